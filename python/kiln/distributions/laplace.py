"""Laplace(loc, scale): density exp(-|x - loc| / scale) / (2 scale)."""
import math
from numbers import Number

import kiln

from . import constraints
from .distribution import Distribution
from .utils import _rand, broadcast_all

__all__ = ["Laplace"]


class Laplace(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        if isinstance(loc, Number) and isinstance(scale, Number):
            batch_shape = kiln.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Laplace, batch_shape, _instance, ("loc", "scale"))

    def rsample(self, sample_shape=kiln.Size()):
        shape = self._extended_shape(sample_shape)
        eps = kiln.finfo(self.loc.dtype).eps
        # u uniform on (eps - 1, 1): the inverse cdf of the symmetric exponential, with the
        # open end kept away from -1 so that log1p(-|u|) stays finite.
        u = _rand(shape, self.loc) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * kiln.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -kiln.log(2 * self.scale) - kiln.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * kiln.expm1(
            -(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * kiln.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + kiln.log(2 * self.scale)
