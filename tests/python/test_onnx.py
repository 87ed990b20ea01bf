"""kiln.onnx against ONNX Runtime: small models built here with the `onnx` package (opsets 7
to 17) run through both on the same inputs; every output must match (float: rtol/atol 1e-4,
integers and bools exactly). Also: external data, save_weights, the testing device, and the
errors kiln raises for broken models and bad inputs.

onnx==1.23.2 and onnxruntime==1.32.0 are required (scripts/test.sh installs them): without
them every test here fails, none is skipped."""
import numpy as np
import pytest

import kiln
import kiln.onnx

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    _IMPORT_ERROR = None
except ImportError as e:  # reported by every test below (never a skip)
    onnx = ort = TensorProto = helper = numpy_helper = None
    _IMPORT_ERROR = e

PINNED = {"onnx": "1.23.2", "onnxruntime": "1.32.0"}
IR_VERSION = 8  # covers opsets up to 17 (and is read by every ORT release)


@pytest.fixture(autouse=True)
def _require_onnx(request):
    if _IMPORT_ERROR is not None and request.node.name != "test_onnx_and_onnxruntime_are_pinned":
        pytest.fail(f"onnx and onnxruntime are required ({_IMPORT_ERROR}): "
                    f"pip install onnxruntime=={PINNED['onnxruntime']} onnx=={PINNED['onnx']}",
                    pytrace=False)
    assert kiln.onnx.available, "kiln was built without the ONNX importer"


def test_onnx_and_onnxruntime_are_pinned():
    import onnx  # an ImportError here fails the suite (the fixture above fails every other test)
    import onnxruntime as ort
    assert onnx.__version__ == PINNED["onnx"], onnx.__version__
    assert ort.__version__ == PINNED["onnxruntime"], ort.__version__


# ---- helpers ---------------------------------------------------------------------------

F32, I64, I32, BOOL = (TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32,
                       TensorProto.BOOL) if TensorProto is not None else (None,) * 4


def rng():
    return np.random.default_rng(1234)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def make(nodes, inputs, outputs, initializers=(), opset=13, name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=IR_VERSION, producer_name="kiln-tests")
    onnx.checker.check_model(model, full_check=True)
    return model


def save(model, tmp_path, name="model.onnx"):
    path = tmp_path / name
    onnx.save_model(model, str(path))
    return str(path)


def to_kiln(a, device=None):
    t = kiln.from_numpy(np.array(a, order="C", copy=True))  # np.array keeps 0-d arrays 0-d
    return t if device is None else t.to(device)


def from_kiln(t):
    return t.cpu().numpy()


def run_kiln(km, feeds, device=None):
    out = km.run({k: to_kiln(v, device) for k, v in feeds.items()})
    assert sorted(out) == sorted(km.outputs)
    if device is not None:
        assert all(t.device == kiln.device(device) for t in out.values())
    return [from_kiln(out[n]) for n in km.outputs]


def ort_session(model_or_path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    src = model_or_path.SerializeToString() if hasattr(model_or_path, "SerializeToString") else model_or_path
    return ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])


def run_ort(model_or_path, feeds):
    return ort_session(model_or_path).run(None, feeds)


def assert_outputs_equal(names, want, got):
    assert len(want) == len(got) == len(names)
    for name, w, g in zip(names, want, got):
        w, g = np.asarray(w), np.asarray(g)
        assert g.dtype == w.dtype, f"output {name!r}: dtype {g.dtype}, ORT gives {w.dtype}"
        assert g.shape == w.shape, f"output {name!r}: shape {g.shape}, ORT gives {w.shape}"
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=f"output {name!r}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {name!r}")


def check_against_ort(model, feeds, tmp_path, name="model.onnx"):
    """Loads `model` from a file in kiln and in ORT, runs both on feeds, compares every
    output; returns (kiln Model, kiln outputs)."""
    path = save(model, tmp_path, name)
    km = kiln.onnx.load(path)
    assert km.outputs == [o.name for o in model.graph.output]
    got = run_kiln(km, feeds)
    want = run_ort(path, feeds)
    assert_outputs_equal(km.outputs, want, got)
    return km, got


