"""Tracing for kiln.export: kiln.fx's symbolic tracing with values.

kiln.fx traces with Proxies that know nothing about the values they stand for, so Python
code that looks at shapes (`if input.dim() != 4`, `B, T, C = x.shape`) cannot run; torch.fx
keeps such modules as leaves. torch.export instead traces with fake tensors: every value has
a shape, static dimensions are plain ints and dynamic ones symbols. _ExportTracer does the
same with real values: every node it records is also computed, on copies of the example
inputs (the "primary world") and, when some dimensions are dynamic, on two more input sets
where each dynamic dimension has another size ("shadow worlds"). Then:

- every module is traced through (no leaves): parameters and buffers are graph inputs
  (placeholders p_<path> / b_<path>), other tensors lifted constants (c_<name>);
- `x.shape`, `x.size()`, `x.dim()`, `x.dtype` ... give concrete ints and objects, except a
  dimension whose size differs between the worlds: that one is an int Proxy of a
  `sym_size_int(x, d)` node, whose arithmetic is recorded, so the graph stays shape-generic;
- the symbolic expression of a dynamic size (s0, 2*s0, s0*s1 ...) is found by fitting its
  values across the worlds against the input symbols' values;
- bool() / int() of such a size is a guard: when every world agrees, the branch does not
  depend on the dynamic dimension and a runtime assertion is recorded (`_assert_scalar`);
  when they disagree the program specializes the dimension: an error for Dim / Dim.DYNAMIC,
  a retrace with the dimension static for Dim.AUTO;
- an op that fails in a shadow world only means the graph does not hold for other sizes
  (a static size baked in, two dims that must be equal): the same error / retrace;
- bool() / int() / .tolist() of a tensor is data-dependent control flow:
  GuardOnDataDependentSymNode, naming the line."""
import builtins
import inspect
import operator
import os
import sys

from .. import _C
from ..fx import _symbolic_trace as _st
from ..fx._patching import _autowrap_check, _kiln_rebinds, _patch_wrapped_functions, _Patcher
from ..fx.graph import Graph
from ..fx.node import Node
from ..fx.proxy import Attribute, Proxy, TracerBase, _install_protocol
from . import _ops
from ._dims import Dim, DimHint, Symbol, ValueRanges, int_oo
from ._errors import GuardOnDataDependentSymNode, UserError, UserErrorType
from ._pytree import leaf_paths, tree_flatten, tree_unflatten

Tensor = _C.Tensor

__all__ = ["trace_export", "TensorMeta", "SymMeta"]

_PRIMES = (5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79)

# Tensor attributes that are the same for every input of the exported shapes: read from the
# example value, not recorded (torch's fake tensors answer them the same way).
_STATIC_TENSOR_ATTRS = frozenset("""dtype device ndim is_cuda is_cpu is_meta is_xpu
is_sparse is_quantized is_mkldnn is_nested layout requires_grad is_leaf itemsize
names""".split())

_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INTERNAL_DIRS = tuple(os.path.join(_KILN_DIR, d) + os.sep for d in ("fx", "export"))


class _Specialize(BaseException):
    """Raised through the traced program (BaseException: its `except Exception` must not
    catch it) when Dim.AUTO symbols must become static; export() traces again."""

    def __init__(self, symbols):
        super().__init__()
        self.symbols = symbols


class TensorMeta:
    """node.meta["val"] of a tensor value: shape (ints, and strings such as "s0" for dynamic
    dimensions), dtype, device (what torch keeps as a FakeTensor)."""
    __slots__ = ("shape", "dtype", "device")

    def __init__(self, shape, dtype, device):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device

    def dim(self):
        return len(self.shape)

    def __repr__(self):
        from ..fx._codegen import _dtype_name, dtype_abbrs
        abbr = dtype_abbrs.get(_dtype_name(self.dtype), _dtype_name(self.dtype))
        return f"{abbr}[{', '.join(str(s) for s in self.shape)}]"


class SymMeta:
    """node.meta["val"] of a dynamic size (or a value computed from sizes): its expression in
    the input symbols ("s0", "2*s0") and its value for the example inputs."""
    __slots__ = ("expr", "hint")

    def __init__(self, expr, hint):
        self.expr, self.hint = expr, hint

    def __repr__(self):
        return f"Sym({self.expr})"


class _SymInfo:
    """A symbol of one export: its name (s0), where it comes from, its range and the size it
    has in each world."""

    def __init__(self, name, key, kind, dim_name, lo, hi, example):
        self.name, self.key, self.kind, self.dim_name = name, key, kind, dim_name
        self.lo, self.hi = lo, hi
        self.values = [example]
        self.sources = []  # "x.size()[0]"

    @property
    def label(self):
        return self.dim_name or (self.sources[0] if self.sources else self.name)


def _user_frame():
    """(filename, lineno, function, source line) of the innermost frame of the traced
    program: the first one outside kiln.fx / kiln.export."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_INTERNAL_DIRS) and \
                not os.path.basename(fn).startswith("_torch_function"):
            import linecache
            return fn, f.f_lineno, f.f_code.co_name, linecache.getline(fn, f.f_lineno).strip()
        f = f.f_back
    return None


def _where():
    frame = _user_frame()
    if frame is None:
        return ""
    fn, line, func, src = frame
    return (f"\n\nThe following call raised this error:\n  File \"{fn}\", line {line}, in "
            f"{func}\n    {src}")


# --- the proxy ------------------------------------------------------------------------------

class ExportProxy(Proxy):
    """A Proxy whose tracer knows its value (see the module docstring)."""

    def __getattr__(self, k):
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return self.tracer._proxy_getattr(self, k)

    def __iter__(self):
        return self.tracer._iter(self)

    def __len__(self):
        return self.tracer._len(self)

    def __bool__(self):
        return self.tracer.to_bool(self)

    def __int__(self):
        return self.tracer._to_int(self)

    __index__ = __int__

    def __float__(self):
        return self.tracer._to_float(self)

    def __setitem__(self, key, value):
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})

    def keys(self):
        return self.tracer._value(self).keys()


class _ExportAttribute(ExportProxy, Attribute):
    """proxy.attr not yet known to be a method or a value: kiln.fx's Attribute (called, it
    records call_method; used otherwise, a getattr node) with the export proxy's behaviour."""


