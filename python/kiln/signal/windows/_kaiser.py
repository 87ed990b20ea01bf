"""The Kaiser window."""
import kiln

from . import _common


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None,
           requires_grad=False):
    """w_n = I0(beta * sqrt(1 - ((n - N/2) / (N/2))^2)) / I0(beta), N = M - 1 (M when
    periodic), I0 the modified Bessel function of order 0."""
    dtype = _common.resolve_dtype(dtype)
    _common.check("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M == 0:
        return _common.empty(dtype, device, requires_grad)
    if M == 1:
        return _common.ones(dtype, device, requires_grad)
    # The grid runs over [-beta, beta] in the window's dtype: beta rounded to that dtype,
    # and the last point capped at it, keep beta^2 - k^2 from going negative (a nan).
    b = kiln.tensor(beta, dtype=dtype, device=device)
    step = 2.0 * b / _common.denominator(M, sym)
    end = kiln.minimum(b, -b + (M - 1) * step)
    k = kiln.linspace((-b).item(), end.item(), M, dtype=dtype, device=device,
                      requires_grad=requires_grad)
    return kiln.i0(kiln.sqrt(b * b - k ** 2)) / kiln.i0(b)
