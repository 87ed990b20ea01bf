"""kiln.onnx folds the activation after a Conv into it at load (conv_folding.cpp, decision
0065): Relu, HardSigmoid, HardSwish, Clip (bounds as attributes before opset 11, constant
inputs after) and the exporters' hard swish written as Add / Clip / Div / Mul in either order
(PaddlePaddle's Div last). The fused model runs `convolution_activation` (oneDNN post-ops, or
kiln's own kernels then the activation) and must give ONNX Runtime's values (unoptimized);
a Conv whose output is also read elsewhere is left alone."""
import numpy as np
import onnx
import pytest

import kiln
import kiln.onnx

from test_onnx import F32, helper, init, make, save, to_kiln, vi  # noqa: F401
from test_onnx_fusion import ort_unoptimized, ops_run


def _conv_graph(tail_nodes, tail_inits=(), out="y", opset=13, extra_outputs=(), cin=5, cout=12,
                shape=(2, 5, 7, 9), group=1, seed=3):
    r = np.random.default_rng(seed)
    w = (r.standard_normal([cout, cin // group, 3, 3]) * 0.4).astype(np.float32)
    b = r.standard_normal(cout).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1],
                              group=group)] + tail_nodes
    out_shape = [shape[0], cout, shape[2], shape[3]]
    outputs = [vi(out, F32, out_shape)] + [vi(n, F32, out_shape) for n in extra_outputs]
    model = make(nodes, [vi("x", F32, list(shape))], outputs,
                 [init("w", w), init("b", b)] + list(tail_inits), opset=opset)
    x = (r.standard_normal(shape) * 2).astype(np.float32)
    return model, x


def _const(name, v):
    return init(name, np.array(v, np.float32))


