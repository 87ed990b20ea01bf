"""The operator registry of kiln.library and its dispatcher, in Python (decision 0111).

Each operator overload ("mylib::foo" or "mylib::foo.out") has an OperatorEntry: its schema
(once defined) and a stack of kernels per dispatch key (the latest registration wins; when
the Library that registered one goes away, the one below it comes back, as in torch).
Calling an op (an OpOverload, reached as kiln.ops.mylib.foo.default) goes through, in torch's
order: __torch_function__ (modes, overriding arguments), argument binding (defaults, types),
autocast (register_autocast), the autograd layer (an Autograd kernel, or a
CompositeImplicitAutograd one, when grad mode is on and a Tensor input requires grad), then
the backend kernel for the dispatch device (CPU, XPU, Meta, ... then CompositeExplicitAutograd,
then CompositeImplicitAutograd). Mutated arguments get their version counters bumped after a
backend kernel, as torch's ADInplaceOrView kernel does."""
import threading

from .. import _C
from .. import _torch_function_dispatch as _tfd
from .. import profiler as _profiler
from . import schema as _schema

Tensor = _C.Tensor

# --- dispatch keys --------------------------------------------------------------------------

_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "xpu": "XPU", "meta": "Meta", "mps": "MPS",
                "testing": "Testing", "hip": "HIP", "xla": "XLA", "hpu": "HPU", "ipu": "IPU",
                "mtia": "MTIA", "lazy": "Lazy", "privateuseone": "PrivateUse1"}
BACKEND_KEYS = frozenset(_DEVICE_KEYS.values())
AUTOGRAD_KEYS = frozenset({"Autograd", "AutogradOther"} |
                          {"Autograd" + k for k in BACKEND_KEYS})
AUTOCAST_KEYS = frozenset({"Autocast" + k for k in ("CPU", "CUDA", "XPU", "MPS", "HPU",
                                                     "PrivateUse1")})
ALIAS_KEYS = frozenset({"CompositeImplicitAutograd", "CompositeExplicitAutograd",
                        "CompositeExplicitAutogradNonFunctional",
                        "CompositeImplicitAutogradNestedTensor"})
# Accepted so that torch code registering them runs; kiln's dispatcher never calls them
# (kiln has no functionalization, torch_dispatch, functorch batching or BackendSelect layer).
INERT_KEYS = frozenset({"BackendSelect", "Python", "PythonTLSSnapshot", "Functionalize",
                        "FuncTorchBatched", "FuncTorchDynamicLayerBackMode",
                        "FuncTorchDynamicLayerFrontMode", "ADInplaceOrView", "Conjugate",
                        "Negative", "ZeroTensor", "Named", "Tracer", "PreDispatch"})
ALL_KEYS = BACKEND_KEYS | AUTOGRAD_KEYS | AUTOCAST_KEYS | ALIAS_KEYS | INERT_KEYS


def parse_dispatch_key(key):
    """key itself when it is a dispatch key name kiln knows, else None (torch's
    _parse_dispatch_key)."""
    return key if key in ALL_KEYS else None


def check_dispatch_key(key):
    if key not in ALL_KEYS:
        raise RuntimeError(f"could not parse dispatch key: {key}")
    return key


def dispatch_key_for_device(device_type):
    """torch._C._dispatch_key_for_device: "cpu" -> "CPU", "meta" -> "Meta", ..."""
    key = _DEVICE_KEYS.get(device_type)
    if key is None:
        raise RuntimeError(f"unknown device type '{device_type}': expected one of "
                           f"{sorted(_DEVICE_KEYS)}")
    return key


def fallthrough_kernel():
    """torch.library.fallthrough_kernel: registered to a key, that key is skipped (for the
    Autograd key: the backend kernel runs as if there were no autograd kernel)."""
    raise NotImplementedError("fallthrough_kernel() should never be called.")


class DispatchKeySet:
    """What a with_keyset=True kernel gets as its first argument. kiln's dispatcher has no key
    sets: this only supports the operations torch code applies to one (&, |, -, has) and
    OpOverload.redispatch(keyset, ...), which runs the op below the autograd layer."""

    def __init__(self, keys=()):
        self.keys = frozenset(keys)

    def __and__(self, other):
        return self

    __or__ = __sub__ = __and__

    def has(self, key):
        return str(key) in self.keys

    def __repr__(self):
        return f"DispatchKeySet({sorted(self.keys)})"


