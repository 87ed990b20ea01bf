"""Views and shape ops. Shapes are static (captured), so view / reshape / expand carry
the captured target shape; ONNX values have no strides, so a view is just its logical
result (Reshape, Transpose, Slice, Gather...)."""
import kiln

from . import messages as M
from .dtypes import elem_type, raw_bytes
from .registry import translates, unsupported


def _norm(dim, rank):
    return dim + rank if dim < 0 else dim


@translates("view", "reshape")
def reshape(b, n):
    x = b.name(n.inputs[0])
    shape = b.shape(n.results[0])
    b.bind(n.results[0], b.add("Reshape", [x, b.ints(shape)], [b.result_name(n)]))


@translates("alias")
def alias(b, n):
    """An alias node is a detach(): the same geometry over the same values."""
    base = n.inputs[0]
    if list(n.extra["shape"]) != b.shape(base) or n.extra["relative_offset"] != 0:
        raise unsupported(n, f"(an alias of shape {n.extra['shape']} at offset "
                             f"{n.extra['relative_offset']} over a {b.shape(base)} value)")
    b.bind(n.results[0], b.add("Identity", [b.name(base)], [b.result_name(n)]))


@translates("permute")
def permute(b, n):
    rank = len(b.shape(n.inputs[0]))
    perm = [_norm(d, rank) for d in n.attr("dims")]
    b.bind(n.results[0], b.add("Transpose", [b.name(n.inputs[0])], [b.result_name(n)],
                               perm=perm))


@translates("expand")
def expand(b, n):
    shape = b.shape(n.results[0])  # the captured shape, -1 entries resolved
    r = b.add("Expand", [b.name(n.inputs[0]), b.ints(shape)], [b.result_name(n)])
    b.bind(n.results[0], r)


@translates("repeat")
def repeat(b, n):
    x_id = n.inputs[0]
    reps = list(n.attr("repeats"))
    x = b.name(x_id)
    extra = len(reps) - len(b.shape(x_id))
    if extra > 0:  # repeat adds leading dims first
        x = b.add("Reshape", [x, b.ints([1] * extra + b.shape(x_id))])
    b.bind(n.results[0], b.add("Tile", [x, b.ints(reps)], [b.result_name(n)]))


@translates("slice")
def slice_(b, n):
    x_id = n.inputs[0]
    dim = n.attr("dim")
    size = b.shape(x_id)[dim]
    start = n.attr("start")
    end = n.attr("end")
    start = 0 if start is None else start
    end = size if end is None else end
    inputs = [b.name(x_id), b.ints([start]), b.ints([end]), b.ints([dim]),
              b.ints([n.attr("step")])]
    b.bind(n.results[0], b.add("Slice", inputs, [b.result_name(n)]))


@translates("select")
def select(b, n):
    """x.select(dim, i): Gather with a scalar index drops the dim, as select does."""
    x_id = n.inputs[0]
    index = b.const(n.attr("index"), kiln.int64, "index")
    r = b.add("Gather", [b.name(x_id), index], [b.result_name(n)], axis=n.attr("dim"))
    b.bind(n.results[0], r)


@translates("squeeze")
def squeeze(b, n):
    """Only dims of size 1 go (torch ignores the others), so the axes are resolved here."""
    shape = b.shape(n.inputs[0])
    dims = n.attr("dim")
    dims = range(len(shape)) if dims is None else [_norm(d, len(shape)) for d in dims]
    axes = sorted({d for d in dims if shape[d] == 1})
    x = b.name(n.inputs[0])
    if not axes:
        r = b.add("Identity", [x], [b.result_name(n)])
    else:
        r = b.add("Squeeze", [x, b.ints(axes, "axes")], [b.result_name(n)])
    b.bind(n.results[0], r)


@translates("unsqueeze")
def unsqueeze(b, n):
    rank = len(b.shape(n.results[0]))
    axis = _norm(n.attr("dim"), rank)
    r = b.add("Unsqueeze", [b.name(n.inputs[0]), b.ints([axis], "axes")], [b.result_name(n)])
    b.bind(n.results[0], r)


@translates("cat")
def cat(b, n):
    dtype = b.dtype(n.results[0])
    inputs = [b.value_as(v, dtype) for v in n.inputs]
    b.bind(n.results[0], b.add("Concat", inputs, [b.result_name(n)], axis=n.attr("dim")))


@translates("flip")
def flip(b, n):
    x_id = n.inputs[0]
    rank = len(b.shape(x_id))
    dims = [_norm(d, rank) for d in n.attr("dims")]
    big = -(2 ** 63)  # past the beginning, for a step of -1
    inputs = [b.name(x_id), b.ints([-1] * len(dims)), b.ints([big] * len(dims)),
              b.ints(dims), b.ints([-1] * len(dims))]
    b.bind(n.results[0], b.add("Slice", inputs, [b.result_name(n)]))


@translates("index_select")
def index_select(b, n):
    """Also nn.Embedding, which kiln records as index_select over a flattened index."""
    x_id, idx_id = n.inputs[:2]
    r = b.add("Gather", [b.name(x_id), b.value_as(idx_id, kiln.int64)], [b.result_name(n)],
              axis=n.attr("dim"))
    b.bind(n.results[0], r)


@translates("gather")
def gather(b, n):
    x_id, idx_id = n.inputs[:2]
    r = b.add("GatherElements", [b.name(x_id), b.value_as(idx_id, kiln.int64)],
              [b.result_name(n)], axis=n.attr("dim"))
    b.bind(n.results[0], r)


@translates("tril", "triu")
def tril_triu(b, n):
    k = b.const(int(n.attr("diagonal")), kiln.int64, "k")
    r = b.add("Trilu", [b.name(n.inputs[0]), k], [b.result_name(n)],
              upper=int(n.op == "triu"))
    b.bind(n.results[0], r)


@translates("fill_")
def fill(b, n):
    """fill_ writes one value over its (preallocated) output: a constant of its shape."""
    out = n.results[0]
    value = kiln.tensor(n.attr("value"), dtype=b.dtype(out)).reshape([1])
    value_msg = M.tensor("value", elem_type(b.dtype(out)), [1], raw_bytes(value))
    r = b.add("ConstantOfShape", [b.ints(b.shape(out))], [b.result_name(n)], value=value_msg)
    b.bind(out, r)


@translates("copy_", "_copy_strided")
def copy(b, n):
    """copy_ writes src, converted and broadcast, over its output."""
    out = n.results[0]
    src = b.value_as(n.inputs[0], b.dtype(out))
    if b.shape(n.inputs[0]) != b.shape(out):
        src = b.add("Expand", [src, b.ints(b.shape(out))])
    b.bind(out, b.add("Identity", [src], [b.result_name(n)]))


@translates("arange")
def arange(b, n):
    """A constant: its arguments are captured numbers."""
    t = kiln.arange(n.attr("start"), n.attr("end"), n.attr("step"), dtype=n.attr("dtype"))
    b.bind(n.results[0], b.initializer(t, f"arange_{n.results[0]}"))


@translates("fresh")
def fresh(b, n):
    """A tensor the function made without an op (kiln.tensor(data)): its contents at capture
    are a constant."""
    b.known[n.results[0]] = n.extra["snapshot"]
