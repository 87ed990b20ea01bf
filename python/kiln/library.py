"""kiln.library: user-defined operators (torch.library, the torch 2.4+ API), decision 0111.

    @kiln.library.custom_op("mylib::my_sin", mutates_args=())
    def my_sin(x: kiln.Tensor) -> kiln.Tensor:
        return kiln.from_numpy(np.sin(x.numpy()))

    @my_sin.register_fake
    def _(x):
        return kiln.empty_like(x)

    my_sin.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].cos(),
                             setup_context=lambda ctx, inputs, output:
                                 ctx.save_for_backward(inputs[0]))

    kiln.ops.mylib.my_sin(x)   # the same operator

or the lower-level Library("mylib", "FRAGMENT").define("foo(Tensor x, int n=2) -> Tensor") with
Library.impl / kiln.library.impl / register_fake / register_autograd. opcheck(op, args) checks
the registrations (schema vs. mutations and aliasing, fake impl vs. real outputs, autograd
registration, kiln.compile vs. eager).

Operators are Python objects over a registry and dispatcher written in Python (kiln._library);
kiln's built-in C++ operators are not in it and cannot be overridden from here."""
import contextlib
import functools
import warnings

from ._library import ops as _ops
from ._library.autograd import Info as _Info, make_autograd_impl as _make_autograd_impl
from ._library.custom_ops import (CustomOpDef, custom_op, maybe_get_opdef as _maybe_get_opdef)
from ._library.fake_impl import FakeImplCtx, get_ctx as _get_ctx  # noqa: F401
from ._library.infer_schema import infer_schema
from ._library.lib import Library, _impls  # noqa: F401
from ._library.opcheck import opcheck, OpCheckError, MetadataMismatchError  # noqa: F401
from ._library.ops import OpOverload, OpOverloadPacket, fallthrough_kernel  # noqa: F401
from ._library.schema import FunctionSchema, parse_schema  # noqa: F401
from ._ops_namespace import ops

__all__ = ["Library", "impl", "define", "fallthrough_kernel", "impl_abstract", "register_fake",
           "register_kernel", "register_autograd", "register_autocast",
           "register_torch_dispatch", "register_vmap", "get_ctx", "get_kernel", "custom_op",
           "CustomOpDef", "infer_schema", "opcheck", "triton_op", "wrap_triton"]

_keep_alive = []


def _install_ops():
    """kiln.ops, reachable once kiln.library is imported (kiln/__init__.py also binds it)."""
    import sys
    import kiln
    if getattr(kiln, "ops", None) is not ops:
        kiln.ops = ops
    sys.modules.setdefault("kiln.ops", ops)


_install_ops()


def get_ctx():
    """The context of the fake impl running now (its new_dynamic_size() raises in kiln: the
    meta device has no values); None outside a fake impl."""
    return _get_ctx()


def _parse_namespace(qualname):
    ns, name, overload = _ops.split_qualname(qualname)
    return ns, name + (f".{overload}" if overload else "")


# --- define / impl ------------------------------------------------------------------------

@functools.singledispatch
def define(qualname, schema, *, lib=None, tags=()):
    """Defines the operator qualname ("mylib::foo") with schema "(Tensor x, int n) -> Tensor".
    With lib, it lives as long as that Library."""
    if not isinstance(qualname, str):
        raise ValueError(f"define(qualname, schema): expected qualname to be instance of str, "
                         f"got {type(qualname)}")
    namespace, name = _parse_namespace(qualname)
    if not isinstance(schema, str) or not schema.lstrip().startswith("(") or "->" not in schema:
        raise ValueError(f'define(qualname, schema, ...): expected schema to look like e.g. '
                         f'"(Tensor x) -> Tensor" but got "{schema}"')
    if lib is None:
        lib = Library(namespace, "FRAGMENT")
        _keep_alive.append(lib)
    lib.define(name + schema, alias_analysis="", tags=tags)