# --- registry -------------------------------------------------------------------------------

_lock = threading.RLock()
_entries = {}   # "ns::name" or "ns::name.overload" -> OperatorEntry
_packets = {}   # ("ns", "name") -> OpOverloadPacket
_defined = {}   # ("ns", "name") -> [defined OperatorEntry], in definition order
_namespaces_seen = set()


class Kernel:
    """One registration: the function, its dispatch key and the Library that owns it."""
    __slots__ = ("func", "key", "with_keyset", "source", "__weakref__")

    def __init__(self, func, key, with_keyset=False, source=""):
        self.func, self.key, self.with_keyset, self.source = func, key, with_keyset, source

    def __call__(self, *args, **kwargs):
        if self.with_keyset:
            return self.func(DispatchKeySet({self.key}), *args, **kwargs)
        return self.func(*args, **kwargs)


def split_qualname(qualname):
    """("ns", "name", "overload") from "ns::name" / "ns::name.overload" (".default" -> "")."""
    if not isinstance(qualname, str):
        raise ValueError(f"expected an operator name string, got {type(qualname).__name__}")
    parts = qualname.split("::")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise ValueError(f'Expected `qualname` to be of the form "namespace::name", but got '
                         f"{qualname}. The qualname passed to the kiln.library APIs must consist "
                         "of a namespace and a name, e.g. mylib::sin")
    ns, rest = parts
    name, _, overload = rest.partition(".")
    if overload == "default":
        overload = ""
    return ns, name, overload


def full_name(ns, name, overload):
    return f"{ns}::{name}" + (f".{overload}" if overload else "")


def get_entry(qualname, create=False):
    ns, name, overload = split_qualname(qualname)
    key = full_name(ns, name, overload)
    with _lock:
        e = _entries.get(key)
        if e is None and create:
            e = _entries[key] = OperatorEntry(ns, name, overload)
        return e


def find_defined(qualname):
    e = get_entry(qualname)
    return e if e is not None and e.schema is not None else None


def _maybe_drop(entry):
    with _lock:
        if entry.schema is None and not any(entry.kernels.values()) and entry.opdef is None:
            _entries.pop(entry.key, None)


