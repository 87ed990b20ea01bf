"""make_tensor: a random tensor for tests, as torch.testing.make_tensor."""
import collections.abc
import math
import warnings

import kiln

_INTEGRAL = (kiln.uint8, kiln.int8, kiln.int16, kiln.int32, kiln.int64)
_FLOATING = (kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64)
_COMPLEX = (kiln.complex64, kiln.complex128)
_BOOL_OR_INTEGRAL = (kiln.bool, *_INTEGRAL)
_FLOATING_OR_COMPLEX = (*_FLOATING, *_COMPLEX)
# The real dtype of a complex one's parts (kiln.finfo takes real dtypes only).
_COMPLEX_PART = {kiln.complex64: kiln.float32, kiln.complex128: kiln.float64}


def _finfo(dtype):
    return kiln.finfo(_COMPLEX_PART.get(dtype, dtype))


def _low_high(dtype, low, high, *, lowest, highest_exclusive, default_low, default_high):
    """The user's [low, high) (or the dtype's default) validated and clamped into the range
    the dtype can hold; integer bounds are rounded up (randint's high is exclusive)."""
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and dtype in _FLOATING_OR_COMPLEX:
        warnings.warn("Passing `low==high` to `kiln.testing.make_tensor` for floating or "
                      "complex types is deprecated (as in torch since 2.1). Use "
                      "`kiln.full(...)` instead.", FutureWarning, stacklevel=3)
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest_exclusive:
        raise ValueError(f"The value interval specified by `low` and `high` is "
                         f"[{low}, {high}), but {dtype} only supports "
                         f"[{lowest}, {highest_exclusive})")
    low = min(max(low, lowest), highest_exclusive)
    high = min(max(high, lowest), highest_exclusive)
    if dtype in _BOOL_OR_INTEGRAL:
        return math.ceil(low), math.ceil(high)
    return low, high


def _uniform_(t, low, high):
    # uniform_ needs high - low to be finite in the dtype: halve the range and double after.
    if high - low >= _finfo(t.dtype).max:
        return t.uniform_(low / 2, high / 2).mul_(2)
    return t.uniform_(low, high)


def _shape(shape):
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    return tuple(shape)


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of `shape` (ints, or one sequence) with values drawn uniformly from
    [low, high). Default ranges: bool [0, 2), unsigned [0, 10), signed integers [-9, 10),
    floating and complex [-9, 9) (complex: each part). Bounds outside the dtype's finite
    range are clamped to it. noncontiguous gives a strided view (when there are 2 or more
    elements); memory_format a clone in that format; exclude_zero replaces zeros by 1
    (bool, integers) or the dtype's tiny. requires_grad is for floating / complex only."""
    shape = _shape(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually "
                         f"exclusive, but got noncontiguous={noncontiguous!r} and "
                         f"memory_format={memory_format!r}")
    if requires_grad and dtype in _BOOL_OR_INTEGRAL:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral "
                         f"dtypes, but got dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        # Twice as many elements in the last dim, every other one kept (from offset 1, so
        # that code ignoring the storage offset is caught too).
        shape = (*shape[:-1], 2 * shape[-1])

    if dtype == kiln.bool:
        low, high = _low_high(dtype, low, high, lowest=0, highest_exclusive=2,
                              default_low=0, default_high=2)
        result = kiln.randint(low, high, shape, device=device, dtype=dtype)
    elif dtype in _INTEGRAL:
        info = kiln.iinfo(dtype)
        # randint's bounds go through int64, so int64's max itself cannot be drawn.
        low, high = _low_high(dtype, low, high, lowest=info.min,
                              highest_exclusive=info.max + (dtype != kiln.int64),
                              default_low=-9, default_high=10)
        result = kiln.randint(low, high, shape, device=device, dtype=dtype)
    elif dtype in _FLOATING_OR_COMPLEX:
        info = _finfo(dtype)
        low, high = _low_high(dtype, low, high, lowest=info.min, highest_exclusive=info.max,
                              default_low=-9, default_high=9)
        result = kiln.empty(shape, device=device, dtype=dtype)
        _uniform_(kiln.view_as_real(result) if dtype in _COMPLEX else result, low, high)
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by "
                        f"kiln.testing.make_tensor().")

    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if dtype in _BOOL_OR_INTEGRAL else _finfo(dtype).tiny
    if dtype in _FLOATING_OR_COMPLEX:
        result.requires_grad = requires_grad
    return result
