"""Proxy: the stand-in for a value while tracing, as torch.fx.Proxy.

A Proxy wraps a Node. Whatever a traced program does with it is recorded as new nodes:
- operators (`x + 1`, `x @ w`, `x[0]`, `-x`, comparisons) are defined on Proxy and become
  call_function nodes of the `operator` function (`operator.add`), as torch records them;
- attribute reads (`x.shape`) become `getattr` call_function nodes, and method calls
  (`x.view(2, -1)`) call_method nodes (Attribute defers the getattr node until the value is
  used as such, so a method call records only the call);
- kiln functions (`kiln.relu(x)`, `kiln.nn.functional.softmax(x, -1)`, `kiln.cat([x, y])`)
  reach Proxy.__torch_function__ through kiln's __torch_function__ protocol (decision 0109)
  and become call_function nodes of that function; Tensor methods called on a real tensor
  with a Proxy argument (`t.add(x)`, `t + x`) become call_method nodes.
Proxy.__torch_function__ is attached after the class statement on purpose: a class statement
defining it would install kiln's dispatching wrappers at import (a cost to every program);
instead the first Proxy made installs them."""
import dis
import inspect
import operator
from bisect import bisect_left

from . import _codegen
from .graph import Graph
from .node import map_aggregate, map_arg

__all__ = ["TraceError", "TracerError", "TracerBase", "GraphAppendingTracer", "Proxy",
           "Attribute"]


class TraceError(ValueError):
    """A traced program used a Proxy in a way tracing cannot record (data-dependent control
    flow: `if x.sum() > 0`, iterating a Proxy)."""


TracerError = TraceError


def _base_types():
    import kiln
    from .. import _C
    return (str, int, float, bool, complex, _C.dtype, _C.device, type(kiln.contiguous_format),
            type(kiln.strided), _C.Tensor)


_BASE_TYPES = None


def base_types():
    global _BASE_TYPES
    if _BASE_TYPES is None:
        _BASE_TYPES = _base_types()
    return _BASE_TYPES


class TracerBase:
    """Records nodes into self.graph; Tracer adds module handling on top."""
    graph: Graph
    record_stack_traces = False
    trace_asserts = False
    proxy_buffer_attributes = False
    traced_func_name = "forward"
    scope = None
    module_stack = None

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = self.graph.create_node(kind, target, args, kwargs, name, type_expr)
        if self.module_stack:
            # which module call each node came from, as torch's meta["nn_module_stack"]
            node.meta["nn_module_stack"] = dict(self.module_stack)
        return node

    def proxy(self, node):
        return Proxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                     proxy_factory_fn=None):
        """A node for (kind, target, args, kwargs) with Proxies lowered to their nodes,
        wrapped in a Proxy."""
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        if not isinstance(args_, tuple):
            raise AssertionError(f"Expected args_ to be tuple, got {type(args_)}")
        if not isinstance(kwargs_, dict):
            raise AssertionError(f"Expected kwargs_ to be dict, got {type(kwargs_)}")
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        return proxy_factory_fn(node) if proxy_factory_fn else self.proxy(node)

    def create_arg(self, a):
        """Lowers a traced value into something a Node can hold: Proxies to their Nodes,
        containers element by element, constants as they are."""
        if isinstance(a, Proxy):
            return a.node  # first: hasattr on a Proxy would record a getattr
        if hasattr(a, "__fx_create_arg__"):
            return a.__fx_create_arg__(self)
        if isinstance(a, tuple):
            elems = [self.create_arg(e) for e in a]
            if type(a) is tuple:
                return tuple(elems)
            if hasattr(a, "_fields"):
                return type(a)(*elems)
            return tuple(elems)  # kiln.Size and other tuple types hold Nodes as a tuple
        if isinstance(a, list):
            return [self.create_arg(e) for e in a]
        if isinstance(a, dict):
            r = {}
            for k, v in a.items():
                if not isinstance(k, str):
                    k = self.create_arg(k)
                    map_arg(k, _no_nodes_error)
                r[k] = self.create_arg(v)
            return r
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        import enum
        if isinstance(a, (*base_types(), enum.Enum)) or a is None or a is ...:
            return a
        raise NotImplementedError(f"argument of type: {type(a)}")

    def to_bool(self, obj):
        """bool(proxy): the value is unknown while tracing, so control flow on it cannot be
        recorded."""
        raise TraceError("symbolically traced variables cannot be used as inputs to control "
                         "flow")

    def iter(self, obj):
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the "
                         "Proxy is used in a loop or as a *args or **kwargs function argument. "
                         "See the torch.fx docs on pytorch.org for a more detailed explanation "
                         "of what types of control flow can be traced, and check out the Proxy "
                         "docstring for help troubleshooting Proxy iteration errors")

    def keys(self, obj):
        return Attribute(obj, "keys")()


def _no_nodes_error(arg):
    raise RuntimeError("Keys for dictionaries used as an argument cannot contain a Node. "
                       f"Got key: {arg}")


