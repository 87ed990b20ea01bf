"""kiln.fx.Graph: an ordered list of Nodes forming one function, as torch.fx.Graph.

Nodes are created at the insert point (the end, unless `inserting_before(n)` /
`inserting_after(n)` moved it), named uniquely from their target, and erased only when
nothing uses them. str(graph) prints the IR in torch's format; python_code turns the graph
into the source a GraphModule runs."""
import copy
import inspect
import warnings

from . import _codegen
from ._namespace import _Namespace, _is_magic, _snake_case
from .immutable_collections import immutable_dict
from .node import Node, _legal_ops, map_arg

__all__ = ["Graph", "PythonCode", "CodeGen"]

PythonCode = _codegen.PythonCode
CodeGen = _codegen.CodeGen


class _InsertPoint:
    """Sets the graph's insert point for a with-block (or for good, without one)."""

    def __init__(self, graph, new_insert):
        self.graph = graph
        self.orig_insert, graph._insert = graph._insert, new_insert

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        self.graph._insert = self.orig_insert


class _node_list:
    """graph.nodes: a live view of the linked list. Iteration skips erased nodes and goes on
    from an erased node's old successor, so a pass may erase the node it is looking at."""

    def __init__(self, graph, direction="_next"):
        self.graph, self.direction = graph, direction

    def __len__(self):
        return self.graph._len

    def __iter__(self):
        root = self.graph._root
        cur = getattr(root, self.direction)
        while cur is not root:
            if not cur._erased:
                yield cur
            cur = getattr(cur, self.direction)

    def __reversed__(self):
        return iter(_node_list(self.graph, "_prev" if self.direction == "_next" else "_next"))


