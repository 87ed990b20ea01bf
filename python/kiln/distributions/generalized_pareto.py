"""GeneralizedPareto(loc, scale, concentration xi): survival function
(1 + xi z)^(-1/xi) with z = (x - loc) / scale, and exp(-z) at xi = 0. Contains the
Exponential (loc 0, xi 0), Pareto (xi > 0, loc = scale / xi) and Uniform (xi = -1) laws.
Support [loc, inf) for xi >= 0 and [loc, loc - scale / xi] for xi < 0. rsample is icdf of
a uniform draw. xi within isclose of 0 takes the xi = 0 formulas; elsewhere xi is replaced by
a safe 1 there, so that neither branch of a where produces nan gradients."""
import math
from numbers import Number, Real

import kiln

from . import constraints
from .distribution import Distribution
from .utils import _rand, broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if (isinstance(loc, Number) and isinstance(scale, Number)
                and isinstance(concentration, Number)):
            batch_shape = kiln.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(GeneralizedPareto, batch_shape, _instance,
                              ("loc", "scale", "concentration"))

    def _zero_and_safe(self):
        """(xi ~ 0 mask, xi with 1 where ~0)."""
        conc = self.concentration
        eq_zero = kiln.isclose(conc, kiln.zeros_like(conc))
        return eq_zero, kiln.where(eq_zero, kiln.ones_like(conc), conc)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def rsample(self, sample_shape=kiln.Size()):
        u = _rand(self._extended_shape(sample_shape), self.loc)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._zero_and_safe()
        # -(1 + 1/xi) log1p(xi z); the factor is 0 exactly at xi = -1 (the uniform case),
        # where log1p(-z) may be -inf at the upper end: keep 0 there instead of nan.
        y = 1 / safe + kiln.ones_like(z)
        nonzero = kiln.where(y == 0, y, y * kiln.log1p(safe * z))
        log_scale = math.log(self.scale) if isinstance(self.scale, Real) else self.scale.log()
        return -log_scale - kiln.where(eq_zero, z, nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._zero_and_safe()
        return kiln.where(eq_zero, -z, -kiln.log1p(safe * z) / safe)

    def log_cdf(self, value):
        return kiln.log1p(-kiln.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return kiln.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, safe = self._zero_and_safe()
        logu = kiln.log1p(-value)  # log of the survival probability
        nonzero = self.loc + self.scale / safe * kiln.expm1(-safe * logu)
        zero = self.loc - self.scale * logu
        return kiln.where(eq_zero, zero, nonzero)

    @property
    def mean(self):
        # Finite only for xi < 1 (nan otherwise, as torch).
        valid = self.concentration < 1
        safe = kiln.where(valid, self.concentration, 0.5)
        return kiln.where(valid, self.loc + self.scale / (1 - safe), math.nan)

    @property
    def variance(self):
        # Finite only for xi < 1/2.
        valid = self.concentration < 0.5
        safe = kiln.where(valid, self.concentration, 0.25)
        result = self.scale ** 2 / ((1 - safe) ** 2 * (1 - 2 * safe))
        return kiln.where(valid, result, math.nan)

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        ans = kiln.log(self.scale) + self.concentration + 1
        return ans.broadcast_to(tuple(self._batch_shape))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = kiln.where(self.concentration < 0, lower - self.scale / self.concentration,
                           math.inf)
        return constraints.interval(lower, upper)
