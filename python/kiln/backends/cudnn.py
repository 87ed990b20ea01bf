"""kiln.backends.cudnn, as torch.backends.cudnn in torch's CPU-only build: kiln has no
cuDNN, so is_available() is False and the flags change nothing in kiln; they are kept (and
checked to be bools, as torch checks them) so that scripts setting them run unchanged."""
import contextlib
import sys
import types

_flags = {"enabled": True, "benchmark": False, "deterministic": False, "allow_tf32": True}
benchmark_limit = 10


def is_available():
    return False


def version():
    return None


def is_acceptable(tensor):
    return False


def _set(name, value):
    if not isinstance(value, bool):
        raise RuntimeError(f"set_{name}_cudnn expects a bool, but got {type(value).__name__}")
    _flags[name] = value


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True):
    """Sets the flags inside the block and restores them after it (torch's defaults when
    not given, as torch's flags())."""
    before = dict(_flags)
    try:
        for name, value in (("enabled", enabled), ("benchmark", benchmark),
                            ("deterministic", deterministic), ("allow_tf32", allow_tf32)):
            _set(name, value)
        yield
    finally:
        _flags.update(before)


def _flag(name):
    return property(lambda self: _flags[name], lambda self, value: _set(name, value))


class _CudnnModule(types.ModuleType):
    enabled = _flag("enabled")
    benchmark = _flag("benchmark")
    deterministic = _flag("deterministic")
    allow_tf32 = _flag("allow_tf32")


sys.modules[__name__].__class__ = _CudnnModule
