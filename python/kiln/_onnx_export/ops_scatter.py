"""scatter / scatter_add / scatter_reduce as ONNX ScatterElements (opset 17 reductions:
none, add, mul). torch's scatter reads src only over index's shape, ONNX wants updates of
exactly index's shape, so a larger src is sliced first."""
import kiln

from .registry import translates, unsupported

# scatter_reduce's reduce -> ScatterElements' reduction, with include_self=True
_REDUCTION = {"sum": "add", "prod": "mul"}


def _updates(b, n, src_id, index_shape):
    dtype = b.dtype(n.results[0])
    src = b.value_as(src_id, dtype)
    src_shape = b.shape(src_id)
    if src_shape != index_shape:
        rank = len(index_shape)
        src = b.add("Slice", [src, b.ints([0] * rank), b.ints(index_shape),
                              b.ints(list(range(rank)))])
    return src


def _scatter(b, n, updates, reduction=None):
    x_id, idx_id = n.inputs[:2]
    dtype = b.dtype(n.results[0])
    inputs = [b.value_as(x_id, dtype), b.value_as(idx_id, kiln.int64), updates]
    r = b.add("ScatterElements", inputs, [b.result_name(n)], axis=n.attr("dim"),
              reduction=reduction)
    b.bind(n.results[0], r)


@translates("scatter", "scatter_add")
def scatter(b, n):
    """scatter.src, or scatter_add (reduction add); duplicate indices in a plain scatter
    pick an unspecified one, in kiln as in ONNX."""
    index_shape = b.shape(n.inputs[1])
    updates = _updates(b, n, n.inputs[2], index_shape)
    _scatter(b, n, updates, "add" if n.op == "scatter_add" else None)


@translates("scatter.value")
def scatter_value(b, n):
    """The scalar broadcast to index's shape."""
    dtype = b.dtype(n.results[0])
    index_shape = b.shape(n.inputs[1])
    updates = b.add("Expand", [b.const(n.attr("value"), dtype, "value"), b.ints(index_shape)])
    _scatter(b, n, updates)


@translates("scatter_reduce")
def scatter_reduce(b, n):
    reduce = n.attr("reduce")
    if reduce not in _REDUCTION or not n.attr("include_self"):
        raise unsupported(n, f"with reduce={reduce!r}, include_self={n.attr('include_self')} "
                             "(opset 17's ScatterElements reduces by add or mul over self; "
                             "max / min need opset 18)")
    updates = _updates(b, n, n.inputs[2], b.shape(n.inputs[1]))
    _scatter(b, n, updates, _REDUCTION[reduce])
