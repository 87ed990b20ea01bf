"""Pruning methods that pick single entries: Identity (none), RandomUnstructured (uniformly
at random) and L1Unstructured (the smallest in absolute value)."""
import kiln

from . import _validation as V
from .base import BasePruningMethod


class Identity(BasePruningMethod):
    """Prunes nothing: sets up <name>_orig / <name>_mask with a mask of ones."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _zero_flat(default_mask, indices):
    """A contiguous copy of default_mask with the flat positions `indices` set to 0."""
    mask = default_mask.clone(memory_format=kiln.contiguous_format)
    mask.view(-1)[indices] = 0
    return mask


class _PickedUnstructured(BasePruningMethod):
    """Zeroes `amount` entries (a count, or a fraction of the entries): those _pick chooses
    among t's flattened entries."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        V.validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        size = t.nelement()
        k = V.nparams_toprune(self.amount, size)
        V.validate_amount(k, size)
        if k == 0:
            return default_mask.clone(memory_format=kiln.contiguous_format)
        return _zero_flat(default_mask, self._pick(t, k))


class RandomUnstructured(_PickedUnstructured):
    """Zeroes `amount` entries chosen at random."""

    def _pick(self, t, k):
        # the k largest of uniform draws: a uniformly random k-subset
        return kiln.topk(kiln.rand_like(t, memory_format=kiln.contiguous_format).view(-1), k).indices

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_PickedUnstructured):
    """Zeroes the `amount` entries of smallest absolute value (of t, which apply() takes from
    importance_scores when given)."""

    def _pick(self, t, k):
        # Among equal magnitudes the choice follows topk's order, which is not specified:
        # kiln's topk prefers lower indices, torch's CPU topk may pick others.
        return kiln.topk(kiln.abs(t).view(-1), k, largest=False).indices

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)
