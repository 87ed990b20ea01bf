"""Cauchy(loc, scale): the ratio of two independent standard normals, shifted and scaled.
It has no mean or variance (reported as nan and inf, as torch does)."""
import math
from numbers import Number

import kiln

from . import constraints
from .distribution import Distribution
from .utils import _empty, broadcast_all

__all__ = ["Cauchy"]


class Cauchy(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        if isinstance(loc, Number) and isinstance(scale, Number):
            batch_shape = kiln.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Cauchy, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return kiln.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype,
                         device=self.loc.device)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return kiln.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype,
                         device=self.loc.device)

    def rsample(self, sample_shape=kiln.Size()):
        shape = self._extended_shape(sample_shape)
        eps = _empty(shape, self.loc).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return kiln.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return kiln.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
