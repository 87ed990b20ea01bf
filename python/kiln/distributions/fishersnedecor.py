"""FisherSnedecor(df1, df2): the F distribution, (X1 / df1) / (X2 / df2) for chi-squared
X1, X2 (sampled as a ratio of Gamma(df/2, df/2) draws; needs kiln._standard_gamma)."""
import math
from numbers import Number

import kiln

from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import _clamp_tiny_st, broadcast_all

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        if isinstance(df1, Number) and isinstance(df2, Number):
            batch_shape = kiln.Size()
        else:
            batch_shape = self.df1.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(FisherSnedecor, batch_shape, _instance,
                              ("df1", "df2", "_gamma1", "_gamma2"))

    @property
    def mean(self):
        df2 = kiln.where(self.df2 <= 2, math.nan, self.df2)  # undefined for df2 <= 2
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return kiln.where(self.df1 <= 2, math.nan, mode)

    @property
    def variance(self):
        df2 = kiln.where(self.df2 <= 4, math.nan, self.df2)  # undefined for df2 <= 4
        return (2 * df2.pow(2) * (self.df1 + df2 - 2)
                / (self.df1 * (df2 - 2).pow(2) * (df2 - 4)))

    def rsample(self, sample_shape=kiln.Size()):
        shape = tuple(self._extended_shape(sample_shape))
        # Gamma(df / 2, rate df) is chi2(df) / (2 df); the factor 2 cancels in the ratio.
        X1 = self._gamma1.rsample(sample_shape).view(shape)
        X2 = _clamp_tiny_st(self._gamma2.rsample(sample_shape).view(shape))
        return _clamp_tiny_st(X1 / X2)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * kiln.log(value)
        t3 = (ct1 + ct2) * kiln.log1p(ct3 * value)
        return t1 + t2 - t3
