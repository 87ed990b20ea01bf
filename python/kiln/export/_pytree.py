"""A small pytree: flatten nested tuples / lists / dicts (None is an empty node) into leaves
and a TreeSpec, and back. What torch.utils._pytree does for export's in_spec / out_spec."""

__all__ = ["TreeSpec", "LEAF", "tree_flatten", "tree_unflatten", "flatten_to_spec",
           "leaf_paths"]


class TreeSpec:
    """The structure of a flattened value. type: 'tuple', 'list', 'dict', 'namedtuple',
    'none' or 'leaf'; context: the dict keys / the namedtuple class; children: TreeSpecs."""
    __slots__ = ("type", "context", "children", "num_leaves")

    def __init__(self, type_, context=None, children=()):
        self.type = type_
        self.context = context
        self.children = list(children)
        self.num_leaves = 1 if type_ == "leaf" else sum(c.num_leaves for c in self.children)

    def __eq__(self, other):
        return (isinstance(other, TreeSpec) and self.type == other.type
                and self.context == other.context and self.children == other.children)

    def __hash__(self):
        return id(self)

    def __repr__(self):
        if self.type == "leaf":
            return "*"
        if self.type == "none":
            return "TreeSpec(NoneType, None, [])"
        name = self.context.__name__ if self.type == "namedtuple" else self.type
        ctx = list(self.context) if self.type == "dict" else None
        return f"TreeSpec({name}, {ctx}, [{', '.join(repr(c) for c in self.children)}])"

    def to_json(self):
        d = {"type": self.type if self.type != "namedtuple" else "tuple"}
        if self.type == "dict":
            d["keys"] = list(self.context)
        if self.children:
            d["children"] = [c.to_json() for c in self.children]
        return d

    @staticmethod
    def from_json(d, depth=0):
        if depth > 64:
            raise ValueError("tree spec nested too deeply")
        if not isinstance(d, dict) or d.get("type") not in ("tuple", "list", "dict", "none",
                                                            "leaf"):
            raise ValueError(f"bad tree spec {d!r:.80}")
        children = d.get("children", [])
        if not isinstance(children, list):
            raise ValueError("bad tree spec children")
        kids = [TreeSpec.from_json(c, depth + 1) for c in children]
        ctx = None
        if d["type"] == "dict":
            keys = d.get("keys")
            if not isinstance(keys, list) or len(keys) != len(kids) or \
                    not all(isinstance(k, (str, int)) and not isinstance(k, bool)
                            for k in keys):
                raise ValueError("bad dict keys in tree spec")
            ctx = list(keys)
        elif d["type"] in ("leaf", "none") and kids:
            raise ValueError("leaf with children in tree spec")
        return TreeSpec(d["type"], ctx, kids)


LEAF = TreeSpec("leaf")


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def tree_flatten(obj):
    """(leaves, spec) of obj."""
    leaves = []

    def go(x):
        if x is None:
            return TreeSpec("none")
        if _is_namedtuple(x):
            return TreeSpec("namedtuple", type(x), [go(e) for e in x])
        if type(x) is tuple or (isinstance(x, tuple) and not hasattr(x, "shape")):
            return TreeSpec("tuple", None, [go(e) for e in x])
        if isinstance(x, list):
            return TreeSpec("list", None, [go(e) for e in x])
        if isinstance(x, dict):
            return TreeSpec("dict", list(x.keys()), [go(v) for v in x.values()])
        leaves.append(x)
        return LEAF
    spec = go(obj)
    return leaves, spec


def tree_unflatten(leaves, spec):
    """The value of structure spec with these leaves."""
    it = iter(leaves)

    def go(s):
        if s.type == "leaf":
            return next(it)
        if s.type == "none":
            return None
        kids = [go(c) for c in s.children]
        if s.type == "tuple":
            return tuple(kids)
        if s.type == "namedtuple":
            return s.context(*kids)
        if s.type == "list":
            return kids
        return dict(zip(s.context, kids))
    leaves = list(leaves)
    if len(leaves) != spec.num_leaves:
        raise ValueError(f"tree_unflatten: {len(leaves)} leaves for a spec of "
                         f"{spec.num_leaves}")
    return go(spec)


def flatten_to_spec(obj, spec):
    """The leaves of obj, which must have structure spec (dicts matched by keys, in the
    spec's order); None when it does not."""
    out = []

    def go(x, s):
        if s.type == "leaf":
            if x is None or isinstance(x, (tuple, list, dict)):
                return False  # a container where a leaf was: another structure
            out.append(x)
            return True
        if s.type == "none":
            return x is None
        if s.type in ("tuple", "namedtuple"):
            ok = isinstance(x, tuple)
        elif s.type == "list":
            ok = isinstance(x, list)
        else:
            ok = isinstance(x, dict) and len(x) == len(s.context) and \
                all(k in x for k in s.context)
            if ok:
                return all(go(x[k], c) for k, c in zip(s.context, s.children))
            return False
        if not ok or len(x) != len(s.children):
            return False
        return all(go(e, c) for e, c in zip(x, s.children))
    return out if go(obj, spec) else None


def leaf_paths(spec):
    """The key path of each leaf: tuples of ints (sequence positions) and dict keys."""
    paths = []

    def go(s, path):
        if s.type == "leaf":
            paths.append(path)
        elif s.type == "dict":
            for k, c in zip(s.context, s.children):
                go(c, path + (k,))
        else:
            for i, c in enumerate(s.children):
                go(c, path + (i,))
    go(spec, ())
    return paths
