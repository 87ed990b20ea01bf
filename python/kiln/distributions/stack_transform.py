"""StackTransform: applies transforms[i] to slice i of one dimension, the transform
counterpart of kiln.stack and of constraints.stack."""
import kiln

from . import constraints
from .transform_base import Transform

__all__ = ["StackTransform"]


class StackTransform(Transform):

    def __init__(self, tseq, dim=0, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, t, name):
        if not -t.dim() <= self.dim < t.dim():
            raise AssertionError(f"dim {self.dim} out of range for {name} with {t.dim()} "
                                 "dimensions")
        if t.size(self.dim) != len(self.transforms):
            raise AssertionError(f"{name}.size({self.dim}) = {t.size(self.dim)} must equal "
                                 f"len(transforms) {len(self.transforms)}")
        return [t.select(self.dim, i) for i in range(t.size(self.dim))]

    def _call(self, x):
        return kiln.stack([tr(xs) for tr, xs in zip(self.transforms, self._slices(x, "x"))],
                          self.dim)

    def _inverse(self, y):
        return kiln.stack([tr.inv(ys) for tr, ys in zip(self.transforms, self._slices(y, "y"))],
                          self.dim)

    def log_abs_det_jacobian(self, x, y):
        xs, ys = self._slices(x, "x"), self._slices(y, "y")
        terms = [tr.log_abs_det_jacobian(a, b) for tr, a, b in zip(self.transforms, xs, ys)]
        return kiln.stack(terms, self.dim)