@define.register
def _(lib: Library, schema, alias_analysis=""):
    """The old form: define(lib, "foo(Tensor x) -> Tensor") as a decorator of its kernel."""
    def wrap(f):
        name = lib.define(schema, alias_analysis)
        lib.impl(name, f)
        return f

    return wrap


def _device_type_to_key(device_type):
    if device_type == "default":
        return "CompositeExplicitAutograd"
    return _ops.dispatch_key_for_device(device_type)


def _impl(qualname, types, func=None, *, lib=None):
    if isinstance(types, str):
        types = (types,)
    keys = []
    for typ in types:
        keys.append(typ if _ops.parse_dispatch_key(typ) else _device_type_to_key(typ))

    def register_(func):
        namespace, _ = _parse_namespace(qualname)
        use_lib = lib
        if use_lib is None:
            use_lib = Library(namespace, "FRAGMENT")
            _keep_alive.append(use_lib)
        for key in keys:
            use_lib.impl(qualname, func, key)
        return func

    if func is None:
        return register_
    register_(func)
    return None


@functools.singledispatch
def impl(qualname, types, func=None, *, lib=None):
    """Registers func for qualname on device types ("cpu", "xpu", "meta", "default" for all)
    or dispatch keys ("CPU", "Autograd", "CompositeImplicitAutograd", ...). A decorator when
    func is not given."""
    return _impl(qualname, types, func, lib=lib)


@impl.register
def _(lib: Library, name, dispatch_key=""):
    """The old form: impl(lib, "foo", "CPU") as a decorator."""
    def wrap(f):
        lib.impl(name, f, dispatch_key)
        return f

    return wrap


# --- registrations by operator ----------------------------------------------------------------

def _resolve_op_for_registration(op, registration_name):
    if not isinstance(op, (str, OpOverload, CustomOpDef)):
        raise ValueError(f"{registration_name}({op}): got unexpected type for op: {type(op)}")
    if isinstance(op, OpOverload):
        op = op.name()
    opdef = _maybe_get_opdef(op)
    if opdef is not None:
        return opdef
    return op


def _library_for_registration(namespace, lib):
    if lib is not None:
        return lib
    use_lib = Library(namespace, "FRAGMENT")
    _keep_alive.append(use_lib)
    return use_lib


def register_kernel(op, device_types, func=None, /, *, lib=None):
    """Registers func as op's implementation for device_types ("cpu", ...; None: all)."""
    op = _resolve_op_for_registration(op, "register_kernel")
    if isinstance(op, CustomOpDef):
        return op.register_kernel(device_types, func)
    if device_types is None:
        device_types = "CompositeExplicitAutograd"
    return _impl(op, device_types, func, lib=lib)


def register_fake(op, func=None, /, *, lib=None, _stacklevel=1, allow_override=True):
    """Registers op's fake impl ("meta kernel"): it runs when the inputs are meta tensors and
    returns meta tensors with the outputs' shapes and dtypes. A decorator when func is not
    given."""
    op = _resolve_op_for_registration(op, "register_fake")
    if isinstance(op, CustomOpDef):
        if func is None:
            return op.register_fake
        return op.register_fake(func)

    def register(func):
        namespace, op_name = _parse_namespace(op)
        use_lib = _library_for_registration(namespace, lib)
        use_lib._register_fake(op_name, func, allow_override=allow_override)
        return func

    if func is None:
        return register
    return register(func)