class _SymShape(tuple):
    """x.shape with dynamic dimensions: a tuple of ints and int Proxies."""

    def numel(self):
        n = 1
        for s in self:
            n = n * s
        return n


# --- the tracer -----------------------------------------------------------------------------

def _materialize(a, w, vals):
    """a with every Node replaced by its value in world w (plain containers)."""
    if isinstance(a, Node):
        return vals[a][w]
    if isinstance(a, tuple):
        if hasattr(a, "_fields"):
            return type(a)(*(_materialize(e, w, vals) for e in a))
        return tuple(_materialize(e, w, vals) for e in a)
    if isinstance(a, list):
        return [_materialize(e, w, vals) for e in a]
    if isinstance(a, dict):
        return {k: _materialize(v, w, vals) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(_materialize(a.start, w, vals), _materialize(a.stop, w, vals),
                     _materialize(a.step, w, vals))
    return a


_OP_TEXT = {operator.add: "+", operator.sub: "-", operator.mul: "*",
            operator.floordiv: "//", operator.truediv: "/", operator.mod: "%",
            operator.pow: "**", operator.eq: "==", operator.ne: "!=", operator.lt: "<",
            operator.le: "<=", operator.gt: ">", operator.ge: ">="}


class _ExportTracer(_st.Tracer):
    """See the module docstring. One instance traces one export attempt."""
    proxy_buffer_attributes = True

    def __init__(self, nworlds, symbols):
        super().__init__()
        self.nworlds = nworlds
        self.symbols = symbols           # [_SymInfo], the dynamic ones
        self.vals = {}                   # Node -> [value per world]
        self.state_nodes = {}            # id(param / buffer) -> placeholder Node
        self.state_proxies = {}          # placeholder Node -> ExportProxy
        self.const_nodes = {}            # id(tensor) -> placeholder Node
        self.constants = {}              # target -> tensor (lifted constants)
        self.const_specs = []            # (node, target) in creation order
        self._const_keep = []            # keeps ids of lifted tensors unique
        self.first_user_placeholder = None
        self.sym_size_cache = {}
        self.guards_seen = set()
        self._lifted_count = 0

    # --- values ---------------------------------------------------------------------------

    def proxy(self, node):
        return ExportProxy(node, self)

    def _value(self, p):
        return self.vals[p.node][0]

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        if kind in ("call_module", "get_attr"):
            raise UserError(UserErrorType.UNSUPPORTED_FEATURE,
                            f"kiln.export: unexpected {kind} node for {target}")
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        if kind in ("call_function", "call_method"):
            self._compute(node)
        return node

    def _compute(self, node):
        inputs = node.all_input_nodes
        values = []
        for w in range(self.nworlds):
            args = _materialize(node.args, w, self.vals)
            kwargs = _materialize(node.kwargs, w, self.vals)
            try:
                if node.op == "call_function":
                    v = node.target(*args, **kwargs)
                else:
                    self_obj, *rest = args
                    v = getattr(self_obj, node.target)(*rest, **kwargs)
            except (_Specialize, UserError, GuardOnDataDependentSymNode):
                raise
            except Exception as e:  # noqa: BLE001
                if w == 0:
                    self._erase_failed(node)
                    if hasattr(e, "add_note"):
                        e.add_note(f"(kiln.export: while computing `{node.format_node()}`)")
                    raise
                self._shadow_failure(node, inputs, e, w)
            values.append(v)
        self.vals[node] = values
        unbacked = any(n.meta.get("unbacked") for n in inputs)
        if unbacked:
            node.meta["unbacked"] = True
        node.meta["val"] = self._meta_of(values, node, unbacked)
        own = node.meta.pop("_own_symbols", frozenset())
        free = set()
        for n in inputs:
            free |= n.meta.get("free_symbols", frozenset())
        if own and not isinstance(values[0], Tensor):
            free = set(own)  # a size that fits an expression depends on its symbols only
        node.meta["free_symbols"] = frozenset(free | set(own))

    def _erase_failed(self, node):
        try:
            node.graph.erase_node(node)
        except RuntimeError:
            pass

    def _meta_of(self, values, node, unbacked=False):
        v0 = values[0]
        if isinstance(v0, Tensor):
            shape, own = [], set()
            for d in range(v0.dim()):
                sizes = [v.shape[d] if isinstance(v, Tensor) and v.dim() == v0.dim()
                         else None for v in values]
                expr, syms = self._dim_expr(sizes)
                own |= syms
                shape.append(expr)
            node.meta["_own_symbols"] = frozenset(own)
            return TensorMeta(shape, v0.dtype, v0.device)
        if isinstance(v0, (bool, int, float)) and not isinstance(v0, Tensor):
            if unbacked:
                return SymMeta(f"u{node.name}", v0)
            if all(v == v0 for v in values):
                return SymMeta(repr(v0), v0)
            if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                expr, syms = self._dim_expr(values)
                node.meta["_own_symbols"] = frozenset(syms)
                return SymMeta(expr, v0)
            return SymMeta(self._expr_text(node), v0)
        if isinstance(v0, (tuple, list)) and v0 and all(isinstance(e, Tensor) for e in v0):
            return [self._meta_of([v[i] for v in values], node) for i in range(len(v0))]
        return None

    def _dim_expr(self, sizes):
        """(int or expression string, symbols in it) of one dimension across the worlds."""
        s0 = sizes[0]
        if all(s == s0 for s in sizes):
            return s0, set()
        if any(s is None for s in sizes):
            return "?", set(self.symbols)
        fit = self._fit(sizes)
        if fit is not None:
            return fit
        return "?", set(self.symbols)

    def _fit(self, sizes):
        syms = self.symbols
        n = len(sizes)
        for s in syms:
            if s.values == list(sizes):
                return s.name, {s}
        for s in syms:
            d = s.values[1] - s.values[0]
            if d == 0 or (sizes[1] - sizes[0]) % d:
                continue
            a = (sizes[1] - sizes[0]) // d
            b = sizes[0] - a * s.values[0]
            if a and all(a * s.values[w] + b == sizes[w] for w in range(n)):
                text = s.name if a == 1 else f"{a}*{s.name}"
                if b:
                    text += f" + {b}" if b > 0 else f" - {-b}"
                return text, {s}
        for s in syms:
            for k in {s.values[w] // sizes[w] for w in range(n) if sizes[w] > 0}:
                if k > 1 and all(s.values[w] // k == sizes[w] for w in range(n)):
                    return f"(({s.name})//{k})", {s}
        for i, s in enumerate(syms):
            for t in syms[i:]:
                prods = [s.values[w] * t.values[w] for w in range(n)]
                if prods[0] and sizes[0] % prods[0] == 0:
                    a = sizes[0] // prods[0]
                    if all(a * prods[w] == sizes[w] for w in range(n)):
                        text = f"{s.name}**2" if s is t else f"{s.name}*{t.name}"
                        return (text if a == 1 else f"{a}*{text}"), {s, t}
        return None

    def _expr_text(self, node, depth=0):
        """A readable expression for a size / condition node (for messages and meta)."""
        if not isinstance(node, Node):
            return repr(node)
        if depth > 8:
            return node.name
        val = node.meta.get("val")
        if node.target is _ops.sym_size_int:
            return str(val.expr) if isinstance(val, SymMeta) else node.name
        if node.op == "call_function" and node.target in _OP_TEXT and len(node.args) == 2:
            a, b = (self._expr_text(x, depth + 1) for x in node.args)
            return f"{a} {_OP_TEXT[node.target]} {b}"
        if node.op == "call_function" and node.target is operator.not_:
            return f"not ({self._expr_text(node.args[0], depth + 1)})"
        if isinstance(val, SymMeta):
            return str(val.expr)
        return node.name

    # --- state and constants -------------------------------------------------------------

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if isinstance(attr_val, Tensor):
            node = self.state_nodes.get(id(attr_val))
            if node is not None:
                return self._state_proxy(node)
        return attr_val

    def _state_proxy(self, node):
        p = self.state_proxies.get(node)
        if p is None:
            p = self.state_proxies[node] = self.proxy(node)
        return p

    def create_arg(self, a):
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, Tensor):
            node = self.state_nodes.get(id(a))
            if node is not None:
                return node
            return self._lift_constant(a)
        from ..nn import Module
        if isinstance(a, Module):
            raise UserError(UserErrorType.UNSUPPORTED_FEATURE,
                            f"kiln.export: a module ({type(a).__name__}) passed as an argument "
                            "to an operation cannot be exported" + _where())
        return TracerBase.create_arg(self, a)

    def _lift_constant(self, t):
        node = self.const_nodes.get(id(t))
        if node is not None:
            return node
        entry = self.tensor_attrs.get(id(t))
        if entry is not None:
            target = entry[1]
        else:
            target = f"lifted_tensor_{self._lifted_count}"
            self._lifted_count += 1
        name = "c_" + target.replace(".", "_")
        with self.graph.inserting_before(self.first_user_placeholder):
            node = make_placeholder(self.graph, name)
        value = t.detach()
        self.vals[node] = [value] * self.nworlds
        node.meta["val"] = self._meta_of(self.vals[node], node)
        node.meta.pop("_own_symbols", None)
        self.const_nodes[id(t)] = node
        self._const_keep.append(t)
        self.constants[target] = value
        self.const_specs.append((node, target))
        return node

    # --- modules ---------------------------------------------------------------------------

    def is_leaf_module(self, m, module_qualified_name):
        return False

    def call_module(self, m, forward, args, kwargs):
        path = self.submodule_paths.get(id(m)) if self.submodule_paths else None
        if path is None:  # a module that is not a submodule of the root: trace through
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    # --- recording, with what needs no node -------------------------------------------------

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                     proxy_factory_fn=None):
        if kind == "call_method" and target in _META_METHODS and args and \
                isinstance(args[0], ExportProxy) and isinstance(self._value(args[0]), Tensor):
            return _META_METHODS[target](self, args[0], *args[1:], **kwargs)
        if kind == "call_function":
            meta_name = _meta_function_name(target)
            if meta_name is not None and args and isinstance(args[0], ExportProxy) and \
                    isinstance(self._value(args[0]), Tensor):
                return _META_METHODS[meta_name](self, args[0], *args[1:], **kwargs)
            from .._library.ops import OpOverload, OpOverloadPacket
            if isinstance(target, OpOverloadPacket):
                overloads = target.overloads()
                if "default" in overloads or len(overloads) == 1:
                    target = getattr(target, "default" if "default" in overloads
                                     else overloads[0])
            if isinstance(target, (OpOverload, OpOverloadPacket)):
                name = getattr(target, "_opname", None) or target.__name__
        p = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        if kind == "call_method" and target == "item":
            p.node.meta["unbacked"] = True
            p.node.meta["val"] = SymMeta(f"u_{p.node.name}", self.vals[p.node][0])
        return p

    def _proxy_getattr(self, p, k):
        v = self._value(p)
        if isinstance(v, Tensor):
            if k == "shape":
                return self._sym_shape(p)
            if k in _STATIC_TENSOR_ATTRS:
                return getattr(v, k)
        return _ExportAttribute(p, k)

    def _sym_shape(self, p):
        node = p.node
        vals = self.vals[node]
        out = []
        for d in range(vals[0].dim()):
            sizes = [v.shape[d] for v in vals]
            if all(s == sizes[0] for s in sizes):
                out.append(sizes[0])
            else:
                out.append(self._sym_size(p, d))
        if all(isinstance(s, int) for s in out):
            from .. import Size
            return Size(out)
        return _SymShape(out)

    def _sym_size(self, p, d):
        key = (p.node, d)
        sp = self.sym_size_cache.get(key)
        if sp is None:
            sp = self.create_proxy("call_function", _ops.sym_size_int, (p, d), {},
                                   name="sym_size_int")
            self.sym_size_cache[key] = sp
        return sp

    # --- guards ------------------------------------------------------------------------------

    def _data_dependent(self, p, what):
        node = p.node
        raise GuardOnDataDependentSymNode(
            f"Could not guard on data-dependent expression {what}: `{node.name}` is computed "
            "from the values of the inputs, and an exported program is one graph for all "
            "input values, so Python control flow (if / while / bool / int / len) cannot depend "
            "on it. Rewrite the branch without reading tensor values (kiln.where, masking, "
            "arithmetic on both outcomes), or compute the condition outside the exported "
            "module." + _where(), node)

    def _concrete_values(self, p, kind):
        """The node's values in every world, refused (data-dependent) for a tensor or a
        value computed from one (bool(), int(), float() of it)."""
        node = p.node
        values = self.vals[node]
        if isinstance(values[0], Tensor):
            self._data_dependent(p, f"{kind}({node.name})")
        if node.meta.get("unbacked"):
            self._data_dependent(p, f"{kind}({self._expr_text(node)})")
        return node, values

    def to_bool(self, p):
        node, values = self._concrete_values(p, "bool")
        bs = [builtins.bool(v) for v in values]
        if all(b == bs[0] for b in bs):
            self._guard(p, bs[0])
            return bs[0]
        self._diverged(node, f"the condition `{self._expr_text(node)}`", bs)

    def _guard(self, p, result):
        node = p.node
        if not node.meta.get("free_symbols"):
            return
        expr = self._expr_text(node)
        key = (expr, result)
        if key in self.guards_seen:
            return
        self.guards_seen.add(key)
        cond = p if result else self.create_proxy("call_function", operator.not_, (p,), {})
        text = expr if result else f"not ({expr})"
        self.create_proxy("call_function", _ops._assert_scalar,
                          (cond, f"Runtime assertion failed for expression {text} on node "
                                 f"'{cond.node.name}'"), {})

    def _to_int(self, p, kind="int"):
        node, values = self._concrete_values(p, kind)
        conv = builtins.int if kind == "int" else builtins.float
        ints = [conv(v) for v in values]
        if all(i == ints[0] for i in ints):
            if node.meta.get("free_symbols"):
                eq = self.create_proxy("call_function", operator.eq, (p, values[0]), {})
                self._guard(eq, True)
            return ints[0]
        self._diverged(node, f"`{kind}({self._expr_text(node)})`", ints)

    def _to_float(self, p):
        return self._to_int(p, "float")

    def _len(self, p):
        v = self._value(p)
        if isinstance(v, Tensor):
            if v.dim() == 0:
                raise TypeError("len() of a 0-d tensor")
            sizes = [x.shape[0] for x in self.vals[p.node]]
            if all(s == sizes[0] for s in sizes):
                return sizes[0]
            self._diverged(p.node, f"`len({p.node.name})`", sizes)
        return len(v)

    def _iter(self, p):
        v = self._value(p)
        if isinstance(v, dict):
            return iter(list(v.keys()))
        if isinstance(v, (Tensor, tuple, list)):
            n = self._len(p)
            return iter([p[i] for i in range(n)])
        from ..fx.proxy import TraceError
        raise TraceError(f"kiln.export: cannot iterate over {node_desc(p.node)}")

    def _diverged(self, node, what, values):
        """The traced program decides something from a dynamic size: AUTO symbols become
        static (retrace); Dim / DYNAMIC ones are an error."""
        syms = set(node.meta.get("free_symbols", ())) or set(self.symbols)
        autos = {s for s in syms if s.kind == "auto"}
        if autos:
            raise _Specialize(autos)
        raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                        _constraint_message(syms, f"{what} gives {values[0]} for the example "
                                            f"inputs and {values[1]} for "
                                            f"{_other_sizes(syms, 1)}") + _where())

    def _shadow_failure(self, node, inputs, err, w):
        syms = set()
        for n in inputs:
            syms |= n.meta.get("free_symbols", frozenset())
        syms = syms or set(self.symbols)
        autos = {s for s in syms if s.kind == "auto"}
        if autos:
            raise _Specialize(autos)
        what = (f"`{node_desc(node)}` works for the example inputs but fails for "
                f"{_other_sizes(syms, w)} ({type(err).__name__}: {err})")
        raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                        _constraint_message(syms, what) + _where()) from err


