"""kiln.library.custom_op and CustomOpDef (torch._library.custom_ops), over kiln's operator
registry (ops.py)."""
import contextlib
import inspect
import logging
import weakref

from .. import _C
from . import ops as _ops
from . import schema as _schema
from .autograd import make_autograd_impl
from .fake_impl import make_meta_kernel
from .infer_schema import infer_schema
from .lib import Library

log = logging.getLogger(__name__)

OPDEF_TO_LIB = {}
OPDEFS = weakref.WeakValueDictionary()


def _normalize_device_types(device_types):
    if device_types is None or isinstance(device_types, str):
        return [device_types]
    return list(device_types)


def get_library_allowing_overwrite(namespace, name):
    """A fresh FRAGMENT library for namespace::name, destroying the one of a previous
    custom_op of the same name (redefining an op replaces it, as in torch)."""
    qualname = f"{namespace}::{name}"
    old = OPDEF_TO_LIB.pop(qualname, None)
    if old is not None:
        old._destroy()
    lib = Library(namespace, "FRAGMENT")
    OPDEF_TO_LIB[qualname] = lib
    return lib


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None, tags=None):
    """Wraps a typed Python function into a custom operator "namespace::name" (torch.library
    .custom_op). The schema is inferred from the annotations unless schema= is given;
    mutates_args names the Tensor arguments the function writes ("unknown": all of them).
    The result is a CustomOpDef: call it like the function, reach it as
    kiln.ops.namespace.name, and add behaviour with register_fake / register_kernel /
    register_autograd."""

    def inner(fn):
        if not isinstance(name, str) or name.count("::") != 1:
            raise ValueError(f'custom_op(name): expected name of the form "namespace::name" '
                             f"(e.g. \"mylib::my_op\"), got {name!r}")
        namespace, opname = name.split("::")
        if not namespace.isidentifier() or not opname.replace(".", "_").isidentifier():
            raise ValueError(f'custom_op(name): expected name of the form "namespace::name" '
                             f"with identifiers on both sides, got {name!r}")
        if schema is None:
            schema_str = infer_schema(fn, mutates_args=mutates_args)
        else:
            schema_str = schema
        result = CustomOpDef(namespace, opname, schema_str, fn, tags)
        if schema is not None:
            expected = {a.name for a in result._opoverload._schema.arguments if a.is_write}
            if mutates_args != "unknown" and expected != set(mutates_args):
                result._destroy()
                raise ValueError(
                    f"Attempted to create a custom op with `mutates_args={mutates_args}` and "
                    f"`schema={schema}. The schema suggests that the op mutates {expected} which "
                    "is different from what was provided to us in `mutates_args`. Please make "
                    "these consistent.")
        result.register_kernel(device_types)(fn)
        return result

    if fn is None:
        return inner
    return inner(fn)


