"""Padding modules (ZeroPad, ConstantPad, ReflectionPad, ReplicationPad, CircularPad in 1, 2
and 3 dims) over kiln.nn.functional.pad. ``padding``: one int for every side, or a tuple of
2 * dims ints (last dim first: left, right, top, bottom, front, back), as torch."""
from .. import functional as F
from .module import Module

__all__ = [f"{kind}Pad{d}d" for kind in ("Zero", "Constant", "Reflection", "Replication",
                                         "Circular") for d in (1, 2, 3)]


class _Pad(Module):
    _dims = 1
    _mode = "constant"

    def __init__(self, padding, value=0.0):
        super().__init__()
        n = 2 * self._dims
        if isinstance(padding, int):
            padding = (padding,) * n
        padding = tuple(int(p) for p in padding)
        if len(padding) != n:
            raise ValueError(f"{type(self).__name__}: expected padding of {n} values, got "
                             f"{len(padding)}")
        self.padding = padding
        self.value = value

    def forward(self, input):
        if self._mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        if type(self).__name__.startswith("Constant"):
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _make(kind, mode, dims, takes_value):
    if takes_value:
        def __init__(self, padding, value):
            _Pad.__init__(self, padding, value)
    else:
        def __init__(self, padding):
            _Pad.__init__(self, padding)
    return type(f"{kind}Pad{dims}d", (_Pad,), {"_dims": dims, "_mode": mode,
                                               "__init__": __init__,
                                               "__module__": __name__})


for _kind, _mode in (("Zero", "constant"), ("Constant", "constant"), ("Reflection", "reflect"),
                     ("Replication", "replicate"), ("Circular", "circular")):
    for _d in (1, 2, 3):
        globals()[f"{_kind}Pad{_d}d"] = _make(_kind, _mode, _d, _kind == "Constant")
del _kind, _mode, _d
