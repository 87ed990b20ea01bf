"""kiln.fx.Node: one operation of a Graph, as torch.fx.Node.

A Node is (op, target, args, kwargs) plus bookkeeping: the Nodes it reads (`all_input_nodes`)
and the Nodes that read it (`users`), kept in step whenever args / kwargs are assigned, so that
passes can rewire a graph with replace_all_uses_with / replace_input_with and ask who uses a
value without scanning the graph. Nodes form a doubly linked list owned by their Graph (the
Graph's sentinel `_root` closes the ring), which makes insertion and removal O(1).

op is one of:
- placeholder:   an input of the function; target is the argument name, args[0] its default.
- get_attr:      a parameter / buffer / attribute of the module; target its dotted path.
- call_function: target(*args, **kwargs); target is the callable itself.
- call_method:   args[0].target(*args[1:], **kwargs); target is the method name.
- call_module:   the submodule at dotted path target, called with args / kwargs.
- output:        the return value, args[0]."""
import builtins
import operator
import sys
import types

from .immutable_collections import immutable_dict, immutable_list

__all__ = ["Node", "map_arg", "map_aggregate", "has_side_effect"]

_legal_ops = dict.fromkeys(["placeholder", "call_method", "call_module", "call_function",
                            "get_attr", "output", "root"])

# Functions that eliminate_dead_code must keep although nothing reads their result (asserts,
# in-place writes through operator.setitem). has_side_effect adds to it, as in torch.
_side_effectful_functions = {operator.setitem}

# kiln's random factories and samplers: they advance the generator, so removing an unused
# call changes later random numbers (torch marks its random ops impure the same way).
_RANDOM_NAMES = frozenset("""rand randn randint randperm rand_like randn_like randint_like
bernoulli multinomial normal poisson dropout dropout1d dropout2d dropout3d alpha_dropout
feature_alpha_dropout rrelu gumbel_softmax""".split())


def has_side_effect(fn):
    """Registers fn as side-effectful: eliminate_dead_code keeps its unused calls."""
    _side_effectful_functions.add(fn)
    return fn


def _type_repr(obj):
    """A short repr for type annotations: builtins by name, other classes module-qualified."""
    if isinstance(obj, type) and not isinstance(obj, types.GenericAlias):
        if obj.__module__ == "builtins":
            return obj.__qualname__
        if obj.__module__ == "kiln._C":  # the extension is private: kiln.Tensor
            return f"kiln.{obj.__qualname__}"
        return f"{obj.__module__}.{obj.__qualname__}"
    if obj is ...:
        return "..."
    if isinstance(obj, types.FunctionType):
        return obj.__name__
    return repr(obj)


def _resolves_to(path, obj):
    """Whether the dotted expression `path` evaluates to obj given its first atom imported:
    generated code may write it out only then."""
    first, *rest = path.split(".")
    cur = sys.modules.get(first)
    for atom in rest:
        cur = getattr(cur, atom, None)
        if cur is None:
            return False
    return cur is obj


def _tensor_type():
    from .._C import Tensor
    return Tensor


def _get_qualified_name(func):
    """The dotted name a callable is known by ('getattr', 'kiln.relu', 'kiln.Tensor.add',
    'operator.add' as '_operator.add', as torch). kiln's own functions get the public path
    that evaluates to them, so that generated code can call them through `kiln` alone."""
    name = func.__name__
    if getattr(builtins, name, None) is func:
        return name
    if getattr(_tensor_type(), name, None) is func:
        return f"kiln.Tensor.{name}"
    if name == "<lambda>":
        raise RuntimeError("Unable to represent lambda")
    module = getattr(func, "__module__", None)
    if module is None:
        raise RuntimeError(f"cannot find module for {func}")
    if module.startswith("kiln"):
        qualname = getattr(func, "__qualname__", name)
        candidates = [f"{module}.{qualname}", f"{module}.{name}"]
        if module == "kiln._C":  # the extension is private: kiln.Tensor, not kiln._C.Tensor
            candidates.insert(0, f"kiln.{qualname}")
        for candidate in candidates:
            if _resolves_to(candidate, func):
                return candidate
    return f"{module}.{name}"