class CustomOpDef:
    """A custom operator made by custom_op: callable like the function it wraps, with methods
    to register more behaviour. Not made directly."""

    def __init__(self, namespace, name, schema, fn, tags=None):
        self._namespace = namespace
        self._name = name
        self._schema = schema
        self._tags = () if tags is None else (tuple(tags) if isinstance(tags, (list, tuple))
                                               else (tags,))
        self._init_fn = fn
        self._backend_fns = {}
        self._abstract_fn = None
        self._setup_context_fn = None
        self._backward_fn = None
        self._vmap_fn = None
        self._autocast_dtype = {}
        self._disabled_kernel = set()
        self._lib = get_library_allowing_overwrite(namespace, name)
        self._register_to_dispatcher()
        OPDEFS[self._qualname] = self

    @property
    def _qualname(self):
        return f"{self._namespace}::{self._name}"

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    def _destroy(self):
        self._lib._destroy()
        OPDEF_TO_LIB.pop(self._qualname, None)

    # --- registration with the registry ------------------------------------------------------

    def _register_to_dispatcher(self):
        parsed = _schema.parse_schema(self._name + self._schema)
        if parsed.has_kwarg_only_tensors():
            self._lib._destroy()
            raise NotImplementedError(f"custom_op with kwarg-only Tensor args. Please make your "
                                      f"tensors not kwarg-only. Got: {self._name}{self._schema}")
        self._lib.define(self._name + self._schema, tags=self._tags)
        self._opoverload = _ops.lookup_op(self._qualname)
        self._entry = self._opoverload._entry
        self._entry.opdef = self
        self._lib.impl(self._name, make_meta_kernel(self._qualname, self._fake_impl), "Meta")
        self._autograd_impl = make_autograd_impl(self._entry, self, str(self._opoverload))
        self._lib.impl(self._name, self._autograd_impl, "Autograd")

    def _fake_impl(self, *args, **kwargs):
        if self._abstract_fn is None:
            schema = self._opoverload._schema
            if schema.is_mutable and not schema.returns:
                return None  # nothing to compute: the trivial fake impl
            raise RuntimeError(
                f"There was no fake impl registered for {self}. This is necessary for the meta "
                "device (and torch.compile/export/fx tracing in torch) to work. Please use "
                f"`{getattr(self._init_fn, '__name__', 'op')}.register_fake` to add an fake "
                "impl.")
        return self._abstract_fn(*args, **kwargs)

    @contextlib.contextmanager
    def set_kernel_enabled(self, device_type, enabled=True):
        """Within the block, the kernel registered for device_type is disabled (the default
        implementation, the function custom_op wrapped, runs instead) or re-enabled."""
        action = "enable" if enabled else "disable"
        originally_disabled = device_type in self._disabled_kernel
        if device_type not in self._backend_fns:
            log.warning("Attempted to %s kernel for %s but no kernel was registered for this "
                        "device type.", action, device_type)
        if not enabled:
            self._disabled_kernel.add(device_type)
        else:
            self._disabled_kernel.discard(device_type)
        try:
            yield
        finally:
            if originally_disabled:
                self._disabled_kernel.add(device_type)
            else:
                self._disabled_kernel.discard(device_type)

    def register_kernel(self, device_types, fn=None, /):
        """Registers fn as the implementation for these device types ("cpu", "xpu", ...; None:
        every device). Usable as a decorator."""

        def inner(fn):
            for device_type in _normalize_device_types(device_types):
                if device_type not in self._backend_fns:
                    key = ("CompositeExplicitAutograd" if device_type is None
                           else _ops.dispatch_key_for_device(device_type))
                    self._lib.impl(self._name, self._make_backend_impl(device_type), key)

                def wrapped_fn(*args, __device_type=device_type, __fn=fn, **kwargs):
                    if __device_type in self._disabled_kernel:
                        return self._init_fn(*args, **kwargs)
                    return __fn(*args, **kwargs)

                wrapped_fn.__wrapped__ = fn
                self._backend_fns[device_type] = wrapped_fn
            return fn

        if device_types is not None and not self._opoverload._schema.has_tensor_arg():
            if not any(a.name == "device" and _schema.strip_optional(a.type) ==
                       _schema.BaseType("Device")
                       for a in self._opoverload._schema.arguments):
                raise ValueError("Functions without tensor inputs are required to have a "
                                 "`device: kiln.device` argument")
        if fn is None:
            return inner
        return inner(fn)

    def _make_backend_impl(self, device_type):
        schema = self._opoverload._schema
        is_view = schema.is_view_op()
        name = self._name

        def backend_impl(*args, **kwargs):
            result = self._backend_fns[device_type](*args, **kwargs)
            if not is_view:
                _check_aliasing(name, self._backend_fns[device_type], args, kwargs, result)
            return result

        return backend_impl

    def register_fake(self, fn, /):
        """Registers the fake impl: given meta tensors (shapes, dtypes, no data), it returns
        meta tensors shaped as the real outputs. Used for meta inputs and by opcheck."""
        self._abstract_fn = fn
        return fn

    def register_autograd(self, backward, /, *, setup_context=None):
        """Registers the backward formula: setup_context(ctx, inputs, output) (with
        keyword_only_inputs too when the op has keyword-only arguments) runs in the forward
        to save what backward(ctx, *grads) needs; backward returns one gradient per input."""
        schema = self._opoverload._schema
        if not _is_functional(schema, allow_valid_view=True):
            raise RuntimeError(f"Cannot register autograd formula for non-functional operator "
                               f"{self} with schema {schema}. Please create a functional "
                               "operator and register an autograd formula for that.")
        if not callable(backward):
            raise TypeError(f"register_autograd: backward must be callable, got "
                            f"{type(backward).__name__}")
        if setup_context is not None and not callable(setup_context):
            raise TypeError(f"register_autograd: setup_context must be callable, got "
                            f"{type(setup_context).__name__}")
        self._backward_fn = backward
        self._setup_context_fn = setup_context

    def register_torch_dispatch(self, torch_dispatch_class, fn=None, /):
        raise NotImplementedError("register_torch_dispatch: kiln does not implement "
                                  "__torch_dispatch__ (only __torch_function__, decision 0109)")

    def register_vmap(self, func=None):
        """Accepted and kept: kiln's vmap runs the function once per batch element, so custom
        ops work under it without a vmap rule (the rule is not used)."""
        def register(func):
            self._vmap_fn = func
            self._entry.vmap_fn = func
            return func

        if func is None:
            return register
        return register(func)

    def register_autocast(self, device_type, cast_inputs):
        """Inside kiln.autocast(device_type), floating-point Tensor inputs (not float64) on that
        device are cast to cast_inputs and the op runs with autocast off."""
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        _ops.dispatch_key_for_device(device_type)
        if not isinstance(cast_inputs, _C.dtype):
            raise TypeError(f"register_autocast: cast_inputs must be a kiln.dtype, got "
                            f"{type(cast_inputs).__name__}")
        self._autocast_dtype[device_type] = cast_inputs
        self._entry.autocast[device_type] = cast_inputs

    def __call__(self, *args, **kwargs):
        return self._opoverload(*args, **kwargs)


