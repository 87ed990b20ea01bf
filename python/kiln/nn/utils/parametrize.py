"""kiln.nn.utils.parametrize, as torch's: a parameter or buffer replaced by a computed value.

register_parametrization(module, "weight", P) moves the tensor to
module.parametrizations.weight.original (original0, original1, ... when P.right_inverse
returns several tensors) and makes module.weight a property computing P(original) on each
read; assigning module.weight = X stores right_inverse(X). To give the module that property
without touching other instances, its class is swapped for a subclass made for it,
Parametrized<Class>, swapped back once the last parametrization is removed."""
import collections.abc
import copy
from contextlib import contextmanager

from ... import _C
from ..._C import Tensor
from ...autograd import no_grad
from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

_cache_depth = 0
_cache = {}  # (id(module), tensor name) -> value, while inside cached()


@contextmanager
def cached():
    """Inside it, each parametrized tensor is computed once (at its first read) and reused:
    for a forward reading the weight several times (recurrent layers)."""
    global _cache_depth, _cache
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache = {}


def _register_parameter_or_buffer(module, name, tensor):
    if isinstance(tensor, Parameter):
        module.register_parameter(name, tensor)
    else:
        module.register_buffer(name, tensor)


def _set_in_place(dest, src):
    # torch's dest.set_(src): dest (whose identity the optimiser holds) takes src's values
    # and shape
    _C._set_data(dest, src.detach())


