"""The function forms: each prunes module.<name> in place with one method and returns the
module; global_unstructured ranks several tensors together; remove makes pruning permanent;
is_pruned looks for pruning hooks anywhere in a module tree."""
from collections.abc import Iterable

import kiln

from .base import BasePruningMethod
from .container import PruningContainer
from .custom import CustomFromMask
from .structured import LnStructured, RandomStructured
from .unstructured import Identity, L1Unstructured, RandomUnstructured


def identity(module, name):
    """Reparametrizes module.<name> as <name>_orig * <name>_mask with a mask of ones."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Zeroes `amount` (count or fraction) of the still-unpruned entries, at random."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Zeroes the `amount` still-unpruned entries of smallest |importance| (default: the
    parameter's own values)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Zeroes `amount` of the still-unpruned channels along dim, at random."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Zeroes the `amount` still-unpruned channels along dim of smallest L_n norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    """Prunes with a caller-given mask (multiplied into any existing one)."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prunes the (module, name) tensors as if they were one flat vector, so `amount` is
    shared between them: the unstructured method ranks all entries together, and each
    tensor then gets its slice of the result through custom_from_mask."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    if importance_scores is None:
        importance_scores = {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)  # walked three times below; a generator would run dry
    flat = kiln.nn.utils.parameters_to_vector
    scores = flat([importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    default_mask = flat([_mask_or_ones(m, n) for m, n in parameters])

    # A container so that entries pruned earlier are skipped (and stay pruned).
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)

    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        n = param.numel()
        custom_from_mask(module, name, mask=final_mask[start:start + n].view_as(param))
        start += n


def _mask_or_ones(module, name):
    """The current mask of module.<name>, or ones where it has not been pruned yet."""
    mask = getattr(module, name + "_mask", None)
    return kiln.ones_like(getattr(module, name)) if mask is None else mask


def remove(module, name):
    """Makes the pruning of module.<name> permanent and drops its hook, _orig and _mask."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            module._forward_pre_hooks_with_kwargs.pop(key, None)
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     f"can be removed")


def is_pruned(module):
    """Whether module or any submodule carries a pruning forward pre-hook."""
    return any(isinstance(hook, BasePruningMethod)
               for _, sub in module.named_modules()
               for hook in sub._forward_pre_hooks.values())