def node_desc(node):
    """`name = target(args)` of a node, for messages."""
    args = [repr(a) for a in node.args] + [f"{k}={v!r}" for k, v in node.kwargs.items()]
    if node.op == "call_method":
        return f"{node.name} = {args[0]}.{node.target}({', '.join(args[1:])})"
    target = getattr(node.target, "__name__", node.target)
    module = getattr(node.target, "__module__", "") or ""
    if module in ("_operator", "operator"):
        target = f"operator.{target}"
    return f"{node.name} = {target}({', '.join(args)})"


def _other_sizes(syms, w):
    return ", ".join(f"{s.label} = {s.values[w]}" for s in sorted(syms, key=lambda s: s.name))


def _constraint_message(syms, what):
    names = ", ".join(s.label for s in sorted(syms, key=lambda s: s.name))
    lines = [f"Constraints violated ({names})! The exported program cannot stay dynamic in "
             f"these dimensions: {what}."]
    for s in sorted(syms, key=lambda s: s.name):
        src = " = " + s.sources[0] if s.sources and s.dim_name else ""
        hi = "int_oo" if s.hi is int_oo else s.hi
        if s.kind == "dynamic":
            lines.append(f"  - You marked {s.label}{src} as dynamic (Dim.DYNAMIC) but your code "
                         f"specializes it or relates it to other dimensions. Use Dim.AUTO or "
                         f"Dim.STATIC, or the same Dim for dimensions that must be equal.")
        else:
            lines.append(f"  - Not all values of {s.label}{src} in the specified range "
                         f"{s.lo} <= {s.label} <= {hi} are allowed by the program: narrow the "
                         "range, make it static, or use the same Dim for dimensions that must "
                         "be equal.")
    return "\n".join(lines)


