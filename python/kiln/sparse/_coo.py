"""SparseCOOTensor: torch.sparse_coo. indices [sparse_dim, nnz] (int64) and values
[nnz, *dense_shape]; the shape is the sparse sizes followed by the dense sizes (a hybrid tensor
when dense_dim > 0). Uncoalesced tensors may repeat a coordinate: every reader sums the
repeats (to_dense, mm through index_add), and coalesce() makes them unique and sorted."""
import kiln

from . import _index
from ._base import SparseTensor, _canonical_dim


class SparseCOOTensor(SparseTensor):
    is_sparse = True

    def __init__(self, indices, values, shape, coalesced):
        # Trusted constructor: kiln.sparse_coo_tensor validates what users pass.
        self._i = indices
        self._v = values
        self._shape = tuple(int(s) for s in shape)
        self._coalesced = bool(coalesced)

    @property
    def layout(self):
        return kiln.sparse_coo

    def sparse_dim(self):
        return self._i.shape[0]

    def dense_dim(self):
        return len(self._shape) - self._i.shape[0]

    # --- structure -------------------------------------------------------------------------
    def _with_values(self, values, coalesced=None):
        return SparseCOOTensor(self._i, values, self._shape,
                               self._coalesced if coalesced is None else coalesced)

    def _with_structure(self, index_fn, values):
        return SparseCOOTensor(index_fn(self._i), values, self._shape, self._coalesced)

    def _indices(self):
        return self._i

    def _values(self):
        return self._v

    def indices(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._i

    def values(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._v

    @property
    def grad(self):
        """The gradient as a sparse tensor whose dense form is the gradient of the dense
        tensor (torch's meaning). Every repeat of a coordinate gets that same gradient on its
        value, so an uncoalesced tensor's gradient keeps one per coordinate: the mean."""
        g = self._v.grad
        if g is None or self._coalesced:
            return None if g is None else self._with_values(g)
        uniq, inverse, counts = kiln.unique(self._linear(), sorted=True, return_inverse=True,
                                            return_counts=True)
        total = kiln.zeros((uniq.shape[0],) + tuple(g.shape[1:]), dtype=g.dtype,
                           device=g.device).index_add(0, inverse, g)
        mean = total / counts.to(g.dtype).reshape((-1,) + (1,) * (g.dim() - 1))
        return SparseCOOTensor(_index.unravel(uniq, self._shape[:self.sparse_dim()]), mean,
                               self._shape, True)

    def is_coalesced(self):
        return self._coalesced

    def _coalesced_(self, coalesced):
        self._coalesced = bool(coalesced)
        return self

    def _linear(self):
        return _index.linearize(self._i, self._shape[:self.sparse_dim()])

    def coalesce(self):
        """Unique coordinates in lexicographic order, the values of repeats summed. The sum is
        an index_add, so gradients reach every repeat."""
        if self._coalesced:
            return self
        sizes = self._shape[:self.sparse_dim()]
        uniq, inverse = kiln.unique(self._linear(), sorted=True, return_inverse=True)
        values = kiln.zeros((uniq.shape[0],) + tuple(self._v.shape[1:]), dtype=self._v.dtype,
                            device=self._v.device).index_add(0, inverse, self._v)
        return SparseCOOTensor(_index.unravel(uniq, sizes), values, self._shape, True)

    # --- conversions -----------------------------------------------------------------------
    def to_dense(self, dtype=None, *, masked_grad=None):
        """index_add of the values at their linear positions: repeats are summed, and the
        gradient of each value is the dense gradient at its position."""
        sd = self.sparse_dim()
        values = self._v if dtype is None else self._v.to(dtype)
        rows = 1
        for s in self._shape[:sd]:
            rows *= s
        flat = kiln.zeros((rows,) + self._shape[sd:], dtype=values.dtype, device=values.device)
        if self._nnz():
            flat = flat.index_add(0, self._linear(), values)
        return flat.reshape(self._shape)

    def to_sparse_coo(self):
        return self

    def to_sparse_csr(self, dense_dim=None):
        if self.sparse_dim() != 2:
            raise RuntimeError("coo_to_sparse_csr: conversion from Sparse to SparseCsr for "
                               "input tensors with sparse_dim()!=2 is not supported")
        if self.dense_dim() != 0:
            raise NotImplementedError("to_sparse_csr: kiln's sparse CSR tensors have no dense "
                                      "dimensions; this COO tensor has "
                                      f"{self.dense_dim()}")
        from ._csr import SparseCSRTensor
        c = self.coalesce()
        crow = _index.crow_from_rows(c._i[0], self._shape[0])
        return SparseCSRTensor(crow, c._i[1], c._v, self._shape)

    # --- shape ops -------------------------------------------------------------------------
    def transpose(self, dim0, dim1):
        n = len(self._shape)
        d0, d1 = _canonical_dim(dim0, n), _canonical_dim(dim1, n)
        if d0 == d1:
            return self
        shape = list(self._shape)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        sd = self.sparse_dim()
        if d0 < sd and d1 < sd:
            order = list(range(sd))
            order[d0], order[d1] = d1, d0
            indices = self._i.index_select(0, kiln.tensor(order, device=self._i.device))
            return SparseCOOTensor(indices, self._v, shape, False)
        raise RuntimeError(f"sparse transpose: transposed dimensions must be sparse Got "
                           f"sparse_dim: {sd}, d0: {d0}, d1: {d1}")

    def t(self):
        if self.dim() > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.dim()}D")
        return self if self.dim() < 2 else self.transpose(0, 1)

    swapaxes = swapdims = transpose
