"""kiln.onnx.export: kiln models written as ONNX (opset 17), checked with onnx's checker,
run in ONNX Runtime and read back with kiln.onnx.load, against kiln's eager outputs.
onnx and onnxruntime are test references only (kiln's exporter writes protobuf itself)."""
import io

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
import kiln.onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

RTOL, ATOL = 1e-4, 1e-5


def eager(model, args):
    """The model's outputs in eval mode (its mode is kept)."""
    training = isinstance(model, nn.Module) and model.training
    if isinstance(model, nn.Module):
        model.eval()
    with kiln.no_grad():
        out = model(*args)
    if training:
        model.train()
    return [o.numpy() for o in flatten(out)]


def flatten(out):
    """Tensors of nested tuples / lists in order, as the exporter lists the outputs."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o)]
    return [out]


def export_and_check(model, args, tmp_path, name="model.onnx", **kwargs):
    """Exports, checks the model fully and returns (path, ModelProto)."""
    path = str(tmp_path / name)
    kiln.onnx.export(model, args, path, **kwargs)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    return path, proto


def run_ort(path_or_bytes, feeds):
    sess = ort.InferenceSession(path_or_bytes, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds), [o.name for o in sess.get_outputs()]


def check_model(model, args, tmp_path, reload=True, **kwargs):
    want = eager(model, args)
    path, proto = export_and_check(model, args, tmp_path, **kwargs)
    names = [i.name for i in proto.graph.input]
    feeds = {n: a.numpy() for n, a in zip(names, args)}
    got, _ = run_ort(path, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    if reload:  # kiln's own importer reads what its exporter wrote
        km = kiln.onnx.load(path)
        outs = km.run({n: a for n, a in zip(names, args)})
        for name, w in zip(km.outputs, want):
            np.testing.assert_allclose(outs[name].numpy(), w, rtol=RTOL, atol=ATOL)
    return proto


def mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(),
                         nn.Dropout(0.2), nn.Linear(16, 4), nn.Softmax(-1))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, groups=4)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.bn2(self.conv2(x)), inplace=True)
        return self.fc(self.gap(x).flatten(1))


def randomize_bn(model):
    """Non-trivial running statistics, so eval-mode BatchNorm is tested for real."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(kiln.randn(m.num_features) * 0.1)
            m.running_var.copy_(kiln.rand(m.num_features) + 0.5)
            m.weight.data.copy_(kiln.rand(m.num_features) + 0.5)
            m.bias.data.copy_(kiln.randn(m.num_features) * 0.1)


