"""kiln.nn.utils.prune, as torch.nn.utils.prune: pruning as a reparametrization. A pruned
tensor <name> of a module is stored as the parameter <name>_orig and the buffer <name>_mask,
and recomputed as their product by a forward pre-hook; pruning the same tensor again chains
methods in a PruningContainer that only prunes what is left.

    base.py          BasePruningMethod (apply / apply_mask / prune / remove)
    container.py     PruningContainer (iterative pruning)
    unstructured.py  Identity, RandomUnstructured, L1Unstructured
    structured.py    RandomStructured, LnStructured
    custom.py        CustomFromMask
    functional.py    identity, random_unstructured, l1_unstructured, random_structured,
                     ln_structured, global_unstructured, custom_from_mask, remove, is_pruned
"""
from .base import BasePruningMethod
from .container import PruningContainer
from .custom import CustomFromMask
from .functional import (custom_from_mask, global_unstructured, identity, is_pruned,
                         l1_unstructured, ln_structured, random_structured,
                         random_unstructured, remove)
from .structured import LnStructured, RandomStructured
from .unstructured import Identity, L1Unstructured, RandomUnstructured

# The classes present themselves (repr, error messages, pickle) under the public module path,
# as torch's do under torch.nn.utils.prune, not under the file that defines them.
for _cls in (BasePruningMethod, PruningContainer, Identity, RandomUnstructured, L1Unstructured,
             RandomStructured, LnStructured, CustomFromMask):
    _cls.__module__ = __name__
del _cls

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]
