"""kiln.xpu: the GPU backend's device API, as torch.xpu.

xpu devices are OpenCL devices (GPUs by default; ``KILN_XPU_DEVICE_TYPES=all`` also admits
CPU OpenCL drivers such as PoCL, which the tests use on machines without a GPU). Ops without
an xpu kernel raise NotImplementedError, or run on the CPU with ``KILN_FALLBACK=cpu``.
"""
from . import _C

__all__ = ["is_available", "device_count", "current_device", "set_device", "synchronize",
           "get_device_name", "get_device_properties", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "empty_cache", "Stream", "Event",
           "current_stream"]


def is_available():
    """True when at least one xpu device exists."""
    return _C.is_available("xpu")


def device_count():
    return _C.device_count("xpu")


def current_device():
    return _C.current_device("xpu")


def set_device(device):
    _C.set_device(_as_device(device))


def _as_device(device):
    if device is None:
        return _C.device("xpu", current_device())
    if isinstance(device, int):
        return _C.device("xpu", device)
    d = _C.device(device) if isinstance(device, str) else device
    if d.type != "xpu":
        raise ValueError(f"expected an xpu device, got {d}")
    return d


def synchronize(device=None):
    """Waits for all work queued on the device's streams."""
    _C.synchronize(_as_device(device))


class _DeviceProperties:
    def __init__(self, props):
        self.name = props["name"]
        self.total_memory = props["total_memory"]
        self.capabilities = props["capabilities"]

    def __repr__(self):
        return (f"_XpuDeviceProperties(name='{self.name}', "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"capabilities='{self.capabilities}')")


def get_device_properties(device=None):
    return _DeviceProperties(_C._device_properties(_as_device(device)))


def get_device_name(device=None):
    return get_device_properties(device).name


def memory_allocated(device=None):
    return _C.memory_allocated(_as_device(device))


def max_memory_allocated(device=None):
    return _C.max_memory_allocated(_as_device(device))


def memory_reserved(device=None):
    return _C.memory_reserved(_as_device(device))


def empty_cache(device=None):
    _C.empty_cache(_as_device(device))


def current_stream(device=None):
    return _C.current_stream(_as_device(device))


def Stream(device=None):  # noqa: N802  (torch.xpu.Stream)
    return _C.Stream(_as_device(device))


def Event(enable_timing=False):  # noqa: N802  (torch.xpu.Event)
    return _C.Event(_C.device("xpu"), enable_timing=enable_timing)