class Encoder(nn.Module):
    """A pre-norm transformer block over nn.MultiheadAttention, plus a hand-written
    attention path through F.scaled_dot_product_attention with a causal mask."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.ln3 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln2(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + a.transpose(1, 2).reshape(b, t, d)
        return x + self.mlp(self.ln3(x))


class EmbeddingClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 12)
        self.fc = nn.Linear(12, 3)

    def forward(self, ids):
        return F.log_softmax(self.fc(self.emb(ids).mean(1)), -1)


def test_mlp(tmp_path):
    kiln.manual_seed(0)
    check_model(mlp(), (kiln.randn(5, 8),), tmp_path)


def test_cnn(tmp_path):
    kiln.manual_seed(1)
    model = CNN()
    randomize_bn(model)
    model.train()  # export switches to eval mode and back
    proto = check_model(model, (kiln.randn(2, 3, 16, 16),), tmp_path)
    assert model.training and model.bn1.training
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "MaxPool", "Relu", "Gemm"} <= ops
    conv2 = [n for n in proto.graph.node if n.op_type == "Conv"][1]
    assert [a.i for a in conv2.attribute if a.name == "group"] == [4]


def test_transformer_block(tmp_path):
    kiln.manual_seed(2)
    check_model(Encoder(), (kiln.randn(2, 5, 16),), tmp_path)


def test_transformer_encoder_layer(tmp_path):
    kiln.manual_seed(3)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, activation="gelu",
                                       batch_first=True)
    check_model(layer, (kiln.randn(2, 6, 16),), tmp_path)


def test_embedding_classifier(tmp_path):
    kiln.manual_seed(4)
    ids = kiln.randint(0, 50, (3, 7))
    proto = check_model(EmbeddingClassifier(), (ids,), tmp_path)
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert "Gather" in {n.op_type for n in proto.graph.node}


def test_names_bytesio_and_metadata(tmp_path):
    kiln.manual_seed(5)
    model = mlp()
    x = kiln.randn(3, 8)
    buf = io.BytesIO()
    kiln.onnx.export(model, (x,), buf, input_names=["features"], output_names=["probs"])
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    assert [i.name for i in proto.graph.input] == ["features"]
    assert [o.name for o in proto.graph.output] == ["probs"]
    assert proto.opset_import[0].version == 17 and proto.producer_name == "kiln"
    # initializers keep the module's parameter names
    inits = {t.name for t in proto.graph.initializer}
    assert {"0.bias", "2.bias", "5.bias"} <= inits
    got, names = run_ort(buf.getvalue(), {"features": x.numpy()})
    assert names == ["probs"]
    np.testing.assert_allclose(got[0], eager(model, (x,))[0], rtol=RTOL, atol=ATOL)


def test_several_inputs_outputs_and_callable(tmp_path):
    def fn(a, b):
        prod = a @ b.t()
        return prod, (a.sum(1, keepdim=True) - 1).relu(), prod, a

    a, b = kiln.randn(4, 6), kiln.randn(5, 6)
    proto = check_model(fn, (a, b), tmp_path, input_names=["a", "b"],
                        output_names=["prod", "rowsum", "prod_again"])
    assert [o.name for o in proto.graph.output] == ["prod", "rowsum", "prod_again", "output_3"]


def test_op_coverage(tmp_path):
    """Pointwise, comparison, reduction and shape ops in one function."""
    def fn(x, y):
        a, b = x.chunk(2, dim=1)
        outs = [
            kiln.cat([a.clamp(min=-0.5), b.clamp(-1, 1)], 1),
            kiln.stack([x, x * 2], 0).flatten(),
            x[:, 1:5:2], x[..., ::2], x[1], x.flip(0),
            x.masked_fill(x > 0, 0.25), F.softplus(x), F.silu(x), x.sigmoid() * x.tanh(),
            F.pad(x, (1, 2)), x.sum(), x.amax(1), x.amin(0, keepdim=True), x.mean((0, 1)),
            (x.abs() + 1).pow(2).sqrt().rsqrt().log().exp(), x / 3, x - 2 * y,
            x.max(1)[0], x.argmax(1), F.leaky_relu(x, 0.1), x.to(kiln.float64),
            kiln.where(x < y, x, y), (x >= 0) & (y != 0), x.var(1), x.std(0),
            x.unsqueeze(1).expand(4, 3, 8).permute(2, 0, 1).reshape(8, -1),
            x.unsqueeze(0).squeeze(0), kiln.maximum(x, y) + kiln.minimum(x, y),
            F.gelu(x), F.gelu(x, approximate="tanh"), x.log_softmax(0), x.norm(),
            kiln.addcmul(x, x, y, value=0.5), x.tril(), x.triu(1), x.neg().erf(),
            x + kiln.arange(8).float(), (x > 0).all(1), (x > 0).any(0),
            (x * 3).to(kiln.int64) + 1, kiln.div(x, 0.7, rounding_mode="floor"),
            kiln.remainder(x, 0.6), kiln.fmod(x, 0.6),
        ]
        return tuple(outs)

    check_model(fn, (kiln.randn(4, 8), kiln.randn(4, 8)), tmp_path)


def test_conv_variants(tmp_path):
    kiln.manual_seed(6)
    model = nn.Sequential(nn.Conv2d(4, 6, 3, padding=2, dilation=2, bias=False),
                          nn.AvgPool2d(2), nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1,
                                                              output_padding=1),
                          nn.AdaptiveAvgPool2d(2), nn.Hardtanh(-0.5, 0.5), nn.Sigmoid())
    check_model(model, (kiln.randn(1, 4, 8, 8),), tmp_path)


@pytest.mark.parametrize("name", ["groupnorm", "instancenorm", "batchnorm_batch_stats",
                                  "upsample", "activations", "conv1d", "mha_weights"])
def test_more_modules(name, tmp_path):
    kiln.manual_seed(9)
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    model, shape = {
        "groupnorm": (nn.GroupNorm(2, 4), (2, 4, 5, 5)),
        "instancenorm": (nn.InstanceNorm2d(4, affine=True), (2, 4, 5, 5)),
        "batchnorm_batch_stats": (nn.BatchNorm2d(4, track_running_stats=False), (2, 4, 5, 5)),
        "upsample": (nn.Upsample(scale_factor=2, mode="nearest"), (1, 2, 3, 3)),
        "activations": (nn.Sequential(nn.PReLU(), nn.ELU(), nn.Mish(), nn.ReLU6(),
                                      nn.LogSigmoid(), nn.Softmin(-1)), (3, 6)),
        "conv1d": (nn.Sequential(nn.Conv1d(3, 4, 3, padding=1), nn.MaxPool1d(2)), (2, 3, 8)),
        "mha_weights": (lambda x: mha(x, x, x), (2, 5, 16)),  # attention weights returned
    }[name]
    check_model(model, (kiln.randn(*shape),), tmp_path)


def test_fused_pointwise_program(tmp_path):
    """Hardswish / Hardsigmoid record kiln's fused pointwise_program, decoded step by step."""
    model = nn.Sequential(nn.Hardswish(), nn.Linear(6, 6), nn.Hardsigmoid())
    proto = check_model(model, (kiln.randn(3, 6) * 4,), tmp_path)
    assert "Clip" in {n.op_type for n in proto.graph.node}
    check_model(lambda x: F.hardswish(x) - F.hardsigmoid(x), (kiln.randn(2, 3, 4) * 4,),
                tmp_path, name="fn.onnx")