class Graph:
    """The IR of kiln.fx: see the module docstring and Node's for the op kinds."""

    def __init__(self, owning_module=None, tracer_cls=None, tracer_extras=None):
        self._root = Node(self, "", "root", "", (), {})
        self._used_names = {}
        self._insert = self._root.prepend
        self._len = 0
        self._graph_namespace = _Namespace()
        self._owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._tracer_extras = tracer_extras
        self._codegen = CodeGen()
        self._co_fields = {}

    @property
    def owning_module(self):
        return self._owning_module

    @owning_module.setter
    def owning_module(self, mod):
        self._owning_module = mod

    @property
    def nodes(self):
        return _node_list(self)

    @property
    def output_node(self):
        for node in reversed(self.nodes):
            if node.op == "output":
                return node
        raise RuntimeError("Graph has no output node")

    def find_nodes(self, *, op, target=None, sort=True):
        """The nodes with this op (and target, when given), in graph order (sort is accepted
        for torch's signature: the order is always the graph's)."""
        return [n for n in self.nodes
                if n.op == op and (target is None or n.target == target)]

    # --- copying ------------------------------------------------------------------------

    def graph_copy(self, g, val_map, return_output_node=False):
        """Copies g's nodes into self (val_map: g's nodes -> self's, filled in as it goes);
        returns the copied output value (or output node) instead of appending an output."""
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                rv = map_arg(node.args[0], lambda n: val_map[n])
                return rv if not return_output_node else (rv, node)
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    def __deepcopy__(self, memo=None):
        memo = memo if memo else {}
        g = Graph(tracer_cls=self._tracer_cls)
        output_vals = g.graph_copy(self, val_map=memo, return_output_node=True)
        g._codegen = copy.deepcopy(self._codegen)
        if output_vals is not None:
            output_val, old_output = output_vals
            new_output = g.output(output_val, type_expr=getattr(old_output, "type", None))
            new_output.meta = copy.copy(old_output.meta)
        return g

    # --- creating and erasing nodes -----------------------------------------------------

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        """A new node at the insert point, named from name or else from its target."""
        args = () if not args else args
        if not isinstance(args, tuple):
            raise AssertionError(f"args must be a tuple, got {type(args)}")
        kwargs = immutable_dict() if not kwargs else kwargs
        if not isinstance(kwargs, dict):
            raise AssertionError(f"kwargs must be a dict, got {type(kwargs)}")
        if op not in _legal_ops or op == "root":
            raise AssertionError(f"op '{op}' is not in _legal_ops")
        candidate = name if name is not None else self._target_to_str(target)
        name = self._graph_namespace.create_name(candidate, None)
        n = Node(self, name, op, target, args, kwargs, type_expr)
        self._graph_namespace.associate_name_with_obj(name, n)
        self._insert(n)
        self._len += 1
        return n

    def erase_node(self, to_erase):
        """Removes a node nothing uses any more (RuntimeError otherwise)."""
        if len(to_erase.users) > 0:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had "
                               f"{len(to_erase.users)} users in the graph: {to_erase.users}!")
        if to_erase.graph is not self:
            raise RuntimeError(f"Attempting to remove {to_erase} from wrong graph!")
        if to_erase._erased:
            warnings.warn(f"erase_node({to_erase}) on an already erased node")
            return
        to_erase._remove_from_list()
        to_erase._erased = True  # iterators may still hold it
        self._len -= 1
        # drop it from its inputs' users
        to_erase._update_args_kwargs(map_arg(to_erase._args, lambda n: None),
                                     map_arg(to_erase._kwargs, lambda n: None))

    def inserting_before(self, n=None):
        """Insert point before n (the graph's start if None). As in torch, nodes created
        under inserting_after(n) each go right after n, so several end up in reverse order."""
        if n is None:
            return self.inserting_after(self._root)
        if n.graph is not self:
            raise AssertionError("Node to insert before is not in graph.")
        return _InsertPoint(self, n.prepend)

    def inserting_after(self, n=None):
        if n is None:
            return self.inserting_before(self._root)
        if n.graph is not self:
            raise AssertionError("Node to insert after is not in graph.")
        return _InsertPoint(self, n.append)

    def placeholder(self, name, type_expr=None, default_value=inspect.Signature.empty):
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args=args, type_expr=type_expr)

    def get_attr(self, qualified_name, type_expr=None):
        """A get_attr node; warns when the owning module has no such attribute."""
        owner = self.owning_module
        if owner is not None and not _has_attr_path(owner, qualified_name):
            warnings.warn("Attempted to insert a get_attr Node with no underlying reference "
                          "in the owning GraphModule! Call GraphModule.add_submodule to add "
                          "the necessary submodule, GraphModule.add_parameter to add the "
                          "necessary Parameter, or nn.Module.register_buffer to add the "
                          "necessary buffer", stacklevel=2)
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name, args=None, kwargs=None, type_expr=None):
        owner = self.owning_module
        if owner is not None and not _has_attr_path(owner, module_name):
            warnings.warn("Attempted to insert a call_module Node with no underlying module "
                          "in the owning GraphModule! Call GraphModule.add_submodule to add "
                          "the necessary submodule", stacklevel=2)
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name, args=None, kwargs=None, type_expr=None):
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function, args=None, kwargs=None, type_expr=None, name=None):
        return self.create_node("call_function", the_function, args, kwargs, name=name,
                                type_expr=type_expr)

    def node_copy(self, node, arg_transform=lambda x: x):
        """A copy of node (from any graph) at the insert point; arg_transform maps its input
        nodes to nodes of this graph."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        result = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        result.meta = copy.copy(node.meta)
        return result

    def output(self, result, type_expr=None):
        return self.create_node(op="output", target="output", args=(result,),
                                type_expr=type_expr)

    def _target_to_str(self, target):
        if callable(target):
            op = target.__name__
        else:
            op = target
            if _is_magic(op):
                op = op[2:-2]
        return _snake_case(op)

    # --- code and printing --------------------------------------------------------------

    def python_code(self, root_module, *, verbose=False):
        """PythonCode(src, globals) of this graph as a function taking root_module first."""
        return _codegen.python_code(self, root_module, verbose=verbose)

    def set_codegen(self, codegen):
        self._codegen = codegen

    def process_inputs(self, *args):
        return self._codegen.process_inputs(*args)

    def process_outputs(self, out):
        return self._codegen.process_outputs(out)

    def __str__(self):
        placeholder_names, maybe_return_typename = [], [""]
        node_strs = [node.format_node(placeholder_names) for node in self.nodes]
        s = f"graph({', '.join(placeholder_names)}){maybe_return_typename[0]}:"
        for node_str in node_strs:
            if node_str:
                s += "\n    " + node_str
        return s

    def print_tabular(self):
        """Prints opcode / name / target / args / kwargs per node (tabulate's 'simple' layout,
        without needing tabulate)."""
        headers = ["opcode", "name", "target", "args", "kwargs"]
        rows = [[str(n.op), str(n.name), str(n.target), str(n.args), str(n.kwargs)]
                for n in self.nodes]
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
                 "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        print("\n".join(lines))

    # --- checks and passes --------------------------------------------------------------

    def lint(self):
        """Checks the graph is well formed: nodes owned by it, arguments defined before use,
        names unique, and (with an owning module) targets that exist."""
        seen_names, seen_values = set(), set()

        def check_arg(arg, n=None):
            context = f" of Node '{n}' " if n else " "
            if arg.graph is not self:
                raise RuntimeError(
                    f"Argument '{arg}'{context}does not belong to this Graph, but was used as "
                    "an argument! If you are copying nodes from another graph, make sure to "
                    f"use ``arg_transform`` on node_copy() to remap values\n{self}")
            if arg not in seen_values:
                raise RuntimeError(
                    f"Argument '{arg}'{context}was used before it has been defined! Please "
                    f"check that Nodes in the graph are topologically ordered\n{self}")

        for node in self.nodes:
            if node.op not in _legal_ops:
                raise RuntimeError(f"Node {node} had unknown opcode {node.op}!")
            if node.graph is not self:
                raise RuntimeError(f"Node '{node}' does not belong to this Graph!")
            for arg in node._input_nodes:
                check_arg(arg, node)
            seen_values.add(node)
            if node.name in seen_names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            seen_names.add(node.name)

        if self.owning_module is None:
            return
        from ..nn import Module
        for node in self.nodes:
            if node.op == "call_function":
                if not callable(node.target):
                    raise ValueError(f"Node {node} target {node.target} has type "
                                     f"{type(node.target).__name__} but a Callable is expected")
            elif not isinstance(node.target, str):
                raise ValueError(f"Node {node} target {node.target} has type "
                                 f"{type(node.target).__name__} but a str is expected")
            if node.op in ("get_attr", "call_module"):
                atoms = node.target.split(".")
                m_itr = self.owning_module
                for i, atom in enumerate(atoms):
                    new_m_itr = getattr(m_itr, atom, None)
                    seen_qualname = ".".join(atoms[:i])
                    if new_m_itr is None:
                        raise RuntimeError(f"Node {node} target {node.target} references "
                                           f"nonexistent attribute {atom} of {seen_qualname}")
                    if node.op == "call_module" and not isinstance(new_m_itr, Module):
                        raise RuntimeError(f"Node {node} target {node.target} {atom} of "
                                           f"{seen_qualname} does not reference an nn.Module")
                    m_itr = new_m_itr

    def eliminate_dead_code(self, is_impure_node=None):
        """Erases the nodes nothing uses that have no side effects (Node.is_impure, or
        is_impure_node when given); returns whether anything was erased."""
        self.lint()  # the reverse walk below relies on topological order

        def has_side_effect(node):
            if is_impure_node is not None:
                return is_impure_node(node)
            return node.is_impure()

        changed = False
        for node in reversed(self.nodes):
            if not has_side_effect(node) and len(node.users) == 0:
                self.erase_node(node)
                changed = True
        return changed


def _has_attr_path(module, qualified_name):
    cur = module
    for atom in qualified_name.split("."):
        if not hasattr(cur, atom):
            return False
        cur = getattr(cur, atom)
    return True
