"""sort / argsort / topk as ONNX TopK, which returns values and int64 indices along one axis,
sorted, with equal values in index order (a stable sort). sort is TopK with k = the dim's
size: largest for descending, smallest (ascending) otherwise."""
import kiln

from .registry import translates


def _topk(b, n, k, axis, largest):
    values, indices = (b.result_name(n, i) for i in range(2))
    # both outputs are always written: ONNX's TopK has no optional output
    outs = [values or b.unique("topk_values"), indices or b.unique("topk_indices")]
    b.add("TopK", [b.name(n.inputs[0]), b.ints([k], "k")], outs, axis=axis,
          largest=int(bool(largest)), sorted=1)
    for vid, name in zip(n.results, outs):
        b.bind(vid, name)


@translates("sort")
def sort(b, n):
    """argsort records sort and reads its indices."""
    shape = b.shape(n.inputs[0])
    axis = n.attr("dim") % max(len(shape), 1)
    if not shape:  # a 0-d tensor sorts to itself, at index 0
        b.bind(n.results[0], b.add("Identity", [b.name(n.inputs[0])], [b.result_name(n, 0)]))
        b.bind(n.results[1], b.const(0, kiln.int64, "index"))
        return
    _topk(b, n, shape[axis], axis, n.attr("descending"))


@translates("topk")
def topk(b, n):
    """Written sorted whatever `sorted` says: kiln's unsorted order is unspecified too."""
    shape = b.shape(n.inputs[0])
    _topk(b, n, int(n.attr("k")), n.attr("dim") % max(len(shape), 1), n.attr("largest"))
