"""kiln.utils._pytree, as torch.utils._pytree: nested containers ("pytrees") flattened to a
list of leaves and a TreeSpec, and mapped over leaf by leaf.

Nodes, as in torch 2.13: tuple, list, dict, OrderedDict, defaultdict, deque, namedtuples
(spec type collections.namedtuple, the class as context), kiln.return_types (as torch's
structseqs: the class as spec type) and the types given to register_pytree_node. Anything
else, None and subclasses of the built-in containers included, is a leaf. Dicts keep their
insertion order; mapping several trees matches dict entries by key.

kiln.func keeps its own smaller flattener (kiln/func/_pytree.py) for its transforms."""
import collections
import types

__all__ = ["TreeSpec", "LeafSpec", "register_pytree_node", "tree_flatten", "tree_unflatten",
           "tree_iter", "tree_leaves", "tree_structure", "tree_map", "tree_map_",
           "tree_map_only", "tree_map_only_", "tree_all", "tree_any", "tree_all_only",
           "tree_any_only", "tree_is_leaf", "treespec_pprint", "is_namedtuple",
           "is_namedtuple_class", "is_namedtuple_instance"]


class _Node:
    __slots__ = ("flatten", "unflatten")

    def __init__(self, flatten, unflatten):
        self.flatten, self.unflatten = flatten, unflatten  # v -> (children, context), back


SUPPORTED_NODES = {}


def _register(cls, flatten, unflatten):
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = _Node(flatten, unflatten)


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                         to_dumpable_context=None, from_dumpable_context=None,
                         flatten_with_keys_fn=None):
    """flatten_fn(obj) -> (children, context); unflatten_fn(children, context) -> obj. The
    serialization and key-path arguments are accepted for torch's signature; kiln has no
    treespec_dumps / tree_flatten_with_path to use them."""
    _register(cls, flatten_fn, unflatten_fn)


def is_namedtuple_class(cls):
    return (isinstance(cls, type) and issubclass(cls, tuple)
            and isinstance(getattr(cls, "_fields", None), tuple)
            and all(type(f) is str for f in cls._fields)
            and callable(getattr(cls, "_make", None)) and callable(getattr(cls, "_asdict", None)))


def is_namedtuple_instance(obj):
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj):
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def _is_return_type(cls):
    # kiln.return_types are namedtuples standing for torch's structseqs (torch.return_types),
    # which torch's specs name by their own class.
    return getattr(cls, "__module__", None) == "kiln.return_types" and is_namedtuple_class(cls)


def _node_type(tree):
    cls = type(tree)
    if is_namedtuple_class(cls) and not _is_return_type(cls):
        return collections.namedtuple
    return cls


def _dict_unflatten(values, keys):
    return dict(zip(keys, values))


def _defaultdict_flatten(d):
    return list(d.values()), [d.default_factory, list(d.keys())]


def _defaultdict_unflatten(values, context):
    return collections.defaultdict(context[0], zip(context[1], values))


_register(tuple, lambda t: (list(t), None), lambda v, c: tuple(v))
_register(list, lambda t: (list(t), None), lambda v, c: list(v))
_register(dict, lambda d: (list(d.values()), list(d.keys())), _dict_unflatten)
_register(collections.OrderedDict, lambda d: (list(d.values()), list(d.keys())),
          lambda v, keys: collections.OrderedDict(zip(keys, v)))
_register(collections.defaultdict, _defaultdict_flatten, _defaultdict_unflatten)
_register(collections.deque, lambda d: (list(d), d.maxlen),
          lambda v, maxlen: collections.deque(v, maxlen=maxlen))
_register(collections.namedtuple, lambda t: (list(t), type(t)), lambda v, cls: cls(*v))
_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


def _node_of(tree, is_leaf):
    """The _Node flattening `tree`, or None for a leaf."""
    if is_leaf is not None and is_leaf(tree):
        return None
    t = _node_type(tree)
    if t in SUPPORTED_NODES:
        return SUPPORTED_NODES[t]
    if _is_return_type(t):
        return _RETURN_TYPE_NODE
    return None


_RETURN_TYPE_NODE = _Node(lambda t: (list(t), None), None)  # rebuilt from the spec's type


