"""The activations and small layers of kiln/nn/functional_activation.h against PyTorch 2.13:
modules (forward, input and parameter gradients, buffers, repr, state_dict layout) through
test_nn_oracle's module harness, functional forms (forward and gradients, float32 and
float64, and forward on NaN / inf / -0) through the op oracle, channel dropout statistics,
and the errors torch raises."""
import numpy as np
import pytest
import torch

import kiln
import oracle
from test_nn_oracle import ModCase, run_module_case

W = "wide"  # inputs in [-8, 8]: past every bend of these functions

CASES = [
    ModCase("Hardtanh", lambda nn: nn.Hardtanh(), [(4, 5)]),
    ModCase("Hardtanh_bounds", lambda nn: nn.Hardtanh(-0.5, 1.5), [(4, 5)]),
    ModCase("ReLU6", lambda nn: nn.ReLU6(), [(4, 6)], domain=W),
    ModCase("Hardsigmoid", lambda nn: nn.Hardsigmoid(), [(4, 6)], domain=W),
    ModCase("Hardswish", lambda nn: nn.Hardswish(), [(4, 6)], domain=W),
    ModCase("ELU", lambda nn: nn.ELU(), [(4, 5)], domain=W),
    ModCase("ELU_alpha", lambda nn: nn.ELU(alpha=0.5), [(4, 5)]),
    ModCase("SELU", lambda nn: nn.SELU(), [(4, 5)], domain=W),
    ModCase("CELU", lambda nn: nn.CELU(alpha=2.0), [(4, 5)], domain=W),
    ModCase("Mish", lambda nn: nn.Mish(), [(4, 5)], domain=W),
    ModCase("LogSigmoid", lambda nn: nn.LogSigmoid(), [(4, 5)], domain=W),
    ModCase("Softsign", lambda nn: nn.Softsign(), [(4, 5)]),
    ModCase("Tanhshrink", lambda nn: nn.Tanhshrink(), [(4, 5)]),
    ModCase("Softshrink", lambda nn: nn.Softshrink(0.7), [(4, 5)]),
    ModCase("Hardshrink", lambda nn: nn.Hardshrink(0.3), [(4, 5)]),
    ModCase("Threshold", lambda nn: nn.Threshold(0.1, 20.0), [(4, 5)]),
    ModCase("GLU", lambda nn: nn.GLU(), [(4, 6)]),
    ModCase("GLU_dim1", lambda nn: nn.GLU(dim=1), [(2, 6, 3)]),
    ModCase("PReLU", lambda nn: nn.PReLU(), [(4, 3, 5)]),
    ModCase("PReLU_channels", lambda nn: nn.PReLU(3, init=0.1), [(4, 3, 5)]),
    ModCase("PReLU_channels_4d", lambda nn: nn.PReLU(3), [(2, 3, 2, 2)]),
    ModCase("RReLU_eval", lambda nn: nn.RReLU(0.1, 0.3), [(4, 5)], train=False),
    ModCase("Softmin", lambda nn: nn.Softmin(dim=1), [(4, 5)]),
    ModCase("Softmax2d", lambda nn: nn.Softmax2d(), [(2, 3, 4, 4)]),
    ModCase("Softmax2d_unbatched", lambda nn: nn.Softmax2d(), [(3, 2, 5)]),
    ModCase("PixelShuffle", lambda nn: nn.PixelShuffle(2), [(2, 8, 3, 3)]),
    ModCase("PixelShuffle_5d", lambda nn: nn.PixelShuffle(3), [(2, 2, 9, 2, 1)]),
    ModCase("PixelUnshuffle", lambda nn: nn.PixelUnshuffle(2), [(2, 2, 4, 6)]),
    ModCase("CosineSimilarity", lambda nn: nn.CosineSimilarity(), [(4, 5), (4, 5)]),
    ModCase("CosineSimilarity_bcast", lambda nn: nn.CosineSimilarity(dim=-1, eps=1e-6),
            [(3, 4, 5), (1, 5)]),
    ModCase("PairwiseDistance", lambda nn: nn.PairwiseDistance(), [(4, 5), (4, 5)]),
    ModCase("PairwiseDistance_p1_keepdim", lambda nn: nn.PairwiseDistance(1.0, keepdim=True),
            [(4, 5), (4, 5)]),
    ModCase("InstanceNorm1d", lambda nn: nn.InstanceNorm1d(3), [(4, 3, 5)]),
    ModCase("InstanceNorm1d_unbatched", lambda nn: nn.InstanceNorm1d(3), [(3, 5)]),
    ModCase("InstanceNorm2d_affine", lambda nn: nn.InstanceNorm2d(3, affine=True),
            [(2, 3, 4, 4)]),
    ModCase("InstanceNorm2d_stats", lambda nn: nn.InstanceNorm2d(3, track_running_stats=True),
            [(2, 3, 4, 4)]),
    ModCase("InstanceNorm2d_stats_eval",
            lambda nn: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
            [(2, 3, 4, 4)], train=False),
    ModCase("InstanceNorm3d", lambda nn: nn.InstanceNorm3d(2, eps=1e-3), [(2, 2, 2, 3, 2)]),
    ModCase("BatchNorm3d_train", lambda nn: nn.BatchNorm3d(3), [(2, 3, 2, 2, 2)]),
    ModCase("BatchNorm3d_eval", lambda nn: nn.BatchNorm3d(3), [(2, 3, 2, 2, 2)], train=False),
    ModCase("Dropout1d_p0", lambda nn: nn.Dropout1d(0.0), [(4, 3, 5)]),
    ModCase("Dropout2d_eval", lambda nn: nn.Dropout2d(0.5), [(2, 3, 4, 4)], train=False),
    ModCase("Dropout3d_eval", lambda nn: nn.Dropout3d(0.5), [(2, 3, 2, 2, 2)], train=False),
    ModCase("ZeroPad1d", lambda nn: nn.ZeroPad1d((1, 2)), [(2, 3, 4)]),
    ModCase("ZeroPad2d", lambda nn: nn.ZeroPad2d(1), [(2, 3, 4, 4)]),
    ModCase("ZeroPad3d", lambda nn: nn.ZeroPad3d((1, 0, 0, 1, 2, 0)), [(1, 2, 3, 3, 3)]),
    ModCase("ConstantPad1d", lambda nn: nn.ConstantPad1d((1, 2), 3.5), [(2, 3, 4)]),
    ModCase("ConstantPad2d", lambda nn: nn.ConstantPad2d(2, -1.0), [(2, 3, 4)]),
    ModCase("ConstantPad3d", lambda nn: nn.ConstantPad3d(1, 0.5), [(1, 2, 2, 2, 2)]),
    ModCase("ReflectionPad1d", lambda nn: nn.ReflectionPad1d(2), [(2, 3, 5)]),
    ModCase("ReflectionPad2d", lambda nn: nn.ReflectionPad2d((1, 0, 2, 1)), [(2, 3, 4, 4)]),
    ModCase("ReflectionPad3d", lambda nn: nn.ReflectionPad3d(1), [(1, 2, 3, 3, 3)]),
    ModCase("ReplicationPad1d", lambda nn: nn.ReplicationPad1d((3, 1)), [(2, 3, 4)]),
    ModCase("ReplicationPad2d", lambda nn: nn.ReplicationPad2d(2), [(2, 3, 4, 4)]),
    ModCase("ReplicationPad3d", lambda nn: nn.ReplicationPad3d(1), [(1, 2, 3, 3, 3)]),
    ModCase("CircularPad1d", lambda nn: nn.CircularPad1d(2), [(2, 3, 4)]),
    ModCase("CircularPad2d", lambda nn: nn.CircularPad2d((1, 2, 0, 1)), [(2, 3, 4, 4)]),
    ModCase("CircularPad3d", lambda nn: nn.CircularPad3d(1), [(1, 2, 3, 3, 3)]),
    ModCase("Sequential_mobilenet_block",
            lambda nn: nn.Sequential(nn.Conv2d(3, 6, 1), nn.Hardswish(), nn.PReLU(6),
                                     nn.InstanceNorm2d(6, affine=True), nn.ZeroPad2d(1),
                                     nn.Conv2d(6, 6, 3, groups=6), nn.Hardsigmoid(),
                                     nn.PixelShuffle(1)), [(2, 3, 5, 5)], domain=W),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_module_vs_torch(case, dtype):
    run_module_case(case, dtype)


def _F(L):
    return torch.nn.functional if L is torch else kiln.nn.functional


FP = ["float32", "float64"]


def _unary(name, **kw):
    """F.name(x, **kw) on a [4, 5] input: forward and gradient, then forward on NaN / inf."""
    return [oracle.Op(f"F.{name}", lambda L, x, _n=name, _kw=kw: getattr(_F(L), _n)(x, **_kw),
                      [((4, 5),), ((2, 3, 4),)], dtypes=FP),
            oracle.Op(f"F.{name}_special",
                      lambda L, x, _n=name, _kw=kw: getattr(_F(L), _n)(x, **_kw),
                      [((6, 7),)], dtypes=FP, domain="special", grad=False)]


F_OPS = (_unary("hardtanh") + _unary("hardtanh", min_val=-2.0, max_val=0.5) + _unary("relu6") +
         _unary("hardsigmoid") + _unary("hardswish") + _unary("elu") + _unary("elu", alpha=0.3) +
         _unary("selu") + _unary("celu", alpha=1.5) + _unary("mish") + _unary("logsigmoid") +
         _unary("softsign") + _unary("tanhshrink") + _unary("softshrink", lambd=0.4) +
         _unary("hardshrink", lambd=0.6) + _unary("threshold", threshold=0.2, value=-1.0) +
         _unary("glu", dim=0) + _unary("softmin", dim=1) + _unary("normalize") +
         _unary("normalize", p=1.0, dim=-1) + _unary("rrelu") + [
    oracle.Op("F.prelu", lambda L, x, w: _F(L).prelu(x, w),
              [((4, 3, 5), (3,)), ((4, 3), (1,)), ((2, 3, 2, 2), (3,))], dtypes=FP),
    oracle.Op("F.cosine_similarity", lambda L, a, b: _F(L).cosine_similarity(a, b),
              [((4, 5), (4, 5)), ((3, 4, 5), (4, 5))], dtypes=FP),
    oracle.Op("F.cosine_similarity_last", lambda L, a, b: _F(L).cosine_similarity(a, b, -1),
              [((3, 1, 5), (4, 5))], dtypes=FP),
    oracle.Op("F.pairwise_distance", lambda L, a, b, **kw: _F(L).pairwise_distance(a, b, **kw),
              [((4, 5), (4, 5)), ((5,), (3, 5))], kwargs=[{}, {"p": 3.0, "keepdim": True}],
              dtypes=FP),
    oracle.Op("F.pixel_shuffle", lambda L, x: _F(L).pixel_shuffle(x, 2),
              [((1, 8, 2, 3),), ((12, 3, 2),)], dtypes=["bfloat16"] + FP),
    oracle.Op("F.pixel_unshuffle", lambda L, x: _F(L).pixel_unshuffle(x, 3),
              [((1, 2, 6, 3),), ((1, 3, 3),)], dtypes=["bfloat16"] + FP),
    oracle.Op("F.instance_norm", lambda L, x, w, b: _F(L).instance_norm(x, weight=w, bias=b),
              [((2, 3, 5), (3,), (3,)), ((2, 3, 2, 3), (3,), (3,))], dtypes=FP, tol=10),
])


@pytest.mark.parametrize("op,dtype", oracle.params(F_OPS))
def test_functional_vs_torch(op, dtype):
    oracle.run_op(op, dtype)


def test_instance_norm_running_stats_update_like_torch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 6))
    rm, rv = rng.standard_normal(4), rng.uniform(0.5, 2.0, 4)
    t_rm, t_rv = torch.tensor(rm), torch.tensor(rv)
    k_rm, k_rv = kiln.tensor(rm), kiln.tensor(rv)
    ty = torch.nn.functional.instance_norm(torch.tensor(x), t_rm, t_rv, momentum=0.3)
    ky = kiln.nn.functional.instance_norm(kiln.tensor(x), k_rm, k_rv, momentum=0.3)
    np.testing.assert_allclose(ky.numpy(), ty.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(k_rm.numpy(), t_rm.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(k_rv.numpy(), t_rv.numpy(), rtol=1e-12, atol=1e-14)
    # use_input_stats=False normalises with the running statistics, as batch norm in eval.
    ty = torch.nn.functional.instance_norm(torch.tensor(x), t_rm, t_rv, use_input_stats=False)
    ky = kiln.nn.functional.instance_norm(kiln.tensor(x), k_rm, k_rv, use_input_stats=False)
    np.testing.assert_allclose(ky.numpy(), ty.numpy(), rtol=1e-12, atol=1e-12)
    oracle.record("nn.instance_norm_running_stats", 3)


@pytest.mark.parametrize("name,shape,channels", [("dropout1d", (40, 50, 7), (40, 50)),
                                                 ("dropout2d", (30, 40, 3, 4), (30, 40)),
                                                 ("dropout2d", (30, 40, 6), (30, 40)),
                                                 ("dropout3d", (30, 40, 2, 2, 3), (30, 40)),
                                                 ("dropout3d", (300, 2, 2, 3), (300,))])
def test_channel_dropout_zeroes_whole_channels(name, shape, channels):
    kiln.manual_seed(1)
    fn = getattr(kiln.nn.functional, name)
    y = fn(kiln.ones(*shape), p=0.3).numpy()
    per_channel = y.reshape(channels + (-1,))
    kept = per_channel[..., 0] != 0
    # each channel is all zeros or all 1 / (1 - p)
    assert np.all(per_channel[kept] == np.float32(1 / 0.7))
    assert np.all(per_channel[~kept] == 0)
    assert abs(kept.mean() - 0.7) < 0.05, kept.mean()
    x = kiln.ones(*shape, requires_grad=True)
    fn(x, p=0.3).sum().backward()  # the gradient is the mask
    g = x.grad.numpy().reshape(channels + (-1,))
    assert set(np.unique(g)) <= {0.0, np.float32(1 / 0.7)}
    assert np.array_equal(fn(kiln.ones(*shape), p=0.3, training=False).numpy(), np.ones(shape))
    assert not fn(kiln.ones(*shape), p=1.0).numpy().any()
    oracle.record("nn." + name + "_train")


def test_rrelu_training_slopes_lie_between_the_bounds():
    kiln.manual_seed(2)
    x = kiln.full((4000,), -2.0, requires_grad=True)
    y = kiln.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    slopes = y.detach().numpy() / -2.0
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 0.01 and slopes.std() > 0.05
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes, rtol=1e-6)
    pos = kiln.nn.functional.rrelu(kiln.full((10,), 3.0), training=True)
    assert np.all(pos.numpy() == 3.0)
    oracle.record("nn.rrelu_train")


ERRORS = {
    "glu_odd": lambda L: _F(L).glu(L.ones(3, 5)),
    "hardtanh_bounds": lambda L: _F(L).hardtanh(L.ones(3), 1.0, -1.0),
    "softshrink_negative": lambda L: _F(L).softshrink(L.ones(3), -0.5),
    "prelu_weight_size": lambda L: _F(L).prelu(L.ones(2, 3, 4), L.ones(4)),
    "pixel_shuffle_channels": lambda L: _F(L).pixel_shuffle(L.ones(1, 6, 2, 2), 2),
    "pixel_unshuffle_size": lambda L: _F(L).pixel_unshuffle(L.ones(1, 1, 3, 4), 2),
    "pixel_shuffle_rank": lambda L: _F(L).pixel_shuffle(L.ones(4, 4), 2),
    "dropout1d_rank": lambda L: _F(L).dropout1d(L.ones(2, 3, 4, 5)),
    "dropout_p": lambda L: _F(L).dropout2d(L.ones(2, 3, 4, 5), p=1.5),
    "instance_norm_one_position": lambda L: _F(L).instance_norm(L.ones(2, 3, 1)),
    "InstanceNorm_rank": lambda L: L.nn.InstanceNorm2d(3)(L.ones(2, 3)),
    "BatchNorm3d_rank": lambda L: L.nn.BatchNorm3d(3)(L.ones(2, 3, 4, 4)),
    "Softmax2d_rank": lambda L: L.nn.Softmax2d()(L.ones(2, 3)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_like_torch(name):
    """Every input torch rejects, kiln rejects too, with a message naming the problem."""
    oracle.check_rejected_with_message(ERRORS[name], "nn.error_" + name)


@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid"])
def test_inference_pass_equals_the_ops_bit_for_bit(name):
    """Without a gradient to record, float32 hardswish / hardsigmoid run as one
    pointwise_program pass; its values are the op sequence's exactly (the recorded path)."""
    x = kiln.randn(3, 40, 33, 17) * 5.0
    fn = getattr(kiln.nn.functional, name)
    with kiln.profiler.profile() as prof:
        fast = fn(x)
    assert "pointwise_program" in {e.key for e in prof.key_averages()}
    xg = x.clone().requires_grad_(True)
    with kiln.profiler.profile() as prof:
        ops = fn(xg)
    assert "pointwise_program" not in {e.key for e in prof.key_averages()}
    np.testing.assert_array_equal(fast.numpy(), ops.detach().numpy())
    oracle.record("nn." + name + "_inference_pass")


FOLD_CASES = [
    ModCase("Unfold", lambda nn: nn.Unfold(3), [(2, 3, 5, 6)]),
    ModCase("Unfold_all_options", lambda nn: nn.Unfold((2, 3), dilation=(2, 1), padding=(1, 2),
                                                       stride=(2, 3)), [(2, 3, 7, 8)]),
    ModCase("Unfold_unbatched", lambda nn: nn.Unfold(2, stride=2), [(3, 4, 4)]),
    ModCase("Fold", lambda nn: nn.Fold((4, 5), 2), [(2, 12, 12)]),
    ModCase("Fold_overlapping_padded",
            lambda nn: nn.Fold((6, 7), (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)),
            [(2, 18, 21)]),
    ModCase("Fold_unbatched", lambda nn: nn.Fold(4, 2, stride=2), [(8, 4)]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", FOLD_CASES, ids=[c.name for c in FOLD_CASES])
def test_fold_unfold_vs_torch(case, dtype):
    run_module_case(case, dtype)


@pytest.mark.parametrize("name", ["fold_blocks", "fold_channels", "fold_rank", "unfold_rank",
                                  "unfold_fit"])
def test_fold_errors_like_torch(name):
    cases = {
        "fold_blocks": lambda L: L.nn.functional.fold(L.ones(1, 4, 5), (3, 3), 2),
        "fold_channels": lambda L: L.nn.functional.fold(L.ones(1, 5, 4), (3, 3), 2),
        "fold_rank": lambda L: L.nn.functional.fold(L.ones(3, 3, 3, 3), (3, 3), 2),
        "unfold_rank": lambda L: L.nn.functional.unfold(L.ones(3, 3), 2),
        "unfold_fit": lambda L: L.nn.functional.unfold(L.ones(1, 1, 2, 2), 3),
    }
    oracle.check_same_error_class(cases[name], "nn.error_" + name)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid", "elu", "selu", "celu", "mish",
                                  "logsigmoid", "softsign", "tanhshrink", "glu", "relu6"])
def test_16_bit_activations_round_once_like_torch(name, dtype):
    """16-bit inputs are computed in float32 and rounded once, as PyTorch's kernels: the
    results equal torch's bit for bit (a composition rounding after every op did not)."""
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(1)) * 4
    tx = x.to(getattr(torch, dtype))
    kx = kiln.from_numpy(x.numpy()).to(getattr(kiln, dtype))
    want = getattr(torch.nn.functional, name)(tx).float().numpy()
    got = getattr(kiln.nn.functional, name)(kx).float().numpy()
    np.testing.assert_array_equal(got, want)
    oracle.record(f"nn.{name}_{dtype}_rounded_once")
