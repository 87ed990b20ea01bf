"""kiln.amp: torch.amp's autocast (decision 0091) and GradScaler. Inside `autocast("cpu")`
products and convolutions run in bfloat16 (float16 on xpu by default, as torch), a few
precision-sensitive ops in float32; gradients flow back to float32 parameters in float32."""
import functools

from . import _C

__all__ = ["autocast", "GradScaler", "is_autocast_available"]


def is_autocast_available(device_type):
    return device_type in ("cpu", "xpu")


class autocast:
    """Context manager and decorator (torch.autocast / torch.amp.autocast)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device_type = device_type.split(":")[0]
        self.fast_dtype = _C._autocast_get_dtype(self.device_type) if dtype is None else dtype
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled

    def __enter__(self):
        d = self.device_type
        self.prev = (_C._autocast_is_enabled(d), _C._autocast_get_dtype(d),
                     _C._autocast_cache_enabled())
        _C._autocast_set_dtype(d, self.fast_dtype)
        _C._autocast_set_enabled(d, self._enabled)
        if self._cache_enabled is not None:
            _C._autocast_set_cache_enabled(bool(self._cache_enabled))
        _C._autocast_increment_nesting()
        return self

    def __exit__(self, *exc):
        d = self.device_type
        _C._autocast_decrement_nesting()  # clears the cast cache at the outermost exit
        enabled, dtype, cache = self.prev
        _C._autocast_set_enabled(d, enabled)
        _C._autocast_set_dtype(d, dtype)
        _C._autocast_set_cache_enabled(cache)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)
        return wrapper


def is_autocast_enabled(device_type=None):
    """torch's rule: without a device type, the CUDA state (kiln has no CUDA: False)."""
    return False if device_type is None else _C._autocast_is_enabled(device_type)


def get_autocast_dtype(device_type):
    return _C._autocast_get_dtype(device_type)


def set_autocast_enabled(device_type, enabled):
    _C._autocast_set_enabled(device_type, bool(enabled))


def set_autocast_dtype(device_type, dtype):
    _C._autocast_set_dtype(device_type, dtype)


def is_autocast_cache_enabled():
    return _C._autocast_cache_enabled()


def set_autocast_cache_enabled(enabled):
    _C._autocast_set_cache_enabled(bool(enabled))


class GradScaler:
    """Loss scaling for float16 training (torch.amp.GradScaler): scale() multiplies the loss,
    step() unscales the gradients and skips the optimizer step when any is inf / NaN,
    update() halves the scale after a skipped step and doubles it after growth_interval
    good steps. enabled=False makes every method a pass-through."""

    def __init__(self, device="cpu", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._enabled = enabled
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = growth_factor, backoff_factor
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._found_inf = {}  # id(optimizer) -> bool, for the current iteration
        self._unscaled = set()

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def _grads(self, optimizer):
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield p

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        if id(optimizer) in self._unscaled:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        inv = 1.0 / self._scale
        found = False
        with _C_no_grad():
            for p in self._grads(optimizer):
                p.grad.mul_(inv)
                found = found or not bool(_C.isfinite(p.grad).all())
        self._found_inf[id(optimizer)] = found
        self._unscaled.add(id(optimizer))

    def step(self, optimizer, *args, **kwargs):
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        if self._found_inf[id(optimizer)]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif any(self._found_inf.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._found_inf.clear()
        self._unscaled.clear()

    def state_dict(self):
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker} if self._enabled else {}

    def load_state_dict(self, state):
        self._scale = float(state["scale"])
        self._growth_factor = state["growth_factor"]
        self._backoff_factor = state["backoff_factor"]
        self._growth_interval = state["growth_interval"]
        self._growth_tracker = state["_growth_tracker"]


def _C_no_grad():
    from .autograd import no_grad
    return no_grad()