def impl_abstract(qualname, func=None, *, lib=None, _stacklevel=1):
    """Renamed register_fake in torch 2.4."""
    warnings.warn("`kiln.library.impl_abstract` was renamed to `kiln.library.register_fake`. "
                  "Please use that instead.", FutureWarning, stacklevel=2)
    return register_fake(qualname, func, lib=lib)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """Registers op's backward formula (see CustomOpDef.register_autograd): backward(ctx,
    *grads) returns one gradient per input; setup_context(ctx, inputs, output) saves what it
    needs in the forward."""
    op = _resolve_op_for_registration(op, "register_autograd")
    if isinstance(op, CustomOpDef):
        op.register_autograd(backward, setup_context=setup_context)
        return
    overload = _ops.lookup_op(op)
    entry = overload._entry
    schema = entry.schema
    from ._library.custom_ops import _is_functional
    if not _is_functional(schema):
        raise RuntimeError(f"Cannot register autograd formula for non-functional operator "
                           f"{overload} with schema {schema}. Please create a functional "
                           "operator and register an autograd formula for that.")
    if schema.has_kwarg_only_tensors():
        raise NotImplementedError(f"register_autograd with kwarg-only Tensor args. In the "
                                  f"original definition of the op, please make your tensors not "
                                  f"kwarg-only. Got: {schema}")
    kernel = _make_autograd_impl(entry, _Info(backward, setup_context), str(overload))
    namespace, opname = _parse_namespace(op)
    _library_for_registration(namespace, lib).impl(opname, kernel, "Autograd")


def register_autocast(op, device_type, cast_inputs, /, *, lib=None):
    """Inside kiln.autocast(device_type), op's floating-point inputs are cast to cast_inputs
    and it runs with autocast off."""
    op = _resolve_op_for_registration(op, "register_autocast")
    if isinstance(op, CustomOpDef):
        return op.register_autocast(device_type, cast_inputs)
    _ops.dispatch_key_for_device(device_type)
    _ops.lookup_op(op)._entry.autocast[device_type] = cast_inputs


def register_vmap(op, func=None, /, *, lib=None):
    """Accepted and kept: kiln's vmap runs functions once per batch element, so operators work
    under it without a vmap rule."""
    op = _resolve_op_for_registration(op, "register_vmap")
    if isinstance(op, CustomOpDef):
        return op.register_vmap(func)

    def register(func):
        _ops.lookup_op(op)._entry.vmap_fn = func
        return func

    return register if func is None else register(func)


def register_torch_dispatch(op, torch_dispatch_class, func=None, /, *, lib=None):
    raise NotImplementedError("register_torch_dispatch: kiln does not implement "
                              "__torch_dispatch__ (only __torch_function__, decision 0109)")


def get_kernel(op, dispatch_key):
    """The kernel op runs for dispatch_key (its own, else CompositeExplicitAutograd /
    CompositeImplicitAutograd for a backend key), as a callable."""
    if isinstance(op, CustomOpDef):
        op = op._opoverload
    if not isinstance(op, (str, OpOverload)):
        raise ValueError(f"get_kernel({op}): got unexpected type for op: {type(op)}")
    overload = op if isinstance(op, OpOverload) else _ops.lookup_op(op)
    key = str(dispatch_key)
    if key not in _ops.ALL_KEYS:
        raise ValueError(f"Invalid dispatch key: {key}")
    e = overload._entry
    k = e.kernel(key)
    if k is None and key in _ops.BACKEND_KEYS:
        k = e.kernel("CompositeExplicitAutograd") or e.kernel("CompositeImplicitAutograd")
    if k is None:
        raise RuntimeError(f"{e.key} has no kernel for the dispatch key {key}")
    return k


@contextlib.contextmanager
def _scoped_library(*args, **kwargs):
    """A Library destroyed at the end of the with block (torch.library._scoped_library)."""
    lib = Library(*args, **kwargs)
    try:
        yield lib
    finally:
        lib._destroy()


# --- Triton ---------------------------------------------------------------------------------

_NO_TRITON = ("kiln has no Triton: Triton compiles GPU kernels for CUDA / ROCm, and kiln's "
              "backends are the CPU and an OpenCL xpu device. Write the kernel as a "
              "kiln.library.custom_op over kiln operations (or numpy) instead.")


def triton_op(name, fn=None, /, *, mutates_args, schema=None):
    """torch.library.triton_op: not available (raises NotImplementedError)."""
    raise NotImplementedError(f"kiln.library.triton_op({name!r}): {_NO_TRITON}")


def wrap_triton(triton_kernel, /):
    """torch.library.wrap_triton: not available (raises NotImplementedError)."""
    raise NotImplementedError(f"kiln.library.wrap_triton: {_NO_TRITON}")