CASES = {
    "relu": ([helper.make_node("Relu", ["c"], ["y"])], [], 13),
    "hardsigmoid": ([helper.make_node("HardSigmoid", ["c"], ["y"], alpha=0.3, beta=0.4)], [], 13),
    "hardswish": ([helper.make_node("HardSwish", ["c"], ["y"])], [], 14),
    "clip_inputs": ([helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
                    [_const("lo", -0.5), _const("hi", 1.5)], 13),
    "clip_max_only": ([helper.make_node("Clip", ["c", "", "hi"], ["y"])], [_const("hi", 2.0)], 13),
    "clip_attrs": ([helper.make_node("Clip", ["c"], ["y"], min=0.0, max=6.0)], [], 6),
    "hswish_div_inside": ([helper.make_node("Add", ["c", "three"], ["a"]),
                           helper.make_node("Clip", ["a", "zero", "six"], ["cl"]),
                           helper.make_node("Div", ["cl", "six2"], ["d"]),
                           helper.make_node("Mul", ["c", "d"], ["y"])],
                          [_const("three", 3.0), _const("zero", 0.0), _const("six", 6.0),
                           _const("six2", 6.0)], 13),
    "hswish_paddle": ([helper.make_node("Add", ["three", "c"], ["a"]),
                       helper.make_node("Clip", ["a", "zero", "six"], ["cl"]),
                       helper.make_node("Mul", ["cl", "c"], ["m"]),
                       helper.make_node("Div", ["m", "six"], ["y"])],
                      [_const("three", 3.0), _const("zero", 0.0), _const("six", 6.0)], 13),
}


@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_activation_folds_into_the_conv_and_matches_ort(tmp_path, case, onednn):
    tail, inits, opset = CASES[case]
    model, x = _conv_graph(tail, inits, opset=opset)
    path = save(model, tmp_path)
    want = ort_unoptimized(path, {"x": x})[0]
    was = kiln._C._onednn_enabled()
    kiln._C._set_onednn_enabled(onednn)
    try:
        km = kiln.onnx.load(path)
        out, names = ops_run(km, {"x": x})
    finally:
        kiln._C._set_onednn_enabled(was)
    assert "convolution_activation" in names, names
    assert not names & {"convolution", "relu", "pointwise_program", "clamp", "div"}, names
    np.testing.assert_allclose(out[0], want, rtol=1e-5, atol=2e-6)


def test_depthwise_and_one_channel_inputs_fold(tmp_path):
    for cin, cout, group, shape in [(6, 6, 6, (1, 6, 9, 8)), (1, 4, 1, (2, 1, 6, 6))]:
        model, x = _conv_graph([helper.make_node("HardSwish", ["c"], ["y"])], opset=14, cin=cin,
                               cout=cout, group=group, shape=shape)
        path = save(model, tmp_path)
        out, names = ops_run(kiln.onnx.load(path), {"x": x})
        assert "convolution_activation" in names
        np.testing.assert_allclose(out[0], ort_unoptimized(path, {"x": x})[0],
                                   rtol=1e-5, atol=2e-6)


def test_conv_output_read_elsewhere_is_not_folded(tmp_path):
    # The convolution's own output is a graph output too: it must stay un-activated.
    model, x = _conv_graph([helper.make_node("Relu", ["c"], ["y"])], extra_outputs=["c"])
    path = save(model, tmp_path)
    out, names = ops_run(kiln.onnx.load(path), {"x": x})
    assert "convolution_activation" not in names
    want = ort_unoptimized(path, {"x": x})
    np.testing.assert_allclose(out[0], want[0], rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(out[1], want[1], rtol=1e-5, atol=2e-6)
    # A hard swish whose Add reads another value than the Mul's operand is no hard swish.
    tail = [helper.make_node("Relu", ["c"], ["x2"]),
            helper.make_node("Add", ["x2", "three"], ["a"]),
            helper.make_node("Clip", ["a", "zero", "six"], ["cl"]),
            helper.make_node("Mul", ["cl", "c"], ["m"]),
            helper.make_node("Div", ["m", "six"], ["y"])]
    inits = [_const("three", 3.0), _const("zero", 0.0), _const("six", 6.0)]
    model, x = _conv_graph(tail, inits)
    path = save(model, tmp_path)
    out, names = ops_run(kiln.onnx.load(path), {"x": x})
    assert "convolution_activation" not in names
    np.testing.assert_allclose(out[0], ort_unoptimized(path, {"x": x})[0],
                               rtol=1e-5, atol=2e-6)


def _branch(name, nodes, out, out_shape, inits=()):
    return helper.make_graph(nodes, name, [], [vi(out, F32, out_shape)], initializer=list(inits))


@pytest.mark.parametrize("take_then", [True, False])
def test_convolutions_inside_if_branches_fold(tmp_path, take_then):
    # Silero VAD's pattern: the Convs and their activations sit in an If branch, reading the
    # main graph's input and weights (initializers of the main graph, Constant nodes of the
    # branch). Each branch folds on its own; the main graph's weight read by both stays.
    r = np.random.default_rng(5)
    w = (r.standard_normal([6, 4, 3]) * 0.4).astype(np.float32)
    b = r.standard_normal(6).astype(np.float32)
    w2 = (r.standard_normal([6, 4, 3]) * 0.4).astype(np.float32)
    then_g = _branch("then", [
        helper.make_node("Conv", ["x", "w", "b"], ["t_c"], pads=[1, 1]),
        helper.make_node("Relu", ["t_c"], ["t_y"])], "t_y", [2, 6, 10])
    else_g = _branch("else", [
        helper.make_node("Constant", [], ["e_w"], value=init("e_w", w2)),
        helper.make_node("Conv", ["x", "e_w", "b"], ["e_c"], pads=[1, 1]),
        helper.make_node("HardSwish", ["e_c"], ["e_y"])], "e_y", [2, 6, 10])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    model = make(nodes, [vi("x", F32, [2, 4, 10]), vi("cond", onnx.TensorProto.BOOL, [])],
                 [vi("y", F32, [2, 6, 10])], [init("w", w), init("b", b)], opset=14)
    path = save(model, tmp_path)
    feeds = {"x": (r.standard_normal([2, 4, 10]) * 2).astype(np.float32),
             "cond": np.array(take_then)}
    want = ort_unoptimized(path, feeds)[0]
    out, names = ops_run(kiln.onnx.load(path), feeds)
    assert "convolution_activation" in names, names
    assert not names & {"convolution", "relu", "clamp", "hardswish"}, names
    np.testing.assert_allclose(out[0], want, rtol=1e-5, atol=2e-6)


def test_branch_convolution_read_twice_is_not_folded(tmp_path):
    # The branch's Conv output is also the branch's second output: the Relu stays.
    r = np.random.default_rng(6)
    w = (r.standard_normal([3, 2, 1]) * 0.5).astype(np.float32)
    branch = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        "b", [], [vi("y", F32, [1, 3, 5]), vi("c", F32, [1, 3, 5])])
    other = helper.make_graph(
        [helper.make_node("Identity", ["z"], ["y2"]), helper.make_node("Identity", ["z"], ["c2"])],
        "o", [], [vi("y2", F32, [1, 3, 5]), vi("c2", F32, [1, 3, 5])])
    nodes = [helper.make_node("If", ["cond"], ["y", "c"], then_branch=branch, else_branch=other)]
    model = make(nodes, [vi("x", F32, [1, 2, 5]), vi("z", F32, [1, 3, 5]),
                         vi("cond", onnx.TensorProto.BOOL, [])],
                 [vi("y", F32, [1, 3, 5]), vi("c", F32, [1, 3, 5])], [init("w", w)], opset=13)
    path = save(model, tmp_path)
    feeds = {"x": r.standard_normal([1, 2, 5]).astype(np.float32),
             "z": r.standard_normal([1, 3, 5]).astype(np.float32), "cond": np.array(True)}
    want = ort_unoptimized(path, feeds)
    out, names = ops_run(kiln.onnx.load(path), feeds)
    assert "relu" in names and "convolution" in names, names
    for o, wnt in zip(out, want):
        np.testing.assert_allclose(o, wnt, rtol=1e-5, atol=2e-6)
