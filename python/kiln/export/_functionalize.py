"""run_decompositions(): the exported graph made functional.

export() records in-place operations as the program runs them (`b_count.add_(1)`,
batch_norm updating its running statistics), as torch.export's default IR does. This pass
rewrites them as out-of-place operations whose results are graph outputs with kind
BUFFER_MUTATION (or USER_INPUT_MUTATION), torch's functional form:

- `base.op_(...)` -> `base.op(...)` (cast back to base's dtype when the arguments could
  promote it); copy_ -> kiln.export.copy, zero_ -> kiln.zeros_like, fill_ -> kiln.full_like;
  kiln.op_(base, ...) -> kiln.op(base, ...); f(base, ..., inplace=True) -> inplace=False;
- batch_norm in training mode with running statistics ->
  kiln.export._native_batch_norm_legit_functional, whose outputs 3 and 4 are the new
  running_mean / running_var;
- later uses of base read the new value.

A mutation is rewritten only when nothing else can see it through an alias: base must not be
a view nor have views taken of it (index assignment `x[i] = v`, metadata changes such as
unsqueeze_, `out=` arguments and parameter mutations stay as they are, and still run
correctly in place)."""
import copy as _copy
import inspect
import operator

from .. import _C
from ..fx.node import Node, _is_inplace_name, map_arg
from . import _ops
from ._signature import (ConstantArgument, InputKind, OutputKind, OutputSpec, SymIntArgument,
                         TensorArgument)

_VIEW_METHODS = frozenset("""view view_as reshape reshape_as flatten unflatten transpose
permute t squeeze unsqueeze expand expand_as narrow select chunk split split_with_sizes
tensor_split unbind diagonal as_strided unfold movedim moveaxis swapaxes swapdims detach
real imag view_as_real view_as_complex contiguous T mT H mH data __getitem__ to type type_as
float double half bfloat16 int long short bool cpu cuda xpu""".split())
_VIEW_FUNCTIONS = _VIEW_METHODS | {"getitem", "getattr"}

_KEEP_INPLACE = frozenset("""unsqueeze_ squeeze_ t_ transpose_ resize_ resize_as_
as_strided_ set_ detach_ requires_grad_ share_memory_ retain_grad_ swapaxes_ swapdims_
as_strided_scatter_""".split())


def _is_view(node):
    if node.op == "call_method":
        return node.target in _VIEW_METHODS
    if node.op == "call_function":
        name = getattr(node.target, "__name__", "")
        return name in _VIEW_FUNCTIONS
    return False


def _alias_groups(graph):
    parent = {}

    def find(n):
        while parent.get(n, n) is not n:
            n = parent[n]
        return n

    def union(a, b):
        ra, rb = find(a), find(b)
        if ra is not rb:
            parent[ra] = rb

    for node in graph.nodes:
        if _is_view(node) and node.args and isinstance(node.args[0], Node):
            union(node, node.args[0])
    sizes = {}
    for node in graph.nodes:
        r = find(node)
        sizes[r] = sizes.get(r, 0) + 1
    return {node for node in graph.nodes if sizes[find(node)] > 1}


def _promotes(node, base):
    """Whether base.op(...) may have another dtype than base (so a cast back is needed)."""
    val = base.meta.get("val")
    dtype = getattr(val, "dtype", None)
    if dtype is None:
        return True
    floating = dtype.is_floating_point if hasattr(dtype, "is_floating_point") else True
    for a in list(node.args[1:]) + list(node.kwargs.values()):
        if isinstance(a, Node):
            v = a.meta.get("val")
            if getattr(v, "dtype", dtype) != dtype and getattr(v, "shape", None) is not None:
                return True
        elif isinstance(a, float) and not floating:
            return True
        elif isinstance(a, complex):
            return True
    return False


