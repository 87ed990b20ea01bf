"""Time units and significant figures for printing measurements."""
import math

from . import _stats

_UNIT_SCALES = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}
_ENGLISH = {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}


def select_unit(t):
    """(unit, scale) that prints the time `t` (seconds) with 1 to 3 digits before the point:
    "ns", "us", "ms", or "s" (also for anything of 1000 s and more)."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(_stats.log10(t) // 3), "s")
    return unit, _UNIT_SCALES[unit]


def unit_to_english(u):
    return _ENGLISH[u]


def trim_sigfig(x, n):
    """x rounded to n significant figures (3.14159, 2 -> 3.1); ties go to the even digit."""
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = int(math.ceil(_stats.log10(abs(x))))
    scale = 10 ** (magnitude - n)
    return float(round(x / scale) * scale)
