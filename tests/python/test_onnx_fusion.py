"""kiln.onnx's pointwise fusion (decision 0056): chains of elementwise nodes with constant
operands (Add / Sub / Mul / Div by scalars or a bias row, Clip, Relu, Erf, Sqrt, HardSigmoid,
HardSwish, inference BatchNormalization) that read one tensor run as one `pointwise_program`
op. Each fused step rounds as its node does, so the outputs equal ONNX Runtime's with its graph
optimizations off bit for bit (NaN matching NaN) for the exactly rounded steps, and a float32
numpy evaluation of batch norm's x * a + b; the profiler shows which ops ran. Chains whose values escape, that
read two tensors, or get inputs they cannot take run node by node with the same results."""
import numpy as np
import pytest

import kiln
import kiln.onnx

from test_onnx import F32, helper, init, make, numpy_helper, ort, save, to_kiln, vi  # noqa: F401


def ort_unoptimized(path, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(None, feeds)


def ops_run(km, feeds, device=None):
    """The model's outputs and the names of the kiln ops one run called."""
    kf = {k: to_kiln(v, device) for k, v in feeds.items()}
    with kiln.profiler.profile() as prof:
        out = km.run(kf)
    names = {e.key for e in prof.key_averages()}
    return [out[n].cpu().numpy() for n in km.outputs], names


def special_input(shape, seed=0):
    x = np.random.default_rng(seed).uniform(-8, 8, shape).astype(np.float32)
    flat = x.reshape(-1)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3.0, 3.0, 6.0], np.float32)
    flat[5::11] = np.resize(specials, flat[5::11].shape)
    return x


def scalar(name, value, shape=(1,)):
    return init(name, np.full(shape, value, np.float32))


def lcnet_block(shape, opset=13):
    """A learnable scale and shift, a hard swish spelled out, and another scale and shift."""
    nodes = [helper.make_node("Mul", ["c_scale", "x"], ["a"]),  # constant first
             helper.make_node("Add", ["a", "c_shift"], ["b"]),
             helper.make_node("Add", ["b", "c3"], ["d"]),
             helper.make_node("Clip", ["d", "c0", "c6"], ["e"]),
             helper.make_node("Mul", ["b", "e"], ["f"]),
             helper.make_node("Div", ["f", "c6"], ["g"]),
             helper.make_node("Sub", ["g", "c_sub"], ["h"]),
             helper.make_node("Div", ["c_num", "h"], ["y"])]  # constant first
    inits = [scalar("c_scale", 0.9431), scalar("c_shift", 0.5043), scalar("c3", 3.0),
             scalar("c0", 0.0, ()), scalar("c6", 6.0, ()), scalar("c_sub", 0.25),
             scalar("c_num", 2.0)]
    out = list(shape) if len(shape) else [1]  # a [1] constant broadcasts a 0-d x up
    return make(nodes, [vi("x", F32, list(shape))], [vi("y", F32, out)], inits, opset=opset)


@pytest.mark.parametrize("shape", [(1, 16, 24, 96), (2, 3, 7, 9), (5,), (1, 64, 40, 41)])
def test_hard_swish_block_is_one_op_and_equals_ort(tmp_path, shape):
    model = lcnet_block(shape)
    path = save(model, tmp_path)
    feeds = {"x": special_input(shape)}
    km = kiln.onnx.load(path)
    (got,), names = ops_run(km, feeds)
    (want,) = ort_unoptimized(path, feeds)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # bit for bit; NaN where ORT has NaN
    assert "pointwise_program" in names
    assert not names & {"add", "sub", "mul", "div", "clamp"}, names


def test_zero_dim_input_keeps_the_broadcast_shape(tmp_path):
    model = lcnet_block([])
    path = save(model, tmp_path)
    feeds = {"x": np.array(1.5, np.float32)}
    (got,), _ = ops_run(kiln.onnx.load(path), feeds)
    (want,) = ort_unoptimized(path, feeds)
    assert got.shape == want.shape == (1,)
    np.testing.assert_array_equal(got, want)


