"""The cosine (sine) window, sampled as SciPy's: at half-integer points, so that neither
end is zero."""
import math

import kiln

from . import _common


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """w_n = sin(pi * (n + 0.5) / M) (M + 1 in place of M for a periodic window)."""
    dtype = _common.resolve_dtype(dtype)
    _common.check("cosine", M, dtype, layout)
    if M == 0:
        return _common.empty(dtype, device, requires_grad)
    step = math.pi / (M + 1 if not sym and M > 1 else M)
    k = _common.grid(0.5 * step, step, M, dtype, device, requires_grad)
    return kiln.sin(k)