class ParametrizationList(ModuleList):
    """The chain of parametrizations of one tensor, holding the unparametrized original(s).
    Calling it computes the parametrized value."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = original.shape, original.dtype
        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, collections.abc.Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            self._store_single_original(original, new)
        else:
            self._store_originals(original, new)
        if not self.unsafe:
            self._check_unchanged(self(), original_shape, original_dtype)

    def _store_single_original(self, original, new):
        if original.dtype != new.dtype:
            raise ValueError("When `right_inverse` outputs one tensor, it may not change the "
                             f"dtype.\noriginal.dtype: {original.dtype}\n"
                             f"right_inverse(original).dtype: {new.dtype}")
        if original.device != new.device:
            raise ValueError("When `right_inverse` outputs one tensor, it may not change the "
                             f"device.\noriginal.device: {original.device}\n"
                             f"right_inverse(original).device: {new.device}")
        with no_grad():
            if new is not original:
                _set_in_place(original, new)
        _register_parameter_or_buffer(self, "original", original)

    def _store_originals(self, original, new):
        for i, part in enumerate(new):
            if not isinstance(part, Tensor):
                raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                 f"tensors (list, tuple...). Got element {i} of the sequence "
                                 f"with type {type(part).__name__}.")
            if isinstance(original, Parameter):
                part = Parameter(part.detach(), original.requires_grad)
            else:
                part = part.detach().requires_grad_(original.requires_grad)
            _register_parameter_or_buffer(self, f"original{i}", part)

    @staticmethod
    def _check_unchanged(value, shape, dtype):
        if not isinstance(value, Tensor):
            raise ValueError(f"A parametrization must return a tensor. Got "
                             f"{type(value).__name__}.")
        if value.dtype != dtype:
            raise ValueError("Registering a parametrization may not change the dtype of the "
                             "tensor, unless `unsafe` flag is enabled.\n"
                             f"unparametrized dtype: {dtype}\nparametrized dtype: "
                             f"{value.dtype}")
        if value.shape != shape:
            raise ValueError("Registering a parametrization may not change the shape of the "
                             "tensor, unless `unsafe` flag is enabled.\n"
                             f"unparametrized shape: {shape}\nparametrized shape: "
                             f"{value.shape}")

    def right_inverse(self, value):
        """Stores the original(s) giving value: each parametrization's right_inverse, from
        the last to the first."""
        with no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                self._set_single_original(value)
            else:
                self._set_originals(value)

    def _set_single_original(self, value):
        if not isinstance(value, Tensor):
            raise ValueError(f"`right_inverse` should return a tensor. Got "
                             f"{type(value).__name__}")
        if value.dtype != self.original.dtype:
            raise ValueError(f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                             f"while `original` has dtype {self.original.dtype}")
        _set_in_place(self.original, value)

    def _set_originals(self, value):
        if not isinstance(value, collections.abc.Sequence):
            raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                             f"{type(value).__name__}.")
        if len(value) != self.ntensors:
            raise ValueError("'right_inverse' must return a sequence of tensors of length "
                             f"{self.ntensors}. Got a sequence of length {len(value)}.")
        for i, tensor in enumerate(value):
            original_i = getattr(self, f"original{i}")
            if not isinstance(tensor, Tensor):
                raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                 f"element {i} of type {type(tensor).__name__}.")
            if original_i.dtype != tensor.dtype:
                raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype "
                                 f"{tensor.dtype} while `original{i}` has dtype "
                                 f"{original_i.dtype}")
            _set_in_place(original_i, tensor)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for parametrization in list(self)[1:]:
            x = parametrization(x)
        return x


def _parametrized_deepcopy(self, memo):
    # the default deepcopy would go through __getstate__, which refuses parametrized modules
    if id(self) in memo:
        return memo[id(self)]
    replica = self.__new__(type(self))
    memo[id(self)] = replica
    replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    return replica


def _refuse_pickling(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through "
                       "state_dict(). See:\nhttps://pytorch.org/tutorials/beginner/"
                       "saving_loading_models.html#saving-loading-a-general-checkpoint-for-"
                       "inference-and-or-resuming-training")


def _load_with_pre_hooks(self, state_dict, prefix, *args):
    # kiln's Module has no load_state_dict pre-hooks; the parametrized class runs the few
    # it needs (weight_norm's renaming of old checkpoints) before the usual loading
    for hook in self.__dict__.get("_parametrize_load_pre_hooks", ()):
        hook(state_dict, prefix, *args)
    super(type(self), self)._load_from_state_dict(state_dict, prefix, *args)


def _inject_new_class(module):
    cls = type(module)
    members = {"__getstate__": _refuse_pickling, "_load_from_state_dict": _load_with_pre_hooks}
    if not hasattr(cls, "__deepcopy__"):
        members["__deepcopy__"] = _parametrized_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), members)


def add_load_state_dict_pre_hook(module, hook):
    """hook(state_dict, prefix, local_metadata, strict, missing, unexpected, errors), run by
    a parametrized module before it loads its own entries."""
    hooks = module.__dict__.setdefault("_parametrize_load_pre_hooks", [])
    hooks.append(hook)


def _inject_property(module, tensor_name):
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if not _cache_depth:
            return parametrization()
        key = (id(self), tensor_name)
        if _cache.get(key) is None:
            _cache[key] = parametrization()
        return _cache[key]

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(type(module), tensor_name, property(get_parametrized, set_original))


def _check_chained(module, tensor_name, parametrization):
    """Adding a parametrization on top of others: it must keep the dtype and shape."""
    y = getattr(module, tensor_name)
    x = parametrization(y)
    if not isinstance(x, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
    for what, got, want in (("dtype", x.dtype, y.dtype), ("shape", x.shape, y.shape)):
        if got != want:
            raise ValueError(f"Registering a parametrization may not change the {what} of the "
                             "tensor, unless the `unsafe` flag is enabled.\n"
                             f"module.{tensor_name}.{what}: {want}\n"
                             f"parametrization(module.{tensor_name}).{what}: {got}")
    if not hasattr(parametrization, "right_inverse"):
        return
    try:
        z = parametrization.right_inverse(x)
    except NotImplementedError:
        return
    if not isinstance(z, Tensor):
        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: "
                         f"{type(z).__name__}")
    for what, got, want in (("dtype", z.dtype, y.dtype), ("shape", z.shape, y.shape)):
        if got != want:
            raise ValueError(f"The tensor returned by parametrization.right_inverse must have "
                             f"the same {what} as module.{tensor_name}, unless the `unsafe` "
                             f"flag is enabled.\nmodule.{tensor_name}.{what}: {want}\n"
                             f"returned {what}: {got}")


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Parametrizes module.<tensor_name> (a parameter, a buffer, or an already parametrized
    tensor, whose chain it extends) by the module parametrization."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_chained(module, tensor_name, parametrization)
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        chain = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = chain
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    parametrizations = getattr(module, "parametrizations", None)
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Turns module.<tensor_name> back into a parameter / buffer: holding its current
    parametrized value (leave_parametrized) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
                _set_in_place(original, value)
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value.detach()
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                         "that is parametrized in terms of a sequence of tensors.")
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def type_before_parametrizations(module):
    return type(module).__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Registers from_module's parametrizations (all, or those of tensor_name) on to_module,
    sharing the original tensors."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        source = from_module.parametrizations[name]
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        if source.is_tensor:
            target.original = source.original
        else:
            for i in range(source.ntensors):
                setattr(target, f"original{i}", getattr(source, f"original{i}"))
    return to_module