def batch_norm_chain(channels, opset):
    r = np.random.default_rng(3)
    bn = [init("scale", r.uniform(0.5, 2, channels).astype(np.float32)),
          init("bias", r.uniform(-1, 1, channels).astype(np.float32)),
          init("mean", r.uniform(-1, 1, channels).astype(np.float32)),
          init("var", r.uniform(0.1, 3, channels).astype(np.float32))]
    nodes = [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["n"],
                              epsilon=1e-3),
             helper.make_node("HardSwish", ["n"], ["s"]),
             helper.make_node("HardSigmoid", ["s"], ["t"], alpha=0.3, beta=0.4),
             helper.make_node("Relu", ["n"], ["u"]),
             helper.make_node("Add", ["t", "u"], ["y"])]
    free = [None] * 4  # channels unchecked by the input, so a wrong count reaches the node
    model = make(nodes, [vi("x", F32, free)], [vi("y", F32, free)], bn,
                 opset=opset)
    return model, [numpy_helper.to_array(t) for t in bn]


def numpy_chain(x, scale, bias, mean, var, eps=np.float32(1e-3)):
    """The chain in float32 numpy, rounding as kiln's ops do (no fused multiply-adds)."""
    f = np.float32
    a = (scale / np.sqrt(var + eps)).astype(f)
    b = (bias - mean * a).astype(f)
    c = (1, -1) + (1,) * (x.ndim - 2)
    n = x * a.reshape(c) + b.reshape(c)
    s = n * np.clip(n * f(1 / 6) + f(0.5), f(0), f(1))
    t = np.clip(s * f(0.3) + f(0.4), f(0), f(1))
    u = np.where(np.isnan(n), n, np.maximum(n, f(0)))
    return t + u


@pytest.mark.parametrize("opset", [14, 15])
def test_batch_norm_and_activations_fuse(tmp_path, opset):
    model, params = batch_norm_chain(6, opset)
    path = save(model, tmp_path)
    km = kiln.onnx.load(path)
    x = special_input((2, 6, 5, 7), seed=4)
    with np.errstate(invalid="ignore"):
        want = numpy_chain(x, *params)
    (got,), names = ops_run(km, {"x": x})
    np.testing.assert_array_equal(got, want)
    assert names & {"pointwise_program"} and not names & {"add", "mul", "clamp", "relu"}, names
    (ref,) = ort_unoptimized(path, {"x": x})
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)  # ORT's batch norm rounds apart
    # Other devices run the same steps as ordinary ops.
    (moved,), _ = ops_run(km.to("testing:0"), {"x": x}, device="testing:0")
    np.testing.assert_array_equal(moved, got)
    # An input the program cannot take (the wrong channel count) runs the nodes one by one:
    # it fails as the batch norm node would.
    with pytest.raises(Exception, match="BatchNormalization"):
        km.run({"x": to_kiln(special_input((2, 5, 3, 3)))})


def test_escaping_values_and_two_roots_stay_unfused(tmp_path):
    """b is also a graph output (it must exist), and q reads x and z: the chain splits where
    a value leaves it, and x * sigmoid-like(z) is not a single-root chain."""
    nodes = [helper.make_node("Mul", ["x", "c2"], ["a"]),
             helper.make_node("Add", ["a", "c1"], ["b"]),
             helper.make_node("Relu", ["b"], ["r"]),
             helper.make_node("Mul", ["r", "c2"], ["y"]),
             helper.make_node("Clip", ["z", "c0", "c6"], ["w"]),
             helper.make_node("Mul", ["x", "w"], ["q"])]
    inits = [scalar("c1", 1.0), scalar("c2", 2.0), scalar("c0", 0.0, ()), scalar("c6", 6.0, ())]
    model = make(nodes, [vi("x", F32, [3, 4]), vi("z", F32, [3, 4])],
                 [vi("y", F32, [3, 4]), vi("b", F32, [3, 4]), vi("q", F32, [3, 4])], inits)
    path = save(model, tmp_path)
    feeds = {"x": special_input((3, 4), 1), "z": special_input((3, 4), 2)}
    got, names = ops_run(kiln.onnx.load(path), feeds)
    want = ort_unoptimized(path, feeds)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert "pointwise_program" in names  # a -> b and r -> y each fused; q not
    assert "clamp" in names and "mul" in names


