"""torch.cond and torch.while_loop in eager mode (what they do outside torch.compile): the
predicate is read and the chosen function runs; plus torch.typename and the warn-always
flag."""
import builtins as _b

from . import _C

_warn_always = False


def _pred(pred, what):
    if isinstance(pred, _C.Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"{what}: expected a predicate with one element, got shape "
                               f"{tuple(pred.shape)}")
        return _b.bool(pred.item())
    return _b.bool(pred)


def cond(pred, true_fn, false_fn, operands=()):
    """true_fn(*operands) if pred else false_fn(*operands)."""
    return (true_fn if _pred(pred, "cond") else false_fn)(*operands)


def while_loop(cond_fn, body_fn, carried_inputs):
    """Runs body_fn on the carried values while cond_fn of them holds; returns them (a tuple)."""
    values = tuple(carried_inputs)
    while _pred(cond_fn(*values), "while_loop"):
        values = tuple(body_fn(*values))
    return values


_LEGACY_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                 "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
                 "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
                 "bool": "BoolTensor"}


def typename(obj):
    """kiln.FloatTensor for a float32 tensor (torch's legacy type names), else the type's
    qualified name."""
    if isinstance(obj, _C.Tensor):
        return "kiln." + _LEGACY_NAMES[str(obj.dtype).replace("kiln.", "")]
    t = type(obj)
    module = t.__module__
    return t.__qualname__ if module in ("builtins", None) else f"{module}.{t.__qualname__}"


def set_warn_always(b):
    """Recorded for torch compatibility: kiln's warnings are shown once per op either way."""
    global _warn_always
    _warn_always = _b.bool(b)


def is_warn_always_enabled():
    return _warn_always


def compiled_with_cxx11_abi():
    return True  # built with g++'s default (new) std::string ABI
