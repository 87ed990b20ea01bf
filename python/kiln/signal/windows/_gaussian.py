"""The gaussian window."""
import math

import kiln

from . import _common


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None,
             requires_grad=False):
    """w_n = exp(-(n - c)^2 / (2 std^2)), centred at (M - 1) / 2 (M / 2 when periodic)."""
    dtype = _common.resolve_dtype(dtype)
    _common.check("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _common.empty(dtype, device, requires_grad)
    scale = 1 / (std * math.sqrt(2))
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    k = _common.grid(start * scale, scale, M, dtype, device, requires_grad)
    return kiln.exp(-(k ** 2))