def test_initializer_that_can_be_fed_is_not_a_constant(tmp_path):
    """A constant that is also a graph input may be fed: the chain must read the fed value."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["a"]), helper.make_node("Add", ["a", "k"], ["y"])]
    model = make(nodes, [vi("x", F32, [4]), vi("k", F32, [1])], [vi("y", F32, [4])],
                 [scalar("k", 2.0)])
    path = save(model, tmp_path)
    km = kiln.onnx.load(path)
    x = np.arange(4, dtype=np.float32)
    out = km.run({"x": to_kiln(x), "k": to_kiln(np.array([5.0], np.float32))})
    np.testing.assert_array_equal(out["y"].numpy(), x * 5 + 5)


def test_bias_row_and_erf_gelu_fuse(tmp_path):
    """A Linear as exported (MatMul, Add of a bias row) and an exact GELU spelled out (Div by
    sqrt 2, Erf, Add 1, Mul by x, Mul by 0.5): the bias and the GELU run as one program, bit
    for bit kiln's own ops applied one by one, and close to ORT (whose erf differs)."""
    r = np.random.default_rng(5)
    w = r.standard_normal((16, 24)).astype(np.float32) * 0.3
    bias = r.standard_normal(24).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "bias"], ["h"]),
             helper.make_node("Div", ["h", "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["f"]),
             helper.make_node("Mul", ["h", "f"], ["g"]),
             helper.make_node("Mul", ["g", "half"], ["y"])]
    inits = [init("w", w), init("bias", bias), scalar("sqrt2", 1.4142135381698608, ()),
             scalar("one", 1.0, ()), scalar("half", 0.5, ())]
    model = make(nodes, [vi("x", F32, [2, 5, 16])], [vi("y", F32, [2, 5, 24])], inits)
    path = save(model, tmp_path)
    km = kiln.onnx.load(path)
    x = special_input((2, 5, 16), seed=6)
    (got,), names = ops_run(km, {"x": x})
    assert "pointwise_program" in names and not names & {"add", "div", "erf", "mul"}, names
    f32 = lambda v: kiln.tensor(np.array(v, np.float32))  # noqa: E731
    h = kiln.add(kiln.matmul(kiln.tensor(x), kiln.tensor(w)), kiln.tensor(bias))
    want = kiln.mul(kiln.mul(h, kiln.add(kiln.erf(kiln.div(h, f32(1.4142135381698608))),
                                         f32(1.0))), f32(0.5)).numpy()
    np.testing.assert_array_equal(got, want)
    (ref,) = ort_unoptimized(path, {"x": x})
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_lone_batch_norm_and_hard_swish_fuse(tmp_path):
    """A batch norm followed by something that does not fuse (here a MaxPool) still runs as
    one program (its statistics folded once), as does a lone HardSwish; a lone Relu stays the
    relu op."""
    model, params = batch_norm_chain(4, 14)
    graph = model.graph
    del graph.node[1:]
    graph.node.extend([helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[2, 2]),
                       helper.make_node("HardSwish", ["p"], ["s"]),
                       helper.make_node("MaxPool", ["s"], ["q"], kernel_shape=[1, 1]),
                       helper.make_node("Relu", ["q"], ["y"])])
    path = save(model, tmp_path)
    # No NaN here: max pooling over a window holding one differs between kiln and ORT.
    x = np.random.default_rng(8).uniform(-8, 8, (1, 4, 6, 6)).astype(np.float32)
    (got,), names = ops_run(kiln.onnx.load(path), {"x": x})
    assert "pointwise_program" in names and "relu" in names, names
    assert not names & {"sqrt", "div", "sub", "add", "mul", "clamp"}, names
    (ref,) = ort_unoptimized(path, {"x": x})
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_gate_of_two_tensors_keeps_its_hard_sigmoid_fused(tmp_path):
    """x * HardSigmoid(z) (a squeeze-and-excitation gate) reads two tensors: the Mul runs as
    the mul op, the HardSigmoid alone as one program."""
    nodes = [helper.make_node("HardSigmoid", ["z"], ["g"], alpha=0.2, beta=0.5),
             helper.make_node("Mul", ["x", "g"], ["y"])]
    model = make(nodes, [vi("x", F32, [2, 3, 4, 4]), vi("z", F32, [2, 3, 1, 1])],
                 [vi("y", F32, [2, 3, 4, 4])])
    path = save(model, tmp_path)
    feeds = {"x": special_input((2, 3, 4, 4), 9), "z": special_input((2, 3, 1, 1), 10)}
    (got,), names = ops_run(kiln.onnx.load(path), feeds)
    assert "pointwise_program" in names and "mul" in names and "clamp" not in names, names
    (want,) = ort_unoptimized(path, feeds)
    np.testing.assert_array_equal(got, want)
