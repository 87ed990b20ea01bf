"""kiln.nn.attention.bias, as torch.nn.attention.bias: causal biases that
kiln.nn.functional.scaled_dot_product_attention accepts as ``attn_mask``.

torch's CausalBias is a data-less Tensor subclass routed through __torch_function__; kiln's
is a plain object that scaled_dot_product_attention recognises (it is not a kiln.Tensor), so
it never takes part in other tensor ops by accident.
"""
import warnings
from enum import IntEnum, auto

from ... import _C

__all__ = ["causal_upper_left", "causal_lower_right", "CausalVariant", "CausalBias"]


class CausalVariant(IntEnum):
    """UPPER_LEFT: query i sees keys 0..i (tril of the [L, S] matrix, is_causal=True).
    LOWER_RIGHT: the triangle is aligned to the bottom-right corner: query i sees keys
    0..i + S - L (the last query sees every key, as when decoding with a KV cache).
    The two agree when L == S."""
    UPPER_LEFT = auto()
    LOWER_RIGHT = auto()


class CausalBias:
    """A causal mask of a given variant for ``seq_len_q`` queries and ``seq_len_kv`` keys."""

    def __init__(self, variant, seq_len_q, seq_len_kv):
        if not isinstance(variant, CausalVariant):
            raise AssertionError(
                f"variant must be a CausalVariant, got {type(variant).__name__}")
        self.variant = variant
        self.seq_len_q = seq_len_q
        self.seq_len_kv = seq_len_kv
        if seq_len_q > seq_len_kv and variant == CausalVariant.LOWER_RIGHT:
            # torch's warning; kiln (like torch's math path) gives those rows 0, not NaN.
            warnings.warn("Lower right causal bias will produce NaNs in the output when "
                          "seq_len_q > seq_len_kv!", stacklevel=2)

    def _materialize(self, device=None):
        """The bool mask [seq_len_q, seq_len_kv] (True = may attend)."""
        ones = _C.ones(self.seq_len_q, self.seq_len_kv, dtype=_C.bool,
                       device=device if device is not None else "cpu")
        if self.variant == CausalVariant.UPPER_LEFT:
            return ones.tril()
        if self.variant == CausalVariant.LOWER_RIGHT:
            return ones.tril(self.seq_len_kv - self.seq_len_q)
        raise ValueError(
            f"CausalBias.variant must be a CausalVariant type, but found: {self.variant}")

    def _sdpa_dispatch(self, query, key, value, dropout_p=0.0, is_causal=False, scale=None,
                       enable_gqa=False):
        """scaled_dot_product_attention with this bias as the mask."""
        from .. import functional as F
        if is_causal:
            raise ValueError("CausalBias should not be used with causal=True")
        if self.seq_len_q == self.seq_len_kv or self.variant == CausalVariant.UPPER_LEFT:
            # is_causal=True is upper-left and lets the implementation build its own mask.
            return F.scaled_dot_product_attention(query, key, value, None, dropout_p, True,
                                                  scale, enable_gqa)
        if self.variant != CausalVariant.LOWER_RIGHT:
            raise ValueError(f"CausalBias.variant must be a CausalVariant type, but found: "
                             f"{self.variant}")
        from . import WARN_FOR_UNFUSED_KERNELS  # read at call time: users set it on the module
        if WARN_FOR_UNFUSED_KERNELS:
            warnings.warn("kiln has no fused lower-right causal kernel; the bias is "
                          "materialised as a bool mask", stacklevel=3)
        return F.scaled_dot_product_attention(query, key, value,
                                              self._materialize(query.device), dropout_p,
                                              False, scale, enable_gqa)

    def __repr__(self):
        return repr(self._materialize())


def causal_upper_left(*size):
    """CausalBias(UPPER_LEFT, L, S): the mask of is_causal=True."""
    if len(size) != 2:
        raise AssertionError("causal_upper_left only supports 2D tensors")
    return CausalBias(CausalVariant.UPPER_LEFT, *size)


def causal_lower_right(*size):
    """CausalBias(LOWER_RIGHT, L, S): tril(ones(L, S), diagonal=S - L)."""
    if len(size) != 2:
        raise AssertionError("causal_lower_right only supports 2D tensors")
    return CausalBias(CausalVariant.LOWER_RIGHT, *size)
