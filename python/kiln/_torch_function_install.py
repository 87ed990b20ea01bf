"""When and over what the __torch_function__ wrappers are installed (decision 0109).

Nothing is wrapped until a program uses the protocol, so kiln.add stays the C++ function and
`a + b` the C++ operator until then. The triggers:
- a kiln.Tensor subclass whose __torch_function__ is not the disabled one (Tensor's
  __init_subclass__; a subclass without its own inherits the default, which keeps the subclass
  on results, as torch);
- a class statement defining __torch_function__ outside torch (duck types passed to kiln
  functions): builtins.__build_class__ is watched until the wrappers are installed, then
  restored, so class creation costs nothing afterwards and tensor ops never pay for it;
- entering a TorchFunctionMode, has_torch_function / handle_torch_function.
Classes made before `import kiln`, or with type(...) directly, are not seen: enter a mode or
call kiln.overrides.has_torch_function once to install."""
import builtins
import types

from . import _C
from . import _torch_function_dispatch as _d
from . import _torch_function_tensor as _tensor

Tensor = _C.Tensor
_NB_FUNC = type(_C.add)
_NB_METHOD = type(Tensor.__dict__["add"])

# Functions of the kiln namespace that are settings, state or tools rather than tensor ops
# (torch's argument parser does not route them either).
_NOT_OPS = frozenset("""
is_tensor is_storage compile cond while_loop vmap save load from_dlpack typename manual_seed
seed initial_seed get_rng_state set_rng_state is_grad_enabled is_inference_mode_enabled
is_anomaly_enabled is_anomaly_check_nan_enabled set_anomaly_enabled set_num_threads
get_num_threads set_num_interop_threads get_num_interop_threads set_default_dtype
get_default_dtype set_default_device get_default_device set_default_tensor_type
set_printoptions use_deterministic_algorithms are_deterministic_algorithms_enabled
is_deterministic_algorithms_warn_only_enabled set_deterministic_debug_mode
get_deterministic_debug_mode set_float32_matmul_precision get_float32_matmul_precision
set_warn_always is_warn_always_enabled compiled_with_cxx11_abi set_flush_denormal
is_autocast_enabled set_autocast_enabled get_autocast_dtype set_autocast_dtype
is_autocast_cache_enabled set_autocast_cache_enabled clear_autocast_cache current_device
current_stream default_stream device_count empty_cache is_available max_memory_allocated
memory_allocated memory_reserved memory_stats reset_peak_memory_stats set_device
set_memory_limit set_stream synchronize promote_types can_cast
""".split())

# Tensor methods torch leaves out of the protocol (get_ignored_functions), and the copy /
# pickle protocol, which kiln implements for subclasses itself.
_TENSOR_IGNORED = frozenset("""
__init__ __new__ __hash__ __iter__ __dir__ __delitem__ __init_subclass__ __subclasshook__
__torch_function__ __reduce_ex__ __deepcopy__ __getstate__ __setstate__ as_subclass
_make_subclass new new_empty new_empty_strided new_full new_ones new_tensor new_zeros stride
unflatten is_tensor
""".split())

# Tensor dunders routed (the operators and protocol methods torch routes).
_TENSOR_DUNDERS = frozenset("""
__repr__ __str__ __len__ __bool__ __float__ __int__ __index__ __complex__ __format__
__contains__ __array__ __dlpack__ __dlpack_device__ __getitem__ __setitem__ __neg__ __pos__
__abs__ __invert__
""".split())

# Binary operators: their handlers' TypeError becomes NotImplemented, as torch's.
_BINARY = frozenset("""
add radd iadd sub rsub isub mul rmul imul truediv rtruediv itruediv pow rpow ipow mod rmod
imod and rand iand or ror ior xor rxor ixor eq ne lt le gt ge floordiv rfloordiv ifloordiv
matmul rmatmul lshift rshift rlshift rrshift ilshift irshift
""".split())

# The function handlers see for an operator, where torch hands over the named method (x + 1
# shows Tensor.add); the others show the operator itself (Tensor.__rsub__).
_OPERATOR_FUNC = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_", "__sub__": "sub",
    "__isub__": "sub_", "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_",
    "__truediv__": "div", "__itruediv__": "div_", "__mod__": "remainder",
    "__imod__": "remainder_", "__rand__": "bitwise_and", "__ror__": "bitwise_or",
    "__rxor__": "bitwise_xor", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt",
    "__ge__": "ge", "__ifloordiv__": "floor_divide_", "__matmul__": "matmul",
    "__str__": "__repr__", "__pos__": "positive", "__neg__": "neg", "__abs__": "abs",
    "__pow__": "pow", "__ipow__": "pow_",
}

_installed = False
_original_build_class = builtins.__build_class__


def installed():
    return _installed