class OperatorEntry:
    def __init__(self, ns, name, overload):
        self.ns, self.name, self.overload = ns, name, overload
        self.key = full_name(ns, name, overload)
        self.qualname = f"{ns}::{name}"
        self.schema = None
        self.kernels = {}        # dispatch key -> [Kernel], latest last
        self.autocast = {}       # device type -> dtype (register_autocast)
        self.opdef = None        # the CustomOpDef, for custom_op operators
        self.tags = ()
        self.vmap_fn = None
        self._overload_obj = None

    # registration ---------------------------------------------------------------------------

    def define(self, schema, tags=()):
        with _lock:
            self.schema = schema
            self.tags = tuple(tags)
            _defined.setdefault((self.ns, self.name), []).append(self)

    def undefine(self):
        with _lock:
            if self.schema is None:
                return
            self.schema = None
            self._overload_obj = None
            self.opdef = None
            self.autocast.clear()
            self.vmap_fn = None
            self.tags = ()
            group = _defined.get((self.ns, self.name), [])
            if self in group:
                group.remove(self)
            if not group:
                _defined.pop((self.ns, self.name), None)
        _maybe_drop(self)

    def add_kernel(self, kernel):
        with _lock:
            self.kernels.setdefault(kernel.key, []).append(kernel)

    def remove_kernel(self, kernel):
        with _lock:
            stack = self.kernels.get(kernel.key, [])
            if kernel in stack:
                stack.remove(kernel)
            if not stack:
                self.kernels.pop(kernel.key, None)
        _maybe_drop(self)

    def kernel(self, key):
        stack = self.kernels.get(key)
        return stack[-1] if stack else None

    def has_kernel(self, key):
        return bool(self.kernels.get(key))

    @property
    def overload_obj(self):
        o = self._overload_obj
        if o is None:
            o = self._overload_obj = OpOverload(self)
        return o

    # dispatch -------------------------------------------------------------------------------

    def call(self, args, kwargs):
        schema = self.schema
        if schema is None:
            raise RuntimeError(f"operator {self.key} is not defined (its Library was destroyed "
                               "or it was never defined)")
        pos, kw = _schema.bind(self.qualname, schema, args, kwargs)
        return self.dispatch(pos, kw)

    def dispatch(self, pos, kw, below_autograd=False):
        """Run the op on bound arguments. below_autograd skips the autograd layer (what a
        generated autograd Function's forward and OpOverload.redispatch do)."""
        tensors = _tensors_of(pos, kw)
        device_type = _dispatch_device(tensors, self.schema, pos, kw)
        if self.autocast and device_type in self.autocast and \
                _C._autocast_is_enabled(device_type):
            return self._autocast(device_type, pos, kw, below_autograd)
        bkey = _DEVICE_KEYS.get(device_type, device_type)
        if not below_autograd and _C.is_grad_enabled() and \
                any(t.requires_grad for t in tensors):
            k = self.kernel("Autograd" + bkey) or self.kernel("Autograd")
            if k is not None:
                if k.func is fallthrough_kernel:  # the autograd layer is skipped, as torch
                    return self._backend(bkey, pos, kw, tensors)
                _opaque_to_capture()
                return self._finish(k(*pos, **kw))
            cia = self.kernel("CompositeImplicitAutograd")
            if cia is not None and self._direct_backend(bkey) is None:
                return self._finish(cia(*pos, **kw))
            # torch's autograd fallback: the backend kernel runs and whatever kiln ops it
            # calls record their own gradients.
        return self._backend(bkey, pos, kw, tensors)

    def _direct_backend(self, bkey):
        k = self.kernel(bkey)
        if k is None or k.func is fallthrough_kernel:
            k = self.kernel("CompositeExplicitAutograd")
        if k is None:
            k = self.kernel("CompositeExplicitAutogradNonFunctional")
        return k

    def _backend(self, bkey, pos, kw, tensors):
        k = self._direct_backend(bkey)
        if k is None:
            k = self.kernel("CompositeImplicitAutograd")
            if k is None:
                raise self._no_kernel(bkey)
        else:
            _opaque_to_capture()
        if not _C.is_grad_enabled() and any(t.requires_grad for t in tensors):
            # Below autograd the kernel gets aliases without the graph link: kiln's
            # Tensor.numpy() refuses a tensor that requires grad even in no_grad mode (torch
            # allows it there), and kernels commonly go through numpy.
            result = k(*_detached(pos), **dict(zip(kw, _detached(kw.values()))))
        else:
            result = k(*pos, **kw)
        if bkey != "Meta" and self.schema.is_mutable:
            _bump_versions(self.schema, pos, kw)
        return self._finish(result)

    def _finish(self, result):
        return _schema.check_returns(self.qualname, self.schema, result)

    def _no_kernel(self, bkey):
        if bkey == "Meta":
            return NotImplementedError(
                f"{self.qualname}: attempted to run this operator with Meta tensors, but there "
                "was no fake impl or Meta kernel registered. Register one with "
                f'kiln.library.register_fake("{self.key}") (or @op.register_fake for a '
                "custom_op): it computes the outputs' shapes and dtypes without data.")
        keys = sorted(k for k, v in self.kernels.items() if v)
        return NotImplementedError(
            f"Could not run '{self.key}' with arguments from the '{bkey}' backend: no kernel is "
            f"registered for it. '{self.key}' is only available for these backends: "
            f"[{', '.join(keys)}]. Register one with Library.impl(..., \"{bkey}\") or "
            "register_kernel.")

    def _autocast(self, device_type, pos, kw, below_autograd):
        from ..amp import autocast
        dtype = self.autocast[device_type]

        def cast(v):
            if isinstance(v, Tensor):
                if v.is_floating_point() and v.device.type == device_type and \
                        v.dtype != _C.float64:
                    return v.to(dtype)
                return v
            if isinstance(v, list):
                return [cast(x) for x in v]
            return v

        with autocast(device_type, enabled=False):
            return self.dispatch([cast(v) for v in pos], {k: cast(v) for k, v in kw.items()},
                                 below_autograd)


