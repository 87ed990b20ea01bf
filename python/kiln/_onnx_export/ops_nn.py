"""Neural-network ops: softmax, layer / RMS norm, convolution, pooling, padding."""
import kiln

from .registry import translates, unsupported


def _x(b, n):
    return b.value_as(n.inputs[0], b.dtype(n.results[0]))


@translates("softmax", "log_softmax")
def softmax(b, n):
    op = "Softmax" if n.op == "softmax" else "LogSoftmax"  # opset 13+: along one axis
    b.bind(n.results[0], b.add(op, [_x(b, n)], [b.result_name(n)], axis=n.attr("dim")))


@translates("native_layer_norm")
def layer_norm(b, n):
    """LayerNormalization (opset 17); its Mean and InvStdDev outputs are kiln's mean and rstd
    (same shapes), named only when something reads them."""
    x_id, w_id, bias_id = n.inputs[:3]
    shape = b.shape(x_id)
    k = n.attr("normalized_ndim")
    dtype = b.dtype(x_id)
    scale = b.name(w_id) if w_id >= 0 else b.initializer(
        kiln.ones(shape[len(shape) - k:], dtype=dtype), "layer_norm_ones")
    inputs = [b.name(x_id), scale] + ([b.name(bias_id)] if bias_id >= 0 else [])
    outs = [b.result_name(n, i) for i in range(3)]
    b.add("LayerNormalization", inputs, outs, axis=-k, epsilon=float(n.attr("eps")))
    for vid, name in zip(n.results, outs):
        if name:
            b.bind(vid, name)


@translates("native_rms_norm")
def rms_norm(b, n):
    """x * rsqrt(mean(x^2 over the last normalized_ndim dims) + eps) * weight; the second
    result is that rsqrt."""
    x_id, w_id = n.inputs[:2]
    dtype = b.dtype(x_id)
    rank = len(b.shape(x_id))
    axes = list(range(rank - n.attr("normalized_ndim"), rank))
    x = b.name(x_id)
    ms = b.add("ReduceMean", [b.add("Mul", [x, x])], axes=axes, keepdims=1)
    rstd = b.add("Reciprocal", [b.add("Sqrt", [b.add("Add", [ms, b.const(float(n.attr("eps")),
                                                                          dtype)])])])
    y = b.add("Mul", [x, rstd])
    if w_id >= 0:
        y = b.add("Mul", [y, b.name(w_id)])
    b.bind(n.results[0], b.add("Identity", [y], [b.result_name(n)]))
    if n.results[1] in b.needed:
        b.bind(n.results[1], rstd)


@translates("native_batch_norm")
def batch_norm_batch_stats(b, n):
    """Batch norm over the batch's own statistics (kiln records an eval-mode BatchNorm with
    running statistics as arithmetic instead, which folds to a scale and shift; this op
    appears for track_running_stats=False). BatchNormalization's inference form needs
    fixed statistics, so it is spelled out: (x - mean) / sqrt(biased var + eps) * w + b.
    Results: y, the per-channel mean and 1 / std."""
    x_id = n.inputs[0]
    dtype = b.dtype(x_id)
    shape = b.shape(x_id)
    axes = [0] + list(range(2, len(shape)))
    channel = [1, shape[1]] + [1] * (len(shape) - 2)
    x = b.name(x_id)
    mean = b.add("ReduceMean", [x], axes=axes, keepdims=1)
    centered = b.add("Sub", [x, mean])
    var = b.add("ReduceMean", [b.add("Mul", [centered, centered])], axes=axes, keepdims=1)
    eps = b.const(float(n.attr("eps")), dtype)
    rstd = b.add("Reciprocal", [b.add("Sqrt", [b.add("Add", [var, eps])])])
    y = b.add("Mul", [centered, rstd])
    _affine_and_statistics(b, n, y, channel, (mean, rstd), [shape[1]])


def _affine_and_statistics(b, n, y, channel, stats, stat_shape):
    """A normalisation's end: y times the weight plus the bias (both [C], broadcast as
    `channel`), bound to result 0, and the statistics reshaped to stat_shape as results 1, 2."""
    w_id, bias_id = n.inputs[1:3]
    if w_id >= 0:
        y = b.add("Mul", [y, b.add("Reshape", [b.name(w_id), b.ints(channel)])])
    if bias_id >= 0:
        y = b.add("Add", [y, b.add("Reshape", [b.name(bias_id), b.ints(channel)])])
    b.bind(n.results[0], b.add("Identity", [y], [b.result_name(n, 0)]))
    for k, stat in zip((1, 2), stats):
        if n.results[k] in b.needed:
            b.bind(n.results[k], b.add("Reshape", [stat, b.ints(stat_shape)],
                                       [b.result_name(n, k)]))


