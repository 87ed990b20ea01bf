"""functional_call: a module called with other tensors in place of some of its parameters
and buffers, as torch.func.functional_call (and the deprecated
torch.nn.utils.stateless.functional_call). The tensors are swapped into the module's
dictionaries for the one call and the originals put back afterwards, also when the call
raises; gradients flow to the given tensors, not to the module's parameters."""
import contextlib
import warnings

from ..._C import Tensor
from ..modules.module import Module

__all__ = ["functional_call"]

_MISSING = object()


def _owner(module, path):
    """(submodule, attribute name) for a dotted name, torch's errors for a wrong path."""
    prefix, _, attr = path.rpartition(".")
    owner = module
    for part in prefix.split(".") if prefix else ():
        try:
            child = getattr(owner, part)
        except AttributeError as ex:
            raise AttributeError(f"{owner._get_name()} has no attribute `{part}`") from ex
        if not isinstance(child, Module):
            raise TypeError(f"submodule `{prefix}`: {child} is not an instance of "
                            "torch.nn.Module")
        owner = child
    return owner, attr


def _swap_tensor(module, path, tensor):
    """Puts tensor (or removes the entry, for _MISSING) at module's path; returns what was
    there (_MISSING when nothing)."""
    if tensor is not _MISSING and tensor is not None and not isinstance(tensor, Tensor):
        raise TypeError(f"{tensor} is not an instance of torch.Tensor")
    owner, name = _owner(module, path)
    for members in (owner._parameters, owner._buffers):
        if name in members:
            old = members[name]
            if tensor is _MISSING:
                del members[name]
            else:
                members[name] = tensor
            return old
    old = getattr(owner, name) if hasattr(owner, name) else _MISSING
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"attribute `{name}`: {old} is not an instance of torch.Tensor")
    if tensor is not _MISSING:
        setattr(owner, name, tensor)
    elif hasattr(owner, name):
        delattr(owner, name)
    return old


def _untie(module, given):
    """With tie_weights: a value given for one name of a tensor registered under several
    names (shared weights) is used for all of them."""
    names_of = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        names_of.setdefault(id(t), set()).add(name)
    tied = {n: names for names in names_of.values() if len(names) > 1 for n in names}
    untied = dict(given)
    for name in [n for n in given if n in tied]:
        group = tied[name]
        values = {id(given[n]) for n in group if n in given}
        if len(values) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(group)}, "
                             "which are tied. Consider using tie_weights=False")
        for other in group:
            untied[other] = given[name]
    return untied


def _check_keys(module, keys):
    valid = {n for n, _ in module.named_parameters(remove_duplicate=False)}
    valid |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
    missing, unexpected = sorted(valid - set(keys)), sorted(set(keys) - valid)
    errors = []
    if unexpected:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(
            module._get_name(), "\n\t".join(errors)))


@contextlib.contextmanager
def _reparametrize_module(module, parameters_and_buffers, tie_weights=False, strict=False):
    values = _untie(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        _check_keys(module, values)
    originals = {}
    try:
        for name, tensor in values.items():
            originals[name] = _swap_tensor(module, name, tensor)
        yield
    finally:
        final = {name: _swap_tensor(module, name, tensor)
                 for name, tensor in originals.items()}
        # as torch: a tensor the call assigned in place of a given one goes back to the
        # caller's dict
        parameters_and_buffers.update({k: final[k] for k in parameters_and_buffers
                                       if k in final})


def _merge_dicts(dicts):
    if isinstance(dicts, dict):
        return dicts
    if not isinstance(dicts, (list, tuple)):
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple "
                         f"of dicts, but got {type(dicts)}")
    if not all(isinstance(d, dict) for d in dicts):
        raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                         "dictionaries")
    seen, repeated = set(), []
    for key in (k for d in dicts for k in d):
        if key in seen and key not in repeated:
            repeated.append(key)
        seen.add(key)
    if repeated:
        raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                         "functional call is ambiguous")
    return {k: v for d in dicts for k, v in d.items()}


def _functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                     tie_weights=True, strict=False):
    """module(*args, **kwargs) with the named tensors of parameter_and_buffer_dicts (a dict,
    or torch.func's list / tuple of dicts with distinct keys) in place of the module's own.
    strict: every parameter and buffer must be given, and nothing else."""
    parameters_and_buffers = _merge_dicts(parameter_and_buffer_dicts)
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights, strict):
        return module(*args, **kwargs)


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """The deprecated torch.nn.utils.stateless form (warns as torch); the same implementation
    as kiln.func.functional_call (a list of dicts accepted too)."""
    warnings.warn("`nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0, "
                  "replaced by `kiln.func.functional_call` (as torch's by "
                  "`torch.func.functional_call`).",
                  FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)
