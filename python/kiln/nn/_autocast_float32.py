"""The float32 policy of autocast for functions kiln composes from ops in Python (decision
0125). torch's autocast runs its losses in float32 (the CPU autocast lists name them); kiln's
autocast interceptor sees the ops these functions are made of one at a time, so a loss of
bfloat16 inputs would run, and return, in bfloat16. Each such function casts its own
bfloat16 / float16 tensor arguments to float32 where autocast is enabled for their device, as
the C++ losses do (src/kiln/nn/functional_loss.cpp)."""
import functools

from .. import _C

_LOWER = None


def _lower_dtypes():
    global _LOWER
    if _LOWER is None:
        _LOWER = (_C.bfloat16, _C.float16)
    return _LOWER


def _to_float32(a):
    if isinstance(a, _C.Tensor) and a.dtype in _lower_dtypes() and \
            _C._autocast_is_enabled(a.device.type):
        return a.float()
    return a


def float32_under_autocast(fn):
    """fn with its lower-precision tensor arguments in float32 under autocast."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*[_to_float32(a) for a in args],
                  **{k: _to_float32(v) for k, v in kwargs.items()})
    return wrapper
