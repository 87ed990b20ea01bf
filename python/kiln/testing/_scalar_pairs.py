"""Pairs for None, booleans and Python (or numpy) numbers."""
import cmath

import kiln
from ._errors import ErrorMeta
from ._messages import scalar_mismatch_msg
from ._pair import Pair
from ._tolerances import get_tolerances

try:
    import numpy as _np
except ImportError:  # numpy is optional: without it only Python scalars are handled here
    _np = None


class NonePair(Pair):
    """Matches when both are None; built whenever either side is None."""

    def __init__(self, actual, expected, **options):
        if actual is not None and expected is not None:
            self._unsupported()
        super().__init__(actual, expected, **options)

    def compare(self):
        if not (self.actual is None and self.expected is None):
            self._fail(AssertionError, f"None mismatch: {self.actual} is not {self.expected}")


class BooleanPair(Pair):
    """bool and numpy.bool_ compared by identity after conversion to bool."""

    def __init__(self, actual, expected, *, id=(), **options):
        types = (bool,) if _np is None else (bool, _np.bool_)
        self._require_isinstance(actual, expected, cls=types)
        super().__init__(bool(actual), bool(expected), id=id, **options)

    def compare(self):
        if self.actual is not self.expected:
            self._fail(AssertionError,
                       f"Booleans mismatch: {self.actual} is not {self.expected}")


# The dtype whose default tolerances a Python number type gets.
_TYPE_TO_DTYPE = {int: kiln.int64, float: kiln.float64, complex: kiln.complex128}


class NumberPair(Pair):
    """int / float / complex (and numpy numbers, through .item()) compared as
    |actual - expected| <= atol + rtol * |expected|; inf only matches itself, nan only
    with equal_nan. check_dtype compares the Python types."""

    def __init__(self, actual, expected, *, id=(), rtol=None, atol=None, equal_nan=False,
                 check_dtype=False, **options):
        types = tuple(_TYPE_TO_DTYPE) + (() if _np is None else (_np.number,))
        self._require_isinstance(actual, expected, cls=types)
        actual, expected = (self._to_number(x, id) for x in (actual, expected))
        super().__init__(actual, expected, id=id, **options)
        # bool is an int: it takes int's tolerances (exact).
        dtypes = [_TYPE_TO_DTYPE[complex if isinstance(x, complex) else
                                 float if isinstance(x, float) else int]
                  for x in (actual, expected)]
        self.rtol, self.atol = get_tolerances(*dtypes, rtol=rtol, atol=atol, id=id)
        self.equal_nan = equal_nan
        self.check_dtype = check_dtype

    @staticmethod
    def _to_number(x, id):
        if _np is not None and isinstance(x, _np.number):
            return x.item()
        if isinstance(x, tuple(_TYPE_TO_DTYPE)):
            return x
        raise ErrorMeta(TypeError, f"Unknown number type {type(x)}.", id=id)

    def compare(self):
        a, e = self.actual, self.expected
        if self.check_dtype and type(a) is not type(e):
            self._fail(AssertionError, f"The (d)types do not match: {type(a)} != {type(e)}.")
        if a == e:
            return
        if self.equal_nan and cmath.isnan(a) and cmath.isnan(e):
            return
        diff = abs(a - e)
        if cmath.isfinite(diff) and diff <= self.atol + self.rtol * abs(e):
            return
        self._fail(AssertionError, scalar_mismatch_msg(a, e, rtol=self.rtol, atol=self.atol))

    def extra_repr(self):
        return ("rtol", "atol", "equal_nan", "check_dtype")
