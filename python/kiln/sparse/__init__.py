"""kiln.sparse, as torch.sparse: sparse COO and CSR tensors written in Python over kiln's
dense tensors (decision 0108), for graph and other sparse workloads (adjacency @ features).

A sparse tensor is a SparseCOOTensor (indices [sparse_dim, nnz] int64, values
[nnz, *dense_shape]) or a SparseCSRTensor (2-D: crow_indices, col_indices, values), both
SparseTensor; it is not a kiln.Tensor. Build one with kiln.sparse_coo_tensor /
kiln.sparse_csr_tensor or dense.to_sparse() / to_sparse_csr(). Operations are vectorised kiln
ops on the index and value tensors, so autograd reaches the values and dense operands.

    _base.py        SparseTensor: shape / dtype / device / autograd flags, operators, errors
    _coo.py         SparseCOOTensor: coalesce, to_dense, transpose, COO -> CSR
    _csr.py         SparseCSRTensor: row indices, CSR -> COO
    _construct.py   sparse_coo_tensor, sparse_csr_tensor (validation), dense -> sparse
    _arith.py       add / mul / div, zero-preserving value maps (abs, sqrt, pow, relu, ...)
    _products.py    mm, matmul, addmm, sampled_addmm
    _reductions.py  sum, softmax, log_softmax
    _repr.py        torch's repr format
    _index.py       coordinates <-> linear positions, CSR row pointers
    _install.py     kiln.sparse_coo_tensor, Tensor.to_sparse*, kiln.mm / matmul routing,
                    nn.functional.linear on sparse input

kiln.mm(sparse, dense), kiln.matmul and the @ operator route to kiln.sparse.mm; other kiln
functions do not accept sparse tensors (convert with .to_dense()).
"""
import kiln as _kiln

from ._base import SparseNotSupportedError, SparseTensor
from ._coo import SparseCOOTensor
from ._csr import SparseCSRTensor
from ._products import addmm, mm, sampled_addmm
from ._reductions import log_softmax, softmax, sum
from . import _install

__all__ = ["SparseTensor", "SparseCOOTensor", "SparseCSRTensor", "SparseNotSupportedError",
           "addmm", "log_softmax", "mm", "sampled_addmm", "softmax", "sum"]

_install.install(vars(_kiln), _kiln.Tensor)