# ---- models ------------------------------------------------------------------------------

def mlp_model(opset=13, batch=4):
    r = rng()
    inits = [init("w1", r.standard_normal((8, 16)).astype(np.float32) * 0.5),
             init("b1", r.standard_normal(16).astype(np.float32)),
             init("w2", r.standard_normal((16, 3)).astype(np.float32) * 0.5),
             init("b2", r.standard_normal(3).astype(np.float32))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
             helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
             helper.make_node("Relu", ["h1"], ["h"], name="act"),
             helper.make_node("MatMul", ["h", "w2"], ["y0"], name="fc2"),
             helper.make_node("Add", ["y0", "b2"], ["y"], name="fc2_bias")]
    return make(nodes, [vi("x", F32, [batch, 8])], [vi("y", F32, [batch, 3]), vi("h", F32, [batch, 16])],
                inits, opset=opset, name="mlp")


def cnn_model():
    r = rng()
    inits = [init("cw", r.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3),
             init("cb", r.standard_normal(4).astype(np.float32) * 0.1),
             init("bn_scale", r.uniform(0.5, 1.5, 4).astype(np.float32)),
             init("bn_bias", r.standard_normal(4).astype(np.float32) * 0.1),
             init("bn_mean", r.standard_normal(4).astype(np.float32) * 0.1),
             init("bn_var", r.uniform(0.5, 2.0, 4).astype(np.float32)),
             init("gw", r.standard_normal((6, 2, 3, 3)).astype(np.float32) * 0.3),
             init("fw", r.standard_normal((5, 6)).astype(np.float32)),
             init("fb", r.standard_normal(5).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("BatchNormalization", ["c", "bn_scale", "bn_bias", "bn_mean", "bn_var"],
                              ["bn"], name="bn", epsilon=1e-5),
             helper.make_node("Relu", ["bn"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "gw"], ["g"], name="grouped_conv", group=2, strides=[2, 2],
                              pads=[1, 1, 1, 1], dilations=[1, 1]),
             helper.make_node("GlobalAveragePool", ["g"], ["gap"], name="gap"),
             helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
             helper.make_node("Gemm", ["flat", "fw", "fb"], ["logits"], name="fc", transB=1, alpha=1.5, beta=0.5)]
    return make(nodes, [vi("x", F32, [2, 3, 8, 8])], [vi("logits", F32, [2, 5]), vi("p", F32, [2, 4, 4, 4])],
                inits, opset=11, name="cnn")


def attention_model():
    B, T, D, H = 2, 5, 8, 2
    r = rng()
    inits = [init("gamma", r.uniform(0.5, 1.5, D).astype(np.float32)),
             init("beta", r.standard_normal(D).astype(np.float32) * 0.1)]
    for w in ("wq", "wk", "wv", "wo"):
        inits.append(init(w, (r.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)))
    inits += [init("heads_shape", np.array([B, T, H, D // H], np.int64)),
              init("merge_shape", np.array([0, 0, -1], np.int64)),
              init("scale", np.array(1.0 / np.sqrt(D // H), np.float32))]
    n = helper.make_node
    nodes = [n("LayerNormalization", ["x", "gamma", "beta"], ["ln"], name="ln", axis=-1, epsilon=1e-5),
             n("MatMul", ["ln", "wq"], ["q"], name="q"), n("MatMul", ["ln", "wk"], ["k"], name="k"),
             n("MatMul", ["ln", "wv"], ["v"], name="v"),
             n("Reshape", ["q", "heads_shape"], ["q4"]), n("Reshape", ["k", "heads_shape"], ["k4"]),
             n("Reshape", ["v", "heads_shape"], ["v4"]),
             n("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
             n("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
             n("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
             n("MatMul", ["qh", "kt"], ["s0"], name="scores"), n("Mul", ["s0", "scale"], ["s"]),
             n("Softmax", ["s"], ["probs"], name="softmax", axis=-1),
             n("MatMul", ["probs", "vh"], ["o4"]), n("Transpose", ["o4"], ["o3"], perm=[0, 2, 1, 3]),
             n("Reshape", ["o3", "merge_shape"], ["o"], name="merge_heads"),
             n("MatMul", ["o", "wo"], ["proj"]), n("Add", ["x", "proj"], ["y"], name="residual")]
    return make(nodes, [vi("x", F32, [B, T, D])],
                [vi("y", F32, [B, T, D]), vi("probs", F32, [B, H, T, T])], inits, opset=17, name="attention")


def if_model():
    # then: a subgraph initializer and an outer-scope read; else: a Constant node.
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["then_y"]),
         helper.make_node("ReduceMax", ["x"], ["then_z"], keepdims=0)],
        "then_branch", [], [vi("then_y", F32, [3, 4]), vi("then_z", F32, [])],
        initializer=[init("two", np.array(2.0, np.float32))])
    else_g = helper.make_graph(
        [helper.make_node("Constant", [], ["minus"], value=numpy_helper.from_array(np.array(-0.5, np.float32))),
         helper.make_node("Mul", ["x", "minus"], ["e0"]),
         helper.make_node("Exp", ["e0"], ["else_y"]),
         helper.make_node("ReduceMin", ["x"], ["else_z"], keepdims=0)],
        "else_branch", [], [vi("else_y", F32, [3, 4]), vi("else_z", F32, [])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y", "z"], name="branch", then_branch=then_g, else_branch=else_g)]
    return make(nodes, [vi("x", F32, [3, 4])], [vi("y", F32, [3, 4]), vi("z", F32, []), vi("cond", BOOL, [])],
                [init("zero", np.array(0.0, np.float32))], opset=13, name="if")


def loop_model():
    # for i in range(M) while cond: acc += x * i; scan out acc; cond = sum(acc) < limit
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=F32),
         helper.make_node("Mul", ["x", "i_f"], ["step"]),
         helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["cond_out"])],
        "body", [vi("i", I64, []), vi("cond_in", BOOL, []), vi("acc_in", F32, [3])],
        [vi("cond_out", BOOL, []), vi("acc_out", F32, [3]), vi("scan_out", F32, [3])])
    nodes = [helper.make_node("Loop", ["M", "keep_going", "acc0"], ["acc", "trace"], name="loop", body=body)]
    return make(nodes, [vi("M", I64, []), vi("x", F32, [3]), vi("limit", F32, [])],
                [vi("acc", F32, [3]), vi("trace", F32, ["iterations", 3])],
                [init("keep_going", np.array(True)), init("acc0", np.zeros(3, np.float32))], opset=13, name="loop")


def dynamic_batch_model():
    r = rng()
    inits = [init("w1", r.standard_normal((6, 5)).astype(np.float32)),
             init("b1", r.standard_normal(5).astype(np.float32)),
             init("w2", r.standard_normal((4, 5)).astype(np.float32)),
             init("b2", r.standard_normal(4).astype(np.float32)),
             init("shape", np.array([-1, 2, 2], np.int64))]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h0"], name="fc1"),
             helper.make_node("Sigmoid", ["h0"], ["h"]),
             helper.make_node("Gemm", ["h", "w2", "b2"], ["y0"], name="fc2", transB=1),
             helper.make_node("Reshape", ["y0", "shape"], ["y"])]
    return make(nodes, [vi("x", F32, ["batch", 6])], [vi("y", F32, ["batch", 2, 2])], inits, opset=7,
                name="dynamic_batch")


def shape_model():
    n = helper.make_node
    inits = [init("idx0", np.array([0], np.int64)), init("two", np.array([2], np.int64)),
             init("starts", np.array([-1], np.int64)), init("ends", np.array([np.iinfo(np.int64).max], np.int64)),
             init("axes", np.array([0], np.int64)),
             init("s_starts", np.array([1], np.int64)), init("s_ends", np.array([-1], np.int64)),
             init("s_axes", np.array([1], np.int64)), init("s_steps", np.array([2], np.int64)),
             init("offset", np.array(1000, np.int64))]
    nodes = [n("Shape", ["x"], ["shape"]),
             n("Gather", ["shape", "idx0"], ["rows"], axis=0),
             n("Slice", ["shape", "starts", "ends", "axes"], ["last"]),
             n("Div", ["last", "two"], ["half"]),
             n("Concat", ["rows", "two", "half"], ["new_shape"], axis=0),
             n("Reshape", ["x", "new_shape"], ["y"]),
             n("Gather", ["y", "pick"], ["picked"], axis=0),
             n("Slice", ["x", "s_starts", "s_ends", "s_axes", "s_steps"], ["strided"]),
             n("Gather", ["tokens", "pick"], ["tok0"], axis=1),
             n("Mul", ["tok0", "tok0"], ["tok1"]),
             n("Add", ["tok1", "offset"], ["tok"])]
    return make(nodes, [vi("x", F32, ["n", 6]), vi("pick", I64, [3]), vi("tokens", I64, [2, 5])],
                [vi("new_shape", I64, [3]), vi("y", F32, ["n", 2, 3]), vi("picked", F32, [3, 2, 3]),
                 vi("strided", F32, ["n", 2]), vi("tok", I64, [2, 3])], inits, opset=10, name="shapes")


def cast_where_model():
    n = helper.make_node
    inits = [init("ten", np.array(10.0, np.float32)), init("fill", np.array(-7, np.int64))]
    nodes = [n("Greater", ["a", "b"], ["gt"]),
             n("Where", ["gt", "a", "b"], ["w"]),
             n("Mul", ["a", "ten"], ["a10"]),
             n("Cast", ["a10"], ["ai"], to=I32),
             n("Cast", ["ai"], ["ai64"], to=I64),
             n("Where", ["gt", "ai64", "fill"], ["wi"]),
             n("Cast", ["gt"], ["gtf"], to=F32),
             n("Relu", ["a"], ["ra"]),
             n("Cast", ["ra"], ["nonzero"], to=BOOL),
             n("Cast", ["a"], ["half"], to=TensorProto.FLOAT16),
             n("Not", ["gt"], ["le"])]
    return make(nodes, [vi("a", F32, [3, 4]), vi("b", F32, [3, 4])],
                [vi("gt", BOOL, [3, 4]), vi("w", F32, [3, 4]), vi("ai", I32, [3, 4]), vi("wi", I64, [3, 4]),
                 vi("gtf", F32, [3, 4]), vi("nonzero", BOOL, [3, 4]), vi("half", TensorProto.FLOAT16, [3, 4]),
                 vi("le", BOOL, [3, 4])], inits, opset=9, name="cast_where")


def opset_semantics_model(opset):
    """Operators whose meaning or signature changed at opset 13: Softmax (before 13 it
    flattens to 2-D at `axis`), Split / Squeeze / Unsqueeze / ReduceSum (axes and split sizes
    move from attributes to inputs)."""
    n = helper.make_node
    inits = []
    if opset < 13:
        nodes = [n("Split", ["x"], ["s0", "s1"], axis=2, split=[1, 3]),
                 n("ReduceSum", ["s1"], ["r"], axes=[1], keepdims=1),
                 n("Squeeze", ["r"], ["sq"], axes=[1]),
                 n("Unsqueeze", ["sq"], ["u"], axes=[0, 3])]
    else:
        inits = [init("split", np.array([1, 3], np.int64)), init("ax1", np.array([1], np.int64)),
                 init("ax03", np.array([0, 3], np.int64))]
        nodes = [n("Split", ["x", "split"], ["s0", "s1"], axis=2),
                 n("ReduceSum", ["s1", "ax1"], ["r"], keepdims=1),
                 n("Squeeze", ["r", "ax1"], ["sq"]),
                 n("Unsqueeze", ["sq", "ax03"], ["u"])]
    nodes += [n("Softmax", ["x"], ["sm"], axis=1), n("LogSoftmax", ["x"], ["lsm"], axis=1),
              n("Hardmax", ["x"], ["hm"], axis=1)]
    return make(nodes, [vi("x", F32, [2, 3, 4])],
                [vi("s0", F32, [2, 3, 1]), vi("u", F32, [1, 2, 3, 1]), vi("sm", F32, [2, 3, 4]),
                 vi("lsm", F32, [2, 3, 4]), vi("hm", F32, [2, 3, 4])], inits, opset=opset,
                name=f"opset{opset}_semantics")


# ---- kiln vs ORT ---------------------------------------------------------------------------

def test_mlp(tmp_path):
    model = mlp_model()
    x = rng().standard_normal((4, 8)).astype(np.float32)
    km, got = check_against_ort(model, {"x": x}, tmp_path)
    assert km.inputs == ["x"] and km.outputs == ["y", "h"]
    assert km.opset_version == 13 and km.num_nodes == 5
    assert km.op_types == ["Add", "MatMul", "Relu"]
    assert km.device.type == "cpu"
    assert "opset 13" in repr(km) and "5 nodes" in repr(km)
    assert (got[1] >= 0).all() and (got[1] == 0).any()  # the Relu did clip something


def test_cnn(tmp_path):
    x = rng().standard_normal((2, 3, 8, 8)).astype(np.float32)
    km, _ = check_against_ort(cnn_model(), {"x": x}, tmp_path)
    assert km.opset_version == 11


def test_attention_block(tmp_path):
    x = rng().standard_normal((2, 5, 8)).astype(np.float32)
    km, (y, probs) = check_against_ort(attention_model(), {"x": x}, tmp_path)
    assert km.opset_version == 17
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_if(tmp_path, sign):
    x = (np.abs(rng().standard_normal((3, 4))) * sign).astype(np.float32)
    _, (y, z, cond) = check_against_ort(if_model(), {"x": x}, tmp_path)
    assert bool(cond) == (sign > 0)


@pytest.mark.parametrize("trips,limit,expect_iters", [(5, 1e6, 5), (10, 20.0, None), (0, 1e6, 0)],
                         ids=["all_trips", "early_exit", "no_trips"])
def test_loop(tmp_path, trips, limit, expect_iters):
    feeds = {"M": np.array(trips, np.int64), "x": np.array([1.0, 2.0, 0.5], np.float32),
             "limit": np.array(limit, np.float32)}
    _, (acc, trace) = check_against_ort(loop_model(), feeds, tmp_path)
    if expect_iters is not None:
        assert trace.shape == (expect_iters, 3)
    else:
        assert 0 < trace.shape[0] < trips


def test_dynamic_batch(tmp_path):
    model = dynamic_batch_model()
    path = save(model, tmp_path)
    km = kiln.onnx.load(path)
    sess = ort_session(path)
    for batch in (1, 7, 3):
        x = rng().standard_normal((batch, 6)).astype(np.float32)
        got = run_kiln(km, {"x": x})
        assert got[0].shape == (batch, 2, 2)
        assert_outputs_equal(km.outputs, sess.run(None, {"x": x}), got)
    assert km.opset_version == 7


def test_int64_shape_computation(tmp_path):
    r = rng()
    for rows in (4, 1):
        feeds = {"x": r.standard_normal((rows, 6)).astype(np.float32),
                 "pick": np.array([0, -1, 0], np.int64) if rows == 1 else np.array([3, -1, 1], np.int64),
                 "tokens": r.integers(-3_000_000_000, 3_000_000_000, (2, 5), dtype=np.int64)}
        _, got = check_against_ort(shape_model(), feeds, tmp_path)
        assert got[0].tolist() == [rows, 2, 3]


def test_cast_and_where(tmp_path):
    r = rng()
    a = r.standard_normal((3, 4)).astype(np.float32)
    a[0, 0] = 0.0
    a[1, 1] = -0.0
    feeds = {"a": a, "b": r.standard_normal((3, 4)).astype(np.float32)}
    check_against_ort(cast_where_model(), feeds, tmp_path)


@pytest.mark.parametrize("opset", [11, 13])
def test_opset_dependent_semantics(tmp_path, opset):
    x = rng().standard_normal((2, 3, 4)).astype(np.float32)
    _, got = check_against_ort(opset_semantics_model(opset), {"x": x}, tmp_path)
    sm = got[2]
    if opset < 13:  # normalised over dims 1.. together
        np.testing.assert_allclose(sm.reshape(2, -1).sum(-1), 1.0, rtol=1e-5)
    else:  # over dim 1 only
        np.testing.assert_allclose(sm.sum(1), 1.0, rtol=1e-5)


# ---- loading, weights, devices ---------------------------------------------------------------

def test_external_data(tmp_path):
    model = cnn_model()
    x = rng().standard_normal((2, 3, 8, 8)).astype(np.float32)
    inline = run_kiln(kiln.onnx.load(save(model, tmp_path, "inline.onnx")), {"x": x})
    ext_dir = tmp_path / "external"
    ext_dir.mkdir()
    path = str(ext_dir / "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.weights", size_threshold=0)
    assert (ext_dir / "model.weights").stat().st_size > 0
    stored = onnx.load_model(path, load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in stored.graph.initializer)
    km = kiln.onnx.load(path)
    got = run_kiln(km, {"x": x})
    for a, b in zip(inline, got):
        np.testing.assert_array_equal(a, b)
    assert_outputs_equal(km.outputs, run_ort(path, {"x": x}), got)


def test_save_weights(tmp_path):
    from safetensors.numpy import load_file
    model = attention_model()
    km = kiln.onnx.load(save(model, tmp_path))
    out = tmp_path / "weights.safetensors"
    km.save_weights(str(out))
    saved = load_file(str(out))
    expected = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert sorted(saved) == sorted(expected)
    for name, want in expected.items():
        assert saved[name].dtype == want.dtype and saved[name].shape == want.shape, name
        np.testing.assert_array_equal(saved[name], want, err_msg=name)


@pytest.mark.parametrize("build,feeds", [
    (attention_model, lambda r: {"x": r.standard_normal((2, 5, 8)).astype(np.float32)}),
    (if_model, lambda r: {"x": r.standard_normal((3, 4)).astype(np.float32)}),
    (loop_model, lambda r: {"M": np.array(4, np.int64), "x": np.ones(3, np.float32),
                            "limit": np.array(1e6, np.float32)}),
    (shape_model, lambda r: {"x": r.standard_normal((4, 6)).astype(np.float32),
                             "pick": np.array([1, 2, -4], np.int64),
                             "tokens": r.integers(0, 100, (2, 5), dtype=np.int64)}),
], ids=["attention", "if", "loop", "shapes"])
def test_testing_device(tmp_path, build, feeds):
    model = build()
    feeds = feeds(rng())
    path = save(model, tmp_path)
    km = kiln.onnx.load(path)
    moved = km.to("testing:0")
    assert moved.device == kiln.device("testing:0") and km.device.type == "cpu"
    got = run_kiln(moved, feeds, device="testing:0")
    assert_outputs_equal(moved.outputs, run_ort(path, feeds), got)
    assert_outputs_equal(km.outputs, run_kiln(km, feeds), got)  # as on the CPU
    # a CPU input to the model on the testing device is an error, never a silent copy
    with pytest.raises(RuntimeError, match=r"is on cpu(:0)? but the model is on testing:0"):
        moved.run({k: to_kiln(v) for k, v in feeds.items()})


# ---- errors --------------------------------------------------------------------------------

def test_load_truncated_model(tmp_path):
    data = mlp_model().SerializeToString()
    for cut in (len(data) // 2, len(data) - 3, 7):
        path = tmp_path / f"truncated_{cut}.onnx"
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=r"truncated_\d+\.onnx.*not a valid serialized ModelProto"):
            kiln.onnx.load(str(path))


def test_load_garbage(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ValueError, match=r"garbage\.onnx.*not a valid serialized ModelProto"):
        kiln.onnx.load(str(path))
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.onnx.* has no graph"):
        kiln.onnx.load(str(empty))
    with pytest.raises(ValueError, match="does not exist"):
        kiln.onnx.load(str(tmp_path / "missing.onnx"))


def test_unknown_operator(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="first"),
             helper.make_node("FrobnicateTensor", ["r"], ["y"], name="mystery")]
    graph = helper.make_graph(nodes, "g", [vi("x", F32, [2, 3])], [vi("y", F32, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=IR_VERSION)
    assert "FrobnicateTensor" not in kiln.onnx.supported_operators()
    km = kiln.onnx.load(save(model, tmp_path))  # kiln reports it when the node runs
    assert km.op_types == ["FrobnicateTensor", "Relu"]
    with pytest.raises(NotImplementedError,
                       match=r"node 'mystery' \(FrobnicateTensor\): operator not supported by kiln"):
        km.run({"x": to_kiln(np.ones((2, 3), np.float32))})


@pytest.mark.parametrize("opset", [18, 99])
def test_unsupported_opset(tmp_path, opset):
    model = mlp_model()
    model.opset_import[0].version = opset
    with pytest.raises(NotImplementedError, match=f"uses opset {opset}; kiln supports opsets 1 to 17"):
        kiln.onnx.load(save(model, tmp_path))


@pytest.fixture
def mlp(tmp_path):
    return kiln.onnx.load(save(mlp_model(), tmp_path))


def test_wrong_input_dtype(mlp):
    for dtype in (np.float64, np.int64, np.float16):
        with pytest.raises(TypeError, match=r"model input 'x' must be .*float32.*got .*" + np.dtype(dtype).name):
            mlp.run({"x": to_kiln(np.ones((4, 8), dtype))})


def test_wrong_input_rank(mlp):
    with pytest.raises(RuntimeError, match=r"model input 'x' must have rank 2, got shape \[4, 8, 1\]"):
        mlp.run({"x": to_kiln(np.ones((4, 8, 1), np.float32))})
    with pytest.raises(RuntimeError, match=r"model input 'x' must have rank 2, got shape \[32\]"):
        mlp.run({"x": to_kiln(np.ones(32, np.float32))})


def test_wrong_fixed_dimension(mlp):
    with pytest.raises(RuntimeError, match=r"model input 'x' must have size 8 in dim 1, got shape \[4, 7\]"):
        mlp.run({"x": to_kiln(np.ones((4, 7), np.float32))})
    with pytest.raises(RuntimeError, match=r"model input 'x' must have size 4 in dim 0, got shape \[5, 8\]"):
        mlp.run({"x": to_kiln(np.ones((5, 8), np.float32))})


def test_missing_or_unknown_input_name(mlp):
    with pytest.raises(ValueError, match="model input 'x' was not given"):
        mlp.run({})
    with pytest.raises(ValueError, match="the model has no input 'X'"):
        mlp.run({"X": to_kiln(np.ones((4, 8), np.float32))})
    # the model still runs after the errors
    assert from_kiln(mlp.run({"x": to_kiln(np.ones((4, 8), np.float32))})["y"]).shape == (4, 3)


def test_model_device_equals_tensor_device(mlp):
    out = mlp.run({"x": to_kiln(np.ones((4, 8), np.float32))})["y"]
    assert out.device == kiln.device("cpu")
    assert mlp.device == out.device
