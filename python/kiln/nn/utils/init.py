"""skip_init: a module built without running its parameter initialisation (torch's)."""
import inspect

from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) whose parameters and buffers hold unspecified values, as
    torch's: built on the meta device (no memory, no initialisation) and then given
    uninitialised memory on `device` (default cpu) by to_empty."""
    if not (inspect.isclass(module_cls) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    kwargs["device"] = "meta"
    return module_cls(*args, **kwargs).to_empty(device=final_device)