class LSTMWithState(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True)
        self.cell = nn.LSTMCell(10, 4)

    def forward(self, x, h0, c0):
        y, (h, c) = self.lstm(x, (h0, c0))
        hc, cc = self.cell(y[:, -1])
        return y, h, c, hc, cc


@pytest.mark.parametrize("name", ["lstm", "lstm_state", "gru", "rnn"])
def test_recurrent(name, tmp_path):
    """LSTM records one lstm_cell per step (gate arithmetic); GRU / RNN only ordinary ops."""
    kiln.manual_seed(10)
    x = kiln.randn(2, 4, 3)
    if name == "lstm":
        model, args = nn.LSTM(3, 5), (x,)
    elif name == "lstm_state":
        model, args = LSTMWithState(), (x, kiln.randn(4, 2, 5), kiln.randn(4, 2, 5))
    elif name == "gru":
        model, args = nn.GRU(3, 5, num_layers=2, bidirectional=True), (x,)
    else:
        model, args = nn.RNN(3, 5, nonlinearity="relu", batch_first=True), (x,)
    check_model(model, args, tmp_path)


@pytest.mark.parametrize("mode,kwargs,shape", [
    ("bilinear", dict(scale_factor=2), (1, 2, 3, 3)),
    ("bilinear", dict(scale_factor=2, align_corners=True), (1, 2, 3, 3)),
    ("bilinear", dict(scale_factor=1.7), (2, 2, 3, 4)),  # output not size * factor
    ("bilinear", dict(size=(2, 1)), (1, 3, 5, 4)),  # downsampling
    ("linear", dict(size=7), (2, 3, 4)),
    ("linear", dict(size=7, align_corners=True), (2, 3, 4)),
    ("trilinear", dict(size=(5, 6, 4)), (1, 2, 3, 4, 3)),
    ("bicubic", dict(size=(5, 7)), (1, 2, 3, 3)),
    ("nearest-exact", dict(scale_factor=1.5), (1, 2, 4, 4)),
])
def test_interpolate(mode, kwargs, shape, tmp_path):
    """Linear modes record index_lerp per resized dim, written as Resize along that dim."""
    kiln.manual_seed(11)
    proto = check_model(lambda x: F.interpolate(x, mode=mode, **kwargs), (kiln.randn(*shape),),
                        tmp_path)
    if "linear" in mode:
        resize = [n for n in proto.graph.node if n.op_type == "Resize"]
        assert len(resize) == len(shape) - 2
        want = "align_corners" if kwargs.get("align_corners") else "half_pixel"
        for node in resize:
            assert {a.name: a.s for a in node.attribute}[
                "coordinate_transformation_mode"] == want.encode()


def test_index_lerp_without_resize_match(tmp_path, monkeypatch):
    """Taps that are no Resize's (forced here) are spelled out as Gathers and kiln's lerp."""
    from kiln._onnx_export import ops_resize
    monkeypatch.setattr(ops_resize, "match_resize", lambda *a: None)
    proto = check_model(nn.Upsample(scale_factor=2, mode="bilinear"), (kiln.randn(1, 2, 3, 3),),
                        tmp_path, do_constant_folding=False)
    assert "Resize" not in {n.op_type for n in proto.graph.node}


