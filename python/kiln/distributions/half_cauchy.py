"""HalfCauchy(scale): |X| for X ~ Cauchy(0, scale)."""
import math

import kiln

from ._folded import FoldedSymmetric
from .cauchy import Cauchy

__all__ = ["HalfCauchy"]


class HalfCauchy(FoldedSymmetric):
    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0, scale, validate_args=False), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return kiln.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype,
                         device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance
