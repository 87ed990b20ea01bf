"""Pruning methods that zero whole channels (slices along `dim`): RandomStructured (chosen at
random) and LnStructured (those of smallest L_n norm). The channels are counted along dim, so
`amount` is a number or fraction of channels."""
import kiln

from . import _validation as V
from .base import BasePruningMethod


def _channel_mask(t, dim, keep):
    """Ones on the channels `keep` (indices or a boolean per channel) along dim, zeros
    elsewhere, shaped and typed like t."""
    mask = kiln.zeros_like(t)
    mask[tuple(keep if d == dim % t.dim() else slice(None) for d in range(t.dim()))] = 1
    return mask


def _checked_counts(t, amount, dim):
    V.validate_structured(t)
    V.validate_dim(t, dim)
    nchannels = t.shape[dim]
    k = V.nparams_toprune(amount, nchannels)
    V.validate_amount(k, nchannels)
    return nchannels, k


class RandomStructured(BasePruningMethod):
    """Zeroes `amount` channels along dim, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        V.validate_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        nchannels, k = _checked_counts(t, self.amount, self.dim)
        if k == 0:
            return default_mask
        # the channels whose draw lies above the k-th smallest draw survive
        draws = kiln.rand(nchannels)
        threshold = kiln.kthvalue(draws, k).values
        mask = _channel_mask(t, self.dim, draws > threshold)
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Zeroes the `amount` channels along dim with the smallest L_n norm (n as torch.norm's p:
    a number, inf, -inf, 'fro' or 'nuc')."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        V.validate_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        nchannels, k = _checked_counts(t, self.amount, self.dim)
        norms = V.channel_norm(t, self.n, self.dim)
        keep = kiln.topk(norms, nchannels - k, largest=True).indices
        if k == 0:
            return default_mask
        mask = _channel_mask(t, self.dim, keep)
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)
