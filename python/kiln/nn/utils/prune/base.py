"""BasePruningMethod: the reparametrization shared by every pruning method. Pruning <name>
moves the parameter to <name>_orig, stores a 0/1 buffer <name>_mask, and keeps <name> as the
plain tensor mask * orig, recomputed by a forward pre-hook (the method object itself) so that
gradients reach <name>_orig through the mask."""
from abc import ABC, abstractmethod

import kiln


class BasePruningMethod(ABC):
    """Subclasses define compute_mask(t, default_mask) and a PRUNING_TYPE ('unstructured',
    'structured' with a `dim` attribute, or 'global'), which tells PruningContainer which part
    of the tensor a later method may still prune."""

    _tensor_name: str

    def __call__(self, module, inputs):
        # the forward pre-hook: refresh the pruned tensor from the current orig and mask
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask for t, zeroing at least what default_mask already zeroes."""

    def apply_mask(self, module):
        """mask * orig, read from the module (the mask cast to orig's dtype)."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prunes module.<name> with cls(*args, **kwargs); a tensor already pruned gets the
        new method appended to a PruningContainer, which then prunes only what is left."""
        method = _merge_with_existing_hook(cls, module, name, *args, **kwargs)
        from .container import PruningContainer

        orig = getattr(module, name)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise AssertionError(f"importance_scores should have the same shape as "
                                     f"parameter {name} of {module}, got "
                                     f"{importance_scores.shape} vs {orig.shape}")
        else:
            importance_scores = orig

        first_time = not isinstance(method, PruningContainer)
        if first_time:
            # the Parameter object itself moves, so optimizers holding it keep working
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = kiln.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(
                memory_format=kiln.contiguous_format)

        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first_time:  # undo the move: the module is left as it was
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """t times the mask computed from importance_scores (default: t itself)."""
        if importance_scores is not None:
            if importance_scores.shape != t.shape:
                raise AssertionError(f"importance_scores should have the same shape as tensor "
                                     f"t, got {importance_scores.shape} vs {t.shape}")
        else:
            importance_scores = t
        if default_mask is None:
            default_mask = kiln.ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Makes the pruning permanent: <name> becomes a Parameter again holding mask * orig
        (the same Parameter object as <name>_orig, its data replaced); _orig and _mask go."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be "
                                 f"removed")
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _merge_with_existing_hook(cls, module, name, *args, **kwargs):
    """The method to register for module.<name>: a new cls(*args, **kwargs), or, when the
    tensor is already pruned, the old hook and the new method in one PruningContainer (the old
    hook is unregistered; apply registers the result again)."""
    from .container import PruningContainer

    old_keys = [k for k, hook in module._forward_pre_hooks.items()
                if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    if len(old_keys) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of "
                             f"module {module}. Use a PruningContainer.")
    old = module._forward_pre_hooks[old_keys[0]] if old_keys else None
    for k in old_keys:
        del module._forward_pre_hooks[k]
        module._forward_pre_hooks_with_kwargs.pop(k, None)

    method = cls(*args, **kwargs)
    method._tensor_name = name
    if old is None:
        return method
    if isinstance(old, PruningContainer):
        old.add_pruning_method(method)
        return old
    container = PruningContainer(old)
    container.add_pruning_method(method)
    return container