# --- tensor queries answered from the value ---------------------------------------------------

def _same_in_worlds(tracer, p, fn, what):
    values = [fn(v) for v in tracer.vals[p.node]]
    if all(v == values[0] for v in values):
        return values[0]
    tracer._diverged(p.node, what, values)


def _m_size(tracer, p, dim=None):
    shape = tracer._sym_shape(p)
    if dim is None:
        return shape
    return shape[operator.index(dim)]


def _m_dim(tracer, p):
    return tracer._value(p).dim()


def _m_numel(tracer, p):
    shape = tracer._sym_shape(p)
    n = 1
    for s in shape:
        n = n * s
    return n


def _m_stride(tracer, p, dim=None):
    if dim is None:
        return _same_in_worlds(tracer, p, lambda v: tuple(v.stride()),
                               f"`{p.node.name}.stride()`")
    return _same_in_worlds(tracer, p, lambda v: v.stride(dim), f"`{p.node.name}.stride()`")


def _m_plain(name):
    def fn(tracer, p, *args, **kwargs):
        return _same_in_worlds(tracer, p, lambda v: getattr(v, name)(*args, **kwargs),
                               f"`{p.node.name}.{name}()`")
    return fn


def _m_data(name):
    def fn(tracer, p, *args, **kwargs):
        tracer._data_dependent(p, f"`{p.node.name}.{name}()`")
    return fn


