"""Gamma(concentration, rate): density rate^a x^(a-1) e^(-rate x) / Gamma(a). Sampling
uses kiln._standard_gamma (Gamma(a, 1) draws with implicit-reparameterisation gradients
with respect to a), so rsample is differentiable in both parameters."""
from numbers import Number

import kiln

from . import constraints
from .exp_family import ExponentialFamily
from .utils import _clamp_tiny_st, broadcast_all

__all__ = ["Gamma"]


def _standard_gamma(concentration):
    return kiln._standard_gamma(concentration)


class Gamma(ExponentialFamily):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, Number) and isinstance(rate, Number):
            batch_shape = kiln.Size()
        else:
            batch_shape = self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Gamma, batch_shape, _instance, ("concentration", "rate"))

    def rsample(self, sample_shape=kiln.Size()):
        shape = tuple(self._extended_shape(sample_shape))
        value = _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        # Small concentrations can underflow to 0, outside the support.
        return _clamp_tiny_st(value)

    def log_prob(self, value):
        value = kiln.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        # xlogy keeps (a - 1) log x finite at x = 0 when a = 1.
        return (kiln.xlogy(self.concentration, self.rate)
                + kiln.xlogy(self.concentration - 1, value)
                - self.rate * value - kiln.lgamma(self.concentration))

    def entropy(self):
        return (self.concentration - kiln.log(self.rate) + kiln.lgamma(self.concentration)
                + (1.0 - self.concentration) * kiln.digamma(self.concentration))

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return kiln.lgamma(x + 1) + (x + 1) * kiln.log(-y.reciprocal())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return kiln.special.gammainc(self.concentration, self.rate * value)
