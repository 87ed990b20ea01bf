"""kiln.onnx runs 2-D Conv layers on channels-last activations (decision 0062): the Conv op
hands oneDNN an nhwc input, its output stays channels-last, and the ops after it (Resize,
Concat, Flatten, Reshape, pooling, pointwise chains) read that layout. The values must be
those ONNX Runtime computes from the same model (float32 rounding apart), whatever the
layout the values pass through."""
import numpy as np
import pytest

import kiln
import kiln.onnx

from test_onnx import F32, I64, helper, init, make, ort, save, to_kiln, vi  # noqa: F401
from test_onnx_fusion import ort_unoptimized


def conv_params(r, cout, cin, k=3):
    return (r.standard_normal([cout, cin, k, k]).astype(np.float32) * 0.3,
            r.standard_normal(cout).astype(np.float32))


def run_both(model, tmp_path, feeds):
    path = save(model, tmp_path)
    km = kiln.onnx.load(path)
    out = km.run({k: to_kiln(v) for k, v in feeds.items()})
    got = [out[n].numpy() for n in km.outputs]
    return got, ort_unoptimized(path, feeds), out


def assert_close(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("mode,coord", [("nearest", "asymmetric"), ("nearest", "half_pixel"),
                                        ("linear", "half_pixel"), ("linear", "align_corners"),
                                        ("cubic", "pytorch_half_pixel")])
def test_conv_then_resize_matches_ort(tmp_path, mode, coord):
    # Conv -> Resize (scales 2 x 3 on H, W; a detector's upsampling) -> Conv: the resize
    # reads the convolution's channels-last output.
    r = np.random.default_rng(7)
    w1, b1 = conv_params(r, 12, 5)
    w2, b2 = conv_params(r, 4, 12)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c", "", "scales"], ["u"], mode=mode,
                              coordinate_transformation_mode=coord),
             helper.make_node("Conv", ["u", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
    inits = [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2),
             init("scales", np.array([1, 1, 2, 3], np.float32))]
    model = make(nodes, [vi("x", F32, [2, 5, 6, 7])], [vi("u", F32, [2, 12, 12, 21]),
                                                       vi("y", F32, [2, 4, 12, 21])], inits)
    x = r.standard_normal([2, 5, 6, 7]).astype(np.float32)
    got, want, _ = run_both(model, tmp_path, {"x": x})
    assert_close(got, want)


def test_concat_flatten_pool_and_pointwise_after_convs_match_ort(tmp_path):
    # Two branches of convolutions (one depthwise) joined by Concat on channels, a hard
    # swish chain, max pooling, a Reshape of the NCHW order and a Flatten: every op that
    # reads channels-last values must see them in ONNX's NCHW order.
    r = np.random.default_rng(8)
    w1, b1 = conv_params(r, 8, 3)
    wd = r.standard_normal([8, 1, 3, 3]).astype(np.float32) * 0.3
    w3, b3 = conv_params(r, 6, 16, k=1)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "wd"], ["d"], pads=[1, 1, 1, 1], group=8),
             helper.make_node("Concat", ["a", "d"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w3", "b3"], ["p"]),
             helper.make_node("HardSwish", ["p"], ["h"]),
             helper.make_node("MaxPool", ["h"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["m", "shape"], ["rs"]),
             helper.make_node("Flatten", ["m"], ["f"], axis=1)]
    inits = [init("w1", w1), init("b1", b1), init("wd", wd), init("w3", w3), init("b3", b3),
             init("shape", np.array([2, 6, -1], np.int64))]
    outputs = [vi("cat", F32, [2, 16, 8, 10]), vi("p", F32, [2, 6, 8, 10]),
               vi("m", F32, [2, 6, 4, 5]),
               vi("rs", F32, [2, 6, 20]), vi("f", F32, [2, 120])]
    model = make(nodes, [vi("x", F32, [2, 3, 8, 10])], outputs, inits, opset=14)
    x = r.standard_normal([2, 3, 8, 10]).astype(np.float32)
    got, want, out = run_both(model, tmp_path, {"x": x})
    assert_close(got, want)
    # The layout the decision promises: a 4-D Conv output stays channels-last.
    assert out["p"].is_contiguous(memory_format=kiln.channels_last)


def test_one_channel_and_nchw_input_kept_correct(tmp_path):
    # A one-channel input (both layouts coincide) and an input fed NCHW to a Conv whose
    # output is also a graph output.
    r = np.random.default_rng(9)
    w1, b1 = conv_params(r, 4, 1)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["y"], pads=[0, 0, 0, 0])]
    model = make(nodes, [vi("x", F32, [1, 1, 5, 5])], [vi("y", F32, [1, 4, 3, 3])],
                 [init("w1", w1), init("b1", b1)])
    x = r.standard_normal([1, 1, 5, 5]).astype(np.float32)
    got, want, _ = run_both(model, tmp_path, {"x": x})
    assert_close(got, want)
