"""Poisson(rate): P(k) = rate^k e^-rate / k!. Sampling needs kiln.poisson."""
from numbers import Number

import kiln

from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = kiln.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Poisson, batch_shape, _instance, ("rate",))

    def sample(self, sample_shape=kiln.Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with kiln.no_grad():
            return kiln.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        # xlogy: k log(rate) is 0 for k = 0 even when rate = 0.
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self):
        return (kiln.log(self.rate),)

    def _log_normalizer(self, x):
        return kiln.exp(x)