def _covered_modules():
    import kiln
    from kiln import fft, linalg, special
    from kiln.nn import functional
    return [kiln, functional, linalg, fft, special]


def _is_wrappable(value):
    return type(value) is _NB_FUNC or (type(value) is types.FunctionType and
                                       getattr(value, "__module__", "").startswith("kiln"))


def _pickle_home(fn):
    """What pickle finds under fn's __module__ and __qualname__ (None if nothing)."""
    import sys
    obj = sys.modules.get(getattr(fn, "__module__", None) or "")
    for part in (getattr(fn, "__qualname__", "") or "").split("."):
        obj = getattr(obj, part, None)
    return obj


def install():
    """Put the dispatching wrappers over the covered functions, methods and properties."""
    global _installed
    if _installed:
        return
    _installed = True
    _unwatch_class_statements()
    from .nn.parameter import Parameter
    _d._PLAIN.update({Tensor, Parameter, _C.dtype, _C.device, _C.Generator,
                      type(_C.contiguous_format)})
    from ._size import Size
    _d._PLAIN.add(Size)
    _d._PLAIN_TENSOR.append(Tensor)
    wrappers = {}  # id(original) -> wrapper: one object shared keeps identities (`is`)
    homes = {}     # wrapper -> (module name, qualname) where it is public

    def wrapped(orig, home, **kw):
        w = wrappers.get(id(orig))
        if w is None:
            w = wrappers[id(orig)] = _d.wrap(orig, **kw)
            homes[w] = home
        return w

    for module in _covered_modules():
        for name, value in list(vars(module).items()):
            if name.startswith("_") or name in _NOT_OPS or not _is_wrappable(value):
                continue
            setattr(module, name, wrapped(value, (module.__name__, name)))
    _install_tensor(wrapped)
    # Pickle finds functions by __module__ and __qualname__: a wrapper that is not found there
    # (a C++ function's home is kiln._C) is given the public place it was installed at.
    for w, (module_name, qualname) in homes.items():
        if _pickle_home(w) is not w:
            w.__module__, w.__qualname__ = module_name, qualname


def _install_tensor(wrapped):
    methods = vars(Tensor)
    names = [n for n, v in methods.items()
             if n not in _TENSOR_IGNORED and (type(v) in (_NB_METHOD, types.FunctionType))
             and (not n.startswith("_") or n in _TENSOR_DUNDERS or n.strip("_") in _BINARY)]
    # Named methods first: operators hand the wrapper of their named method to handlers.
    names.sort(key=lambda n: (n.startswith("__"), n in _OPERATOR_FUNC))
    for name in names:
        orig = methods[name]
        public = _OPERATOR_FUNC.get(name)
        public = getattr(Tensor, public) if public in methods else None
        w = wrapped(orig, ("kiln._C", "Tensor." + name), public=public,
                    operator=name.startswith("__") and name.strip("_") in _BINARY)
        setattr(Tensor, name, w)
    for name, value in list(methods.items()):
        if type(value) is property:
            new = _d.wrap_property(value)
            setattr(Tensor, name, new)
            if name == "grad":
                _tensor.nowrap.add(new.__get__)


def _tensor_init_subclass(cls, **kwargs):
    super(Tensor, cls).__init_subclass__(**kwargs)
    if not _installed and _d.overrides_type(cls):
        install()


def _watching_build_class(func, name, *bases, **kwargs):
    cls = _original_build_class(func, name, *bases, **kwargs)
    if (not _installed and isinstance(cls, type) and "__torch_function__" in cls.__dict__
            and not _is_torch_class(cls) and _d.overrides_type(cls)):
        install()
    return cls


def _is_torch_class(cls):
    # torch's own classes (torch.Tensor, its subclasses and modes) are torch's, not inputs
    # kiln sees: a program importing torch next to kiln keeps kiln's zero-cost path.
    module = getattr(cls, "__module__", "") or ""
    return module == "torch" or module.startswith("torch.")


def _unwatch_class_statements():
    if builtins.__build_class__ is _watching_build_class:
        builtins.__build_class__ = _original_build_class


def arm():
    """At import: the default Tensor.__torch_function__ and the install triggers; no wrapper."""
    Tensor.__torch_function__ = _tensor.make_default(Tensor)
    Tensor._disabled_torch_function_impl = _d.disabled_torch_function_impl
    Tensor.__init_subclass__ = classmethod(_tensor_init_subclass)
    builtins.__build_class__ = _watching_build_class
    # The names torch has in torch._C.
    from . import _torch_function_mode as _mode
    for name in ("DisableTorchFunction", "DisableTorchFunctionSubclass",
                 "_is_torch_function_enabled", "_is_torch_function_mode_enabled"):
        setattr(_C, name, getattr(_mode, name))
    _C._disabled_torch_function_impl = _d.disabled_torch_function_impl
