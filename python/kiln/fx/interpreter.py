"""Interpreter and Transformer (torch.fx's): run a graph node by node in Python.

Interpreter.run executes each node with the method named by its op (placeholder, get_attr,
call_function, call_method, call_module, output), so a subclass changes how one kind of node
runs by overriding one method (ShapeProp records each result's shape this way). Values are
dropped from the environment after their last use, as in generated code.

Transformer runs the same methods on Proxies instead of values: the result is a new graph,
so overriding call_function (say) to emit a different call rewrites the graph."""
import inspect

from .graph import Graph
from .graph_module import GraphModule
from .node import map_aggregate, map_arg
from .proxy import Proxy
from ._symbolic_trace import Tracer

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Runs module.graph (or graph) on concrete values: Interpreter(gm).run(*inputs)."""

    def __init__(self, module, garbage_collect_values=True, graph=None):
        self.module = module
        self.submodules = dict(module.named_modules())
        if graph is not None:
            self.graph = graph
        else:
            self.graph = module.graph
        self.env = {}
        self.name = "Interpreter"
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        if garbage_collect_values:
            # walking backwards, the first use of a value met is its last use
            node_to_last_use, self.user_to_last_uses = {}, {}
            for node in reversed(self.graph.nodes):
                for n in node._input_nodes:
                    if n not in node_to_last_use:
                        node_to_last_use[n] = node
                        self.user_to_last_uses.setdefault(node, []).append(n)

    def run(self, *args, initial_env=None, enable_io_processing=True):
        """The graph's output for these inputs. initial_env: {Node: value} of nodes not to
        run (their values given)."""
        self.env = initial_env if initial_env is not None else {}
        if enable_io_processing:
            args = self.graph.process_inputs(*args)
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                if self.extra_traceback:
                    _name_node_in_error(e, node)
                raise
            if self.garbage_collect_values:
                for to_delete in self.user_to_last_uses.get(node, []):
                    del self.env[to_delete]
            if node.op == "output":
                output_val = self.env[node]
                return (self.graph.process_outputs(output_val) if enable_io_processing
                        else output_val)
        return None

    def boxed_run(self, args_list):
        """run with the inputs in a list that is cleared (so they can be freed early)."""
        args_iter = iter(args_list)
        env = {}
        for n in self.graph.nodes:
            if n.op == "placeholder":
                env[n] = next(args_iter)
        args_list.clear()
        return self.run(initial_env=env)

    def run_node(self, n):
        """One node: its arguments from the environment, then the method of its op."""
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # --- the ops ------------------------------------------------------------------------

    def placeholder(self, target, args, kwargs):
        if target.startswith("*"):
            # *args takes the remaining inputs
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration as si:
            if len(args) > 0:
                return args[0]  # the default value
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one "
                               "was not passed in!") from si

    def get_attr(self, target, args, kwargs):
        return self.fetch_attr(target)

    def call_function(self, target, args, kwargs):
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        self_obj, *args_tail = args
        return getattr(self_obj, target)(*args_tail, **kwargs)

    def call_module(self, target, args, kwargs):
        submod = self.fetch_attr(target)
        return submod(*args, **kwargs)

    def output(self, target, args, kwargs):
        return args[0]

    # --- helpers ------------------------------------------------------------------------

    def fetch_attr(self, target):
        """The object at dotted path target in self.module."""
        target_atoms = target.split(".")
        attr_itr = self.module
        for i, atom in enumerate(target_atoms):
            if not hasattr(attr_itr, atom):
                raise RuntimeError("Node referenced nonexistent target "
                                   f"{'.'.join(target_atoms[:i + 1])}")
            attr_itr = getattr(attr_itr, atom)
        return attr_itr

    def fetch_args_kwargs_from_env(self, n):
        args = self.map_nodes_to_values(n.args, n)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        return tuple(args), dict(kwargs)

    def map_nodes_to_values(self, args, n):
        def load_arg(n_arg):
            if n_arg not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {n_arg}! Run "
                                   "Graph.lint() to diagnose such issues")
            return self.env[n_arg]
        # plain containers: immutable_list / immutable_dict are for the graph only
        return _plain(map_arg(args, load_arg))


def _name_node_in_error(e, node):
    """Appends the failing node to the message, as torch does ("While executing %view :
    ..."); for exceptions whose message is not their first argument (KeyError shows its
    repr), a note says it instead."""
    where = f"While executing {node.format_node()}"
    if e.args and isinstance(e.args[0], str) and not isinstance(e, KeyError):
        e.args = (f"{e.args[0]}\n\n{where}",) + e.args[1:]
    else:
        e.add_note(where)


def _plain(a):
    if isinstance(a, list):
        return [_plain(x) for x in a]
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        return tuple(_plain(x) for x in a)
    if isinstance(a, dict):
        return {k: _plain(v) for k, v in a.items()}
    return a


class _TransformerTracer(Tracer):
    """Appends to the Transformer's new graph; every module stays a call_module."""

    def __init__(self, graph):
        super().__init__()
        self.graph = graph
        self.tensor_attrs = {}

    def is_leaf_module(self, _m, _name):
        return True


class Transformer(Interpreter):
    """Interpreter over Proxies: transform() returns a GraphModule of the graph the
    (overridden) methods produced. The defaults copy the graph."""

    def __init__(self, module):
        super().__init__(module)
        self.new_graph = Graph()
        self.new_graph.set_codegen(module.graph._codegen)
        self.tracer = _TransformerTracer(self.new_graph)
        self.tracer.root = module

    def placeholder(self, target, args, kwargs):
        default = next(iter(args)) if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default), self.tracer)

    def get_attr(self, target, args, kwargs):
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_module(self, target, args, kwargs):
        submod = self.fetch_attr(target)
        return self.tracer.call_module(submod, submod.forward, args, kwargs)

    def call_function(self, target, args, kwargs):
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def transform(self):
        """The transformed GraphModule."""
        result = super().run(enable_io_processing=False)
        if result is not None:
            def strip_proxy(a):
                return a.node if isinstance(a, Proxy) else a
            self.new_graph.output(map_aggregate(result, strip_proxy))
        return GraphModule(self.module, self.new_graph)