@translates("native_group_norm")
def group_norm(b, n):
    """Group norm spelled out (ONNX's GroupNormalization took per-group scales before opset 21):
    each sample's groups as rows of [N, G, -1], (x - mean) / sqrt(biased var + eps), back to
    x's shape, then the per-channel weight and bias. Results: y, mean and 1 / std, [N, G]."""
    x_id = n.inputs[0]
    dtype = b.dtype(x_id)
    shape = b.shape(x_id)
    groups = int(n.attr("num_groups"))
    channel = [1, shape[1]] + [1] * (len(shape) - 2)
    rows = b.add("Reshape", [b.name(x_id), b.ints([shape[0], groups, -1])])
    mean = b.add("ReduceMean", [rows], axes=[2], keepdims=1)
    centered = b.add("Sub", [rows, mean])
    var = b.add("ReduceMean", [b.add("Mul", [centered, centered])], axes=[2], keepdims=1)
    eps = b.const(float(n.attr("eps")), dtype)
    rstd = b.add("Reciprocal", [b.add("Sqrt", [b.add("Add", [var, eps])])])
    y = b.add("Reshape", [b.add("Mul", [centered, rstd]), b.ints(list(shape))])
    _affine_and_statistics(b, n, y, channel, (mean, rstd), [shape[0], groups])


@translates("convolution")
def convolution(b, n):
    """Conv, or ConvTranspose for a transposed convolution; kiln's and ONNX's weight layouts
    agree ([out, in/groups, k...] and [in, out/groups, k...])."""
    x_id, w_id, bias_id = n.inputs[:3]
    padding = list(n.attr("padding"))
    attrs = dict(strides=list(n.attr("stride")), pads=padding + padding,
                 dilations=list(n.attr("dilation")), group=int(n.attr("groups")),
                 kernel_shape=b.shape(w_id)[2:])
    inputs = [b.name(x_id), b.name(w_id)] + ([b.name(bias_id)] if bias_id >= 0 else [])
    if n.attr("transposed"):
        output_padding = list(n.attr("output_padding"))
        if any(output_padding):
            attrs["output_padding"] = output_padding
        r = b.add("ConvTranspose", inputs, [b.result_name(n)], **attrs)
    else:
        r = b.add("Conv", inputs, [b.result_name(n)], **attrs)
    b.bind(n.results[0], r)


@translates("max_pool")
def max_pool(b, n):
    """MaxPool. Its Indices output counts over the whole input tensor (row-major, batch and
    channel included, unpadded coordinates); kiln's, as torch's, count within one channel's
    plane, so they are that index modulo the plane's size."""
    x_id = n.inputs[0]
    padding = list(n.attr("padding"))
    values_name, indices_name = b.result_name(n, 0), b.result_name(n, 1)
    flat = b.unique("max_pool_flat_indices") if indices_name else ""
    outs = b.add("MaxPool", [b.name(x_id)], [values_name or b.unique("max_pool"), flat],
                 kernel_shape=list(n.attr("kernel_size")), strides=list(n.attr("stride")),
                 pads=padding + padding, dilations=list(n.attr("dilation")),
                 ceil_mode=int(bool(n.attr("ceil_mode"))))
    values = outs[0] if isinstance(outs, list) else outs
    b.bind(n.results[0], values)
    if indices_name:
        plane = 1
        for s in b.shape(x_id)[2:]:
            plane *= s
        b.bind(n.results[1], b.add("Mod", [flat, b.const(plane, kiln.int64, "plane")],
                                   [indices_name]))


@translates("avg_pool")
def avg_pool(b, n):
    if n.attr("divisor_override") is not None:
        raise unsupported(n, "with divisor_override")
    padding = list(n.attr("padding"))
    r = b.add("AveragePool", [b.name(n.inputs[0])], [b.result_name(n)],
              kernel_shape=list(n.attr("kernel_size")), strides=list(n.attr("stride")),
              pads=padding + padding, ceil_mode=int(bool(n.attr("ceil_mode"))),
              count_include_pad=int(bool(n.attr("count_include_pad"))))
    b.bind(n.results[0], r)


@translates("adaptive_avg_pool")
def adaptive_avg_pool(b, n):
    """GlobalAveragePool for output size 1, AveragePool when the input divides evenly; other
    sizes have overlapping, uneven windows ONNX cannot express in one op."""
    x_id = n.inputs[0]
    out = list(n.attr("output_size"))
    spatial = b.shape(x_id)[-len(out):]
    if all(o == 1 for o in out):
        r = b.add("GlobalAveragePool", [b.name(x_id)], [b.result_name(n)])
    elif all(s % o == 0 for s, o in zip(spatial, out)):
        k = [s // o for s, o in zip(spatial, out)]
        r = b.add("AveragePool", [b.name(x_id)], [b.result_name(n)], kernel_shape=k, strides=k)
    else:
        raise unsupported(n, f"with output size {out} not dividing the input's {spatial}")
    b.bind(n.results[0], r)


@translates("pad")
def pad(b, n):
    """torch's pad list runs from the last dim backwards in (begin, end) pairs; ONNX's
    pads are all begins then all ends, first dim first."""
    x_id = n.inputs[0]
    rank = len(b.shape(x_id))
    spec = list(n.attr("pad"))
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(spec) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = spec[2 * i], spec[2 * i + 1]
    mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}.get(n.attr("mode"))
    if mode is None:
        raise unsupported(n, f"with mode {n.attr('mode')!r}")
    inputs = [b.name(x_id), b.ints(begins + ends, "pads")]
    if mode == "constant":
        inputs.append(b.const(n.attr("value") or 0, b.dtype(x_id)))
    b.bind(n.results[0], b.add("Pad", inputs, [b.result_name(n)], mode=mode))
