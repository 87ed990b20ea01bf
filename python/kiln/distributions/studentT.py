"""StudentT(df, loc, scale): loc + scale * Z / sqrt(V / df), Z standard normal, V ~ Chi2(df).
rsample goes through Chi2's (gamma) rsample, so it needs kiln._standard_gamma."""
import math

import kiln

from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .utils import _randn, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self):
        # Undefined (nan) for df <= 1.
        return kiln.where(self.df <= 1, math.nan, self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        # scale^2 df / (df - 2) for df > 2, infinite for 1 < df <= 2, undefined for df <= 1.
        df = self.df
        finite = self.scale.pow(2) * df / kiln.where(df > 2, df - 2, kiln.ones_like(df))
        m = kiln.where(df > 2, finite, math.inf)
        return kiln.where(df <= 1, math.nan, m)

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        batch_shape = self.df.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(StudentT, batch_shape, _instance, ("df", "loc", "scale", "_chi2"))

    def rsample(self, sample_shape=kiln.Size()):
        shape = self._extended_shape(sample_shape)
        X = _randn(shape, self.df)
        Z = self._chi2.rsample(sample_shape)
        Y = X * kiln.rsqrt(Z / self.df)
        return self.loc + self.scale * Y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + kiln.lgamma(0.5 * self.df) - kiln.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * kiln.log1p(y ** 2.0 / self.df) - Z

    def entropy(self):
        lbeta = (kiln.lgamma(0.5 * self.df) + math.lgamma(0.5)
                 - kiln.lgamma(0.5 * (self.df + 1)))
        return (self.scale.log()
                + 0.5 * (self.df + 1)
                * (kiln.digamma(0.5 * (self.df + 1)) - kiln.digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)
