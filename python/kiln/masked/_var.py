"""Masked variance and standard deviation: the mean of the masked-in elements, then the sum
of squared deviations over (count - correction), clamped at 0 so that a slice with too few
elements gives inf or NaN rather than a negative divisor."""
import builtins

import kiln

from ._mask import _unwrap
from ._reductions import _count, sum


def _std_var(input, dim, unbiased, *, correction_opt, keepdim, dtype, mask, take_sqrt):
    input, mask = _unwrap(input, mask)
    if unbiased is not None and correction_opt is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = builtins.float(correction_opt)
    if dtype is None:
        dtype = input.dtype
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = kiln.float32
    compute_dtype = dtype
    if not (compute_dtype.is_floating_point or compute_dtype.is_complex):
        compute_dtype = kiln.float32

    count, inmask = _count(input, dim, True, mask)
    sample_mean = sum(input, dim, keepdim=True, dtype=dtype, mask=inmask) / count
    x = input - sample_mean
    total = sum(x * x.conj(), dim, keepdim=keepdim, dtype=compute_dtype, mask=inmask)
    if not keepdim:
        count = count.reshape(total.shape)
    if correction != 0:
        real_dtype = compute_dtype
        if compute_dtype.is_complex:
            real_dtype = {kiln.complex64: kiln.float32,
                          kiln.complex128: kiln.float64}[compute_dtype]
        count = count.to(dtype=real_dtype) - correction
        count = kiln.maximum(count, count.new_zeros([]))
    output = (total / count).to(dtype=dtype)
    return kiln.sqrt(output) if take_sqrt else output


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Variance over dim of the masked-in elements, with Bessel's correction unless
    unbiased=False or another correction is given (NaN where none are masked in)."""
    return _std_var(input, dim, unbiased, correction_opt=correction, keepdim=keepdim,
                    dtype=dtype, mask=mask, take_sqrt=False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Standard deviation: the square root of var."""
    return _std_var(input, dim, unbiased, correction_opt=correction, keepdim=keepdim,
                    dtype=dtype, mask=mask, take_sqrt=True)
