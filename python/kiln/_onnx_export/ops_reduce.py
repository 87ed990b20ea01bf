"""Reductions. kiln's empty dim list means every dim, as ONNX's absent axes. In opset 17
ReduceSum takes its axes as an input, the others as an attribute."""
import kiln

from .dtypes import elem_type
from .registry import translates, unsupported

_ATTR_AXES = {"mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
              "prod": "ReduceProd", "logsumexp": "ReduceLogSumExp"}


def _reduce(b, op, x, dims, keepdim, outputs=None):
    keep = int(bool(keepdim))
    if op == "ReduceSum":
        inputs = [x] + ([b.ints(dims, "axes")] if dims else [])
        return b.add(op, inputs, outputs, keepdims=keep)
    return b.add(op, [x], outputs, axes=list(dims) if dims else None, keepdims=keep)


def _x(b, n):
    return b.value_as(n.inputs[0], b.dtype(n.results[0]))


@translates("sum", *_ATTR_AXES)
def reduce(b, n):
    op = "ReduceSum" if n.op == "sum" else _ATTR_AXES[n.op]
    r = _reduce(b, op, _x(b, n), n.attr("dim"), n.attr("keepdim"), [b.result_name(n)])
    b.bind(n.results[0], r)


@translates("all", "any")
def all_any(b, n):
    """all / any as the min / max of the values as 0 and 1 (ONNX has no boolean reduction)."""
    x = b.cast(b.add("Cast", [b.name(n.inputs[0])], to=elem_type(kiln.bool)), kiln.bool,
               kiln.int32)
    r = _reduce(b, "ReduceMin" if n.op == "all" else "ReduceMax", x, n.attr("dim"),
                n.attr("keepdim"))
    b.bind(n.results[0], b.add("Cast", [r], [b.result_name(n)],
                               to=elem_type(b.dtype(n.results[0]))))


def _single_dim(b, n):
    dims = list(n.attr("dim"))
    x = b.name(n.inputs[0])
    if not dims:  # over the flattened tensor
        return b.add("Reshape", [x, b.ints([-1])]), 0, True
    if len(dims) != 1:
        raise unsupported(n, f"over several dims {dims}")
    return x, dims[0], False


@translates("argmax", "argmin")
def argmax_argmin(b, n):
    x, axis, flat = _single_dim(b, n)
    keep = int(bool(n.attr("keepdim")) and not flat)
    op = "ArgMax" if n.op == "argmax" else "ArgMin"
    b.bind(n.results[0], b.add(op, [x], [b.result_name(n)], axis=axis, keepdims=keep))


@translates("max.dim", "min.dim")
def max_min_dim(b, n):
    x, axis, flat = _single_dim(b, n)
    keep = int(bool(n.attr("keepdim")) and not flat)
    values, indices = n.results[:2]
    if values in b.needed:
        op = "ReduceMax" if n.op == "max.dim" else "ReduceMin"
        b.bind(values, b.add(op, [x], [b.result_name(n, 0)], axes=[axis], keepdims=keep))
    if indices in b.needed:
        op = "ArgMax" if n.op == "max.dim" else "ArgMin"
        b.bind(indices, b.add(op, [x], [b.result_name(n, 1)], axis=axis, keepdims=keep))


@translates("var", "std")
def var_std(b, n):
    """sum((x - mean)^2) / (N - correction), and its square root for std."""
    x_id = n.inputs[0]
    dtype = b.dtype(n.results[0])
    shape = b.shape(x_id)
    dims = list(n.attr("dim")) or list(range(len(shape)))
    count = 1
    for d in dims:
        count *= shape[d]
    x = _x(b, n)
    centered = b.add("Sub", [x, _reduce(b, "ReduceMean", x, dims, True)])
    sq = _reduce(b, "ReduceSum", b.add("Mul", [centered, centered]), dims, n.attr("keepdim"))
    denom = max(count - float(n.attr("correction")), 0.0)
    out = [b.result_name(n)]
    if n.op == "var":
        r = b.add("Div", [sq, b.const(denom, dtype)], out)
    else:
        r = b.add("Sqrt", [b.add("Div", [sq, b.const(denom, dtype)])], out)
    b.bind(n.results[0], r)


@translates("norm")
def norm(b, n):
    p = float(n.attr("p"))
    if p not in (1.0, 2.0):
        raise unsupported(n, f"with p={p}")
    op = "ReduceL2" if p == 2.0 else "ReduceL1"
    r = _reduce(b, op, _x(b, n), n.attr("dim"), n.attr("keepdim"), [b.result_name(n)])
    b.bind(n.results[0], r)
