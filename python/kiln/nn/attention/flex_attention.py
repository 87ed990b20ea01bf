"""kiln.nn.attention.flex_attention, as torch.nn.attention.flex_attention, computed eagerly
with kiln ops (so autograd differentiates it, tensors captured by score_mod included).

The [B, H, Q, KV] scores are materialised; score_mod(score, b, h, q_idx, kv_idx) is called
ONCE with the whole score tensor and broadcast index tensors b [B,1,1,1], h [1,H,1,1],
q_idx [1,1,Q,1], kv_idx [1,1,1,KV] (torch vmaps it over scalars). Elementwise score mods
(relative-position biases, ALiBi, soft-capping, table lookups such as bias[q_idx - kv_idx])
work unchanged; score mods with data-dependent Python control flow (``if q_idx > kv_idx:``)
are not supported -- write them with kiln.where. The same holds for mask_mods.
"""
import math
import warnings
from typing import NamedTuple, Optional

from ... import _C
from ._block_mask import (  # noqa: F401  (re-exported, as torch's module)
    BlockMask, _LARGE_SPARSE_BLOCK_SIZE, _create_empty_block_mask,
    _index_grids, _sliced_mask_mod_error, and_masks, create_block_mask, create_mask,
    noop_mask, or_masks)

__all__ = ["BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "FlexKernelOptions",
           "create_block_mask", "create_mask", "or_masks", "and_masks", "noop_mask"]

# torch's kernel tuning knobs (a TypedDict there); kiln has no fused kernel to tune and
# accepts and ignores them.
FlexKernelOptions = dict


class AuxRequest(NamedTuple):
    """Which auxiliary outputs flex_attention should return."""
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """Auxiliary outputs of flex_attention (None where not requested)."""
    lse: Optional[object] = None
    max_scores: Optional[object] = None


def _validate(query, key, value, block_mask, enable_gqa):
    if query.device != key.device or query.device != value.device:
        raise ValueError("Expected query, key, and value to have the same device type, but "
                         f"got query.device: {query.device}, key.device: {key.device}, and "
                         f"value.device: {value.device} instead.")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if query.size(-1) != key.size(-1):
        raise ValueError("Expect query and key/value to have the same embedding dimension "
                         f"but got E={query.size(-1)} and E={key.size(-1)}.")
    hq, hkv = query.size(1), key.size(1)
    if not enable_gqa and hq != hkv:
        raise ValueError("Expect query and key/value to have the same number of heads but got "
                         f"Hq={hq} and Hkv={hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and (hkv == 0 or hq % hkv != 0):
        raise ValueError("Expect number of query heads to be a multiple of kv heads for GQA "
                         f"but got Hq={hq} and Hkv={hkv}.")
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise ValueError("Expect query and key/value to have the same batch size, or "
                             "non-none block_mask, but got block_mask=None, "
                             f"Bq={query.size(0)}, and Bkv={key.size(0)}.")
        if block_mask.kv_num_blocks.size(0) != query.size(0) or key.size(0) != 1:
            raise ValueError("Expect query and key/value to have the same batch size, or "
                             "block_mask and query to have the same batch size, but got "
                             f"Bq={query.size(0)}, Bkv={key.size(0)}, "
                             f"B_block_mask={block_mask.kv_num_blocks.size(0)}.")
    if block_mask is None or block_mask.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE,
                                                       _LARGE_SPARSE_BLOCK_SIZE):
        return
    if block_mask.mask_mod is _sliced_mask_mod_error:
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    bq, bkv = block_mask.shape[-2:]
    q_len, kv_len = query.size(-2), key.size(-2)
    if q_len > bq or kv_len > bkv:
        raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} "
                         f"but got q_len={q_len} and kv_len={kv_len}. As the block mask was "
                         "created for a smaller length than you're using it for, you likely "
                         "need to create a new block mask.")
    if q_len != bq or kv_len != bkv:
        raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} "
                         f"but got q_len={q_len} and kv_len={kv_len}. As the block mask was "
                         "created for a larger length than you're using it for, create a new "
                         "block mask with the correct length.")


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, *,
                   return_aux=None):
    """softmax(score_mod(q @ k^T * scale) masked by block_mask) @ v, per (batch, head).

    query [B, Hq, L, E], key [B or 1, Hkv, S, E], value [B or 1, Hkv, S, Ev] -> [B, Hq, L, Ev].
    enable_gqa: Hkv may divide Hq (query head h uses kv head h // (Hq / Hkv)).
    Scores are computed in float64 for float64 inputs and float32 otherwise (as torch).
    A query row with every score masked (or -inf) gives 0 and lse -inf, not NaN.
    return_lse (deprecated in torch) / return_aux=AuxRequest(lse=..., max_scores=...): also
    the row log-sum-exp of the modified scores (natural log) and / or their row maximum.
    kernel_options is accepted and ignored (no fused kernel to tune)."""
    _validate(query, key, value, block_mask, enable_gqa)
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is "
                         "deprecated, please use return_aux=AuxRequest(lse=True) instead.")
    if return_lse:
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=2)
    if kernel_options is not None and not isinstance(kernel_options, dict):
        raise TypeError(f"kernel_options must be a dict, got {type(kernel_options).__name__}")

    B, hq, q_len, e = query.shape
    hkv, kv_len = key.size(1), key.size(2)
    if hq != hkv:  # GQA: repeat each kv head for its group (autograd sums the copies back)
        key = key.repeat_interleave(hq // hkv, dim=1)
        value = value.repeat_interleave(hq // hkv, dim=1)
    if key.size(0) != B:  # one kv batch shared by every query batch
        key = key.expand(B, *key.shape[1:])
        value = value.expand(B, *value.shape[1:])
    scale = 1.0 / math.sqrt(e) if scale is None else scale

    work = _C.float64 if query.dtype == _C.float64 else _C.float32
    scores = _C.matmul(query.to(work), key.to(work).transpose(-2, -1)) * scale
    if score_mod is not None:
        b, h, qi, kvi = _index_grids(B, hq, q_len, kv_len, query.device)
        modded = score_mod(scores, b, h, qi, kvi)
        # A score_mod may ignore some inputs; its result still covers every score. Its dtype
        # is kept (a float64 table promotes float32 scores, and the lse, as in torch).
        scores = modded.expand(*scores.shape) if modded.shape != scores.shape else modded
    mask = (block_mask or _create_empty_block_mask(query, key))._element_mask()
    neg_inf = float("-inf")
    if mask is not None:
        scores = _C.where(mask, scores, neg_inf)

    # Rows with nothing to attend: the softmax and logsumexp run on zeros there (finite
    # values and gradients) and the results are replaced by 0 / -inf (torch's _safe_softmax).
    dead = (scores == neg_inf).all(dim=-1, keepdim=True)
    any_dead = bool(dead.any().item())
    safe = _C.where(dead, 0.0, scores) if any_dead else scores
    probs = _C.softmax(safe, -1)
    if any_dead:
        probs = _C.where(dead, 0.0, probs)
    out = _C.matmul(probs.to(query.dtype), value.to(query.dtype))

    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    want_max = return_aux is not None and return_aux.max_scores
    lse = max_scores = None
    if want_lse:
        lse = _C.logsumexp(safe, -1)
        if any_dead:
            lse = _C.where(dead.squeeze(-1), neg_inf, lse)
    if want_max:
        max_scores = scores.amax(-1)  # -inf on dead rows already
    if return_aux is not None:
        return out, AuxOutput(lse=lse, max_scores=max_scores)
    if return_lse:
        return out, lse
    return out
