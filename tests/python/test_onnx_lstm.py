"""ONNX LSTM against ONNX Runtime (unoptimized): the default cell on the CPU runs each step's
gate arithmetic as one lstm_cell op (decision 0070); peepholes, clip, a coupled forget gate
and other activations keep the step written as ops. Both directions, sequence lengths,
given or absent initial states, batch-first layout, one step (streaming) and several."""
import numpy as np
import pytest

import kiln
import kiln.onnx

from test_onnx import F32, I32, helper, init, make, save, to_kiln, vi  # noqa: F401
from test_onnx_fusion import ort_unoptimized, ops_run


def _lstm_model(seq, batch, inp, hidden, dirs=1, peephole=False, states=True, lens=False,
                layout=0, **attrs):
    r = np.random.default_rng(seq * 7 + batch)
    g = 4 * hidden
    inits = [init("W", (r.standard_normal((dirs, g, inp)) * 0.3).astype(np.float32)),
             init("R", (r.standard_normal((dirs, g, hidden)) * 0.3).astype(np.float32)),
             init("B", (r.standard_normal((dirs, 2 * g)) * 0.3).astype(np.float32))]
    names = ["x", "W", "R", "B", "lens" if lens else "", "h0" if states else "",
             "c0" if states else ""]
    if peephole:
        inits.append(init("P", (r.standard_normal((dirs, 3 * hidden)) * 0.3).astype(np.float32)))
        names.append("P")
    direction = "bidirectional" if dirs == 2 else "forward"
    node = helper.make_node("LSTM", names, ["y", "yh", "yc"], hidden_size=hidden,
                            direction=direction, layout=layout, **attrs)
    xs = [seq, batch, inp] if layout == 0 else [batch, seq, inp]
    ss = [dirs, batch, hidden] if layout == 0 else [batch, dirs, hidden]
    inputs = [vi("x", F32, xs)]
    feeds = {"x": r.standard_normal(xs).astype(np.float32)}
    if lens:
        inputs.append(vi("lens", I32, [batch]))
        feeds["lens"] = r.integers(1, seq + 1, batch).astype(np.int32)
    if states:
        inputs += [vi("h0", F32, ss), vi("c0", F32, ss)]
        feeds["h0"] = r.standard_normal(ss).astype(np.float32)
        feeds["c0"] = r.standard_normal(ss).astype(np.float32)
    ys = [seq, dirs, batch, hidden] if layout == 0 else [batch, seq, dirs, hidden]
    outputs = [vi("y", F32, ys), vi("yh", F32, ss), vi("yc", F32, ss)]
    return make([node], inputs, outputs, inits, opset=14), feeds


CASES = {
    "streaming step": dict(seq=1, batch=1, inp=64, hidden=32),
    "no initial state": dict(seq=1, batch=1, inp=16, hidden=8, states=False),
    "sequence, batch": dict(seq=5, batch=3, inp=12, hidden=20),
    "bidirectional, lengths": dict(seq=4, batch=3, inp=10, hidden=6, dirs=2, lens=True),
    "peepholes": dict(seq=3, batch=2, inp=8, hidden=5, peephole=True),
    "clip": dict(seq=3, batch=2, inp=8, hidden=5, clip=0.5),
    "coupled forget gate": dict(seq=3, batch=2, inp=8, hidden=5, input_forget=1),
    "other activations": dict(seq=2, batch=2, inp=8, hidden=5,
                              activations=["HardSigmoid", "Tanh", "Relu"]),
}
FUSED = {"streaming step", "no initial state", "sequence, batch", "bidirectional, lengths"}


@pytest.mark.parametrize("case", list(CASES))
def test_lstm_matches_ort(tmp_path, case):
    model, feeds = _lstm_model(**CASES[case])
    path = save(model, tmp_path)
    want = ort_unoptimized(path, feeds)
    out, names = ops_run(kiln.onnx.load(path), feeds)
    assert ("lstm_cell" in names) == (case in FUSED), names
    for got, w in zip(out, want):
        assert got.shape == w.shape
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_batch_first_layout(tmp_path):
    # ONNX Runtime has no layout 1: its layout 0 on the transposed inputs is the reference.
    base, feeds = _lstm_model(seq=3, batch=2, inp=8, hidden=5, dirs=2)
    first, _ = _lstm_model(seq=3, batch=2, inp=8, hidden=5, dirs=2, layout=1)
    want = ort_unoptimized(save(base, tmp_path, "base.onnx"), feeds)
    feeds_first = {"x": feeds["x"].transpose(1, 0, 2).copy(),
                   "h0": feeds["h0"].transpose(1, 0, 2).copy(),
                   "c0": feeds["c0"].transpose(1, 0, 2).copy()}
    out, names = ops_run(kiln.onnx.load(save(first, tmp_path, "first.onnx")), feeds_first)
    assert "lstm_cell" in names
    np.testing.assert_allclose(out[0], want[0].transpose(2, 0, 1, 3), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], want[1].transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[2], want[2].transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
