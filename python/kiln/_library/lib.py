"""kiln.library.Library: a handle that defines operators of a namespace and registers kernels
for them; what it registered goes away when it is destroyed (garbage-collected or _destroy())."""
import sys
import weakref

from . import ops as _ops
from . import schema as _schema

_reserved_namespaces = ["prim"]
_builtin_namespaces = ("aten", "prim", "prims")
_def_libraries = {}   # namespace -> weakref to its live "DEF" Library
_impls = set()        # "ns/name/key" registered from Python (torch's _impls)


def _source(stacklevel):
    try:
        f = sys._getframe(stacklevel + 1)
        return f"{f.f_code.co_filename}:{f.f_lineno}"
    except ValueError:
        return "?"


def _cleanup(defs, kernels, impl_keys):
    """What a Library registered, undone (it holds no reference to the Library itself, so that
    the Library can be collected)."""
    for kernel, entry in list(kernels):
        entry.remove_kernel(kernel)
    kernels.clear()
    for key in list(defs):
        e = _ops.get_entry(key)
        if e is not None:
            e.undefine()
    defs.clear()
    _impls.difference_update(impl_keys)
    impl_keys.clear()


class Library:
    """torch.library.Library: Library(ns, kind, dispatch_key="").

    kind "DEF" defines a new namespace (one live DEF Library per namespace), "FRAGMENT" adds
    operators to a namespace that may have others, "IMPL" only registers kernels. define()
    adds an operator from a schema string; impl() registers a kernel for a dispatch key
    ("CPU", "XPU", "Meta", "Autograd", "CompositeImplicitAutograd",
    "CompositeExplicitAutograd", ...)."""

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in ("IMPL", "DEF", "FRAGMENT"):
            raise ValueError(f"Unsupported kind: {kind}")
        if ns in _reserved_namespaces and kind in ("DEF", "FRAGMENT"):
            raise ValueError(f"{ns} is a reserved namespace. Please try creating a library with "
                             "another name.")
        if not isinstance(ns, str) or not ns.isidentifier():
            raise ValueError(f"Library namespace must be an identifier, got {ns!r}")
        if dispatch_key:
            _ops.check_dispatch_key(dispatch_key)
        if kind == "DEF":
            ref = _def_libraries.get(ns)
            prev = ref() if ref is not None else None
            if prev is not None and prev.m is not None:
                raise RuntimeError(
                    f"Only a single Library(\"{ns}\", \"DEF\") can be used to register the "
                    f"namespace {ns}; please put all of your definitions in a single DEF "
                    "library, or use Library(..., \"FRAGMENT\") to define operators of one "
                    f"namespace in several places. Previous registration at {prev._source}.")
            _def_libraries[ns] = weakref.ref(self)
        self.ns = ns
        self.kind = kind
        self.dispatch_key = dispatch_key
        self.m = True  # torch's C++ library handle; None once destroyed
        self._source = _source(1)
        self._op_defs = set()
        self._kernels = []      # (Kernel, OperatorEntry)
        self._op_impls = set()
        self._registration_handles = []
        self._finalizer = weakref.finalize(self, _cleanup, self._op_defs, self._kernels,
                                           self._op_impls)

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    def _check_alive(self):
        if self.m is None:
            raise RuntimeError("Library object has been destroyed")

    def define(self, schema, alias_analysis="", *, tags=()):
        """Defines the operator `schema` ("name(Tensor x, int n=2) -> Tensor") in this
        namespace; returns its name (without the overload name, as torch)."""
        if alias_analysis not in ("", "FROM_SCHEMA", "CONSERVATIVE"):
            raise RuntimeError(f"Invalid alias_analysis type {alias_analysis}")
        self._check_alive()
        if self.kind == "IMPL":
            raise RuntimeError(f"def(\"{schema}\"): Cannot define an operator inside of an IMPL "
                               f"library (Library(\"{self.ns}\", \"IMPL\") only registers "
                               "kernels); define it in a \"DEF\" or \"FRAGMENT\" library")
        parsed = _schema.parse_schema(schema)
        name = parsed.name
        if "::" in name:
            ns, name = name.split("::", 1)
            if ns != self.ns:
                raise RuntimeError(f"Explicitly provided namespace ({ns}) in schema string does "
                                   f"not match namespace of enclosing library ({self.ns})")
        key = _ops.full_name(self.ns, name, parsed.overload_name)
        entry = _ops.get_entry(key, create=True)
        if entry.schema is not None:
            raise RuntimeError(
                f"Tried to register an operator ({self.ns}::{schema}) with the same name and "
                "overload name multiple times. Each overload's schema should only be "
                "registered with a single call to define(). Duplicate registration: "
                f"{_source(1)}. Original registration: {entry._def_source}")
        if isinstance(tags, (list, tuple, set)):
            tags = tuple(tags)
        else:
            tags = (tags,)
        entry.define(parsed.with_name(f"{self.ns}::{name}"), tags)
        entry._def_source = _source(1)
        self._op_defs.add(key)
        return name

    def _resolve_op_name(self, op_name, api_name):
        if isinstance(op_name, str):
            return op_name
        if isinstance(op_name, _ops.OpOverload):
            return op_name._opname + ("" if op_name._overloadname == "default"
                                      else "." + op_name._overloadname)
        raise RuntimeError(f"{api_name} should be passed either a name or an OpOverload object "
                           f"as the first argument, got {type(op_name)}")

    def _qualify(self, name):
        if "::" in name:
            ns = name.split("::", 1)[0]
            if ns != self.ns:
                raise RuntimeError(f"Explicitly provided namespace ({ns}) in operator name does "
                                   f"not match namespace of enclosing library ({self.ns})")
            return name
        return f"{self.ns}::{name}"

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False, allow_override=True):
        """Registers fn as op_name's kernel for dispatch_key (the library's own key by
        default, CompositeImplicitAutograd when neither is given)."""
        if not callable(fn):
            raise TypeError(f"Input function is required to be a callable but found type "
                            f"{type(fn)}")
        self._check_alive()
        if dispatch_key == "":
            dispatch_key = self.dispatch_key
        if dispatch_key == "":
            dispatch_key = "CompositeImplicitAutograd"
        _ops.check_dispatch_key(dispatch_key)
        name = self._resolve_op_name(op_name, "impl")
        qualname = self._qualify(name)
        ns, opname, overload = _ops.split_qualname(qualname)
        key = f"{self.ns}/{opname}{'.' + overload if overload else ''}/{dispatch_key}"
        if not allow_override and key in _impls:
            raise RuntimeError(f"This is not allowed since there's already a kernel registered "
                               f"from python overriding {opname}'s behavior for {dispatch_key} "
                               f"dispatch key and {self.ns} namespace.")
        entry = _ops.get_entry(qualname, create=True)
        if ns in _builtin_namespaces and entry.schema is None:
            raise NotImplementedError(
                f"kiln.library: cannot register a kernel for {qualname}: kiln's built-in "
                "operators are C++ kernels that Python registrations do not override. Define a "
                "new operator in your own namespace instead (custom_op or Library.define).")
        if dispatch_key == "Meta" and entry.has_kernel("CompositeImplicitAutograd"):
            raise RuntimeError(
                f"We should not register a meta kernel directly to the operator '{name}', "
                "because it has a CompositeImplicitAutograd kernel. Instead we should let the "
                "operator decompose, and ensure that we have meta kernels for the base ops that "
                "it decomposes into.")
        kernel = _ops.Kernel(fn, dispatch_key, with_keyset, _source(1))
        entry.add_kernel(kernel)
        self._kernels.append((kernel, entry))
        _impls.add(key)
        self._op_impls.add(key)
        return kernel

    def _register_fake(self, op_name, fn, _stacklevel=1, *, allow_override=True):
        from .fake_impl import make_meta_kernel
        qualname = self._qualify(op_name)
        entry = _ops.get_entry(qualname, create=True)
        if not allow_override:
            k = entry.kernel("Meta")
            if k is not None:
                raise RuntimeError(f"register_fake(...): the operator {qualname} already has a "
                                   f"fake impl registered at {k.source}.")
            if entry.has_kernel("CompositeImplicitAutograd"):
                raise RuntimeError(
                    f"register_fake(...): the operator {qualname} already has an implementation "
                    "for this device type via a pre-existing registration to "
                    "DispatchKey::CompositeImplicitAutograd. CompositeImplicitAutograd operators "
                    "do not need a fake impl; instead, the operator will decompose into its "
                    "constituents and those can have fake impls defined on them.")
        return self.impl(op_name, make_meta_kernel(qualname, fn), "Meta")

    def fallback(self, fn, dispatch_key="", *, with_keyset=False):
        raise NotImplementedError("Library.fallback: kiln's dispatcher has no per-key "
                                  "fallbacks for Python kernels")

    def _destroy(self):
        if self.m is None:
            return
        self.m = None
        self._finalizer()
        if self.kind == "DEF":
            ref = _def_libraries.get(self.ns)
            if ref is not None and ref() is self:
                _def_libraries.pop(self.ns, None)