_META_METHODS = {
    "size": _m_size, "dim": _m_dim, "ndimension": _m_dim, "numel": _m_numel,
    "nelement": _m_numel, "stride": _m_stride,
    **{n: _m_plain(n) for n in ("is_contiguous", "is_floating_point", "is_complex",
                                "is_signed", "element_size", "get_device", "storage_offset",
                                "is_pinned", "is_shared")},
    **{n: _m_data(n) for n in ("tolist", "numpy", "is_nonzero", "__array__")},
}


def _meta_function_name(target):
    """The _META_METHODS name of a kiln function that is one (kiln.numel), else None."""
    name = getattr(target, "__name__", None)
    if name not in _META_METHODS:
        return None
    import kiln
    if getattr(kiln, name, None) is target or getattr(Tensor, name, None) is target:
        return name
    return None


# --- dynamic_shapes ---------------------------------------------------------------------------

def _normalize_tensor_spec(spec, t, where):
    """{dim: Dim | DimHint | int} for one tensor input; None means all static."""
    if spec is None:
        return {}
    rank = t.dim()
    if isinstance(spec, dict):
        items = list(spec.items())
    elif isinstance(spec, (tuple, list)):
        if len(spec) != rank:
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"dynamic_shapes of {where}: expected a spec for each of its {rank} "
                            f"dimensions, got {len(spec)}")
        items = list(enumerate(spec))
    else:
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"dynamic_shapes of {where} must be None, a dict {{dim: Dim}} or a "
                        f"tuple with one entry per dimension, got {spec!r}")
    out = {}
    for d, s in items:
        if isinstance(d, bool) or not isinstance(d, int) or not -rank <= d < rank:
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"dynamic_shapes of {where}: dimension {d!r} is out of range for a "
                            f"tensor with {rank} dimensions")
        d %= rank
        if s is None or s == Dim.STATIC:
            continue
        if isinstance(s, bool) or not isinstance(s, (Dim, DimHint, int)):
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"dynamic_shapes of {where}[{d}]: expected a Dim, Dim.AUTO / "
                            f"STATIC / DYNAMIC, an int or None, got {s!r}")
        size = t.shape[d]
        if isinstance(s, int):
            if s != size:
                raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                f"dynamic_shapes of {where}[{d}] is {s} but the example input "
                                f"has size {size}")
            continue
        if isinstance(s, Dim) and size not in ValueRanges(s.min, s.max):
            raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                            f"Constraints violated ({s.__name__})! The example input {where} "
                            f"has size {size} in dimension {d}, outside the range "
                            f"{s.min} <= {s.__name__} <= {s.max} of {s!r}")
        out[d] = s
    return out


def _leaf_specs(value, spec, where, out):
    """Appends, in tree_flatten's leaf order, the dim spec of each leaf of value."""
    if isinstance(value, Tensor):
        out.append(_normalize_tensor_spec(spec, value, where))
        return
    if value is None:
        return
    if isinstance(value, (tuple, list)):
        if spec is not None and (not isinstance(spec, (tuple, list)) or
                                 len(spec) != len(value)):
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"dynamic_shapes of {where} must mirror it: a {type(value).__name__}"
                            f" of {len(value)}, got {spec!r}")
        for i, v in enumerate(value):
            _leaf_specs(v, None if spec is None else spec[i], f"{where}[{i}]", out)
        return
    if isinstance(value, dict):
        if spec is not None and (not isinstance(spec, dict) or set(spec) != set(value)):
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"dynamic_shapes of {where} must mirror it: a dict with keys "
                            f"{list(value)}, got {spec!r}")
        for k, v in value.items():
            _leaf_specs(v, None if spec is None else spec[k], f"{where}[{k!r}]", out)
        return
    if spec is not None:
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"dynamic_shapes of {where}: {type(value).__name__} inputs are "
                        f"specialized to their value; give None, not {spec!r}")
    out.append(None)


