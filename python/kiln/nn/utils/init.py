"""skip_init: a module built without running its parameter initialisation (torch's)."""
import inspect

from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) whose parameters and buffers hold unspecified values.
    torch builds it on the meta device and then allocates uninitialised memory; kiln has no
    meta device, so the module is built on its device and its initial values simply carry no
    promise (the same contract, without torch's saving of the initialisation time)."""
    if not (inspect.isclass(module_cls) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)
