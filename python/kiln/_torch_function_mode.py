"""TorchFunctionMode and the context managers that turn dispatch off (decision 0109), as
torch.overrides.TorchFunctionMode, torch._C.DisableTorchFunctionSubclass and
torch._C.DisableTorchFunction."""
import warnings

from . import _torch_function_dispatch as _d


class TorchFunctionMode:
    """While entered (`with mode:`), mode.__torch_function__(func, types, args, kwargs) sees
    every covered kiln call first. Its own calls inside the handler go to the mode below it
    (the mode is off while its handler runs); returning NotImplemented hands the call to the
    overriding arguments' classes."""

    def __init__(self):
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def __enter__(self):
        from . import _torch_function_install
        _torch_function_install.install()  # the wrappers see calls only once installed
        _d.push_mode(self)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        _d.pop_mode()

    @classmethod
    def push(cls, *args, **kwargs):
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just "
                      "`with Mode()`")
        return cls(*args, **kwargs)


def _get_current_function_mode():
    """The innermost mode of this thread, or None."""
    modes = _d.state.modes
    return modes[-1] if modes else None


def _get_current_function_mode_stack():
    return list(_d.state.modes)


def _len_torch_function_stack():
    return len(_d.state.modes)


class DisableTorchFunctionSubclass:
    """Within it, overriding arguments are ignored (modes still see calls)."""

    def __enter__(self):
        _d.state.subclass_off += 1
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        _d.state.subclass_off -= 1


class DisableTorchFunction:
    """Within it, neither overriding arguments nor modes see calls."""

    def __enter__(self):
        _d.state.all_off += 1
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        _d.state.all_off -= 1


def _is_torch_function_enabled():
    return not (_d.state.subclass_off or _d.state.all_off)


def _is_torch_function_mode_enabled():
    return bool(_d.state.modes) and not _d.state.all_off
