"""Masked operations whose output has the input's shape: softmax, log_softmax, softmin and
normalize along one dim, the running cumsum / cumprod, and the elementwise logaddexp. The
masked-out elements enter as the identity of the underlying reduction (-inf for softmax,
+inf for softmin, 0 for sums and norms, 1 for products); a slice with nothing masked in
gives NaN for the softmaxes (0/0) and 0 for normalize (0 over eps)."""
import kiln

from ._mask import _canonical_dim, _combine_input_and_mask, _unwrap
from ._reductions import amax, amin, norm, prod, sum


def _functional():
    # looked up at call time: kiln.nn may still be importing when this module is
    return kiln.nn.functional


def _one_dim(dim, input):
    return _canonical_dim(dim, input.dim())[0]


def softmax(input, dim, *, dtype=None, mask=None):
    """softmax along dim over the masked-in elements; masked-out ones get 0."""
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    d = _one_dim(dim, input)
    return _functional().softmax(_combine_input_and_mask(amax, input, mask), d, dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """log of the masked softmax; masked-out elements get -inf."""
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    d = _one_dim(dim, input)
    return _functional().log_softmax(_combine_input_and_mask(amax, input, mask), d, dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    """softmax of -input along dim over the masked-in elements; masked-out ones get 0."""
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    d = _one_dim(dim, input)
    return _functional().softmin(_combine_input_and_mask(amin, input, mask), d, dtype=dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """input over its masked ord-norm along dim (at least eps); masked-out elements get 0."""
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    filled = _combine_input_and_mask(sum, input, mask)
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return kiln.divide(filled, kiln.maximum(nrm, nrm.new_full([], eps)))


def cumsum(input, dim, *, dtype=None, mask=None):
    """Running sum along dim, masked-out elements adding 0. Without dtype the result keeps
    the input's dtype (unlike kiln.cumsum, which takes integers to int64)."""
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    d = _one_dim(dim, input)
    filled = _combine_input_and_mask(sum, input, mask)
    return kiln.cumsum(filled, d, dtype=dtype).to(dtype=dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Running product along dim, masked-out elements multiplying by 1."""
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    d = _one_dim(dim, input)
    filled = _combine_input_and_mask(prod, input, mask)
    return kiln.cumprod(filled, d, dtype=dtype).to(dtype=dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """log(exp(input) + exp(other)) with each operand's masked-out elements taken as -inf
    (each mask broadcast to its own operand); -inf where both are masked out."""
    if dtype is None:
        dtype = input.dtype
    a = _combine_input_and_mask(logaddexp, input, input_mask)
    b = _combine_input_and_mask(logaddexp, other, other_mask)
    return kiln.logaddexp(a, b).to(dtype=dtype)