class GraphAppendingTracer(TracerBase):
    """Appends to an existing graph (Proxy(node) without a tracer; Transformer)."""

    def __init__(self, graph):
        super().__init__()
        self.graph = graph
        self.scope = None
        self.module_stack = {}
        self.node_name_to_scope = {}


def _install_protocol():
    from .._torch_function_install import install, installed
    if not installed():
        install()


class Proxy:
    """A Node standing in for a value during tracing (see the module docstring)."""

    def __init__(self, node, tracer=None):
        if tracer is None:
            tracer = GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node
        _install_protocol()

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, k):
        # not recorded yet: a method call records call_method instead of getattr + call
        return Attribute(self, k)

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, d):
        self.__dict__ = d

    def __deepcopy__(self, memo):
        # explicit, or deepcopy would find an Attribute for "__deepcopy__"
        import copy
        new = Proxy.__new__(type(self))
        for k, v in self.__dict__.items():
            try:
                new.__dict__[k] = copy.deepcopy(v, memo)
            except Exception:  # noqa: BLE001 - as torch: fall back to sharing
                new.__dict__[k] = copy.copy(v)
        return new

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self):
        # `a, b = proxy` unpacks a known count: record proxy[0], proxy[1]. Other iteration
        # depends on the value, which tracing does not know.
        calling_frame = inspect.currentframe().f_back
        insts = list(dis.get_instructions(calling_frame.f_code))
        idx = bisect_left(insts, calling_frame.f_lasti, key=lambda x: x.offset)
        if idx < len(insts) and insts[idx].opname == "UNPACK_SEQUENCE":
            return (self[i] for i in range(insts[idx].argval))
        return self.tracer.iter(self)

    def __abs__(self):
        return self.tracer.create_proxy("call_function", operator.abs, (self,), {})

    def __bool__(self):
        return self.tracer.to_bool(self)

    def keys(self):
        return self.tracer.keys(self)

    def __len__(self):
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want "
                           "this call to be recorded, please call kiln.fx.wrap('len') at module "
                           "scope")


def _find_tracer(cls, args, kwargs):
    tracers = {}

    def visit(a):
        if isinstance(a, cls):
            tracers[a.tracer] = None
        return a
    map_aggregate(args, visit)
    map_aggregate(kwargs, visit)
    if len(tracers) > 1:
        raise RuntimeError(f"Found multiple different tracers {list(tracers)} while trying "
                           "to trace operations")
    return next(iter(tracers))


def _namespace_functions():
    """The public functions of kiln's covered namespaces, by id, to tell kiln.square(x) from
    Tensor.square where both are one object."""
    from .._torch_function_install import _covered_modules
    ids = set()
    for module in _covered_modules():
        for name, value in vars(module).items():
            if not name.startswith("_") and callable(value):
                ids.add(id(value))
    return ids


_NAMESPACE_FUNCTION_IDS = None


def _is_tensor_method(func, args):
    from .._C import Tensor
    name = getattr(func, "__name__", None)
    if name is None or getattr(Tensor, name, None) is not func:
        return False
    global _NAMESPACE_FUNCTION_IDS
    if _NAMESPACE_FUNCTION_IDS is None:
        _NAMESPACE_FUNCTION_IDS = _namespace_functions()
    if id(func) in _NAMESPACE_FUNCTION_IDS and args and isinstance(args[0], Proxy):
        # kiln.square is Tensor.square: a method call on a Proxy never gets here (it goes
        # through Proxy.__getattr__), so with a Proxy first this was the function.
        return False
    return True


def _proxy_torch_function(cls, orig_method, types, args=(), kwargs=None):
    args = args if args else ()
    kwargs = kwargs if kwargs else {}
    tracer = _find_tracer(cls, args, kwargs)
    if _is_tensor_method(orig_method, args):
        return tracer.create_proxy("call_method", orig_method.__name__, args, kwargs)
    return tracer.create_proxy("call_function", orig_method, args, kwargs,
                               name=tracer.graph._target_to_str(orig_method.__name__))


Proxy.__torch_function__ = classmethod(_proxy_torch_function)


class Attribute(Proxy):
    """proxy.attr: a call records call_method; any other use records getattr (once)."""

    def __init__(self, root, attr):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node = None

    @property
    def node(self):
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr,
                                                  (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _define_magic(method):
    def impl(*args, **kwargs):
        tracer = args[0].tracer
        return tracer.create_proxy("call_function", getattr(operator, method), args, kwargs)
    impl.__name__ = method
    setattr(Proxy, f"__{method.strip('_')}__", impl)


def _define_reflectable(method):
    name = f"__r{method.strip('_')}__"

    def impl(self, rhs):
        return self.tracer.create_proxy("call_function", getattr(operator, method),
                                        (rhs, self), {})
    impl.__name__ = impl.__qualname__ = name
    setattr(Proxy, name, impl)


# Set after the class statement, as torch does: defining __eq__ in the body would make Proxy
# unhashable, and Proxies are dict keys (tracer bookkeeping).
for _m in _codegen.magic_methods:
    if hasattr(operator, _m):
        _define_magic(_m)
for _m in _codegen.reflectable_magic_methods:
    if hasattr(operator, _m) and _m != "getitem":
        _define_reflectable(_m)
del _m