def _dim_specs(sig, args, kwargs, dynamic_shapes):
    """The dim spec of each flat input leaf (flatten order of (args, kwargs))."""
    names = _positional_names(sig, len(args))
    if dynamic_shapes is None:
        per_arg = [None] * len(args)
        per_kw = {k: None for k in kwargs}
    elif isinstance(dynamic_shapes, dict):
        known = set(names) | set(kwargs)
        varargs = [p.name for p in sig.parameters.values()
                   if p.kind == inspect.Parameter.VAR_POSITIONAL]
        extra = set(dynamic_shapes) - known - set(varargs)
        if extra:
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"dynamic_shapes has keys {sorted(map(str, extra))} that are not "
                            f"inputs of the call (inputs: {sorted(known)})")
        per_arg = []
        for i, n in enumerate(names):
            if n.startswith("*"):  # *args: its spec is a tuple over the extra arguments
                vname, j = n[1:].split("#")
                vs = dynamic_shapes.get(vname)
                per_arg.append(None if vs is None else vs[int(j)])
            else:
                per_arg.append(dynamic_shapes.get(n))
        per_kw = {k: dynamic_shapes.get(k) for k in kwargs}
    elif isinstance(dynamic_shapes, (tuple, list)):
        total = len(args) + len(kwargs)
        if len(dynamic_shapes) not in (len(args), total):
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"dynamic_shapes has {len(dynamic_shapes)} entries for "
                            f"{len(args)} positional and {len(kwargs)} keyword inputs")
        per_arg = list(dynamic_shapes[:len(args)])
        rest = list(dynamic_shapes[len(args):]) or [None] * len(kwargs)
        per_kw = dict(zip(kwargs, rest))
    else:
        raise UserError(UserErrorType.INVALID_INPUT,
                        "dynamic_shapes must be None, a dict keyed by input name or a tuple "
                        f"mirroring the inputs, got {type(dynamic_shapes).__name__}")
    out = []
    for i, a in enumerate(args):
        _leaf_specs(a, per_arg[i], _display_name(names[i]), out)
    for k, v in kwargs.items():
        _leaf_specs(v, per_kw[k], k, out)
    return out


def _positional_names(sig, n):
    """The parameter name each of n positional arguments binds to ("*args#2" for the third
    extra argument of *args)."""
    names = []
    params = [p for p in sig.parameters.values()]
    i = 0
    for p in params:
        if len(names) == n:
            break
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == inspect.Parameter.VAR_POSITIONAL:
            while len(names) < n:
                names.append(f"*{p.name}#{i}")
                i += 1
    while len(names) < n:
        names.append(f"arg{len(names)}")
    return names


def _display_name(n):
    if n.startswith("*"):
        base, j = n[1:].split("#")
        return f"{base}_{j}"
    return n


def _sanitize(name):
    import keyword
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in str(name))
    if not out or out[0].isdigit():
        out = "_" + out
    if keyword.iskeyword(out):
        out += "_"
    return out


def force_placeholder_name(node, name):
    """Names a placeholder `name` although kiln.fx's namespace would avoid a builtin's name
    (`input` -> `input_1`): torch.export keeps the parameter's name. Generated code still
    renames the variable; the node, the signature and the saved form use `name`."""
    if node.name == name:
        return node
    ns = node.graph._graph_namespace
    if name in ns._used_names and name != node.name:
        if any(n.name == name for n in node.graph.nodes if n is not node):
            return node
    ns._used_names.add(name)
    node.name = name
    if node.op == "placeholder":
        node.target = name
    return node


def make_placeholder(graph, name):
    node = Graph.create_node(graph, "placeholder", name, name=name)
    node.target = node.name
    return force_placeholder_name(node, name)


def _leaf_names(sig, args, kwargs, spec):
    """Placeholder names of the flat inputs, torch's: the parameter name, then the path
    inside it (xs_0, d_key); keyword inputs by their key."""
    names = _positional_names(sig, len(args))
    out = []
    for path in leaf_paths(spec):
        if path[0] == 0:
            head = _display_name(names[path[1]])
        else:
            head = str(path[1])
        rest = [str(p) for p in path[2:]]
        out.append(_sanitize("_".join([head] + rest)))
    return out


# --- the export ---------------------------------------------------------------------------------

class TraceResult:
    """What trace_export hands to the ExportedProgram."""