def test_sort_topk(tmp_path):
    """sort / argsort / topk as TopK (distinct random values: no ties to order)."""
    def fn(x):
        v, i = x.sort(-1)
        vd, id_ = x.sort(0, descending=True)
        top, top_i = x.topk(3, 1)
        low, low_i = x.topk(2, 0, largest=False)
        return v, i, vd, id_, x.argsort(1), top * 2, top_i + 1, low, low_i

    proto = check_model(fn, (kiln.randn(4, 6),), tmp_path)
    assert {n.op_type for n in proto.graph.node} <= {"TopK", "Mul", "Add"}


def test_scatter(tmp_path):
    def fn(x, src, index):
        return (x.scatter(1, index, src), x.scatter(0, index, -1.5),
                x.scatter_add(1, index, src), x.scatter_reduce(1, index, src * 0.5, "prod"),
                x.scatter_reduce(0, index, src, "sum"))

    index = kiln.tensor([[0, 3], [2, 1], [4, 4]])  # repeated in a row: add / mul reduce them
    args = (kiln.randn(5, 5), kiln.randn(3, 4), index)
    ops = {n.op_type for n in check_model(lambda x, s, i: fn(x, s, i)[2:], args, tmp_path,
                                          name="reduce.onnx").graph.node}
    assert "ScatterElements" in ops
    index = kiln.tensor([[0, 3], [2, 1], [4, 0]])  # distinct: a plain scatter is defined
    check_model(lambda x, s, i: fn(x, s, i)[:2], (args[0], args[1], index), tmp_path)


