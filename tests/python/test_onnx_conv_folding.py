"""kiln.onnx folds an inference BatchNormalization, or an Add of a per-channel constant, into
the Conv before it at load (decision 0060), as ONNX Runtime does: the outputs match a float64 numpy evaluation of conv then batch
norm, and ORT (optimized and not), within float32 rounding; the profiler shows the
convolution alone. Batch norms whose Conv output escapes, whose parameters a caller may feed,
or that train are left as they are and keep their exact results."""
import numpy as np
import pytest

import kiln
import kiln.onnx

from test_onnx import F32, helper, init, make, numpy_helper, ort, save, to_kiln, vi  # noqa: F401
from test_onnx_fusion import ops_run, ort_unoptimized


def conv_reference(x, w, b, group, pads):
    """float64 Conv (stride 1, dilation 1) of x [N, C, *S] by w [O, C / group, *K]."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads])
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    k = w.shape[2:]
    out_sp = [x.shape[2 + i] - k[i] + 1 for i in range(nd)]
    y = np.zeros([n, o] + out_sp)
    og = o // group
    for g in range(group):
        xs = x[:, g * cg:(g + 1) * cg]
        for idx in np.ndindex(*k):
            sl = tuple(slice(idx[i], idx[i] + out_sp[i]) for i in range(nd))
            patch = xs[(slice(None), slice(None)) + sl]  # [N, cg, *out]
            wk = w[(slice(g * og, (g + 1) * og), slice(None)) + idx]  # [og, cg]
            y[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch, wk)
    if b is not None:
        y += b.astype(np.float64).reshape([1, o] + [1] * nd)
    return y


def bn_reference(y, scale, bias, mean, var, eps):
    shape = [1, -1] + [1] * (y.ndim - 2)
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    return (y - mean.astype(np.float64).reshape(shape)) * a.reshape(shape) + \
        bias.astype(np.float64).reshape(shape)


def conv_bn_model(spatial, cin, cout, group, with_bias, as_constants=False, opset=13,
                  extra_nodes=(), extra_outputs=(), feedable=(), eps=1e-3, seed=0):
    r = np.random.default_rng(seed)
    k = [3] * len(spatial)
    params = {"w": r.standard_normal([cout, cin // group] + k).astype(np.float32) * 0.3,
              "scale": r.uniform(0.5, 2.0, cout).astype(np.float32),
              "bias": r.standard_normal(cout).astype(np.float32),
              "mean": r.standard_normal(cout).astype(np.float32),
              "var": r.uniform(0.1, 3.0, cout).astype(np.float32)}
    if with_bias:
        params["b"] = r.standard_normal(cout).astype(np.float32)
    conv_in = ["x", "w"] + (["b"] if with_bias else [])
    nodes, inits = [], []
    for name, value in params.items():
        if as_constants:
            nodes.append(helper.make_node("Constant", [], [name],
                                          value=numpy_helper.from_array(value, name + "_t")))
        else:
            inits.append(init(name, value))
    pads = [1] * len(spatial)
    nodes.append(helper.make_node("Conv", conv_in, ["c"], group=group, pads=pads * 2))
    nodes.append(helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"],
                                  ["y"], epsilon=eps))
    nodes.extend(extra_nodes)
    inputs = [vi("x", F32, [2, cin] + list(spatial))]
    inputs += [vi(n, F32, list(params[n].shape)) for n in feedable]
    out_shape = [2, cout] + list(spatial)
    outputs = [vi("y", F32, out_shape)] + [vi(n, F32, out_shape) for n in extra_outputs]
    model = make(nodes, inputs, outputs, inits, opset=opset)
    x = r.standard_normal([2, cin] + list(spatial)).astype(np.float32)
    want = bn_reference(conv_reference(x, params["w"], params.get("b"), group, pads),
                        params["scale"], params["bias"], params["mean"], params["var"], eps)
    return model, x, want, params


def ort_optimized(path, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("spatial,cin,cout,group,with_bias,as_constants", [
    ((9, 11), 4, 6, 1, True, False),
    ((9, 11), 4, 6, 1, False, False),
    ((8, 8), 6, 6, 6, False, True),   # depthwise, weights as Constant nodes (Paddle's export)
    ((8, 7), 4, 8, 2, True, True),
    ((17,), 3, 5, 1, True, False),    # 1-D
])
def test_batch_norm_is_folded_into_the_conv(tmp_path, spatial, cin, cout, group, with_bias,
                                            as_constants):
    model, x, want, _ = conv_bn_model(spatial, cin, cout, group, with_bias, as_constants)
    path = save(model, tmp_path)
    km = kiln.onnx.load(path)
    (got,), names = ops_run(km, {"x": x})
    assert "convolution" in names
    # Nothing but the convolution touches the activations (and its bias add, if any).
    assert not names & {"pointwise_program", "mul", "sub", "div"}, names
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    for ort_out in (ort_optimized(path, {"x": x})[0], ort_unoptimized(path, {"x": x})[0]):
        np.testing.assert_allclose(got, ort_out, rtol=2e-5, atol=2e-5)
    assert len(km.outputs) == 1 and km.run({"x": to_kiln(x)})["y"].shape == tuple(want.shape)


def test_conv_output_read_elsewhere_is_not_folded(tmp_path):
    relu = helper.make_node("Relu", ["c"], ["r"])
    model, x, want, params = conv_bn_model((6, 6), 3, 4, 1, True, extra_nodes=[relu],
                                           extra_outputs=["r"])
    path = save(model, tmp_path)
    (got, r), names = ops_run(kiln.onnx.load(path), {"x": x})
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    conv = conv_reference(x, params["w"], params["b"], 1, [1, 1])
    np.testing.assert_allclose(r, np.maximum(conv, 0), rtol=2e-5, atol=2e-5)
    (want_ort, r_ort) = ort_unoptimized(path, {"x": x})
    np.testing.assert_allclose(got, want_ort, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(r, r_ort, rtol=2e-5, atol=2e-5)
    assert "pointwise_program" in names  # the batch norm ran, as a fused program


def test_feedable_parameters_are_not_folded(tmp_path):
    # "scale" is an initializer and a graph input: a caller may feed another scale.
    model, x, want, params = conv_bn_model((6, 6), 3, 4, 1, True, feedable=["scale"])
    path = save(model, tmp_path)
    km = kiln.onnx.load(path)
    (got,), _ = ops_run(km, {"x": x})
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    scale2 = params["scale"] * 3
    (got2,), _ = ops_run(km, {"x": x, "scale": scale2})
    want2 = bn_reference(conv_reference(x, params["w"], params["b"], 1, [1, 1]), scale2,
                         params["bias"], params["mean"], params["var"], 1e-3)
    np.testing.assert_allclose(got2, want2, rtol=2e-5, atol=2e-5)


def test_training_batch_norm_is_not_folded(tmp_path):
    model, x, _, params = conv_bn_model((5, 5), 3, 4, 1, True, opset=15)
    bn = model.graph.node[-1]
    bn.attribute.append(helper.make_attribute("training_mode", 1))
    bn.output.extend(["run_mean", "run_var"])
    model.graph.output.extend([vi("run_mean", F32, [4]), vi("run_var", F32, [4])])
    path = save(model, tmp_path)
    got = kiln.onnx.load(path).run({"x": to_kiln(x)})
    conv = conv_reference(x, params["w"], params["b"], 1, [1, 1])
    batch_mean = conv.mean(axis=(0, 2, 3))
    np.testing.assert_allclose(got["run_mean"].numpy(), params["mean"] * 0.9 + batch_mean * 0.1,
                               rtol=1e-4, atol=1e-5)
    y = got["y"].numpy()
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), params["bias"], atol=1e-4)


def conv_add_model(shift, shift_as, with_bias, seed=1, cout=6):
    """Conv [2, 3, 7, 8] -> [2, cout, 7, 8], then Add of `shift` given as an initializer, a
    Constant node, or a Reshape of a Constant [shift.size] by a Constant shape (Paddle's SE
    blocks)."""
    r = np.random.default_rng(seed)
    w = r.standard_normal([cout, 3, 3, 3]).astype(np.float32) * 0.3
    b = r.standard_normal(cout).astype(np.float32) if with_bias else None
    nodes, inits = [], [init("w", w)] + ([init("b", b)] if with_bias else [])
    shift = np.asarray(shift, np.float32)
    if shift_as == "initializer":
        inits.append(init("s", shift))
    elif shift_as == "constant":
        nodes.append(helper.make_node("Constant", [], ["s"],
                                      value=numpy_helper.from_array(shift, "s_t")))
    else:
        nodes.append(helper.make_node("Constant", [], ["flat"],
                                      value=numpy_helper.from_array(shift.reshape(-1), "f_t")))
        nodes.append(helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(
            np.array(shift.shape, np.int64), "shape_t")))
        nodes.append(helper.make_node("Reshape", ["flat", "shape"], ["s"]))
    nodes.append(helper.make_node("Conv", ["x", "w"] + (["b"] if with_bias else []), ["c"],
                                  pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Add", ["s", "c"], ["y"]))  # the constant first
    model = make(nodes, [vi("x", F32, [2, 3, 7, 8])], [vi("y", F32, [2, cout, 7, 8])], inits)
    x = r.standard_normal([2, 3, 7, 8]).astype(np.float32)
    want = conv_reference(x, w, b, 1, [1, 1]) + shift.astype(np.float64)
    return model, x, want


@pytest.mark.parametrize("shape,shift_as,with_bias,folded", [
    ((1, 6, 1, 1), "reshape", False, True),
    ((1, 6, 1, 1), "reshape", True, True),
    ((6, 1, 1), "initializer", True, True),
    ((1,), "constant", False, True),          # one value for every channel
    ((1, 1, 1, 8), "initializer", False, False),  # along the width: not a bias
    ((2, 6, 1, 1), "constant", False, False),     # per image: not a bias
])
def test_bias_add_is_folded_into_the_conv(tmp_path, shape, shift_as, with_bias, folded):
    shift = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    model, x, want = conv_add_model(shift, shift_as, with_bias)
    path = save(model, tmp_path)
    (got,), names = ops_run(kiln.onnx.load(path), {"x": x})
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got, ort_unoptimized(path, {"x": x})[0], rtol=2e-5, atol=2e-5)
    assert ("add" not in names) == folded, names
