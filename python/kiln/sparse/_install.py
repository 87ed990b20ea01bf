"""What kiln.sparse adds outside itself when kiln imports it: kiln.sparse_coo_tensor /
sparse_csr_tensor, dense Tensor.to_sparse* / is_sparse_csr / to_dense, kiln.mm and
kiln.matmul taking a sparse operand, and nn.functional guards (linear works on a sparse input,
convolutions refuse one by name instead of with nanobind's argument-type error)."""
import functools

import kiln

from . import _construct, _products
from ._base import SparseTensor


def _routes_sparse(dense_fn, sparse_fn):
    # The dense path pays one isinstance pair (tens of ns next to a microsecond-scale op).
    @functools.wraps(dense_fn)
    def fn(input, other, *, out=None):
        if isinstance(input, SparseTensor) or isinstance(other, SparseTensor):
            if out is not None:
                raise NotImplementedError(f"{dense_fn.__name__}: out= with a sparse operand")
            return sparse_fn(input, other)
        return dense_fn(input, other) if out is None else dense_fn(input, other, out=out)
    return fn


def _sparse_linear(original):
    @functools.wraps(original)
    def linear(input, weight, bias=None):
        if isinstance(input, SparseTensor):
            # torch computes sparse input @ weight^T (+ bias) as a dense result.
            out = _products.mm(input, weight.t())
            return out if bias is None else out + bias
        if isinstance(weight, SparseTensor):
            raise NotImplementedError("linear: a sparse weight is not supported by kiln.sparse")
        return original(input, weight, bias)
    return linear


def _refuses_sparse(original, op):
    @functools.wraps(original)
    def guarded(nd, input, *args, **kwargs):
        if isinstance(input, SparseTensor):
            raise NotImplementedError(f"{op}: sparse ({input.layout}) inputs are not supported "
                                      "in kiln; convert with .to_dense() first")
        return original(nd, input, *args, **kwargs)
    return guarded


def _dense_to_dense(self, dtype=None, *, masked_grad=None):
    return self if dtype is None else self.to(dtype)


def install(namespace, tensor_type):
    namespace["sparse_coo_tensor"] = _construct.sparse_coo_tensor
    namespace["sparse_csr_tensor"] = _construct.sparse_csr_tensor
    namespace["mm"] = _routes_sparse(namespace["mm"], _products.mm)
    namespace["matmul"] = _routes_sparse(namespace["matmul"], _products.matmul)
    tensor_type.to_sparse = _construct.tensor_to_sparse
    tensor_type.to_sparse_coo = lambda self: _construct.dense_to_sparse(self)
    tensor_type.to_sparse_csr = _construct.dense_to_sparse_csr
    if not hasattr(tensor_type, "to_dense"):
        tensor_type.to_dense = _dense_to_dense
    tensor_type.is_sparse_csr = property(lambda self: False)
    if not hasattr(tensor_type, "is_sparse"):
        tensor_type.is_sparse = property(lambda self: False)
    functional = kiln.nn.functional
    functional.linear = _sparse_linear(functional.linear)
    functional._conv = _refuses_sparse(functional._conv, "convolution")
    functional._conv_transpose = _refuses_sparse(functional._conv_transpose,
                                                 "transposed convolution")
