"""The Bartlett (triangular) window."""
import kiln

from . import _common


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """w_n = 1 - |2n / N - 1|, N = M - 1 (M when periodic)."""
    dtype = _common.resolve_dtype(dtype)
    _common.check("bartlett", M, dtype, layout)
    if M == 0:
        return _common.empty(dtype, device, requires_grad)
    if M == 1:
        return _common.ones(dtype, device, requires_grad)
    k = _common.grid(-1, 2 / _common.denominator(M, sym), M, dtype, device, requires_grad)
    return 1 - kiln.abs(k)