def _tensors_of(pos, kw):
    out = []
    for v in pos:
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, list):
            out.extend(x for x in v if isinstance(x, Tensor))
    for v in kw.values():
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, list):
            out.extend(x for x in v if isinstance(x, Tensor))
    return out


_graph = _C._graph


def _opaque_to_capture():
    """Inside a kiln.compile capture, a kernel other than a CompositeImplicitAutograd one is
    opaque: the C++ graph could replay the kiln ops it happens to call, but not its Python
    code (numpy, host reads through aliases the tracer does not know, Python autograd
    Functions). The capture is marked as reading computed values on the host, so that guard
    runs eagerly: correct results instead of a stale replay."""
    if _graph.is_capturing():
        _graph.note_host_read(_C.zeros(()))


def _detached(values):
    out = []
    for v in values:
        if isinstance(v, Tensor) and v.requires_grad:
            v = v.detach()
        elif isinstance(v, list):
            v = [x.detach() if isinstance(x, Tensor) and x.requires_grad else x for x in v]
        out.append(v)
    return out


def _dispatch_device(tensors, schema, pos, kw):
    """The device type whose kernel runs: meta if any input is a meta tensor, else the first
    non-CPU tensor's, else cpu. Without tensor inputs, the first Device argument's (torch's
    BackendSelect for factory-like ops), else cpu."""
    if tensors:
        found = "cpu"
        for t in tensors:
            d = t.device.type
            if d == "meta":
                return d
            if found == "cpu":
                found = d
        return found
    values = iter(pos)
    for a in schema.arguments:
        v = kw.get(a.name) if a.kwarg_only else next(values, None)
        if isinstance(v, _C.device):
            return v.type
    return "cpu"


def _bump_versions(schema, pos, kw):
    values = iter(pos)
    for a in schema.arguments:
        v = kw.get(a.name) if a.kwarg_only else next(values, None)
        if not a.is_write:
            continue
        if isinstance(v, Tensor):
            _C._increment_version(v)
        elif isinstance(v, list):
            for t in v:
                if isinstance(t, Tensor):
                    _C._increment_version(t)


def storage_key(t):
    """An identity of t's storage (device, base address), or None for tensors without memory
    (meta, empty). Two live tensors alias iff their keys are equal."""
    if t.device.type == "meta":
        return None
    ptr = t.data_ptr()
    if not ptr:
        return None
    return (str(t.device), ptr - t.storage_offset() * t.element_size())


# --- __torch_function__ and profiling around a call -----------------------------------------

_PLAIN = _tfd._PLAIN
_overrides_type = _tfd.overrides_type


def _needs_torch_function(args, kwargs):
    if _tfd._pushed:
        return True
    for a in args:
        t = type(a)
        if t is Tensor or t in _PLAIN:
            continue
        if t is list or t is tuple:
            for b in a:
                tb = type(b)
                if tb is not Tensor and tb not in _PLAIN and _overrides_type(tb):
                    return True
        elif _overrides_type(t):
            return True
    if kwargs:
        return _needs_torch_function(tuple(kwargs.values()), None)
    return False


