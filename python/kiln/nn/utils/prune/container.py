"""PruningContainer: the hook of a tensor pruned more than once. It remembers every method
applied, in order, and computes the newest one's mask only over what earlier ones left (the
entries still at 1, or the channels not yet all zero), so amounts are fractions of what is
left, not of the whole tensor."""
from .base import BasePruningMethod


class PruningContainer(BasePruningMethod):
    """Holds a sequence of pruning methods for one tensor; built from one method (or several,
    all on the same tensor name) or empty (then _tensor_name must be set by hand)."""

    def __init__(self, *methods):
        self._pruning_methods = ()
        if methods:
            # the name every later method must prune (torch only takes it from a single
            # method; with several it fails with AttributeError, kiln takes the first's)
            self._tensor_name = methods[0]._tensor_name
        for method in methods:
            self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Appends method (None is accepted and kept, as torch does)."""
        if method is not None and not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. Found "
                             f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """default_mask with the newest method applied to the part of t it may still prune."""
        method = self._pruning_methods[-1]
        new_mask = default_mask.to(dtype=t.dtype)
        where = _still_prunable(method, t, default_mask)
        partial = method.compute_mask(t[where], default_mask=default_mask[where])
        new_mask[where] = partial.to(dtype=new_mask.dtype)
        return new_mask


def _still_prunable(method, t, mask):
    """The index selecting what the method sees: unstructured, the entries whose mask is 1
    (flattened); structured, the whole channels along method.dim with any entry left; global,
    everything."""
    kind = method.PRUNING_TYPE
    if kind == "unstructured":
        return mask == 1
    if kind == "structured":
        if not hasattr(method, "dim"):
            raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have '
                                 'the attribute `dim` defined.')
        ndim = t.dim()
        dim = method.dim + ndim if method.dim < 0 else method.dim
        if dim < 0:
            raise IndexError(f"Index is out of bounds for tensor with dimensions {ndim}")
        alive = mask.sum(dim=[d for d in range(ndim) if d != dim]) != 0
        return tuple(alive if d == dim else slice(None) for d in range(ndim))
    if kind == "global":
        return tuple(slice(None) for _ in range(len(t.shape)))
    raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
