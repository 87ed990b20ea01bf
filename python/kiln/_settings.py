"""Global settings with torch's names: print options, deterministic algorithms, float32
matmul precision."""
import builtins as _builtins
import sys as _sys
import threading as _threading

from . import _C

_PRINT_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80),
                   "full": (4, _sys.maxsize, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """torch.set_printoptions: a profile ("default", "short", "full") first, then the values
    given; sci_mode is set on every call (None: chosen per tensor), as torch's."""
    p, t, e, w, _ = _C._get_print_options()
    if profile is not None:
        if profile not in _PRINT_PROFILES:
            raise ValueError(f"set_printoptions: unknown profile '{profile}' (expected one of "
                             f"{', '.join(_PRINT_PROFILES)})")
        p, t, e, w = _PRINT_PROFILES[profile]
    p = p if precision is None else precision
    t = t if threshold is None else (
        _sys.maxsize if threshold == _builtins.float("inf") else _builtins.int(threshold))
    e = e if edgeitems is None else edgeitems
    w = w if linewidth is None else linewidth
    sci = -1 if sci_mode is None else _builtins.int(_builtins.bool(sci_mode))
    _C._set_print_options(p, t, e, w, sci)


_warn_only = False


def use_deterministic_algorithms(mode, *, warn_only=False):
    """On: kernels whose results could depend on the order of concurrent writes take a
    deterministic path (on xpu, index_put and scatter with repeated indices run the CPU kernel
    through host memory: the last write wins). kiln's other kernels are deterministic anyway
    (fixed summation orders, no float atomics), so nothing raises in this mode."""
    global _warn_only
    if not isinstance(mode, _builtins.bool):
        raise TypeError(f"use_deterministic_algorithms expects a bool, but got {type(mode).__name__}")
    _C._set_deterministic_algorithms(mode)
    _warn_only = _builtins.bool(warn_only) and mode


def are_deterministic_algorithms_enabled():
    return _C._deterministic_algorithms()


def is_deterministic_algorithms_warn_only_enabled():
    return _warn_only


def set_deterministic_debug_mode(debug_mode):
    """0 / "default": off; 1 / "warn": on, warn only; 2 / "error": on."""
    names = {"default": 0, "warn": 1, "error": 2}
    mode = names.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected one of 0, 1, 2 or "
                           f"'default', 'warn', 'error', but got {debug_mode}")
    use_deterministic_algorithms(mode != 0, warn_only=mode == 1)


def get_deterministic_debug_mode():
    if not are_deterministic_algorithms_enabled():
        return 0
    return 1 if _warn_only else 2


_matmul_precision = "highest"


def set_float32_matmul_precision(precision):
    """Recorded for torch compatibility: kiln's float32 products always compute in float32
    (torch's "highest"); "high" / "medium" would allow TF32 / bfloat16 internally, which kiln
    does not do."""
    global _matmul_precision
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: expected 'highest', 'high' or "
                           f"'medium'")
    _matmul_precision = precision


def get_float32_matmul_precision():
    return _matmul_precision


def set_default_device(device):
    """Where factories (zeros, empty, tensor, arange, rand, ..., and so the parameters of nn
    modules) put their tensors when no device= is given; None: back to the CPU. *_like
    factories keep following their input, as in torch."""
    _C._set_default_device(None if device is None else _C.device(device))


def get_default_device():
    d = _C._get_default_device()
    return _C.device("cpu") if d is None else d


# `with kiln.device("meta"):` as torch's device context: factories inside the block (and so
# the parameters of modules built there) default to that device. The default device itself
# is process-wide (set_default_device); each thread keeps its own stack of the defaults its
# blocks replaced, so nested blocks restore in order.
_device_blocks = _threading.local()


def _device_enter(self):
    stack = _device_blocks.__dict__.setdefault("stack", [])
    stack.append(_C._get_default_device())
    _C._set_default_device(self)
    return self


def _device_exit(self, exc_type, exc, tb):
    _C._set_default_device(_device_blocks.stack.pop())


_C.device.__enter__ = _device_enter
_C.device.__exit__ = _device_exit
