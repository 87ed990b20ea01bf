"""Nested tuples / lists / dicts of values flattened to a list of leaves and back: what the
kiln.func transforms need to take and return structures of tensors (a dict of parameters for
functional_call, a tuple of outputs). Namedtuples keep their class; dicts keep their order."""

__all__ = ["flatten", "unflatten", "map_leaves"]


class Spec:
    """The shape of a structure: kind ("leaf", "tuple", "list", "dict", "namedtuple"), the
    dict keys or the namedtuple class, and one Spec per child."""

    __slots__ = ("kind", "context", "children")

    def __init__(self, kind, context=None, children=()):
        self.kind, self.context, self.children = kind, context, tuple(children)

    def __eq__(self, other):
        return (isinstance(other, Spec) and self.kind == other.kind
                and self.context == other.context and self.children == other.children)

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        inner = ", ".join(map(repr, self.children))
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.context, self.children))
            return "{" + inner + "}"
        return f"[{inner}]" if self.kind == "list" else f"({inner})"


def _kind_of(value):
    if isinstance(value, tuple):
        return "namedtuple" if hasattr(type(value), "_fields") else "tuple"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return "leaf"


def flatten(value):
    """(leaves in order, Spec)."""
    leaves = []

    def walk(v):
        kind = _kind_of(v)
        if kind == "leaf":
            leaves.append(v)
            return Spec("leaf")
        if kind == "dict":
            return Spec("dict", tuple(v.keys()), [walk(c) for c in v.values()])
        context = type(v) if kind == "namedtuple" else None
        return Spec(kind, context, [walk(c) for c in v])

    return leaves, walk(value)


def unflatten(leaves, spec):
    it = iter(leaves)

    def build(s):
        if s.kind == "leaf":
            return next(it)
        children = [build(c) for c in s.children]
        if s.kind == "dict":
            return dict(zip(s.context, children))
        if s.kind == "namedtuple":
            return s.context(*children)
        return tuple(children) if s.kind == "tuple" else children

    return build(spec)


def map_leaves(fn, value):
    leaves, spec = flatten(value)
    return unflatten([fn(x) for x in leaves], spec)
