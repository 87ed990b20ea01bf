"""kiln.random, as torch.random: the default (CPU) generator's seed and state, and fork_rng,
which puts the generator states back after a block.

xpu ops draw from per-device generators that kiln's Python API does not expose yet (no
kiln.xpu.get_rng_state), so fork_rng can only restore them for device modules that have one:
asking it for xpu devices raises instead of silently leaving their streams advanced."""
import contextlib
import warnings

from . import _C
from ._composite_factory import get_rng_state, set_rng_state

__all__ = ["set_rng_state", "get_rng_state", "manual_seed", "seed", "initial_seed", "fork_rng"]

manual_seed = _C.manual_seed  # seeds every device's default generator; returns the CPU one
seed = _C.seed
initial_seed = _C.initial_seed

_fork_rng_warned = False


def _device_module(device_type):
    import kiln
    mod = getattr(kiln, device_type, None)
    if mod is None:
        raise RuntimeError(f"kiln has no module of `{device_type}`")
    return mod


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type=None):
    """Saves the CPU generator's state (and that of `devices` of `device_type`, default
    "xpu", kiln's accelerator; torch's default is CUDA) and restores it when the block
    ends, so random draws inside it do not move the streams outside it."""
    global _fork_rng_warned
    if not enabled:
        yield
        return
    device_mod = _device_module(device_type or "xpu")
    if devices is None:
        n = device_mod.device_count()
        if n > 0 and not hasattr(device_mod, "get_rng_state") and not _fork_rng_warned:
            warnings.warn(f"kiln.random.{_caller}: only the CPU generator is restored; the "
                          f"generators of the {n} {device_type or 'xpu'} device(s) have no "
                          f"state API in kiln yet. Pass {_devices_kw}=[] to silence this.",
                          stacklevel=3)
            _fork_rng_warned = True
        devices = list(range(n)) if hasattr(device_mod, "get_rng_state") else []
    else:
        devices = list(devices)
        if devices and not hasattr(device_mod, "get_rng_state"):
            raise NotImplementedError(
                f"kiln.random.{_caller}: cannot save the generator state of "
                f"{device_type or 'xpu'} devices {devices}: kiln exposes no per-device "
                f"generator state yet (only the CPU generator's, kiln.get_rng_state)")
    cpu_state = get_rng_state()
    device_states = [device_mod.get_rng_state(d) for d in devices]
    try:
        yield
    finally:
        set_rng_state(cpu_state)
        for d, state in zip(devices, device_states):
            device_mod.set_rng_state(state, d)
