"""Elementwise transforms: Exp, Power, Sigmoid, Softplus, Tanh, Abs, Affine and
CumulativeDistribution (a distribution's cdf as a map to the unit interval)."""
import functools
import math
import numbers

import kiln
import kiln.nn.functional as F

from . import constraints
from .utils import broadcast_all
from .transform_base import Transform

__all__ = [
    "ExpTransform", "PowerTransform", "SigmoidTransform", "SoftplusTransform", "TanhTransform",
    "AbsTransform", "AffineTransform", "CumulativeDistributionTransform",
]


class ExpTransform(Transform):
    """y = exp(x); log|dy/dx| = x."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    def __hash__(self):
        return hash(ExpTransform)

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent on the positive reals; log|dy/dx| = log|exponent y / x|."""
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @functools.cached_property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        if not isinstance(other, PowerTransform):
            return False
        return bool(self.exponent.eq(other.exponent).all())

    def __hash__(self):
        return id(self)

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return kiln.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))

    def inverse_shape(self, shape):
        return kiln.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))


def _clipped_sigmoid(x):
    """sigmoid kept inside [tiny, 1 - eps] so that its inverse (a logit) stays finite."""
    finfo = kiln.finfo(x.dtype)
    return kiln.clamp(kiln.sigmoid(x), min=finfo.tiny, max=1.0 - finfo.eps)


class SigmoidTransform(Transform):
    """y = sigmoid(x); log|dy/dx| = log s(x) + log s(-x) = -softplus(-x) - softplus(x)."""
    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    def __hash__(self):
        return hash(SigmoidTransform)

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        finfo = kiln.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x) - F.softplus(x)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x)); inverse x = log(expm1(y)) written as y + log(-expm1(-y)), which
    does not overflow for large y; log|dy/dx| = log sigmoid(x) = -softplus(-x)."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    def __hash__(self):
        return hash(SoftplusTransform)

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x)


class TanhTransform(Transform):
    """y = tanh(x). log|dy/dx| = log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x)), a form
    that stays accurate where tanh(x) rounds to +-1."""
    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    def __hash__(self):
        return hash(TanhTransform)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        # Not clamped (clamping would bias samples); use cache_size=1 to avoid recomputing.
        return kiln.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = |x| (not injective: the inverse returns the positive branch)."""
    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    def __hash__(self):
        return hash(AbsTransform)

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, with event_dim rightmost dims forming one event (for log|det J|,
    which is sum log|scale| over the event)."""
    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False

        def same(a, b):
            if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
                return a == b
            return bool((a == b).all())
        return same(self.loc, other.loc) and same(self.scale, other.scale)

    def __hash__(self):
        return id(self)

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        scale = self.scale
        if isinstance(scale, numbers.Real):
            result = kiln.full_like(x, math.log(abs(scale)))
        else:
            result = kiln.abs(scale).log()
        if self.event_dim:
            result_size = tuple(result.size()[:result.dim() - self.event_dim]) + (-1,)
            result = result.view(result_size).sum(-1)
            shape = shape[:len(shape) - self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return kiln.broadcast_shapes(shape, getattr(self.loc, "shape", ()),
                                     getattr(self.scale, "shape", ()))

    def inverse_shape(self, shape):
        return kiln.broadcast_shapes(shape, getattr(self.loc, "shape", ()),
                                     getattr(self.scale, "shape", ()))



class CumulativeDistributionTransform(Transform):
    """y = F(x) for a univariate distribution's cdf F; log|dy/dx| = log density."""
    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return type(self)(self.distribution, cache_size=cache_size)


# Transforms kept in their own files (they import Transform from here, hence at the end).