def _pick_shadow_values(v, lo, hi, k):
    chosen = []
    lo2 = max(lo, 2)
    for j in (2 * k, 2 * k + 1):
        d = _PRIMES[j % len(_PRIMES)] + (j // len(_PRIMES)) * 2
        for c in (v + d, v - d):
            if lo2 <= c and (hi is int_oo or c <= hi) and c != v and c not in chosen:
                chosen.append(c)
                break
    top = v + 200 if hi is int_oo else min(hi, v + 200)
    c = lo2
    while len(chosen) < 2 and c <= top:
        if c != v and c not in chosen:
            chosen.append(c)
        c += 1
    for c in (1, 0):
        if len(chosen) < 2 and lo <= c and c != v and c not in chosen and \
                (hi is int_oo or c <= hi):
            chosen.append(c)
    if not chosen:
        return None
    if len(chosen) == 1:
        chosen.append(chosen[0])
    return chosen


def _shadow_tensor(t, dims_sizes):
    """t resized along dynamic dims by repeating its own entries (so that integer inputs,
    token ids, stay valid values)."""
    import kiln
    out = t
    for d, n in dims_sizes:
        cur = out.shape[d]
        if cur == 0:
            shape = list(out.shape)
            shape[d] = n
            out = kiln.zeros(shape, dtype=out.dtype, device=out.device)
            continue
        idx = kiln.arange(n, device=out.device) % cur
        out = out.index_select(d, idx)
    return out.clone()


def trace_export(mod, args, kwargs, dynamic_shapes, forced_static):
    """One export attempt: the graph with lifted state, its signature pieces and the input
    checks. forced_static: keys of Dim.AUTO symbols to keep static."""
    from ..nn import Module
    if not isinstance(mod, Module):
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"kiln.export.export expects a kiln.nn.Module, got {type(mod).__name__}")
    sig = inspect.signature(mod.forward)
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"the example inputs do not match {type(mod).__name__}.forward: {e}") \
            from None
    leaves, in_spec = tree_flatten((tuple(args), dict(kwargs)))
    leaf_specs = _dim_specs(sig, args, kwargs, dynamic_shapes)
    names = _leaf_names(sig, args, kwargs, in_spec)
    assert len(leaf_specs) == len(leaves) == len(names)
    for leaf, name in zip(leaves, names):
        if not isinstance(leaf, (Tensor, bool, int, float, str)):
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"kiln.export: input {name} of type {type(leaf).__name__} is not "
                            "supported (tensors, numbers, strings, None and tuples / lists / "
                            "dicts of them are)")

    # symbols: one per Dim name; AUTO / DYNAMIC dims share one per (kind, example size)
    symbols, by_key = [], {}
    leaf_dims = []  # per leaf: {dim: _SymInfo}
    for leaf, spec, name in zip(leaves, leaf_specs, names):
        dims = {}
        for d, s in (spec or {}).items():
            size = leaf.shape[d]
            if isinstance(s, Dim):
                key = ("dim", s.__name__)
                kind, dim_name, lo, hi = "named", s.__name__, s.min, s.max
            else:
                kind = "auto" if s == Dim.AUTO else "dynamic"
                key = (kind, size)
                dim_name, lo, hi = None, 0, int_oo
            if key in forced_static:
                continue
            info = by_key.get(key)
            if info is None:
                info = _SymInfo(f"s{len(symbols)}", key, kind, dim_name, lo, hi, size)
                by_key[key] = info
                symbols.append(info)
            else:
                if isinstance(s, Dim) and (info.lo, info.hi) != (s.min, s.max):
                    raise UserError(UserErrorType.INVALID_INPUT,
                                    f"two Dims named {s.__name__} with different ranges")
                if info.values[0] != size:
                    raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                    f"Constraints violated ({info.label})! {name}.size()[{d}] "
                                    f"= {size} but {info.sources[0]} = {info.values[0]}, and "
                                    f"both are {info.label}: dimensions that share a Dim must "
                                    "have the same size")
            info.sources.append(f"{name}.size()[{d}]")
            dims[d] = info
        leaf_dims.append(dims)
    dynamic = []
    for k, info in enumerate(symbols):
        shadow = _pick_shadow_values(info.values[0], info.lo, info.hi, k)
        if shadow is None:  # a range of one value
            for dims in leaf_dims:
                for d in [d for d, i in dims.items() if i is info]:
                    del dims[d]
            continue
        info.values += shadow
        dynamic.append(info)
    for k, info in enumerate(dynamic):
        info.name = f"s{k}"
    nworlds = 3 if dynamic else 1

    tracer = _ExportTracer(nworlds, dynamic)
    graph = tracer.graph = Graph()
    tracer.root = mod
    tracer.root_module_name = mod._get_name()
    tracer.submodule_paths = {id(m): n for n, m in mod.named_modules()}
    tracer.tensor_attrs = {}
    tracer._collect_tensor_attrs(mod, [])

    # placeholders: parameters, buffers (constants are inserted before the user inputs as
    # they are met), user inputs
    input_specs = []  # (node, kind, target, persistent)
    non_persistent = set()
    for mname, m in mod.named_modules():
        for b in getattr(m, "_non_persistent_buffers_set", ()):
            non_persistent.add(f"{mname}.{b}" if mname else b)
    for pname, param in mod.named_parameters():
        node = make_placeholder(graph, _sanitize("p_" + pname))
        tracer.vals[node] = [param.detach()] * nworlds
        node.meta["val"] = tracer._meta_of(tracer.vals[node], node)
        tracer.state_nodes[id(param)] = node
        input_specs.append((node, "PARAMETER", pname, None))
    for bname, buf in mod.named_buffers():
        node = make_placeholder(graph, _sanitize("b_" + bname))
        tracer.vals[node] = [buf.detach().clone() for _ in range(nworlds)]
        node.meta["val"] = tracer._meta_of(tracer.vals[node], node)
        tracer.state_nodes[id(buf)] = node
        input_specs.append((node, "BUFFER", bname, bname not in non_persistent))
    user_nodes, user_values = [], []
    input_checks = []
    for i, (leaf, name, dims) in enumerate(zip(leaves, names, leaf_dims)):
        node = make_placeholder(graph, name)
        if tracer.first_user_placeholder is None:
            tracer.first_user_placeholder = node
        if isinstance(leaf, Tensor):
            primary = leaf.detach().clone()
            vals = [primary]
            for w in range(1, nworlds):
                vals.append(_shadow_tensor(primary, [(d, s.values[w]) for d, s in
                                                     sorted(dims.items())]))
            tracer.vals[node] = vals
            node.meta["val"] = tracer._meta_of(vals, node)
            node.meta["free_symbols"] = frozenset(node.meta.pop("_own_symbols", ()))
            user_values.append(tracer.proxy(node))
            input_checks.append({"name": node.name, "kind": "tensor",
                                 "shape": [dims[d].name if d in dims else leaf.shape[d]
                                           for d in range(leaf.dim())],
                                 "dtype": str(leaf.dtype).split(".")[-1]})
        else:
            tracer.vals[node] = [leaf] * nworlds
            user_values.append(leaf)
            input_checks.append({"name": node.name, "kind": "constant", "value": leaf})
        user_nodes.append(node)
    if tracer.first_user_placeholder is None:
        # no user inputs: constants go at the end of the placeholders
        anchor = Graph.create_node(graph, "placeholder", "_kiln_anchor", name="_kiln_anchor")
        tracer.first_user_placeholder = anchor
    else:
        anchor = None
    call_args, call_kwargs = tree_unflatten(user_values, in_spec)

    global_flag = _st._is_fx_tracing_flag
    _install_protocol()
    _st._is_fx_tracing_flag = True
    try:
        with _Patcher() as patcher:
            tracer._patch_modules(patcher)
            _patch_setattr(tracer, patcher)
            _patch_private_functionals(tracer, patcher)
            _patch_wrapped_functions(patcher)
            rebinds = _kiln_rebinds()
            tracer._rebinds = rebinds
            fwd = getattr(type(mod).forward, "__globals__", {})
            _autowrap_check(patcher, fwd, tracer._autowrap_function_ids, rebinds)
            for module in tracer._autowrap_search:
                _autowrap_check(patcher, module.__dict__, tracer._autowrap_function_ids,
                                rebinds)
            result = mod(*call_args, **call_kwargs)
    finally:
        _st._is_fx_tracing_flag = global_flag
    if anchor is not None:
        graph.erase_node(anchor)
        tracer.first_user_placeholder = None

    out_leaves, out_spec = tree_flatten(result)
    out_args, output_specs = [], []
    for leaf in out_leaves:
        if isinstance(leaf, Proxy):
            node = leaf.node
            kind = "sym" if isinstance(node.meta.get("val"), SymMeta) else "tensor"
            out_args.append(node)
            output_specs.append((kind, node))
        elif isinstance(leaf, Tensor):
            node = tracer.create_arg(leaf)
            out_args.append(node)
            output_specs.append(("tensor", node))
        elif leaf is None or isinstance(leaf, (bool, int, float, str)):
            out_args.append(leaf)
            output_specs.append(("constant", leaf))
        else:
            raise UserError(UserErrorType.INVALID_OUTPUT,
                            f"kiln.export: an output of type {type(leaf).__name__} is not "
                            "supported (tensors, numbers, strings and tuples / lists / dicts "
                            "of them are)")
    Graph.create_node(graph, "output", "output", (tuple(out_args),))
    graph.eliminate_dead_code()

    for node, target in tracer.const_specs:
        input_specs.append((node, "CONSTANT_TENSOR", target, None))
    for node in user_nodes:
        input_specs.append((node, "USER_INPUT", None, None))
    for node in graph.nodes:  # values are not kept; their metadata is
        node.meta.pop("free_symbols", None)
        node.meta.pop("unbacked", None)

    res = TraceResult()
    res.graph = graph
    res.input_specs = input_specs
    res.output_specs = output_specs
    res.in_spec, res.out_spec = in_spec, out_spec
    res.input_checks = input_checks
    res.input_leaves = leaves
    res.user_input_constants = {n.name: v for n, v in zip(user_nodes, leaves)
                                if not isinstance(v, Tensor)}
    res.constants = dict(tracer.constants)
    res.symbols = {Symbol(s.name): ValueRanges(s.lo, s.hi) for s in dynamic}
    res.symbol_info = {s.name: {"min": s.lo, "max": None if s.hi is int_oo else s.hi,
                                "dim": s.dim_name, "sources": list(s.sources)}
                       for s in dynamic}
    res.signature = _signature_of_forward(sig)
    res.n_args = len(args)
    res.kwarg_names = list(kwargs)
    return res


