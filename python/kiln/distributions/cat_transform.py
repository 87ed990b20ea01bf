"""CatTransform: applies transforms to consecutive slices of one dimension (slice k has
lengths[k] entries), the transform counterpart of kiln.cat and of constraints.cat."""
import kiln

from . import constraints
from .transform_base import Transform
from .utils import _sum_rightmost

__all__ = ["CatTransform"]


class CatTransform(Transform):

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        if lengths is None:
            lengths = [1] * len(self.transforms)
        self.lengths = list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms "
                                 f"({len(self.transforms)})")
        self.dim = dim

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _check(self, t, name):
        if not -t.dim() <= self.dim < t.dim():
            raise AssertionError(f"dim {self.dim} out of range for {name} with {t.dim()} "
                                 "dimensions")
        if t.size(self.dim) != self.length:
            raise AssertionError(f"{name}.size({self.dim}) = {t.size(self.dim)} must equal "
                                 f"length {self.length}")

    def _slices(self, t):
        start = 0
        for length in self.lengths:
            yield t.narrow(self.dim, start, length)
            start = start + length

    def _call(self, x):
        self._check(x, "x")
        return kiln.cat([tr(xs) for tr, xs in zip(self.transforms, self._slices(x))],
                        self.dim)

    def _inverse(self, y):
        self._check(y, "y")
        return kiln.cat([tr.inv(ys) for tr, ys in zip(self.transforms, self._slices(y))],
                        self.dim)

    def log_abs_det_jacobian(self, x, y):
        self._check(x, "x")
        self._check(y, "y")
        event_dim = self.event_dim
        terms = []
        for tr, xs, ys in zip(self.transforms, self._slices(x), self._slices(y)):
            term = tr.log_abs_det_jacobian(xs, ys)
            terms.append(_sum_rightmost(term, event_dim - tr.event_dim))
        # If the concatenated dim is a batch dim the per-slice terms keep it (concatenate);
        # if it lies inside the event it was summed away in each term (add them up).
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim = dim + event_dim
        if dim < 0:
            return kiln.cat(terms, dim)
        return sum(terms)
