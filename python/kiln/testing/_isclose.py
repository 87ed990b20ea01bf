"""Elementwise closeness for the comparisons. kiln.isclose converts non-floating inputs to
float64, which drops the imaginary part of complex tensors; complex ones are compared
here with the same rule directly on the complex values."""
import kiln


def isclose(a, e, *, rtol, atol, equal_nan):
    """|a - e| <= atol + rtol * |e| where the difference is finite, or a == e (which lets
    infinities of the same sign match), or both nan under equal_nan. Same dtype assumed."""
    if not a.dtype.is_complex:
        return kiln.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    diff = a - e
    close = (kiln.abs(diff) <= atol + rtol * kiln.abs(e)) & kiln.isfinite(diff)
    close = close | (a == e)
    if equal_nan:
        close = close | (kiln.isnan(a) & kiln.isnan(e))
    return close