def _is_functional(schema, *, allow_valid_view=False):
    if schema.is_mutable:
        return False
    rets = schema.returns
    is_non_mutating_view = any(r.alias_info is not None and not r.alias_info.is_write
                               for r in rets)
    if is_non_mutating_view:
        n_in = sum(1 for a in schema.arguments if _schema.is_tensor_type(a.type))
        n_out = sum(1 for r in rets if _schema.is_tensor_type(r.type))
        return allow_valid_view and n_in == 1 and n_out == 1
    return bool(rets)


def _iter_tensors(values):
    for v in values:
        if isinstance(v, _C.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, _C.Tensor):
                    yield x


def _check_aliasing(name, fn, args, kwargs, result):
    """custom ops' outputs must not be, or alias, an input or another output (torch's
    _c_check_aliasing_constraint): compared by storage."""
    keys = set()
    for t in _iter_tensors(list(args) + list(kwargs.values())):
        k = _ops.storage_key(t)
        if k is not None:
            keys.add(k)
    outs = result if isinstance(result, tuple) else (result,)
    for t in _iter_tensors(outs):
        k = _ops.storage_key(t)
        if k is None:
            continue
        if k in keys:
            module = inspect.getmodule(getattr(fn, "__wrapped__", fn))
            raise RuntimeError(
                f"{name} (with implementation in {module}): The output of this custom operator "
                "(1) must not also be an input to this custom operator and (2) may not alias any "
                "inputs to this custom operator or other returns. The most common way to trigger "
                "this error is if we have y = custom_op(x) and y and x are the same Tensor. "
                "Please instead return a clone of the offending output tensor(s) (e.g. return "
                "x.clone()) or refactor the custom operator to not return y.")
        keys.add(k)


def maybe_get_opdef(op):
    if isinstance(op, CustomOpDef):
        return op
    if isinstance(op, _ops.OpOverload):
        op = op._name
    if isinstance(op, str):
        return OPDEFS.get(op)
    return None
