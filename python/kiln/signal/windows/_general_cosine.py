"""Sums of cosines: general_cosine and general_hamming, on which hann, hamming, blackman
and nuttall are built."""
import collections.abc
import math

import kiln

from . import _common


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """w_n = sum_i (-1)^i a_i cos(2 pi i n / N), N = M - 1 (M when periodic)."""
    dtype = _common.resolve_dtype(dtype)
    _common.check("general_cosine", M, dtype, layout)
    if M == 0:
        return _common.empty(dtype, device, requires_grad)
    if M == 1:
        return _common.ones(dtype, device, requires_grad)
    if not isinstance(a, collections.abc.Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    k = _common.grid(0, 2 * math.pi / _common.denominator(M, sym), M, dtype, device,
                     requires_grad)
    signed = kiln.tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype,
                         device=device, requires_grad=requires_grad)
    i = kiln.arange(signed.shape[0], dtype=dtype, device=device)
    # One row per term: a_i * cos(i * k), summed over the terms.
    return (signed.unsqueeze(-1) * kiln.cos(i.unsqueeze(-1) * k)).sum(0)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """w_n = alpha - (1 - alpha) cos(2 pi n / N)."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)
