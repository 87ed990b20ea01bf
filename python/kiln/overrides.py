"""kiln.overrides: torch's __torch_function__ protocol (torch.overrides), decision 0109.

A Tensor subclass, or any class (a "duck type"), defining the classmethod
`__torch_function__(cls, func, types, args=(), kwargs=None)` sees the kiln functions
(kiln.*, kiln.nn.functional.*, kiln.linalg.*, kiln.fft.*, kiln.special.*), Tensor methods,
operators and properties that get its instances as arguments; a TorchFunctionMode sees every
such call while entered. kiln.Tensor.__torch_function__ is torch's default (results become
the subclass); kiln.nn.Parameter opts out (_disabled_torch_function_impl).

Cost: none until used. kiln.add and Tensor.__add__ stay the C++ functions until the first
class defining __torch_function__ is created (or a mode entered); then Python wrappers are
installed whose fast path, for plain arguments, is a few type checks before the original.
Measured on the 2-core CI VM under load (1-element tensors, timeit best of 7 x 200000, best of
three fresh processes): `a + b` 640 ns before installation, 945 ns after
it with plain tensors only; `kiln.add(a, b)` 680 ns before, 990 ns after."""
from . import _torch_function_dispatch as _d
from ._torch_function_install import install as _install, installed as _installed  # noqa: F401
from ._torch_function_mode import (TorchFunctionMode, DisableTorchFunction,  # noqa: F401
                                   DisableTorchFunctionSubclass, _get_current_function_mode,
                                   _get_current_function_mode_stack,
                                   _is_torch_function_enabled, _is_torch_function_mode_enabled,
                                   _len_torch_function_stack)

_disabled_torch_function_impl = _d.disabled_torch_function_impl


def _tensor_type():
    from ._C import Tensor
    return Tensor


def has_torch_function(relevant_args):
    """Whether calling with these arguments would reach a __torch_function__ (an argument of
    an overriding type, or a mode entered). Looks at the top level of relevant_args only."""
    _install()  # a program asking uses the protocol: from here on kiln's functions route
    st = _d.state
    if st.all_off:
        return False
    if st.modes:
        return True
    if st.subclass_off:
        return False
    return any(_d.overrides_type(type(a)) for a in relevant_args)


def has_torch_function_unary(obj):
    return has_torch_function((obj,))


def has_torch_function_variadic(*args):
    return has_torch_function(args)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Call the handlers for public_api(*args, **kwargs) (the mode first, then the overriding
    arguments among relevant_args, subclasses first); TypeError when all return
    NotImplemented. As torch's Python version, a plain Tensor counts as overriding here (its
    default __torch_function__ runs public_api with subclass dispatch off)."""
    _install()
    st = _d.state
    tensor = _tensor_type()
    found, seen = [], []
    if not (st.all_off or st.subclass_off):
        for a in relevant_args:
            if type(a) is tensor:  # plain tensors too, after any subclass of theirs
                if tensor not in seen:
                    seen.append(tensor)
                    found.append(a)
            else:
                _d._add_overloaded(a, seen, found)
    mode = st.modes[-1] if st.modes and not st.all_off else None
    return _d.call_handlers(public_api, (mode, found), args, kwargs)


def is_tensor_like(inp):
    """A kiln.Tensor (or subclass) instance, or an object whose type defines
    __torch_function__."""
    return type(inp) is _tensor_type() or hasattr(inp, "__torch_function__")


def is_tensor_method_or_property(func):
    """Whether func is a covered Tensor method or property accessor (after installation)."""
    tensor = _tensor_type()
    name = getattr(func, "__name__", None)
    if name in ("__get__", "__set__"):
        return isinstance(getattr(func, "__self__", None), property)
    return getattr(tensor, name or "", None) is func


def get_ignored_functions():
    """The kiln functions that are not routed (settings, state, tools), best effort."""
    import kiln
    from ._torch_function_install import _NOT_OPS
    return {getattr(kiln, n) for n in _NOT_OPS if callable(getattr(kiln, n, None))}


def get_overridable_functions():
    """{namespace: [functions routed through __torch_function__]}, installing the wrappers
    (the functions listed are the wrappers handlers see)."""
    _install()
    from ._torch_function_install import _covered_modules
    from ._C import Tensor
    result = {}
    for module in _covered_modules():
        result[module] = [v for n, v in vars(module).items()
                          if not n.startswith("_") and hasattr(v, "__wrapped__")]
    result[Tensor] = [v for v in vars(Tensor).values() if hasattr(v, "__wrapped__")]
    return result


def enable_reentrant_dispatch():
    """torch.overrides.enable_reentrant_dispatch: kiln has no reentrant dispatcher, so this is
    a context manager that does nothing."""
    import contextlib
    return contextlib.nullcontext()
