"""Elementwise arithmetic on sparse tensors: sums (sparse + sparse stays sparse; with a dense
operand the result is dense), products (by a scalar, by a dense tensor at the stored
positions, by another sparse tensor on the common positions), and value maps that keep 0 at 0.
All of it works on the values tensor with kiln ops, so autograd reaches the values."""
import numbers

import kiln

from . import _base

# Maps with f(0) == 0: applying them to the stored values is the dense result restricted to
# the sparsity pattern. Non-linear ones need unique coordinates (f(a) + f(b) != f(a + b)).
ZERO_PRESERVING = ("abs", "sqrt", "square", "sin", "tan", "tanh", "asin", "atan", "sinh",
                   "asinh", "atanh", "expm1", "log1p", "relu", "sign", "sgn", "floor", "ceil",
                   "round", "trunc", "frac", "erf", "erfinv", "deg2rad", "rad2deg", "nan_to_num")
_LINEAR = ("neg", "deg2rad", "rad2deg")


def _is_sparse(x):
    return isinstance(x, _base.SparseTensor)


def _is_scalar(x):
    return isinstance(x, numbers.Number) or (isinstance(x, kiln.Tensor) and x.dim() == 0)


def _coalesced_for(s, name):
    if s.layout is kiln.sparse_coo and not s._coalesced and name not in _LINEAR:
        return s.coalesce()
    return s


def unary(s, name, *args, **kwargs):
    s = _coalesced_for(s, name)
    return s._with_values(getattr(s._v, name)(*args, **kwargs))


def neg(s):
    return s._with_values(-s._v)


def pow(s, exponent):
    if not isinstance(exponent, numbers.Number):
        raise NotImplementedError("pow: a sparse tensor can only be raised to a scalar power in "
                                  "kiln")
    if exponent == 0:
        raise RuntimeError("pow: cannot raise to zeroth power on sparse tensor; it would make "
                           "the result tensor dense")
    return unary(s, "pow", exponent)


def _check_same(op, a, b):
    if a.layout is not b.layout:
        raise RuntimeError(f"{op}: expected both sparse tensors to have the same layout, but "
                           f"got {a.layout} and {b.layout}")
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"{op}: expected sizes of 'self' and 'other' to match, but "
                           f"{list(a.shape)} != {list(b.shape)}")
    if a.sparse_dim() != b.sparse_dim():
        raise RuntimeError(f"{op}: expected 'self' and 'other' to have the same sparse_dim, but "
                           f"got {a.sparse_dim()} and {b.sparse_dim()}")


def add(a, b, alpha=1):
    """a + alpha * b. sparse + sparse: sparse (coalesced when both are, as torch's);
    sparse with dense: dense (torch only allows the dense operand on the left; kiln takes
    either order)."""
    if _is_sparse(a) and _is_sparse(b):
        return _sparse_add(a, b, alpha)
    s, other = (a, b) if _is_sparse(a) else (b, a)
    if isinstance(other, kiln.Tensor) and other.dim() > 0:
        if s is a:
            return kiln.add(a.to_dense(), b, alpha=alpha)
        return kiln.add(a, b.to_dense(), alpha=alpha)
    raise RuntimeError(f"add: a scalar cannot be added to a sparse ({s.layout}) tensor, the "
                       "result would be dense; use .to_dense() first")


def _sparse_add(a, b, alpha):
    from ._coo import SparseCOOTensor
    _check_same("add", a, b)
    csr = a.layout is kiln.sparse_csr
    ca, cb = a.to_sparse_coo(), b.to_sparse_coo()
    dtype = kiln.promote_types(a.dtype, b.dtype)
    vb = cb._v.to(dtype)
    if alpha != 1:
        vb = vb * alpha
    # Concatenating the entries is the sum of two COO tensors (repeats add up when read).
    r = SparseCOOTensor(kiln.cat([ca._i, cb._i], 1), kiln.cat([ca._v.to(dtype), vb]),
                        a.shape, False)
    if csr or (ca._coalesced and cb._coalesced):
        r = r.coalesce()
    return r.to_sparse_csr() if csr else r


def _gather_dense(coo, dense):
    """dense (broadcast to coo's shape) at coo's stored coordinates: [nnz, *dense_shape]."""
    sd = coo.sparse_dim()
    rows = 1
    for s in coo._shape[:sd]:
        rows *= s
    flat = dense.expand(coo._shape).reshape((rows,) + coo._shape[sd:])
    return flat.index_select(0, coo._linear())


def mul(a, b):
    """sparse * scalar and sparse * dense: sparse, same pattern. sparse * sparse: sparse on
    the coordinates both store (the other products are 0)."""
    if _is_sparse(a) and _is_sparse(b):
        return _sparse_mul(a, b)
    s, other = (a, b) if _is_sparse(a) else (b, a)
    if _is_scalar(other):
        return s._with_values(s._v * other)
    if isinstance(other, kiln.Tensor):
        return s._with_values(s._v * _gather_dense(s.to_sparse_coo(), other))
    return NotImplemented


def div(s, other):
    if not _is_sparse(s) or _is_sparse(other):
        raise NotImplementedError("div: only a sparse tensor divided by a scalar or a dense "
                                  "tensor is supported in kiln.sparse")
    if _is_scalar(other):
        return s._with_values(s._v / other)
    if isinstance(other, kiln.Tensor):
        return s._with_values(s._v / _gather_dense(s.to_sparse_coo(), other))
    return NotImplemented


def _sparse_mul(a, b):
    from ._coo import SparseCOOTensor
    _check_same("mul", a, b)
    csr = a.layout is kiln.sparse_csr
    ca, cb = a.to_sparse_coo().coalesce(), b.to_sparse_coo().coalesce()
    la, lb = ca._linear(), cb._linear()
    if la.numel() == 0 or lb.numel() == 0:
        keep_a = keep_b = kiln.zeros(0, dtype=kiln.int64, device=la.device)
    else:
        # Both position lists are sorted and unique: look each of b's up in a's.
        pos = kiln.searchsorted(la, lb).clamp(max=la.numel() - 1)
        keep_b = (la.index_select(0, pos) == lb).nonzero().reshape(-1)
        keep_a = pos.index_select(0, keep_b)
    values = ca._v.index_select(0, keep_a) * cb._v.index_select(0, keep_b)
    r = SparseCOOTensor(cb._i.index_select(1, keep_b), values, a.shape, True)
    return r.to_sparse_csr() if csr else r
