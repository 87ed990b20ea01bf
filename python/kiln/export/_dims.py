"""Dim and the dim hints of dynamic_shapes (torch.export.Dim, Dim.AUTO / STATIC / DYNAMIC),
the symbols dynamic dimensions become (s0, s1, ...) and their value ranges."""
import math

__all__ = ["Dim", "dims", "DimHint", "Symbol", "ValueRanges", "int_oo"]


class _IntInfinity:
    """The upper bound of an unbounded range, printed as torch prints it (int_oo)."""
    __slots__ = ()

    def __repr__(self):
        return "int_oo"

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, _IntInfinity) or other == math.inf

    def __hash__(self):
        return hash(math.inf)

    def __lt__(self, other):
        return False

    def __le__(self, other):
        return self == other

    def __gt__(self, other):
        return not self == other

    def __ge__(self, other):
        return True

    def __reduce__(self):
        return (_int_oo, ())


def _int_oo():
    return int_oo


int_oo = _IntInfinity()


class DimHint:
    """Dim.AUTO (dynamic if the program allows it, else static), Dim.STATIC, Dim.DYNAMIC
    (dynamic, or an error)."""
    __slots__ = ("type",)

    def __init__(self, type_):
        self.type = type_

    def __repr__(self):
        return f"DimHint({self.type})"

    def __eq__(self, other):
        return isinstance(other, DimHint) and other.type == self.type

    def __hash__(self):
        return hash(("DimHint", self.type))


class Dim:
    """A named dynamic dimension: Dim("batch", min=2, max=1024). The same Dim object (or
    name) used for several input dimensions makes them one symbol: they must be equal.
    min defaults to 0, max to unbounded (int_oo). Dim.AUTO / Dim.STATIC / Dim.DYNAMIC are
    hints for one dimension without a name."""
    AUTO = None  # set below
    STATIC = None
    DYNAMIC = None

    def __init__(self, name, *, min=None, max=None):  # noqa: A002 - torch's keywords
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"Dim name must be a valid identifier, got {name!r}")
        lo = 0 if min is None else min
        hi = int_oo if max is None or max == math.inf else max
        if isinstance(lo, bool) or not isinstance(lo, int) or lo < 0:
            raise ValueError(f"Dim {name}: min must be a non-negative int, got {min!r}")
        if hi is not int_oo and (isinstance(hi, bool) or not isinstance(hi, int)):
            raise ValueError(f"Dim {name}: max must be an int, got {max!r}")
        if hi is not int_oo and hi < lo:
            raise ValueError(f"Dim {name}: max ({hi}) is smaller than min ({lo})")
        self.__name__ = name
        self.min = lo
        self.max = hi

    def __repr__(self):
        parts = [repr(self.__name__)]
        if self.min != 0:
            parts.append(f"min={self.min}")
        if self.max is not int_oo:
            parts.append(f"max={self.max}")
        return f"Dim({', '.join(parts)})"

    def _derived(self, *_):
        raise NotImplementedError(
            f"derived dims ({self.__name__} used in arithmetic) are not supported by "
            "kiln.export: give the dimension its own Dim (see decision 0112)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = _derived


Dim.AUTO = DimHint("AUTO")
Dim.STATIC = DimHint("STATIC")
Dim.DYNAMIC = DimHint("DYNAMIC")


def dims(*names, min=None, max=None):  # noqa: A002
    """One Dim per name, with the same bounds (torch.export.dims)."""
    return tuple(Dim(n, min=min, max=max) for n in names)


class Symbol:
    """A dynamic dimension in the exported program: prints as s0, s1, ... (torch's sympy
    symbols). Compares equal to its name."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, Symbol):
            return other.name == self.name
        return isinstance(other, str) and other == self.name

    def __hash__(self):
        return hash(self.name)


class ValueRanges:
    """[lower, upper] of a symbol; upper may be int_oo. Prints VR[2, 1024] as torch."""
    __slots__ = ("lower", "upper")

    def __init__(self, lower, upper):
        self.lower = lower
        self.upper = upper

    def __repr__(self):
        return f"VR[{self.lower}, {self.upper}]"

    def __eq__(self, other):
        return isinstance(other, ValueRanges) and (self.lower, self.upper) == \
            (other.lower, other.upper)

    def __hash__(self):
        return hash((self.lower, str(self.upper)))

    def __contains__(self, v):
        return self.lower <= v and (self.upper is int_oo or v <= self.upper)