class TreeSpec:
    """The structure of a pytree: the node type, its context (dict keys, namedtuple class,
    deque maxlen, ...) and one TreeSpec per child; LeafSpec() for a leaf."""

    def __init__(self, type, context, children_specs):
        self.type = type
        self._context = context
        self._children = list(children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self._children)
        self.num_leaves = sum(c.num_leaves for c in self._children)
        self.num_children = len(self._children)

    @property
    def context(self):
        return self._context

    @property
    def children_specs(self):
        return self._children

    def is_leaf(self):
        return self.num_nodes == 1 and self.num_leaves == 1

    def children(self):
        return list(self._children)

    def child(self, index):
        return self._children[index]

    def _rebuild(self, children):
        if _is_return_type(self.type):
            return self.type(*children)
        return SUPPORTED_NODES[self.type].unflatten(children, self._context)

    def unflatten(self, leaves):
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} "
                             f"but the spec refers to a pytree that holds {self.num_leaves} "
                             f"items ({self}).")
        it = iter(leaves)

        def build(spec):
            if spec.is_leaf():
                return next(it)
            return spec._rebuild([build(c) for c in spec._children])
        return build(self)

    def flatten_up_to(self, tree):
        """The subtrees of `tree` where this spec has leaves (tree must have this spec's
        structure down to them: same node types, arities and dict keys)."""
        out = []
        self._flatten_up_to(tree, out)
        return out

    def _flatten_up_to(self, tree, out):
        if self.is_leaf():
            out.append(tree)
            return
        t = _node_type(tree)
        if self.type in _DICTS:
            if t not in _DICTS:
                raise ValueError(f"Node type mismatch; expected {self.type}, but got "
                                 f"{type(tree)}.")
        elif t is not self.type:
            raise ValueError(f"Node type mismatch; expected {self.type}, but got {type(tree)}.")
        children, context = _node_of(tree, None).flatten(tree)
        if len(children) != self.num_children:
            raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got "
                             f"{len(children)}.")
        if self.type in _DICTS:  # matched by key, whatever the order
            keys = self._context[1] if self.type is collections.defaultdict else self._context
            if set(keys) != set(tree.keys()):
                raise ValueError(f"Node keys mismatch; missing key(s): "
                                 f"{set(keys) - set(tree.keys())}; extra key(s): "
                                 f"{set(tree.keys()) - set(keys)}.")
            children = [tree[k] for k in keys]
        else:
            if self.type is not collections.deque and context != self._context:
                raise ValueError(f"Node context mismatch for node type {self.type}; expected "
                                 f"{self._context}, but got {context}.")
        for spec, child in zip(self._children, children):
            spec._flatten_up_to(child, out)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (str(self.type) == str(other.type) and self._context == other._context
                and self._children == other._children)

    def __hash__(self):
        # the context may be a list (dict keys): equal specs still hash alike without it
        return hash((str(self.type), self.num_children, tuple(self._children)))

    def __repr__(self, indent=0):
        if self.is_leaf():
            return "*"
        out = f"TreeSpec({self.type.__name__}, {self._context}, ["
        indent += 2
        out += ",\n".join(((" " * indent) if i else "") + c.__repr__(indent)
                          for i, c in enumerate(self._children))
        return out + "])"


class LeafSpec(TreeSpec):
    def __init__(self):
        super().__init__(None, None, [])
        self.num_leaves = 1


_LEAF = LeafSpec()


def tree_flatten(tree, is_leaf=None):
    """(leaves in order, TreeSpec)."""
    leaves = []

    def walk(node):
        n = _node_of(node, is_leaf)
        if n is None:
            leaves.append(node)
            return _LEAF
        children, context = n.flatten(node)
        return TreeSpec(_node_type(node), context, [walk(c) for c in children])
    return leaves, walk(tree)


def tree_unflatten(leaves, treespec):
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"Expected `treespec` to be an instance of PyTreeSpec but got item of "
                        f"type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree, is_leaf=None):
    n = _node_of(tree, is_leaf)
    if n is None:
        yield tree
        return
    for child in n.flatten(tree)[0]:
        yield from tree_iter(child, is_leaf)


def tree_leaves(tree, is_leaf=None):
    return list(tree_iter(tree, is_leaf))


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_is_leaf(tree, is_leaf=None):
    return _node_of(tree, is_leaf) is None


def tree_map(func, tree, *rests, is_leaf=None):
    """func applied to each leaf (with the matching subtrees of `rests` as more arguments),
    in a tree of the same structure."""
    leaves, spec = tree_flatten(tree, is_leaf)
    columns = [leaves] + [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(map(func, *columns))


def tree_map_(func, tree, *rests, is_leaf=None):
    """tree_map for func's side effects: returns `tree` itself."""
    leaves, spec = tree_flatten(tree, is_leaf)
    columns = [leaves] + [spec.flatten_up_to(r) for r in rests]
    for args in zip(*columns):
        func(*args)
    return tree


def _predicate(type_or_types_or_pred):
    if isinstance(type_or_types_or_pred, (type, tuple, types.UnionType)):
        return lambda x: isinstance(x, type_or_types_or_pred)
    if callable(type_or_types_or_pred):
        return type_or_types_or_pred
    raise TypeError("Argument must be a type, a tuple of types, or a callable.")


def _only(type_or_types_or_pred, func):
    pred = _predicate(type_or_types_or_pred)
    return lambda x: func(x) if pred(x) else x


def tree_map_only(type_or_types_or_pred, /, func, tree, is_leaf=None):
    """tree_map over the leaves of the given type(s) (or passing the predicate); the other
    leaves are kept as they are."""
    return tree_map(_only(type_or_types_or_pred, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types_or_pred, /, func, tree, is_leaf=None):
    return tree_map_(_only(type_or_types_or_pred, func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types, /, pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, /, pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


class _Star:
    def __repr__(self):
        return "*"


def treespec_pprint(treespec):
    """The structure written as the tree itself, with * for each leaf."""
    return repr(treespec.unflatten([_Star()] * treespec.num_leaves))