def _batch_norm_args(node):
    from ..nn import functional as F
    try:
        bound = inspect.signature(F.batch_norm).bind(*node.args, **node.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    a = bound.arguments
    return a


def functionalize(ep):
    """(graph, output_specs) of ep with its mutations made outputs (see the module
    docstring)."""
    import kiln
    from ..nn import functional as F
    from ._trace import force_placeholder_name
    graph = _copy.deepcopy(ep.graph)
    for new, old in zip([n for n in graph.nodes if n.op == "placeholder"],
                        [n for n in ep.graph.nodes if n.op == "placeholder"]):
        force_placeholder_name(new, old.name)
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    aliased = _alias_groups(graph)
    current = {}

    def latest(n):
        seen = 0
        while n in current and seen < 10000:
            n = current[n]
            seen += 1
        return n

    for node in list(graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        if current:
            node.args = map_arg(node.args, latest)
            node.kwargs = map_arg(node.kwargs, latest)
        base = node.args[0] if node.args and isinstance(node.args[0], Node) else None
        if base is None or base in aliased or node in aliased:
            continue
        base_spec = specs.get(base.name) if base.op == "placeholder" else None
        if base.op == "placeholder" and (base_spec is None or base_spec.kind not in
                                         (InputKind.BUFFER, InputKind.USER_INPUT)):
            continue  # parameters and constants: left in place
        new = None
        if node.op == "call_method" and _is_inplace_name(node.target) and \
                node.target not in _KEEP_INPLACE:
            name = node.target[:-1]
            with graph.inserting_before(node):
                if node.target == "copy_" and len(node.args) >= 2:
                    new = graph.call_function(_ops.copy, (base, node.args[1]), name="copy")
                elif node.target == "zero_":
                    new = graph.call_function(kiln.zeros_like, (base,))
                elif node.target == "fill_" and len(node.args) == 2 and \
                        not isinstance(node.args[1], Node):
                    new = graph.call_function(kiln.full_like, (base, node.args[1]))
                elif hasattr(_C.Tensor, name) and not _is_inplace_name(name):
                    new = graph.call_method(name, node.args, dict(node.kwargs))
                    if _promotes(node, base) and getattr(base.meta.get("val"), "dtype",
                                                         None) is not None:
                        new = graph.call_method("to", (new, base.meta["val"].dtype))
        elif node.op == "call_function" and node.target is F.batch_norm:
            a = _batch_norm_args(node)
            if a is None or not a.get("training"):
                continue
            rm, rv = a.get("running_mean"), a.get("running_var")
            if not (isinstance(rm, Node) and isinstance(rv, Node)) or rm in aliased or \
                    rv in aliased:
                continue
            with graph.inserting_before(node):
                f = graph.call_function(
                    _ops._native_batch_norm_legit_functional,
                    (a["input"], a.get("weight"), a.get("bias"), rm, rv, True,
                     a.get("momentum", 0.1), a.get("eps", 1e-5)))
                gets = [graph.call_function(operator.getitem, (f, i)) for i in range(5)]
            for src in (f, *gets):
                src.meta = {"val": _bn_meta(node, rm, rv, src, gets)}
            node.replace_all_uses_with(gets[0])
            graph.erase_node(node)
            current[rm], current[rv] = gets[3], gets[4]
            continue
        elif node.op == "call_function":
            name = getattr(node.target, "__name__", "")
            if node.kwargs.get("inplace") is True:
                with graph.inserting_before(node):
                    new = graph.call_function(node.target, node.args,
                                              {**node.kwargs, "inplace": False})
            elif _is_inplace_name(name) and name not in _KEEP_INPLACE and \
                    getattr(kiln, name, None) is node.target and \
                    callable(getattr(kiln, name[:-1], None)):
                with graph.inserting_before(node):
                    new = graph.call_function(getattr(kiln, name[:-1]), node.args,
                                              dict(node.kwargs))
        if new is None:
            continue
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        current[base] = new

    out = graph.output_node
    user_vals = [latest(v) if isinstance(v, Node) else v for v in out.args[0]]
    mutations, mutation_specs = [], []
    for node in graph.nodes:
        if node.op != "placeholder" or node not in current:
            continue
        spec = specs[node.name]
        new = latest(node)
        if spec.kind == InputKind.BUFFER:
            mutation_specs.append(OutputSpec(OutputKind.BUFFER_MUTATION,
                                             TensorArgument(new.name), spec.target))
        else:
            mutation_specs.append(OutputSpec(OutputKind.USER_INPUT_MUTATION,
                                             TensorArgument(new.name), node.name))
        mutations.append(new)
    user_specs = []
    old_user = [s for s in ep.graph_signature.output_specs
                if s.kind not in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION)]
    old_mut = [s for s in ep.graph_signature.output_specs if s not in old_user]
    for spec, v in zip(old_user, user_vals[len(old_mut):]):
        if isinstance(spec.arg, ConstantArgument):
            user_specs.append(spec)
        else:
            cls = SymIntArgument if isinstance(spec.arg, SymIntArgument) else TensorArgument
            user_specs.append(OutputSpec(spec.kind, cls(v.name), spec.target))
    out.args = (tuple(mutations) + tuple(user_vals[len(old_mut):]),)
    graph, renamed = _renamed(graph)
    graph.eliminate_dead_code()
    graph.lint()
    for spec in mutation_specs + user_specs:
        if isinstance(spec.arg, (TensorArgument, SymIntArgument)) and spec.arg.name in renamed:
            spec.arg = type(spec.arg)(renamed[spec.arg.name])
    return graph, mutation_specs + user_specs


def _renamed(graph):
    """A copy of graph with its nodes named afresh in order (add, add_1, ...), as torch's
    run_decompositions re-traces: the names then follow the functional graph. Returns
    (graph, {old name: new name})."""
    from ..fx.graph import Graph
    from .._library.ops import OpOverload
    new = Graph()
    env, names = {}, {}
    for node in graph.nodes:
        if node.op == "placeholder":
            from ._trace import make_placeholder
            n = make_placeholder(new, node.name)
        else:
            name = None
            if node.op == "call_function" and isinstance(node.target, OpOverload):
                name = node.target._opname
            n = new.create_node(node.op, node.target, map_arg(node.args, lambda a: env[a]),
                                map_arg(node.kwargs, lambda a: env[a]), name=name)
        n.meta = dict(node.meta)
        env[node] = n
        names[node.name] = n.name
    return new, names


def _bn_meta(node, rm, rv, src, gets):
    from ._trace import TensorMeta
    out = node.meta.get("val")
    if src is gets[0]:
        return out
    if src is gets[3]:
        return rm.meta.get("val")
    if src is gets[4]:
        return rv.meta.get("val")
    if src in gets and isinstance(out, TensorMeta) and len(out.shape) > 1:
        return TensorMeta((out.shape[1],), out.dtype, out.device)
    return None
