"""The classic windows that are fixed sums of cosines. Their argument errors name
general_cosine (blackman checks under its own name first), as torch's do."""
from . import _common
from ._general_cosine import general_cosine, general_hamming


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """0.54 - 0.46 cos(2 pi n / N)."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / N) = sin^2(pi n / N)."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)."""
    dtype = _common.resolve_dtype(dtype)
    _common.check("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


# Nuttall's minimum 4-term Blackman-Harris coefficients.
_NUTTALL = [0.3635819, 0.4891775, 0.1365995, 0.0106411]


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """Nuttall's minimum 4-term Blackman-Harris window."""
    return general_cosine(M, a=_NUTTALL, sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)
