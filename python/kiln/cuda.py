"""kiln.cuda: torch.cuda as it behaves in torch's CPU-only build, so that scripts written for
CUDA run their CPU path unchanged. kiln has no CUDA backend (its GPU backend is kiln.xpu):
is_available() is False, device_count() is 0, seeding and cache-emptying calls do nothing,
and the calls that need a CUDA device raise AssertionError, as torch's CPU build does."""
from collections import OrderedDict

from . import _C

__all__ = ["is_available", "device_count", "is_bf16_supported", "is_tf32_supported",
           "is_initialized", "init", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "initial_seed", "get_rng_state", "get_rng_state_all", "set_rng_state",
           "set_rng_state_all", "synchronize", "empty_cache", "current_device", "set_device",
           "device", "get_device_name", "get_device_capability", "get_device_properties",
           "mem_get_info", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "memory_stats", "reset_peak_memory_stats", "current_stream",
           "stream", "Stream", "Event", "ipc_collect", "get_arch_list", "get_gencode_flags",
           "OutOfMemoryError", "default_generators"]

OutOfMemoryError = _C.OutOfMemoryError
default_generators = ()

_NO_CUDA = "kiln not compiled with CUDA enabled (kiln's GPU backend is kiln.xpu)"


def _no_cuda(*args, **kwargs):
    # torch's CPU build fails these with AssertionError("Torch not compiled with CUDA
    # enabled"); code written for it catches that type.
    raise AssertionError(_NO_CUDA)


def is_available():
    return False


def device_count():
    return 0


def is_bf16_supported(including_emulation=True):
    return False


def is_tf32_supported():
    return False


def is_initialized():
    return False


def _is_compiled():
    return False


# Seeding: torch queues these until CUDA is initialized, which never happens on a CPU build.
def manual_seed(seed):
    int(seed)  # torch converts the seed right away (a ValueError for "abc")


def manual_seed_all(seed):
    int(seed)


def seed():
    pass


def seed_all():
    pass


def set_rng_state(new_state, device="cuda"):
    pass


def set_rng_state_all(new_states):
    pass


def get_rng_state_all():
    return []


def empty_cache():
    pass


# Memory statistics read as zero without a device, as torch's.
def memory_allocated(device=None):
    return 0


def max_memory_allocated(device=None):
    return 0


def memory_reserved(device=None):
    return 0


def max_memory_reserved(device=None):
    return 0


def memory_stats(device=None):
    return OrderedDict()


def get_arch_list():
    return []


def get_gencode_flags():
    return ""


init = synchronize = current_device = get_device_name = _no_cuda
get_device_capability = get_device_properties = mem_get_info = _no_cuda
get_rng_state = initial_seed = current_stream = ipc_collect = _no_cuda
# torch's CPU build fails these two with an AttributeError about a missing torch._C binding,
# an accident of the build; kiln raises the error the rest of this module raises.
set_device = reset_peak_memory_stats = _no_cuda


class device:
    """torch.cuda.device(idx): entering it needs CUDA (None or a negative index: no-op)."""

    def __init__(self, device):
        self.idx = device if device is None or isinstance(device, int) else _C.device(device).index

    def __enter__(self):
        if self.idx is not None and self.idx >= 0:
            raise RuntimeError("kiln was compiled without CUDA support")
        return self

    def __exit__(self, *exc):
        return False


class _StreamContext:
    def __init__(self, stream):
        if stream is not None:
            raise RuntimeError("kiln.cuda.stream requires CUDA support")

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def stream(stream):
    """torch.cuda.stream(None) is a no-op context (the only stream a CPU build can name)."""
    return _StreamContext(stream)


class Stream:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("kiln.cuda.Stream requires CUDA support (kiln's GPU streams are "
                           "kiln.xpu.Stream)")


class Event:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("kiln.cuda.Event requires CUDA support (kiln's GPU events are "
                           "kiln.xpu.Event)")
