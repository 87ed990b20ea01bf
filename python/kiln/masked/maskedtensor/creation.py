"""The two factories, mirroring kiln.tensor (a new leaf) and kiln.as_tensor (differentiable,
keeps the history)."""
from .core import MaskedTensor

__all__ = ["as_masked_tensor", "masked_tensor"]


def masked_tensor(data, mask, requires_grad=False):
    """A MaskedTensor holding copies of data (detached, a leaf) and mask."""
    return MaskedTensor(data, mask, requires_grad)


def as_masked_tensor(data, mask):
    """A MaskedTensor whose data is a differentiable copy of data: gradients of anything
    computed from it reach data."""
    return MaskedTensor._from_values(data, mask)
