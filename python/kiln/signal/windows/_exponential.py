"""The exponential (Poisson) window."""
import kiln

from . import _common


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """w_n = exp(-|n - c| / tau), c = `center` (default (M - 1) / 2, or M / 2 when
    sym=False). center may only be given for a periodic window (sym=False)."""
    dtype = _common.resolve_dtype(dtype)
    _common.check("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _common.empty(dtype, device, requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    k = _common.grid(-center / tau, 1 / tau, M, dtype, device, requires_grad)
    return kiln.exp(-kiln.abs(k))
