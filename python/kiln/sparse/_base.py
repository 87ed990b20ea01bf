"""SparseTensor: what the COO and CSR layouts share. A sparse tensor here is a plain Python
object holding dense kiln tensors (int64 indices and a values tensor), not a kiln.Tensor
(decision 0108): shape and dtype queries, dtype / device moves, autograd flags (they live on
the values), operators, and a clear error for the Tensor methods it does not have."""
import kiln

from . import _arith, _products, _reductions, _repr


class SparseNotSupportedError(NotImplementedError, AttributeError):
    """A kiln.Tensor method a sparse tensor does not implement. Also an AttributeError, so that
    hasattr() and getattr(x, name, default) keep working on sparse tensors."""


class SparseTensor:
    """Base of SparseCOOTensor and SparseCSRTensor. Subclasses set `layout` and implement
    _with_values, to_dense, to_sparse_coo, to_sparse_csr, detach-free structure copies."""
    layout = None
    is_sparse = False
    is_sparse_csr = False
    is_quantized = is_meta = is_nested = is_mkldnn = is_cuda = False

    # --- shape, dtype, device -------------------------------------------------------------
    @property
    def shape(self):
        return kiln.Size(self._shape)

    def size(self, dim=None):
        if dim is None:
            return kiln.Size(self._shape)
        return self._shape[_canonical_dim(dim, len(self._shape))]

    def dim(self):
        return len(self._shape)

    ndim = property(dim)

    def numel(self):
        n = 1
        for s in self._shape:
            n *= s
        return n

    nelement = numel

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    @property
    def dtype(self):
        return self._v.dtype

    @property
    def device(self):
        return self._v.device

    def is_floating_point(self):
        return self._v.is_floating_point()

    def is_complex(self):
        return self._v.is_complex()

    def _nnz(self):
        return self._v.shape[0]

    def get_device(self):
        return self._v.get_device()

    # --- autograd: the values carry it -----------------------------------------------------
    @property
    def requires_grad(self):
        return self._v.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self._v.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        self._v.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        """The gradient accumulated on the values, as a sparse tensor of this one's structure
        (torch also gives a leaf sparse tensor a sparse gradient)."""
        g = self._v.grad
        return None if g is None else self._with_values(g)

    @property
    def grad_fn(self):
        return self._v.grad_fn

    @property
    def is_leaf(self):
        return self._v.is_leaf

    def detach(self):
        return self._with_values(self._v.detach())

    def clone(self, *, memory_format=None):
        return self._with_structure(lambda t: t.clone(), self._v.clone())

    # --- conversions -----------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """to(dtype), to(device), to(device, dtype), to(other), with dtype= / device=
        keywords; the indices move with the values and stay int64."""
        dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        copy = kwargs.pop("copy", False)
        if kwargs:
            raise TypeError(f"to(): unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, kiln.dtype):
                dtype = a
            elif isinstance(a, (str, kiln.device, int)):
                device = a
            elif isinstance(a, (SparseTensor, kiln.Tensor)):
                dtype, device = a.dtype, a.device
            else:
                raise TypeError(f"to(): unexpected argument {a!r}")
        values = self._v.to(dtype=dtype or self._v.dtype, device=device or self._v.device,
                            copy=copy)
        if values is self._v:
            return self
        return self._with_structure(lambda t: t.to(values.device), values)

    def double(self):
        return self.to(kiln.float64)

    def float(self):
        return self.to(kiln.float32)

    def half(self):
        return self.to(kiln.float16)

    def bfloat16(self):
        return self.to(kiln.bfloat16)

    def long(self):
        return self.to(kiln.int64)

    def int(self):
        return self.to(kiln.int32)

    def bool(self):
        return self.to(kiln.bool)

    def cpu(self):
        return self.to("cpu")

    def type_as(self, other):
        return self.to(other.dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout is kiln.sparse_csr:
            return self.to_sparse_csr()
        if layout not in (None, kiln.sparse_coo):
            raise NotImplementedError(f"to_sparse: kiln has no {layout} layout")
        coo = self.to_sparse_coo()
        if sparse_dim is not None and sparse_dim != coo.sparse_dim():
            raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim "
                               "argument !=self.sparse_dim() is not supported")
        return coo

    # --- math: operators and methods route to the modules that implement them ---------------
    def __add__(self, other):
        return _arith.add(self, other)

    def __radd__(self, other):
        return _arith.add(other, self)

    def __sub__(self, other):
        return _arith.add(self, other, alpha=-1)

    def __rsub__(self, other):
        return _arith.add(other, self, alpha=-1)

    def __mul__(self, other):
        return _arith.mul(self, other)

    def __rmul__(self, other):
        return _arith.mul(other, self)

    def __truediv__(self, other):
        return _arith.div(self, other)

    def __neg__(self):
        return _arith.neg(self)

    def __abs__(self):
        return _arith.unary(self, "abs")

    def __pow__(self, exponent):
        return _arith.pow(self, exponent)

    def __matmul__(self, other):
        return _products.matmul(self, other)

    def __rmatmul__(self, other):
        return _products.matmul(other, self)

    def add(self, other, *, alpha=1):
        return _arith.add(self, other, alpha=alpha)

    def sub(self, other, *, alpha=1):
        return _arith.add(self, other, alpha=-alpha)

    def mul(self, other):
        return _arith.mul(self, other)

    def div(self, other):
        return _arith.div(self, other)

    def neg(self):
        return _arith.neg(self)

    negative = neg

    def pow(self, exponent):
        return _arith.pow(self, exponent)

    def mm(self, mat2):
        return _products.mm(self, mat2)

    def matmul(self, other):
        return _products.matmul(self, other)

    def sum(self, dim=None, keepdim=False, dtype=None):
        return _reductions.sum(self, dim, keepdim=keepdim, dtype=dtype)

    def __bool__(self):
        raise RuntimeError("Boolean value of a sparse tensor is ambiguous (kiln.sparse); use "
                           "_nnz() or to_dense()")

    def __getitem__(self, index):
        raise SparseNotSupportedError(f"indexing is not supported for sparse ({self.layout}) "
                                      "tensors in kiln; convert with .to_dense() first")

    def __iter__(self):
        raise SparseNotSupportedError(f"iteration is not supported for sparse ({self.layout}) "
                                      "tensors in kiln; convert with .to_dense() first")

    def __repr__(self):
        return _repr.sparse_repr(self)

    __str__ = __repr__

    def __getattr__(self, name):
        # Only reached for names the class lacks: name the sparse limitation for a Tensor
        # method instead of a bare AttributeError.
        if not name.startswith("__") and hasattr(kiln.Tensor, name):
            raise SparseNotSupportedError(
                f"Tensor.{name} is not supported for sparse ({self.layout}) tensors in kiln "
                "(kiln.sparse is a Python layer over dense tensors, decision 0108); convert "
                "with .to_dense() first")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def _canonical_dim(dim, ndim):
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {dim})")
    return dim % max(ndim, 1)


def _install_unary_methods():
    # Value maps that send 0 to 0, so the result keeps the sparsity pattern (torch's list for
    # sparse COO includes these).
    for name in _arith.ZERO_PRESERVING:
        def method(self, _name=name):
            return _arith.unary(self, _name)
        method.__name__ = name
        setattr(SparseTensor, name, method)


_install_unary_methods()
