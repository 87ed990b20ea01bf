"""SparseCSRTensor: torch.sparse_csr for 2-D tensors (no batch or dense dimensions).
crow_indices [nrows + 1] and col_indices [nnz] (int64), values [nnz]. Products and reductions
run on the row index of each entry, computed once from crow_indices and kept."""
import kiln

from . import _index
from ._base import SparseTensor


class SparseCSRTensor(SparseTensor):
    is_sparse_csr = True

    def __init__(self, crow_indices, col_indices, values, shape):
        # Trusted constructor: kiln.sparse_csr_tensor validates what users pass.
        self._crow = crow_indices
        self._col = col_indices
        self._v = values
        self._shape = tuple(int(s) for s in shape)
        self._rows = None

    @property
    def layout(self):
        return kiln.sparse_csr

    def sparse_dim(self):
        return 2

    def dense_dim(self):
        return 0

    def crow_indices(self):
        return self._crow

    def col_indices(self):
        return self._col

    def values(self):
        return self._v

    def _row_indices(self):
        if self._rows is None:
            self._rows = _index.rows_from_crow(self._crow, self._shape[0])
        return self._rows

    def _with_values(self, values, coalesced=None):
        r = SparseCSRTensor(self._crow, self._col, values, self._shape)
        r._rows = self._rows
        return r

    def _with_structure(self, index_fn, values):
        return SparseCSRTensor(index_fn(self._crow), index_fn(self._col), values, self._shape)

    def to_sparse_coo(self):
        from ._coo import SparseCOOTensor
        indices = kiln.stack([self._row_indices(), self._col])
        return SparseCOOTensor(indices, self._v, self._shape, True)

    def to_sparse_csr(self, dense_dim=None):
        return self

    def to_dense(self, dtype=None, *, masked_grad=None):
        return self.to_sparse_coo().to_dense(dtype)

    def transpose(self, dim0, dim1):
        # torch answers with a CSC tensor, a layout kiln does not have.
        raise NotImplementedError("transpose of a sparse CSR tensor gives a CSC tensor in "
                                  "torch; kiln.sparse has no CSC layout: use "
                                  ".to_sparse_coo().t() (and .to_sparse_csr() if needed)")

    def t(self):
        return self.transpose(0, 1)

    def is_coalesced(self):
        raise RuntimeError("is_coalesced expected sparse coordinate tensor layout but got "
                           "SparseCsr")

    def indices(self):
        raise RuntimeError("indices expected sparse coordinate tensor layout but got SparseCsr")

    _indices = indices
