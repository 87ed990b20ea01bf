"""kiln.nn.attention, as torch.nn.attention: choosing the backends scaled_dot_product_attention
may use (SDPBackend, sdpa_kernel), causal biases (.bias) and flex_attention (.flex_attention).

kiln has one SDPA implementation (a composition of kiln ops, differentiable). It counts as
MATH for every input, and as FLASH_ATTENTION for the inputs torch's fused CPU kernel (which
torch files under FLASH_ATTENTION) accepts: 4-D query/key/value with equal batch sizes,
equal heads (or a divisor with enable_gqa), one head dim for q, k and v, no dropout and a
2-D or 4-D mask. EFFICIENT_ATTENTION, CUDNN_ATTENTION and OVERRIDEABLE are CUDA/extension
kernels kiln does not have, so allowing only those fails as in torch on CPU. See
docs/decisions/0099-nn-attention.md.
"""
import contextlib
import enum
import threading
import warnings

from .. import functional as _F

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

# As torch: when True, a CausalBias that falls back to a materialised mask warns why.
WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The backends of scaled_dot_product_attention (torch's values)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


# torch's default priority order (torch._C._get_sdp_priority_order()).
_DEFAULT_ORDER = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                  SDPBackend.MATH, SDPBackend.CUDNN_ATTENTION, SDPBackend.OVERRIDEABLE)
_ALL = frozenset(_DEFAULT_ORDER)

# Per thread: the allowed backends and the priority order. torch keeps these process-wide;
# kiln keeps them per thread so a data-loader or serving thread's choice does not leak.
_tls = threading.local()
# How many sdpa_kernel contexts are open in any thread. While none is, functional's hook is
# None and an SDPA call pays only that one module-global test.
_open = 0
_open_lock = threading.Lock()


def _allowed():
    return getattr(_tls, "allowed", _ALL)


def _order():
    return getattr(_tls, "order", _DEFAULT_ORDER)


def _cur_sdpa_kernel_backends(with_priority=False):
    """The allowed backends, in enum order or (with_priority) in priority order."""
    allowed = _allowed()
    if with_priority:
        return [b for b in _order() if b in allowed]
    return [b for b in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                        SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
                        SDPBackend.OVERRIDEABLE) if b in allowed]


def _flash_refusal(query, key, value, attn_mask, dropout_p, enable_gqa):
    """Why torch's fused CPU ('flash') kernel would refuse these inputs, or None."""
    if dropout_p > 0.0:
        return "Both fused kernels do not support non-zero dropout."
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return (f"Both fused kernels requires query, key and value to be 4 dimensional, but "
                f"got Query dim: {query.dim()}, Key dim: {key.dim()}, Value dim: "
                f"{value.dim()} instead.")
    if not (query.size(0) == key.size(0) == value.size(0)):
        return "For dense inputs, both fused kernels require query, key and value to have " \
               "the same batch_size."
    hq, hk, hv = query.size(1), key.size(1), value.size(1)
    if not (hq == hk == hv or (enable_gqa and hk == hv and hk > 0 and hq % hk == 0)):
        return "For dense input, both fused kernels require query, key and value to have " \
               "the same num_heads."
    if not (query.size(-1) == key.size(-1) == value.size(-1)):
        return "Flash attention requires q,k,v to have the same last dimension."
    if attn_mask is not None and attn_mask.dim() not in (2, 4):
        return "Flash attention requires attn_mask to be 2 or 4 dimensional."
    return None


def _check_backends(query, key, value, attn_mask, dropout_p, enable_gqa):
    """Raise as torch when none of this thread's allowed backends can run the call."""
    allowed = _allowed()
    if SDPBackend.MATH in allowed:
        return
    if SDPBackend.FLASH_ATTENTION not in allowed:
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. "
                           "This is likely due to turning off both the math kernel and the "
                           "fused kernels.")
    why = _flash_refusal(query, key, value, attn_mask, dropout_p, enable_gqa)
    if why is not None:
        warnings.warn("Flash attention kernel not used because: " + why, stacklevel=3)
        # torch's message, two spaces included.
        raise RuntimeError("No available kernel.  Aborting execution.")


def _set(backends, order):
    _tls.allowed = frozenset(backends)
    _tls.order = tuple(order)


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Allow only ``backends`` (an SDPBackend or a list of them) for scaled_dot_product_attention
    in this thread while the context is open; set_priority records their order as the
    priority order (kiln has one implementation, so the order changes nothing it computes)."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                             f"SDPBackend instances, got {type(backends).__name__}")
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(dict.fromkeys(backends))
    prev_allowed, prev_order = _allowed(), _order()
    order = prev_order
    if set_priority:
        order = tuple(backends) + tuple(b for b in prev_order if b not in backends)
    global _open
    with _open_lock:
        _open += 1
        _F._sdpa_backend_check = _check_backends
    try:
        _set(backends, order)
        yield {}
    finally:
        _set(prev_allowed, prev_order)
        with _open_lock:
            _open -= 1
            if _open == 0:
                _F._sdpa_backend_check = None


@contextlib.contextmanager
def _sdpa_kernel_variadic(*backends):
    with sdpa_kernel(list(backends)):
        yield


def _get_flash_version():
    return "2.5.7"  # as torch; kiln has no flash-attn build of its own


from . import bias, flex_attention  # noqa: E402,F401