def _signature_of_forward(sig):
    return [[p.name, p.kind.name] for p in sig.parameters.values()]


def _has_proxy(values, depth=0):
    for v in values:
        if isinstance(v, Proxy):
            return True
        if depth < 2 and isinstance(v, (list, tuple)) and _has_proxy(v, depth + 1):
            return True
    return False


def _patch_private_functionals(tracer, patcher):
    """kiln.nn's modules reach some kernels through functions kiln's __torch_function__
    protocol does not cover: kiln.nn.functional._conv / _conv_transpose / _max_pool /
    _avg_pool (private helpers taking the dimension count first) and kiln._C._nn's bindings
    (the recurrent layers' _nn.rnn). During the trace a call of one with Proxies goes to the
    public conv<nd>d / conv_transpose<nd>d / max_pool<nd>d / avg_pool<nd>d, which records one
    node (torch's conv2d, max_pool2d), and a _C._nn call is recorded as a node of that
    binding. Module attributes holding a kiln function bound before the protocol was
    installed (TransformerEncoderLayer's activation=F.relu default) are rebound to the
    dispatching wrapper, as kiln.fx does for module globals."""
    from .. import _C
    from ..nn import functional as F
    redirects = {
        "_conv": lambda nd, *a: getattr(F, f"conv{nd}d")(*a),
        "_conv_transpose": lambda nd, *a: getattr(F, f"conv_transpose{nd}d")(*a),
        "_max_pool": lambda nd, *a: getattr(F, f"max_pool{nd}d")(*a),
        "_avg_pool": lambda nd, *a: getattr(F, f"avg_pool{nd}d")(*a),
    }
    for name, public in redirects.items():
        orig = F.__dict__.get(name)
        if orig is None:
            continue

        def make(orig, public):
            def redirected(nd, *args, **kwargs):
                if _has_proxy(args) or _has_proxy(kwargs.values()):
                    return public(nd, *args, **kwargs)
                return orig(nd, *args, **kwargs)
            return redirected
        patcher.patch(F.__dict__, name, make(orig, public))

    nn_bindings = _C._nn
    for name, orig in list(vars(nn_bindings).items()):
        if name.startswith("_") or not callable(orig) or isinstance(orig, type):
            continue

        def make_recorder(orig):
            def recorder(*args, **kwargs):
                if _has_proxy(args) or _has_proxy(kwargs.values()):
                    return tracer.create_proxy("call_function", orig, args, kwargs)
                return orig(*args, **kwargs)
            return recorder
        patcher.patch(nn_bindings.__dict__, name, make_recorder(orig))

    rebinds = _kiln_rebinds()
    for _, m in tracer.root.named_modules():
        for k, v in list(m.__dict__.items()):
            if not k.startswith("_") and callable(v) and id(v) in rebinds:
                patcher.patch(m.__dict__, k, rebinds[id(v)])


def _patch_setattr(tracer, patcher):
    """`self.buf = value` during the trace: recorded as an in-place copy into the buffer, as
    torch.export treats buffer assignment (run_decompositions makes it a BUFFER_MUTATION)."""
    from ..nn import Module
    orig_setattr = Module.__setattr__

    def setattr_wrapper(mod, name, value):
        buffers = mod.__dict__.get("_buffers")
        if isinstance(value, Proxy) and buffers is not None and name in buffers and \
                buffers[name] is not None:
            node = tracer.state_nodes.get(id(buffers[name]))
            if node is not None:
                tracer.create_proxy("call_method", "copy_", (tracer._state_proxy(node), value),
                                    {})
                return None
        return orig_setattr(mod, name, value)

    patcher.patch_method(Module, "__setattr__", setattr_wrapper)