@pytest.mark.parametrize("pool,shape,kwargs", [
    (F.max_pool2d, (2, 3, 6, 5), dict(kernel_size=2)),
    (F.max_pool2d, (2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    (F.max_pool1d, (2, 3, 9), dict(kernel_size=3, stride=2, ceil_mode=True)),
    (F.max_pool3d, (1, 2, 4, 4, 4), dict(kernel_size=2)),
])
def test_max_pool_indices(pool, shape, kwargs, tmp_path):
    """MaxPool's Indices count over the whole tensor, kiln's within a channel's plane."""
    check_model(lambda x: pool(x, return_indices=True, **kwargs), (kiln.randn(*shape),),
                tmp_path)


def test_no_constant_folding_and_params_as_inputs(tmp_path):
    kiln.manual_seed(7)
    model = CNN()
    randomize_bn(model)
    x = kiln.randn(1, 3, 8, 8)
    want = eager(model, (x,))
    _, folded = export_and_check(model, (x,), tmp_path, "folded.onnx")
    path, plain = export_and_check(model, (x,), tmp_path, "plain.onnx",
                                   do_constant_folding=False)
    assert len(plain.graph.node) > len(folded.graph.node)  # the BatchNorm arithmetic stays
    got, _ = run_ort(path, {"input": x.numpy()})
    np.testing.assert_allclose(got[0], want[0], rtol=RTOL, atol=ATOL)

    path, proto = export_and_check(model, (x,), tmp_path, "params.onnx", export_params=False)
    assert not proto.graph.initializer or all(
        t.name not in dict(model.named_parameters()) for t in proto.graph.initializer)
    feeds = {"input": x.numpy()}
    state = dict(model.named_parameters())
    state.update(dict(model.named_buffers()))
    for i in proto.graph.input[1:]:
        feeds[i.name] = state[i.name].detach().numpy()
    got, _ = run_ort(path, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=RTOL, atol=ATOL)


def test_data_dependent_control_flow_is_refused(tmp_path):
    def fn(x):
        if x.sum() > 0:
            return x * 2
        return -x

    with pytest.raises(RuntimeError, match="control flow may depend on the data"):
        kiln.onnx.export(fn, (kiln.randn(3),), str(tmp_path / "m.onnx"))
    assert issubclass(kiln.onnx.DataDependentError, RuntimeError)


def test_unsupported_op_names_it(tmp_path):
    with pytest.raises(NotImplementedError, match=r"op 'cumsum'.*Supported ops: .*addmm"):
        kiln.onnx.export(lambda x: x.cumsum(-1), (kiln.randn(3, 4),), io.BytesIO())
    with pytest.raises(NotImplementedError, match=r"scatter_reduce.*reduce='amax'.*opset 18"):
        kiln.onnx.export(lambda x, i: x.scatter_reduce(1, i, x, "amax"),
                         (kiln.randn(3, 4), kiln.tensor([[0], [1], [3]])), io.BytesIO())


def test_in_place_write_into_view_is_refused():
    def fn(x):
        y = x * 2
        y[:, 0] = 5.0
        return y

    with pytest.raises(NotImplementedError, match="writes in place into a view"):
        kiln.onnx.export(fn, (kiln.randn(3, 4),), io.BytesIO())


def _run_dynamic(model, args, dynamic_axes, names, other_args, tmp_path):
    path, proto = export_and_check(model, args, tmp_path, input_names=names,
                                   dynamic_axes=dynamic_axes)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for alt in [args] + other_args:
        got = sess.run(None, {n: a.numpy() for n, a in zip(names, alt)})
        for g, w in zip(got, eager(model, alt)):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    return [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in list(proto.graph.input) + list(proto.graph.output)]


def test_dynamic_axes(tmp_path):
    """Shape constants that follow the dynamic dims are computed from the inputs' Shape."""
    kiln.manual_seed(12)
    shapes = _run_dynamic(mlp(), (kiln.randn(6, 8),), {"x": {0: "batch"}}, ["x"],
                          [(kiln.randn(9, 8),), (kiln.randn(20, 8),)], tmp_path)
    assert shapes == [["batch", 8], ["batch", 4]]
    shapes = _run_dynamic(Encoder(), (kiln.randn(2, 5, 16),), {"x": [1]}, ["x"],
                          [(kiln.randn(2, 9, 16),), (kiln.randn(2, 3, 16),)], tmp_path)
    assert shapes == [[2, "x_dynamic_axes_1", 16], [2, "x_dynamic_axes_1", 16]]
    # an LSTM cell's zero state is sized by the batch (ConstantOfShape of a computed shape)
    shapes = _run_dynamic(nn.LSTMCell(3, 4), (kiln.randn(5, 3),), {"x": {0: "b"}}, ["x"],
                          [(kiln.randn(11, 3),)], tmp_path)
    assert shapes[0] == ["b", 3] and shapes[1] == ["b", 4]


def test_dynamic_axes_refused_when_not_linear():
    """A flatten over two dynamic dims needs their product; a variance over a dynamic dim
    divides by a float count: both are refused rather than exported wrong."""
    with pytest.raises(NotImplementedError, match="not a linear function"):
        kiln.onnx.export(lambda x: x.reshape(-1) * 2, (kiln.randn(3, 4),), io.BytesIO(),
                         input_names=["x"], dynamic_axes={"x": {0: "a", 1: "b"}})
    with pytest.raises(NotImplementedError, match="depends on the sizes"):
        kiln.onnx.export(lambda x: x.var(0), (kiln.randn(3, 4),), io.BytesIO(),
                         input_names=["x"], dynamic_axes={"x": [0]})
    with pytest.raises(ValueError, match="no input"):
        kiln.onnx.export(mlp(), (kiln.randn(2, 8),), io.BytesIO(), dynamic_axes={"y": [0]})
    kiln.onnx.export(mlp(), (kiln.randn(2, 8),), io.BytesIO(), dynamic_axes={})  # empty: fine


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_same_outputs_as_torch_export(tmp_path):
    """The MLP with identical weights exported by torch.onnx.export gives the same outputs."""
    torch = pytest.importorskip("torch")
    kiln.manual_seed(8)
    km = mlp().eval()
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16),
                             torch.nn.GELU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 4),
                             torch.nn.Softmax(-1)).eval()
    with torch.no_grad():
        for name, p in tm.named_parameters():
            p.copy_(torch.from_numpy(dict(km.named_parameters())[name].detach().numpy()))
    x = kiln.randn(5, 8)
    path, _ = export_and_check(km, (x,), tmp_path, input_names=["x"])
    tpath = str(tmp_path / "torch.onnx")
    try:
        torch.onnx.export(tm, (torch.from_numpy(x.numpy()),), tpath, input_names=["x"],
                          opset_version=17, dynamo=False)
    except Exception as e:  # noqa: BLE001  torch's exporter needs packages of its own
        pytest.skip(f"torch.onnx.export unavailable: {e}")
    mine, _ = run_ort(path, {"x": x.numpy()})
    theirs, _ = run_ort(tpath, {"x": x.numpy()})
    np.testing.assert_allclose(mine[0], theirs[0], rtol=RTOL, atol=ATOL)


def test_exporter_does_not_import_onnx_or_protobuf():
    import subprocess
    import sys
    code = ("import io, sys, kiln, kiln.nn as nn, kiln.onnx\n"
            "kiln.onnx.export(nn.Linear(2, 2), kiln.randn(1, 2), io.BytesIO())\n"
            "bad = [m for m in sys.modules if m == 'onnx' or m.startswith('google.protobuf')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)
