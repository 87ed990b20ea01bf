"""kiln.utils.hooks, as torch.utils.hooks: RemovableHandle, what every register_*_hook
returns."""
import weakref
from collections import OrderedDict

__all__ = ["RemovableHandle"]


def _ref(d):
    # Weak, as torch's, so that a handle kept around does not keep a dead module's hooks
    # alive; a plain dict cannot be weakly referenced, so one is held strongly instead.
    try:
        return weakref.ref(d)
    except TypeError:
        return lambda: d


class RemovableHandle:
    """Removes hook `id` from hooks_dict (and from each extra_dict, which keep per-hook
    options) on remove() or at the end of a `with` block. Handles pickle with their dicts, so
    a module pickled together with a handle can still have the hook removed after loading."""

    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = _ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        if extra_dict is None:
            extra_dict = ()
        elif isinstance(extra_dict, dict):
            extra_dict = (extra_dict,)
        self.extra_dict_ref = tuple(_ref(d) for d in extra_dict)

    def remove(self):
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __getstate__(self):
        dicts = tuple(ref() for ref in self.extra_dict_ref)
        if dicts:
            return (self.hooks_dict_ref(), self.id, dicts)
        return (self.hooks_dict_ref(), self.id)

    def __setstate__(self, state):
        # A dict that did not survive (collected before pickling) becomes an empty one.
        self.hooks_dict_ref = _ref(OrderedDict() if state[0] is None else state[0])
        self.id = state[1]
        RemovableHandle.next_id = max(RemovableHandle.next_id, self.id + 1)
        extra = state[2] if len(state) > 2 else ()
        self.extra_dict_ref = tuple(_ref(OrderedDict() if d is None else d) for d in extra)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
