"""index_lerp: two positions along a dim blended with per-position weights, which kiln's
linear / bilinear / trilinear interpolation records once per resized dim. Its index and
weight vectors are constants computed at capture; when they are exactly the taps of ONNX
Resize (mode linear) under align_corners or half_pixel coordinates, the node becomes a
Resize along that dim; otherwise it is spelled out as two Gathers and kiln's lerp formula.
(Nearest and bicubic interpolation record index_select / mul / addcmul.)"""
import kiln

from .registry import translates


def _known(b, vid):
    """The value of a constant input: known outright, or a dtype conversion (_to_copy) of a
    known tensor when constant folding is off."""
    if vid in b.known:
        return b.known[vid]
    for node in b.g.nodes:
        if vid in node.results:
            if node.op == "_to_copy" and node.inputs[0] in b.known:
                return b.known[node.inputs[0]].to(b.dtype(vid))
            return None
    return None


def _tap_matrix(i0, i1, w, size):
    """[out][size]: how much of each input position each output position takes."""
    rows = []
    for a, c, l in zip(i0, i1, w):
        row = [0.0] * size
        row[a] += 1.0 - l
        row[c] += l
        rows.append(row)
    return rows


def _onnx_taps(size, out, mode, scale):
    """ONNX Resize (linear)'s taps along one axis: the source coordinate of each output
    position under coordinate_transformation_mode, clamped into the input."""
    i0s, i1s, ws = [], [], []
    for o in range(out):
        if mode == "align_corners":
            x = o * (size - 1) / (out - 1) if out > 1 else 0.0
        else:  # half_pixel
            x = (o + 0.5) / scale - 0.5
        x = min(max(x, 0.0), size - 1.0)
        i0 = int(x // 1)
        i0s.append(i0)
        i1s.append(min(i0 + 1, size - 1))
        ws.append(x - i0)
    return i0s, i1s, ws


def _fitted_scale(i0, i1, w):
    """A half-pixel scale factor from the last unclamped tap: src = (o + 0.5) / f - 0.5
    (interpolate with a scale_factor whose output size is not size * factor)."""
    for o in reversed(range(len(i0))):
        src = i0[o] + w[o]
        if i1[o] > i0[o] and src > 0:
            return (o + 0.5) / (src + 0.5)
    return None


def _same(m1, m2):
    return all(abs(p - q) <= 1e-5 for r1, r2 in zip(m1, m2) for p, q in zip(r1, r2))


def match_resize(size, i0, i1, w):
    """(coordinate_transformation_mode, scale or None for sizes) whose taps are these, or
    None."""
    out = len(i0)
    want = _tap_matrix(i0, i1, w, size)
    candidates = [("align_corners", None), ("half_pixel", None)]
    fitted = _fitted_scale(i0, i1, w)
    if fitted and int(size * fitted) == out:
        candidates.append(("half_pixel", fitted))
    for mode, scale in candidates:
        taps = _onnx_taps(size, out, mode, scale or out / size)
        if _same(_tap_matrix(*taps, size), want):
            return mode, scale
    return None


def _resize(b, n, x, shape, dim, out, mode, scale):
    """Resize along `dim` only. ONNX Runtime's linear Resize takes 2-D and 4-D inputs whose
    leading two scales are 1, so other layouts go through a [1, A, size, B] view."""
    rank = len(shape)
    four_d = rank == 4 and dim >= 2
    if not four_d:
        outer = 1
        for s in shape[:dim]:
            outer *= s
        inner = 1
        for s in shape[dim + 1:]:
            inner *= s
        x = b.add("Reshape", [x, b.ints([1, outer, shape[dim], inner])])
        work_shape, work_dim = [1, outer, shape[dim], inner], 2
    else:
        work_shape, work_dim = list(shape), dim
    f32 = kiln.float32
    if scale is None:
        sizes = list(work_shape)
        sizes[work_dim] = out
        inputs = [x, "", "", b.ints(sizes, "sizes")]
    else:
        scales = [1.0] * 4
        scales[work_dim] = scale
        inputs = [x, "", b.const(scales, f32, "scales")]
    y = b.add("Resize", inputs, None if not four_d else [b.result_name(n)], mode="linear",
              coordinate_transformation_mode=mode)
    if not four_d:
        y = b.add("Reshape", [y, b.ints(b.shape(n.results[0]))], [b.result_name(n)])
    return y


def _lerp(b, n, x, dim, rank):
    """kiln's (PyTorch's) lerp, exact at both ends: a + w (b - a) for |w| < 0.5, else
    b - (b - a)(1 - w); the weights broadcast along dim."""
    x_id, i0_id, i1_id, w_id = n.inputs[:4]
    dtype = b.dtype(n.results[0])
    lo = b.add("Gather", [x, b.value_as(i0_id, kiln.int64)], axis=dim)
    hi = b.add("Gather", [x, b.value_as(i1_id, kiln.int64)], axis=dim)
    w = b.add("Reshape", [b.value_as(w_id, dtype), b.ints([-1] + [1] * (rank - 1 - dim))])
    diff = b.add("Sub", [hi, lo])
    one = b.const(1.0, dtype)
    near_lo = b.add("Add", [lo, b.add("Mul", [w, diff])])
    near_hi = b.add("Sub", [hi, b.add("Mul", [diff, b.add("Sub", [one, w])])])
    small = b.add("Less", [b.add("Abs", [w]), b.const(0.5, dtype)])
    return b.add("Where", [small, near_lo, near_hi], [b.result_name(n)])


@translates("index_lerp")
def index_lerp(b, n):
    x_id, i0_id, i1_id, w_id = n.inputs[:4]
    shape = b.shape(x_id)
    dim = n.attr("dim") % len(shape)
    x = b.name(x_id)
    taps = [_known(b, v) for v in (i0_id, i1_id, w_id)]
    match = None
    if all(t is not None for t in taps) and b.dtype(x_id).is_floating_point:
        i0, i1, w = (t.tolist() for t in taps)
        match = match_resize(shape[dim], i0, i1, w)
    if match is not None:
        r = _resize(b, n, x, shape, dim, len(taps[0].tolist()), *match)
    else:
        r = _lerp(b, n, x, dim, len(shape))
    b.bind(n.results[0], r)
