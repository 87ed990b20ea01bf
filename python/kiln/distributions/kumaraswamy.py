"""Kumaraswamy(concentration1 = a, concentration0 = b): density a b x^(a-1) (1 - x^a)^(b-1)
on (0, 1), built as (1 - U^(1/b))^(1/a) for uniform U."""
import math

import kiln

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a, b, n):
    """E[X^n] = b B(1 + n / a, b), through lgamma."""
    arg1 = 1 + n / a
    log_value = kiln.lgamma(arg1) + kiln.lgamma(b) - kiln.lgamma(arg1 + b)
    return b * kiln.exp(log_value)


class Kumaraswamy(TransformedDistribution):
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(kiln.full_like(self.concentration0, 0),
                            kiln.full_like(self.concentration0, 1),
                            validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        # ((a - 1) / (a b - 1))^(1 / a) for a >= 1, b >= 1 (not both 1); otherwise the density
        # is unbounded or flat and there is no unique interior mode (nan). torch 2.13's formula
        # exchanges a and b and returns nan everywhere; this is the textbook value.
        a, b = self.concentration1, self.concentration0
        log_mode = ((a - 1).log() - (a * b - 1).log()) / a
        bad = (a < 1) | (b < 1) | ((a == 1) & (b == 1))
        return kiln.where(bad, math.nan, log_mode.exp())

    @property
    def variance(self):
        return (_moments(self.concentration1, self.concentration0, 2)
                - kiln.pow(self.mean, 2))

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        H0 = kiln.digamma(self.concentration0 + 1) + euler_constant  # harmonic number H_b
        return t0 + t1 * H0 - kiln.log(self.concentration1) - kiln.log(self.concentration0)
