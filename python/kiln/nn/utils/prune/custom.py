"""CustomFromMask: prune with a mask the caller computed (also how global_unstructured
installs its per-tensor slices of the global mask)."""
from .base import BasePruningMethod


class CustomFromMask(BasePruningMethod):
    """Multiplies the current mask by a given one (any dtype; cast to the mask's)."""

    # 'global': inside a PruningContainer it sees the whole tensor, not what is left
    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match "
                                 f"self.mask shape {self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)