def _format_arg(arg, max_list_len=float("inf")):
    """How str(graph) shows an argument: %name for Nodes, str() for constants (torch's)."""
    if isinstance(arg, list):
        items = ", ".join(_format_arg(a) for i, a in enumerate(arg) if i < max_list_len)
        more = "" if len(arg) < max_list_len + 1 else f", ...[total_len={len(arg)}]"
        return f"[{items}{more}]"
    if isinstance(arg, tuple):
        items = ", ".join(_format_arg(a) for i, a in enumerate(arg) if i < max_list_len)
        more = "" if len(arg) < max_list_len + 1 else f", ...[total_len={len(arg)}]"
        comma = "," if len(arg) == 1 else ""
        return f"({items}{comma}{more})"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v)}" for k, v in arg.items()) + "}"
    if isinstance(arg, Node):
        return "%" + str(arg)
    return str(arg)


class Node:
    """One operation of a kiln.fx.Graph (see the module docstring for the op kinds)."""

    def __init__(self, graph, name, op, target, args, kwargs, return_type=None):
        if op not in _legal_ops:
            raise AssertionError(f"op '{op}' is not in _legal_ops")
        if op == "call_function" and not callable(target):
            raise ValueError(f"Node [graph = {graph}, name = '{name}'] target {target} has "
                             f"type {type(target).__name__} but a Callable is expected")
        if op in ("placeholder", "call_method", "call_module", "get_attr", "output") \
                and not isinstance(target, str):
            raise ValueError(f"Node [graph = {graph}, name = '{name}'] target {target} has "
                             f"type {type(target).__name__} but a str is expected")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._input_nodes = {}   # dict as an ordered set: the Nodes read, in argument order
        self.users = {}          # Node -> None: the Nodes reading this one
        self.type = return_type
        self._prev = self._next = self
        self._erased = False
        self._repr_fn = None     # codegen renames Nodes into its own namespace through this
        self.meta = {}
        self._args, self._kwargs = (), immutable_dict()
        self._update_args_kwargs(args, kwargs)

    # --- the linked list ----------------------------------------------------------------

    @property
    def next(self):
        return self._next

    @property
    def prev(self):
        return self._prev

    def prepend(self, x):
        """Moves x to just before this node (x must belong to the same graph)."""
        if self.graph is not x.graph:
            raise AssertionError("Attempting to move a Node into a different Graph")
        if self is x:
            raise AssertionError("Cannot prepend a node to itself")
        x._remove_from_list()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x

    def append(self, x):
        """Moves x to just after this node (self.next.prepend(x))."""
        self._next.prepend(x)

    def _remove_from_list(self):
        p, n = self._prev, self._next
        p._next, n._prev = n, p

    # --- arguments and the use lists ----------------------------------------------------

    @property
    def args(self):
        return self._args

    @args.setter
    def args(self, a):
        self._update_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self):
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k):
        self._update_args_kwargs(self._args, k)

    @property
    def all_input_nodes(self):
        return list(self._input_nodes)

    def update_arg(self, idx, arg):
        args = list(self.args)
        args[idx] = arg
        self.args = tuple(args)

    def insert_arg(self, idx, arg):
        if not 0 <= idx <= len(self.args):
            raise AssertionError("insert_args index must be between 0 and len(self.args)")
        self.args = self.args[:idx] + (arg,) + self.args[idx:]

    def update_kwarg(self, key, arg):
        self.kwargs = {**self.kwargs, key: arg}

    def _update_args_kwargs(self, new_args, new_kwargs):
        # Lists and dicts become immutable so that edits must go through these setters, which
        # keep users / _input_nodes right.
        self._args = map_aggregate(tuple(new_args), lambda x: x)
        self._kwargs = map_aggregate(dict(new_kwargs), lambda x: x)
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._input_nodes = {}
        map_arg(self._args, self._input_nodes.setdefault)
        map_arg(self._kwargs, self._input_nodes.setdefault)
        for new in self._input_nodes:
            new.users.setdefault(self)

    def replace_all_uses_with(self, replace_with, delete_user_cb=None, *,
                              propagate_meta=False):
        """Makes every user of this node read replace_with instead (those for which
        delete_user_cb returns True, when given); returns the users changed."""
        if propagate_meta:
            if replace_with.meta:
                raise AssertionError(
                    "Called node.replace_all_uses_with(replace_with, propagate_meta=True), "
                    "but replace_with already has .meta keys")
            replace_with.meta.update(self.meta)
        changed = []
        for user in list(self.users):
            if delete_user_cb is not None and not delete_user_cb(user):
                continue
            changed.append(user)
            user._replace_input_with(self, replace_with)
        return changed

    def replace_input_with(self, old_input, new_input):
        """Replaces every occurrence of old_input among this node's arguments."""
        self._replace_input_with(old_input, new_input)

    def _replace_input_with(self, old, new):
        def swap(n):
            return new if n is old else n
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    # --- queries ------------------------------------------------------------------------

    @property
    def stack_trace(self):
        return self.meta.get("stack_trace", None)

    @stack_trace.setter
    def stack_trace(self, trace):
        self.meta["stack_trace"] = trace

    def is_impure(self, impure_random=True):
        """Whether eliminate_dead_code must keep this node although nothing uses it:
        placeholders, output, registered side-effectful functions, random ops and (unlike
        torch, which removes them) in-place calls such as x.add_(1) or kiln.relu_(x), whose
        effect is the mutation."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_module":
            owner = self.graph.owning_module
            if owner is None:
                raise AssertionError("self.graph.owning_module not set for purity check")
            return getattr(owner.get_submodule(self.target), "_is_impure", False)
        if self.op == "call_function":
            if self.target in _side_effectful_functions:
                return True
            name = getattr(self.target, "__name__", "")
            if impure_random and name in _RANDOM_NAMES:
                return True
            return _is_inplace_name(name)
        if self.op == "call_method":
            return _is_inplace_name(self.target)
        return False

    # --- printing -----------------------------------------------------------------------

    def __repr__(self):
        if self._repr_fn is not None:
            return self._repr_fn(self)
        return self.name

    @staticmethod
    def _pretty_print_target(target):
        """builtins.getattr, operator.add, kiln.relu...: how str(graph) shows a target."""
        if isinstance(target, str):
            return target
        if hasattr(target, "__module__"):
            name = getattr(target, "__name__", None)
            if name is None:
                return _get_qualified_name(target)
            if target.__module__ == "builtins":
                return f"builtins.{name}"
            if target.__module__ == "_operator":
                return f"operator.{name}"
        return _get_qualified_name(target)

    def format_node(self, placeholder_names=None, maybe_return_typename=None):
        """This node as str(graph) shows it (`%name : [num_users=n] = op[target=...](...)`).
        Within Graph.__str__ placeholders are collected into placeholder_names instead."""
        if self.op == "placeholder":
            arg_str = self.target
            arg_str += f": {_type_repr(self.type)}" if self.type else ""
            if placeholder_names:
                placeholder_names.append(arg_str)
                return None
            typename = f"{_type_repr(self.type)} " if self.type else ""
            default = "(default=" + str(self.args[0]) + ")" if self.args else ""
            return (f"%{self.name} : {typename}[num_users={len(self.users)}] = "
                    f"{self.op}[target={self.target}]{default}")
        if self.op == "get_attr":
            typename = f"{_type_repr(self.type)} " if self.type is not None else ""
            return (f"%{self.name} : {typename}[num_users={len(self.users)}] = "
                    f"{self.op}[target={self._pretty_print_target(self.target)}]")
        if self.op == "output":
            if self.type and maybe_return_typename:
                maybe_return_typename[0] = f" -> {_type_repr(self.type)}"
            return f"return {self.args[0]}"
        typename = f"{_type_repr(self.type)} " if self.type is not None else ""
        return (f"%{self.name} : {typename}[num_users={len(self.users)}] = "
                f"{self.op}[target={self._pretty_print_target(self.target)}]("
                f"args = {_format_arg(self.args)}, kwargs = {_format_arg(self.kwargs)})")

    def _rename(self, candidate):
        if candidate == self.name:
            return
        name = self.graph._graph_namespace.create_name(candidate, None)
        self.name = name
        self.graph._graph_namespace._rename_object(self, name)


def _is_inplace_name(name):
    return (isinstance(name, str) and name.endswith("_") and not name.endswith("__")
            and not name.startswith("_"))


def map_arg(a, fn):
    """Applies fn to every Node inside a (nested tuples / lists / dicts / slices), keeping the
    structure."""
    if not callable(fn):
        raise AssertionError("kiln.fx.map_arg(a, fn): fn must be a callable")
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def map_aggregate(a, fn):
    """Applies fn to every leaf of a (tuples, named tuples, lists, dicts and slices are
    descended into; lists and dicts come back as immutable_list / immutable_dict)."""
    if isinstance(a, tuple):
        t = tuple(map_aggregate(elem, fn) for elem in a)
        return type(a)(*t) if hasattr(a, "_fields") else t
    if isinstance(a, list):
        return immutable_list(map_aggregate(elem, fn) for elem in a)
    if isinstance(a, dict):
        rv = immutable_dict()
        for k, v in a.items():
            dict.__setitem__(rv, k, map_aggregate(v, fn))
        return rv
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn),
                     map_aggregate(a.step, fn))
    return fn(a)
