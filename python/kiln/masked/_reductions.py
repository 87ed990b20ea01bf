"""Masked reductions whose result is the plain reduction of the input with its masked-out
elements set to the identity: sum, prod, amax, amin, argmax, argmin, logsumexp, norm, and
median (NaN-filled, reduced by nanmedian). A reduced slice with no masked-in element gives
the identity itself (0 for sum, -inf for amax, ...), NaN for median.

The dtype rules are torch.masked's, which are not always torch's: sum and prod accumulate
small integers in int64; amax, amin, argmax, argmin and logsumexp cast their result to
`dtype`, which defaults to the input's (so argmax of a float tensor gives float indices)."""
import builtins

import kiln

from ._mask import (_accumulation_dtype, _canonical_dim, _combine_input_and_mask, _unwrap)


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Sum over dim of the masked-in elements (0 where there are none)."""
    input, mask = _unwrap(input, mask)
    dtype = _accumulation_dtype(input, dtype)
    dims = _canonical_dim(dim, input.dim())
    filled = _combine_input_and_mask(sum, input, mask)
    return kiln.sum(filled, dims, builtins.bool(keepdim), dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Product over dim of the masked-in elements (1 where there are none)."""
    input, mask = _unwrap(input, mask)
    dtype = _accumulation_dtype(input, dtype)
    dims = _canonical_dim(dim, input.dim())
    result = _combine_input_and_mask(prod, input, mask).to(dtype=dtype)
    # one dim at a time, last first, so that without keepdim the others keep their index
    for d in reversed(dims):
        result = result.prod(dim=d, keepdim=builtins.bool(keepdim))
    return result


def _extremum(op, reduce, input, dim, keepdim, dtype, mask):
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    filled = _combine_input_and_mask(op, input, mask)
    dims = _canonical_dim(dim, filled.dim())
    return reduce(filled, dims, builtins.bool(keepdim)).to(dtype=dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Maximum over dim of the masked-in elements (-inf, or the dtype's minimum, where there
    are none)."""
    return _extremum(amax, kiln.amax, input, dim, keepdim, dtype, mask)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Minimum over dim of the masked-in elements (inf, or the dtype's maximum, where there
    are none)."""
    return _extremum(amin, kiln.amin, input, dim, keepdim, dtype, mask)


def _arg_extremum(op, reduce, input, dim, keepdim, dtype, mask):
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    filled = _combine_input_and_mask(op, input, mask)
    return reduce(filled, dim, builtins.bool(keepdim)).to(dtype=dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the largest masked-in element along dim (one int dim, or None: flattened);
    a slice with none masked in gives 0. Cast to dtype (default: the input's)."""
    return _arg_extremum(argmax, kiln.argmax, input, dim, keepdim, dtype, mask)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the smallest masked-in element along dim (see argmax)."""
    return _arg_extremum(argmin, kiln.argmin, input, dim, keepdim, dtype, mask)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """log(sum(exp)) over dim of the masked-in elements (-inf where there are none)."""
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    dims = _canonical_dim(dim, input.dim())
    filled = _combine_input_and_mask(logsumexp, input, mask)
    return kiln.logsumexp(filled, dims, keepdim=keepdim).to(dtype=dtype)


# torch's names of scalar types, for the messages of vector_norm's checks
def _vector_norm(x, ord, dims, keepdim, dtype):
    """kiln.linalg.vector_norm (which makes torch's dtype checks)."""
    return kiln.linalg.vector_norm(x, ord, dims, keepdim, dtype=dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The vector ord-norm over dim of the masked-in elements (0 where there are none; inf
    for ord=-inf)."""
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    filled = _combine_input_and_mask(norm, input, mask, ord)
    dims = _canonical_dim(dim, input.dim())
    return _vector_norm(filled, ord, dims, builtins.bool(keepdim), dtype)


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """Median along one dim (default the last; None means dim 0) of the masked-in elements,
    the lower of the two middle ones for an even count; NaN where there are none. Integer
    input is reduced in float32 and cast back, which needs every slice to have a masked-in
    element."""
    input, mask = _unwrap(input, mask)
    if dtype is None:
        dtype = input.dtype
    d = _canonical_dim(dim, input.dim())[0]
    is_float = kiln.is_floating_point(input)
    if not is_float:
        input = input.to(dtype=kiln.float32)
    filled = _combine_input_and_mask(median, input, mask)
    if filled.dim() == 0:
        # kiln.nanmedian with a dim crashes on 0-d input; the median of one value is itself
        output = kiln.nanmedian(filled.reshape(1), 0, False).values.reshape(())
    else:
        output = kiln.nanmedian(filled, d, keepdim).values
    if is_float:
        return output
    if not kiln.isnan(output).any():
        return output.to(dtype=dtype)
    raise ValueError("masked median expects no fully masked out rows if dtype is not floating "
                     "point")


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Mean over dim of the masked-in elements: their sum over their count (NaN where there
    are none). Needs a floating (or complex) input or dtype."""
    input, mask = _unwrap(input, mask)
    source = "Optional"
    if dtype is None:
        dtype, source = input.dtype, "Input"
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"mean(): Could not infer output dtype. {source} dtype must be either "
                         f"a floating point or complex dtype. Got: {dtype}")
    count, inmask = _count(input, dim, keepdim, mask)
    total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=inmask)
    return total / count


def _count(input, dim, keepdim, mask):
    """(number of masked-in elements reduced into each output element, the canonical mask or
    None). Without a mask every element counts."""
    from ._mask import _input_mask
    if mask is None:
        ones = kiln.ones(input.shape, dtype=kiln.int64, device=input.device)
        return sum(ones, dim, keepdim=keepdim), None
    inmask = _input_mask(input, mask=mask)
    dims = _canonical_dim(dim, input.dim())
    return inmask.sum(dim=dims, keepdim=builtins.bool(keepdim)), inmask
