"""Exponential(rate): density rate * exp(-rate x) on x >= 0."""
from numbers import Number

import kiln

from . import constraints
from .exp_family import ExponentialFamily
from .utils import _empty, broadcast_all

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return kiln.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = kiln.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Exponential, batch_shape, _instance, ("rate",))

    def rsample(self, sample_shape=kiln.Size()):
        shape = self._extended_shape(sample_shape)
        # Standard exponential draws scaled by 1 / rate: d x / d rate = -x / rate.
        return _empty(shape, self.rate).exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - kiln.exp(-self.rate * value)

    def icdf(self, value):
        return -kiln.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - kiln.log(self.rate)

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -kiln.log(-x)
