"""A captured graph (kiln._C._graph.Graph.describe()) as small Python objects: nodes whose
attributes can be read by the names their op's schema gives them."""
import functools


@functools.lru_cache(maxsize=None)
def attr_names(schema):
    """The names of a schema's non-tensor arguments, in order (the node's attrs follow them):
    'add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor' gives ('alpha',)."""
    args = schema[schema.index("(") + 1:schema.index(") ->")]
    names = []
    for arg in args.split(","):
        arg = arg.strip()
        if not arg or arg == "*":
            continue
        type_, name = arg.split("=")[0].split()[:2]
        if not type_.startswith("Tensor"):
            names.append(name)
    return tuple(names)


def is_view_schema(schema):
    """Whether an op returns a view of its first input (its result is 'Tensor(a)')."""
    return schema is not None and "-> Tensor(a)" in schema and "(a!)" not in schema


class Node:
    """One captured node: kind ('op', 'alias' or 'fresh'), op name, input / preallocated
    output / result value ids and attributes."""

    def __init__(self, d, index):
        self.index = index
        self.kind = d["kind"]
        self.op = d["op"] if self.kind == "op" else self.kind
        self.schema = d["schema"]
        self.inputs = list(d["inputs"])
        self.outs = list(d["outs"])
        self.results = list(d["results"])
        self.attrs = list(d["attrs"])
        self.extra = d  # alias geometry, fresh snapshot
        self._names = attr_names(self.schema) if self.schema else ()

    def attr(self, name):
        return self.attrs[self._names.index(name)]

    def __repr__(self):
        return (f"%{', %'.join(map(str, self.results))} = {self.op}"
                f"({', '.join('%' + str(i) for i in self.inputs)}; {self.attrs})")


class Captured:
    def __init__(self, desc):
        self.inputs = list(desc["inputs"])
        self.outputs = list(desc["outputs"])
        self.constants = {vid: t for vid, t in desc["constants"]}
        self.values = desc["values"]
        self.nodes = [Node(d, i) for i, d in enumerate(desc["nodes"])]

    def shape(self, vid):
        return list(self.values[vid]["shape"])

    def dtype(self, vid):
        return self.values[vid]["dtype"]

    def is_literal(self, vid):
        return self.values[vid]["literal"]