class OpOverload:
    """One overload of an operator (torch._ops.OpOverload): kiln.ops.mylib.foo.default."""

    def __init__(self, entry):
        self._entry = entry
        self._name = entry.qualname
        self.namespace = entry.ns
        self._opname = entry.name
        self._overloadname = entry.overload or "default"
        self.__name__ = f"{entry.name}.{self._overloadname}"
        self.__qualname__ = self.__name__
        self.__module__ = f"kiln.ops.{entry.ns}"

    @property
    def _schema(self):
        return self._entry.schema

    @property
    def tags(self):
        return list(self._entry.tags)

    @property
    def overloadpacket(self):
        return get_packet(self.namespace, self._opname)

    @property
    def op(self):
        return self

    @property
    def is_view(self):
        return self._entry.schema.is_view_op()

    def name(self):
        return self._entry.key

    def __call__(self, *args, **kwargs):
        if _needs_torch_function(args, kwargs):
            found = _tfd.find(args, kwargs)
            if found is not None:
                return _tfd.call_handlers(self, found, args, kwargs)
        if _profiler._active_window is not None:  # a kiln.profiler.profile is recording
            with _profiler.record_function(self._entry.key):
                return self._entry.call(args, kwargs)
        return self._entry.call(args, kwargs)

    def redispatch(self, keyset, *args, **kwargs):
        """Runs the op below the autograd layer (kiln has no key sets; see DispatchKeySet)."""
        e = self._entry
        pos, kw = _schema.bind(e.qualname, e.schema, args, kwargs)
        return e.dispatch(pos, kw, below_autograd=True)

    def has_kernel_for_dispatch_key(self, key):
        return self._entry.has_kernel(str(key))

    def decompose(self, *args, **kwargs):
        k = self._entry.kernel("CompositeImplicitAutograd")
        if k is None:
            return NotImplemented
        return k(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverload(op='{self.namespace}.{self._opname}', " \
               f"overload='{self._overloadname}')>"

    def __str__(self):
        return f"{self.namespace}.{self._opname}.{self._overloadname}"

    def __reduce__(self):
        return (_lookup_for_pickle, (self._entry.key,))


def _lookup_for_pickle(key):
    return lookup_op(key)


def lookup_op(qualname):
    """The OpOverload for "ns::name" / "ns::name.overload" (torch._library.utils.lookup_op)."""
    e = find_defined(qualname)
    if e is None:
        ns, name, overload = split_qualname(qualname)
        raise RuntimeError(f"operator {full_name(ns, name, overload)} is not defined: define it "
                           "with kiln.library.custom_op, kiln.library.define or Library.define")
    return e.overload_obj


class OpOverloadPacket:
    """All overloads of one operator name (torch._ops.OpOverloadPacket): kiln.ops.mylib.foo.
    Calling it picks the first overload whose schema the arguments fit."""

    def __init__(self, ns, name):
        self._ns = ns
        self._name = name
        self._qualified_op_name = f"{ns}::{name}"
        self.__name__ = name
        self.__qualname__ = name
        self.__module__ = f"kiln.ops.{ns}"

    def _entries(self):
        return list(_defined.get((self._ns, self._name), ()))

    def overloads(self):
        return [e.overload or "default" for e in self._entries()]

    def __getattr__(self, key):
        if key.startswith("__"):
            raise AttributeError(key)
        overload = "" if key == "default" else key
        e = find_defined(full_name(self._ns, self._name, overload))
        if e is None:
            raise AttributeError(f"The underlying op of '{self._ns}.{self._name}' has no "
                                 f"overload name '{key}'")
        return e.overload_obj

    @property
    def _schemas(self):
        return {e.overload: e.schema for e in self._entries()}

    def __call__(self, *args, **kwargs):
        if _needs_torch_function(args, kwargs):  # handlers see the packet, as torch's
            found = _tfd.find(args, kwargs)
            if found is not None:
                return _tfd.call_handlers(self, found, args, kwargs)
        entries = _defined.get((self._ns, self._name))
        if entries is not None and len(entries) == 1:
            return entries[0].overload_obj(*args, **kwargs)
        entries = list(entries or ())
        if not entries:
            raise RuntimeError(f"operator {self._qualified_op_name} is no longer defined")
        if len(entries) == 1:
            return entries[0].overload_obj(*args, **kwargs)
        entries.sort(key=lambda e: e.overload != "")  # the default overload first
        errors = []
        for e in entries:
            try:
                _schema.bind(e.qualname, e.schema, args, kwargs)
            except RuntimeError as err:
                errors.append(str(err).splitlines()[0])
                continue
            return e.overload_obj(*args, **kwargs)
        raise RuntimeError(f"{self._qualified_op_name}: no overload matches the arguments; "
                           "tried:\n  " + "\n  ".join(errors))

    def __repr__(self):
        return f"<OpOverloadPacket(op='{self._ns}.{self._name}')>"

    def __str__(self):
        return f"{self._ns}.{self._name}"

    def __reduce__(self):
        return (get_packet, (self._ns, self._name))


def get_packet(ns, name):
    with _lock:
        p = _packets.get((ns, name))
        if p is None:
            p = _packets[(ns, name)] = OpOverloadPacket(ns, name)
        return p


def has_packet(ns, name):
    return (ns, name) in _defined


def namespace_ops(ns):
    with _lock:
        return sorted({name for (n, name) in _defined if n == ns})


def _namespaces_of_defined():
    with _lock:
        return {ns for (ns, _) in _defined}
