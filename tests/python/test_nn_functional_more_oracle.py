"""The functional forms and modules of decision 0079 (kiln/nn/_functional_pool_more.py,
_functional_misc_more.py, _functional_bag.py, _functional_sampling.py, _functional_ctc.py and
their modules) against torch 2.13 on identical inputs: values and the gradients of every
floating input, float32 and float64, their options and edge cases, and torch's exception
classes for bad arguments. The random ones (alpha dropout, Gumbel-softmax) are checked by
their statistics and structure, and by eval-mode identity."""
import math

import numpy as np
import pytest
import torch

import kiln
import oracle
from test_nn_oracle import ModCase, run_module_case

DTYPES = ["float32", "float64"]


def _F(L):
    return torch.nn.functional if L is torch else kiln.nn.functional


class In:
    """One input given as a numpy array; floating arrays become gradient leaves."""

    def __init__(self, array, grad=None):
        self.array = np.asarray(array)
        self.grad = self.array.dtype.kind == "f" if grad is None else grad


def _uniform(rng, shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape)


def check(name, fn, inputs, dtype, tol=1.0, grad=True):
    """fn(L, *tensors) with L = torch and L = kiln: same result, same input gradients."""
    built_t, built_k = [], []
    for item in inputs:
        item = item if isinstance(item, In) else In(item)
        a = item.array.astype(dtype) if item.array.dtype.kind == "f" else item.array
        t, k = torch.tensor(a), kiln.tensor(a)
        if grad and item.grad:
            t.requires_grad_(True)
            k.requires_grad_(True)
        built_t.append(t)
        built_k.append(k)
    where = f"{name}[{dtype}]"
    tr, kr = fn(torch, *built_t), fn(kiln, *built_k)
    oracle.assert_same(kr, tr, tol, where=where)
    n = 1
    tr = tr[0] if isinstance(tr, tuple) else tr
    kr = kr[0] if isinstance(kr, tuple) else kr
    if grad and tr.requires_grad:
        rng = np.random.default_rng(oracle._seed("cotangent", name, dtype))
        g = rng.uniform(-1, 1, size=tuple(tr.shape)).astype(dtype)
        tr.backward(torch.tensor(g))
        kr.backward(kiln.tensor(g))
        for i, (t, k) in enumerate(zip(built_t, built_k)):
            if not t.requires_grad:
                continue
            if t.grad is None or not t.grad.numpy().any():
                assert k.grad is None or not oracle.to_numpy(k.grad).any(), f"{where} input {i}"
                continue
            assert k.grad is not None, f"{where}: kiln computed no gradient of input {i}"
            oracle.assert_same(k.grad, t.grad, tol * 4, where=f"{where} grad of input {i}")
        n += 1
    oracle.record("nn." + name.split(" ")[0], n)


def rng_for(*parts):
    return np.random.default_rng(oracle._seed(*parts))


# --- pooling, unpooling, local response normalisation -------------------------------------

def _pool_cases():
    r = rng_for("pool")
    pos = lambda shape: _uniform(r, shape, 0.1, 2.0)  # noqa: E731  (x^p of fractional p)
    return {
        "lp_pool1d p2": (lambda L, x: _F(L).lp_pool1d(x, 2, 3, 2), [_uniform(r, (2, 3, 9))]),
        "lp_pool1d p3 unbatched": (lambda L, x: _F(L).lp_pool1d(x, 3, 2),
                                   [pos((3, 8))]),
        "lp_pool2d p2 ceil": (lambda L, x: _F(L).lp_pool2d(x, 2, (2, 3), ceil_mode=True),
                              [_uniform(r, (2, 3, 7, 8))]),
        "lp_pool2d p1.5 stride": (lambda L, x: _F(L).lp_pool2d(x, 1.5, 2, stride=1),
                                  [pos((2, 2, 5, 4))]),
        "lp_pool2d pinf": (lambda L, x: _F(L).lp_pool2d(x, float("inf"), 2),
                           [_uniform(r, (1, 2, 4, 6))]),
        "lp_pool3d p2": (lambda L, x: _F(L).lp_pool3d(x, 2, (2, 2, 3), stride=(1, 2, 2)),
                         [_uniform(r, (2, 2, 4, 5, 6))]),
        "adaptive_max_pool3d": (lambda L, x: _F(L).adaptive_max_pool3d(x, (2, None, 3), True),
                                [_uniform(r, (2, 3, 5, 4, 7))]),
        "adaptive_max_pool3d_unbatched": (lambda L, x: _F(L).adaptive_max_pool3d(x, 2),
                                          [_uniform(r, (3, 5, 4, 7))]),
        "adaptive_max_pool3d_with_indices": (
            lambda L, x: _F(L).adaptive_max_pool3d_with_indices(x, (3, 2, 2)),
            [_uniform(r, (1, 2, 6, 5, 4))]),
        "adaptive_max_pool1d_with_indices": (
            lambda L, x: _F(L).adaptive_max_pool1d_with_indices(x, 4),
            [_uniform(r, (2, 3, 9))]),
        "max_pool3d_with_indices": (
            lambda L, x: _F(L).max_pool3d_with_indices(x, 2, stride=1, padding=1),
            [_uniform(r, (1, 2, 3, 4, 5))]),
        "local_response_norm 3d": (lambda L, x: _F(L).local_response_norm(x, 3),
                                   [_uniform(r, (2, 7, 5))]),
        "local_response_norm 4d even": (
            lambda L, x: _F(L).local_response_norm(x, 4, alpha=0.3, beta=0.6, k=2.0),
            [_uniform(r, (2, 6, 3, 4))]),
        "local_response_norm 5d": (
            lambda L, x: _F(L).local_response_norm(x, 5, alpha=0.1),
            [_uniform(r, (2, 4, 2, 3, 3))]),
        "local_response_norm wide window": (
            lambda L, x: _F(L).local_response_norm(x, 9, alpha=0.5),
            [_uniform(r, (1, 3, 4))]),
    }


POOL_CASES = _pool_cases()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(POOL_CASES))
def test_pooling_vs_torch(name, dtype):
    fn, inputs = POOL_CASES[name]
    check(name, fn, inputs, dtype)


def _unpool(nd, kernel, stride, padding, shape, output_size=None):
    """max_unpool of torch's own max_pool result (values and indices) on a random input."""
    x = rng_for("unpool", nd, shape).uniform(-2, 2, size=shape)
    pool = getattr(torch.nn.functional, f"max_pool{nd}d")
    values, indices = pool(torch.tensor(x), kernel, stride, padding, return_indices=True)

    def fn(L, v, i):
        return getattr(_F(L), f"max_unpool{nd}d")(v, i, kernel, stride, padding, output_size)
    return fn, [values.numpy(), indices.numpy()]


UNPOOL_CASES = {
    "max_unpool1d": _unpool(1, 2, None, 0, (2, 3, 8)),
    "max_unpool1d overlapping": _unpool(1, 3, 2, 1, (2, 3, 9)),
    "max_unpool2d": _unpool(2, 2, None, 0, (2, 3, 6, 8)),
    "max_unpool2d output_size": _unpool(2, 2, 2, 0, (1, 2, 7, 5), output_size=(7, 5)),
    "max_unpool2d full output_size": _unpool(2, 2, 2, 0, (1, 2, 7, 5),
                                             output_size=(1, 2, 7, 5)),
    "max_unpool2d unbatched": _unpool(2, (2, 3), (2, 1), 0, (3, 5, 6)),
    "max_unpool3d": _unpool(3, 2, None, 0, (1, 2, 4, 4, 6)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(UNPOOL_CASES))
def test_max_unpool_vs_torch(name, dtype):
    fn, inputs = UNPOOL_CASES[name]
    check(name, fn, inputs, dtype)


# --- small layers: channel shuffle, pdist, leaky_relu_, multilabel margin ---------------------

def _misc_cases():
    r = rng_for("misc")
    target = np.array([[3, 0, -1, 1, 1], [0, 1, 2, 3, 4], [4, -1, 0, 0, 0], [-1, 2, 2, 2, 2]])
    cases = {
        "channel_shuffle": (lambda L, x: _F(L).channel_shuffle(x, 3), [_uniform(r, (2, 6, 3))]),
        "channel_shuffle 4d": (lambda L, x: _F(L).channel_shuffle(x, 2),
                               [_uniform(r, (1, 8, 2, 3))]),
        "native_channel_shuffle": (lambda L, x: _F(L).native_channel_shuffle(x, 4),
                                   [_uniform(r, (2, 8, 3))]),
        "pdist one row": (lambda L, x: _F(L).pdist(x), [_uniform(r, (1, 4))]),
        "multilabel_margin_loss 1d": (
            lambda L, x, y: _F(L).multilabel_margin_loss(x, y), [_uniform(r, (5,)),
                                                                np.array([2, 4, -1, 0, 1])]),
    }
    for p in (0.5, 1, 2, 3, float("inf")):
        cases[f"pdist p{p}"] = (lambda L, x, p=p: _F(L).pdist(x, p), [_uniform(r, (6, 4))])
    for red in ("mean", "sum", "none"):
        cases[f"multilabel_margin_loss {red}"] = (
            lambda L, x, y, red=red: _F(L).multilabel_margin_loss(x, y, reduction=red),
            [_uniform(r, (4, 5)), target])
    return cases


MISC_CASES = _misc_cases()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(MISC_CASES))
def test_small_layers_vs_torch(name, dtype):
    fn, inputs = MISC_CASES[name]
    # torch has no derivative of native_channel_shuffle (kiln's is channel_shuffle's)
    check(name, fn, inputs, dtype, grad=not name.startswith("native"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_leaky_relu_in_place(dtype):
    a = rng_for("leaky").uniform(-2, 2, size=(3, 4)).astype(dtype)
    t, k = torch.tensor(a), kiln.tensor(a)
    rt, rk = torch.nn.functional.leaky_relu_(t, 0.2), kiln.nn.functional.leaky_relu_(k, 0.2)
    assert rk is k or rk._is_same(k)
    oracle.assert_same(k, t, where="leaky_relu_")
    oracle.assert_same(rk, rt, where="leaky_relu_ result")
    oracle.record("nn.leaky_relu_")


# --- embedding_bag -----------------------------------------------------------------------

def _bag_cases():
    r = rng_for("bag")
    flat = np.array([1, 2, 4, 5, 4, 3, 2, 9, 9, 0])
    offsets = np.array([0, 4, 4, 7])  # bag 1 is empty
    weight = lambda: _uniform(r, (10, 3))  # noqa: E731
    cases = {}
    for mode in ("sum", "mean", "max"):
        cases[f"embedding_bag {mode} offsets"] = (
            lambda L, w, i, o, mode=mode: _F(L).embedding_bag(i, w, o, mode=mode),
            [weight(), flat, offsets])
        cases[f"embedding_bag {mode} 2d"] = (
            lambda L, w, i, mode=mode: _F(L).embedding_bag(i, w, mode=mode),
            [weight(), r.integers(0, 10, size=(4, 3))])
        cases[f"embedding_bag {mode} padding_idx"] = (
            lambda L, w, i, o, mode=mode: _F(L).embedding_bag(i, w, o, mode=mode,
                                                               padding_idx=2),
            [weight(), np.array([2, 2, 1, 2, 5, 5, 2]), np.array([0, 2, 4])])
        cases[f"embedding_bag {mode} last offset"] = (
            lambda L, w, i, o, mode=mode: _F(L).embedding_bag(i, w, o, mode=mode,
                                                               include_last_offset=True),
            [weight(), flat, np.array([0, 3, 3, 8, 10])])
    cases["embedding_bag per_sample_weights"] = (
        lambda L, w, i, o, s: _F(L).embedding_bag(i, w, o, mode="sum", per_sample_weights=s),
        [weight(), flat, offsets, _uniform(r, (10,))])
    cases["embedding_bag per_sample_weights 2d padding"] = (
        lambda L, w, i, s: _F(L).embedding_bag(i, w, mode="sum", per_sample_weights=s,
                                               padding_idx=-1),
        [weight(), np.array([[9, 1, 2], [3, 9, 9]]), _uniform(r, (2, 3))])
    cases["embedding_bag all empty"] = (
        lambda L, w, i, o: _F(L).embedding_bag(i, w, o, mode="mean"),
        [weight(), np.zeros(0, dtype=np.int64), np.array([0, 0])])
    return cases


BAG_CASES = _bag_cases()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(BAG_CASES))
def test_embedding_bag_vs_torch(name, dtype):
    fn, inputs = BAG_CASES[name]
    check(name, fn, inputs, dtype)


# --- affine_grid and grid_sample ---------------------------------------------------------

def _sampling_cases():
    r = rng_for("sampling")
    cases = {}
    for ac in (True, False):
        cases[f"affine_grid 2d align={ac}"] = (
            lambda L, th, ac=ac: _F(L).affine_grid(th, [2, 3, 4, 5], align_corners=ac),
            [_uniform(r, (2, 2, 3))])
        cases[f"affine_grid 3d align={ac}"] = (
            lambda L, th, ac=ac: _F(L).affine_grid(th, (1, 2, 3, 4, 2), align_corners=ac),
            [_uniform(r, (1, 3, 4))])
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for ac in (True, False):
                # grid points up to half the input outside it on every side
                cases[f"grid_sample 2d {mode} {pad} align={ac}"] = (
                    lambda L, x, g, m=mode, p=pad, a=ac: _F(L).grid_sample(x, g, m, p, a),
                    [_uniform(r, (2, 3, 4, 5)), _uniform(r, (2, 3, 6, 2), -1.6, 1.6)])
    for mode in ("bilinear", "nearest"):
        for pad in ("zeros", "border", "reflection"):
            for ac in (True, False):
                cases[f"grid_sample 3d {mode} {pad} align={ac}"] = (
                    lambda L, x, g, m=mode, p=pad, a=ac: _F(L).grid_sample(x, g, m, p, a),
                    [_uniform(r, (2, 2, 3, 4, 5)), _uniform(r, (2, 2, 3, 2, 3), -1.6, 1.6)])
    cases["grid_sample far outside"] = (
        lambda L, x, g: _F(L).grid_sample(x, g, padding_mode="reflection",
                                          align_corners=False),
        [_uniform(r, (1, 2, 3, 4)), _uniform(r, (1, 4, 4, 2), -7.0, 7.0)])
    cases["grid_sample size-1 input reflection"] = (
        lambda L, x, g: _F(L).grid_sample(x, g, padding_mode="reflection", align_corners=True),
        [_uniform(r, (1, 2, 1, 4)), _uniform(r, (1, 2, 3, 2), -1.5, 1.5)])
    # grid points exactly on the edges: torch's clip passes no gradient there
    edges = np.array([[[[-1.0, 1.0], [1.0, -1.0], [0.25, 1.0], [-1.0, -0.5]],
                       [[1.2, 1.0], [-1.0, -1.3], [0.0, 0.0], [1.0, 0.3]]]])
    for pad in ("border", "reflection"):
        cases[f"grid_sample {pad} exact edges"] = (
            lambda L, x, g, p=pad: _F(L).grid_sample(x, g, padding_mode=p, align_corners=True),
            [_uniform(r, (1, 2, 3, 4)), edges])
    cases["affine_grid into grid_sample"] = (
        lambda L, x, th: _F(L).grid_sample(
            x, _F(L).affine_grid(th, [2, 3, 5, 4], align_corners=False), align_corners=False),
        [_uniform(r, (2, 3, 6, 7)), _uniform(r, (2, 2, 3), -0.8, 0.8)])
    cases["affine_grid identity align_corners"] = (
        lambda L, x: _F(L).grid_sample(
            x, _F(L).affine_grid(L.eye(2, 3, dtype=x.dtype).reshape(1, 2, 3), [1, 1, 4, 5],
                                 align_corners=True), padding_mode="border",
            align_corners=True),
        [_uniform(r, (1, 1, 4, 5))])
    return cases


SAMPLING_CASES = _sampling_cases()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(SAMPLING_CASES))
def test_sampling_vs_torch(name, dtype):
    fn, inputs = SAMPLING_CASES[name]
    check(name, fn, inputs, dtype, tol=4.0)


def test_grid_sample_identity_grid_returns_input():
    x = kiln.tensor(rng_for("identity").uniform(-1, 1, size=(1, 2, 3, 4)))
    grid = kiln.nn.functional.affine_grid(kiln.tensor([[[1.0, 0, 0], [0, 1.0, 0]]]).double(),
                                          [1, 2, 3, 4], align_corners=False)
    out = kiln.nn.functional.grid_sample(x, grid, align_corners=False)
    np.testing.assert_allclose(out.numpy(), x.numpy(), atol=1e-12)
    oracle.record("nn.grid_sample_identity")


# --- ctc_loss ----------------------------------------------------------------------------

def _log_probs(r, t, n, c):
    logits = r.normal(size=(t, n, c))
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def _ctc(targets, input_lengths, target_lengths, **kw):
    def fn(L, lp, y):
        il = L.tensor(input_lengths) if isinstance(input_lengths, list) else input_lengths
        return _F(L).ctc_loss(lp, y, il, L.tensor(target_lengths), **kw)
    return fn, np.asarray(targets)


def _ctc_cases():
    r = rng_for("ctc")
    padded = [[1, 2, 2, 0], [3, 1, 0, 0], [4, 4, 4, 4]]
    cases = {}
    for red in ("none", "mean", "sum"):
        fn, y = _ctc(padded, [8, 7, 8], [3, 2, 4], reduction=red)
        cases[f"ctc_loss padded {red}"] = (fn, [_log_probs(r, 8, 3, 5), y])
        fn, y = _ctc([1, 2, 2, 3, 1, 4, 4], [6, 8], [3, 4], reduction=red)
        cases[f"ctc_loss concatenated {red}"] = (fn, [_log_probs(r, 8, 2, 5), y])
    fn, y = _ctc([[0, 1, 1], [2, 0, 3]], [7, 5], [3, 3], blank=4)
    cases["ctc_loss blank last"] = (fn, [_log_probs(r, 7, 2, 5), y])
    # sample 1 needs 5 frames for its 3 labels (two repeats) but has 4: infinite loss
    fn, y = _ctc([[1, 2, 3], [2, 2, 2]], [6, 4], [3, 3], zero_infinity=True, reduction="none")
    cases["ctc_loss zero_infinity none"] = (fn, [_log_probs(r, 6, 2, 4), y])
    fn, y = _ctc([[1, 2, 3], [2, 2, 2]], [6, 4], [3, 3], zero_infinity=True, reduction="mean")
    cases["ctc_loss zero_infinity mean"] = (fn, [_log_probs(r, 6, 2, 4), y])
    fn, y = _ctc([[1, 2], [3, 1]], [5, 5], [0, 2], reduction="sum")
    cases["ctc_loss empty target"] = (fn, [_log_probs(r, 5, 2, 4), y])
    fn, y = _ctc([[2, 3, 1, 3]], [9], [4], reduction="none")
    cases["ctc_loss long"] = (fn, [_log_probs(r, 9, 1, 6), y])

    def unbatched(L, lp, y):
        return _F(L).ctc_loss(lp, y, L.tensor(6), L.tensor(2), reduction="none")
    cases["ctc_loss unbatched"] = (unbatched, [_log_probs(r, 6, 1, 4)[:, 0], np.array([3, 1])])
    return cases


CTC_CASES = _ctc_cases()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CTC_CASES))
def test_ctc_loss_vs_torch(name, dtype):
    fn, inputs = CTC_CASES[name]
    check(name, fn, inputs, dtype, tol=4.0)


def test_ctc_loss_infinite_without_zero_infinity():
    lp = _log_probs(rng_for("ctc-inf"), 4, 1, 3)
    args = lambda L: (L.tensor(lp), L.tensor([[1, 1, 1]]), L.tensor([4]), L.tensor([3]))  # noqa
    tr = torch.nn.functional.ctc_loss(*args(torch), reduction="none")
    kr = kiln.nn.functional.ctc_loss(*args(kiln), reduction="none")
    assert math.isinf(tr.item()) and math.isinf(kr.item())
    oracle.record("nn.ctc_loss_inf")


def test_ctc_loss_gradient_through_log_softmax():
    """The logits' gradient through log_softmax (what training sees) matches torch's."""
    logits = rng_for("ctc-logits").normal(size=(7, 2, 5))
    tl = torch.tensor(logits, requires_grad=True)
    kl = kiln.tensor(logits)
    kl.requires_grad_(True)
    for L, x in ((torch, tl), (kiln, kl)):
        _F(L).ctc_loss(_F(L).log_softmax(x, 2), L.tensor([[1, 2, 3], [4, 4, 0]]),
                       L.tensor([7, 6]), L.tensor([3, 2])).backward()
    oracle.assert_same(kl.grad, tl.grad, 4.0, where="ctc logits grad")
    oracle.record("nn.ctc_loss_logits")


# --- modules -----------------------------------------------------------------------------

class _CTCWithLengths:
    """A module wrapper giving CTCLoss fixed targets and lengths after the log_softmax."""

    @staticmethod
    def make(nn, **kw):
        L = torch if nn is torch.nn else kiln

        class Wrapped(nn.Module):
            def __init__(self):
                super().__init__()
                self.loss = nn.CTCLoss(**kw)

            def forward(self, x):
                return self.loss(x.log_softmax(2), L.tensor([[1, 2, 1], [3, 3, 0]]),
                                 L.tensor([6, 5]), L.tensor([3, 2]))
        return Wrapped()


class _Unpooled:
    @staticmethod
    def make(nn):
        class PoolUnpool(nn.Module):
            def __init__(self):
                super().__init__()
                self.pool = nn.MaxPool2d(2, return_indices=True)
                self.unpool = nn.MaxUnpool2d(2)

            def forward(self, x):
                return self.unpool(*self.pool(x))
        return PoolUnpool()


MODULE_CASES = [
    ModCase("LPPool1d", lambda nn: nn.LPPool1d(2, 3, stride=2), [(2, 3, 9)]),
    ModCase("LPPool2d", lambda nn: nn.LPPool2d(2, (2, 3), ceil_mode=True), [(2, 3, 5, 7)]),
    ModCase("LPPool3d", lambda nn: nn.LPPool3d(2, 2), [(1, 2, 4, 4, 5)]),
    ModCase("MaxUnpool2d", _Unpooled.make, [(2, 3, 4, 6)]),
    ModCase("AdaptiveMaxPool3d", lambda nn: nn.AdaptiveMaxPool3d((2, None, 3)), [(2, 3, 4, 4, 5)]),
    ModCase("LocalResponseNorm", lambda nn: nn.LocalResponseNorm(3, alpha=0.2), [(2, 5, 3, 3)]),
    # 9 channels: past the first window, where torch's running sum keeps channel 0
    ModCase("CrossMapLRN2d", lambda nn: nn.CrossMapLRN2d(5, 0.1, 0.75, 2), [(2, 9, 3, 2)]),
    ModCase("CrossMapLRN2d_even", lambda nn: nn.CrossMapLRN2d(4, 0.3), [(1, 7, 2, 2)]),
    ModCase("ChannelShuffle", lambda nn: nn.ChannelShuffle(2), [(2, 4, 3, 3)]),
    ModCase("AlphaDropout_eval", lambda nn: nn.AlphaDropout(0.3), [(4, 5)], train=False),
    ModCase("FeatureAlphaDropout_eval", lambda nn: nn.FeatureAlphaDropout(0.3), [(2, 4, 5)],
            train=False),
    ModCase("AlphaDropout_p0", lambda nn: nn.AlphaDropout(0.0), [(4, 5)]),
    ModCase("EmbeddingBag", lambda nn: nn.EmbeddingBag(10, 3), [("long", (4, 3), 10)]),
    ModCase("EmbeddingBag_max_padding",
            lambda nn: nn.EmbeddingBag(10, 3, mode="max", padding_idx=-2),
            [("long", (4, 5), 10)]),
    ModCase("EmbeddingBag_sum", lambda nn: nn.EmbeddingBag(6, 2, mode="sum"),
            [("long", (3, 4), 6)]),
    ModCase("MultiLabelMarginLoss", lambda nn: nn.MultiLabelMarginLoss(),
            [(4, 5), ("long", (4, 5), 5)]),
    ModCase("MultiLabelMarginLoss_sum", lambda nn: nn.MultiLabelMarginLoss(reduction="sum"),
            [(4, 5), ("long", (4, 5), 5)]),
    ModCase("CTCLoss", lambda nn: _CTCWithLengths.make(nn), [(6, 2, 4)]),
    ModCase("CTCLoss_sum_blank", lambda nn: _CTCWithLengths.make(nn, blank=0, reduction="sum",
                                                                 zero_infinity=True),
            [(6, 2, 4)]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", MODULE_CASES, ids=[c.name for c in MODULE_CASES])
def test_module_vs_torch(case, dtype):
    run_module_case(case, dtype)


@pytest.mark.parametrize("freeze", [True, False])
def test_embedding_bag_from_pretrained(freeze):
    w = rng_for("pretrained").uniform(-1, 1, size=(5, 3))
    tb = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(w), freeze=freeze, mode="sum")
    kb = kiln.nn.EmbeddingBag.from_pretrained(kiln.tensor(w), freeze=freeze, mode="sum")
    assert repr(kb) == repr(tb)
    assert kb.weight.requires_grad == tb.weight.requires_grad
    idx, off = [4, 0, 0, 2], [0, 1]
    oracle.assert_same(kb(kiln.tensor(idx), kiln.tensor(off)),
                       tb(torch.tensor(idx), torch.tensor(off)), where="from_pretrained")
    oracle.record("nn.EmbeddingBag_from_pretrained")


# --- random layers: statistics and structure -------------------------------------------

def test_alpha_dropout_keeps_mean_and_variance():
    kiln.manual_seed(0)
    x = kiln.randn(400, 500)
    y = kiln.nn.functional.alpha_dropout(x, 0.2, training=True)
    assert abs(y.mean().item()) < 0.02
    assert abs(y.std().item() - 1.0) < 0.02
    # the dropped units all hold one value: a * (-alpha') + b of torch's formula
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha ** 2 * 0.2 + 1) * 0.8)
    dropped = -alpha * a + alpha * a * 0.2
    share = (y - dropped).abs().lt(1e-6).float().mean().item()
    assert abs(share - 0.2) < 0.01
    oracle.record("nn.alpha_dropout_statistics")


def test_feature_alpha_dropout_drops_whole_channels():
    kiln.manual_seed(1)
    x = kiln.randn(64, 32, 5, 6)
    y = kiln.nn.functional.feature_alpha_dropout(x, 0.5, training=True)
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha ** 2 * 0.5 + 1) * 0.5)
    kept = (y - (x * a + alpha * a * 0.5)).abs().lt(1e-5)
    per_channel = kept.float().mean((2, 3))
    # every channel is either kept whole or dropped whole, about half of each
    assert bool(((per_channel == 0) | (per_channel == 1)).all())
    assert abs(per_channel.mean().item() - 0.5) < 0.05
    oracle.record("nn.feature_alpha_dropout_channels")


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_identity_and_extremes(name):
    fn = getattr(kiln.nn.functional, name)
    x = kiln.randn(3, 4, 5)
    assert bool((fn(x, 0.5, training=False) == x).all())
    assert bool((fn(x, 0.0, training=True) == x).all())
    assert bool((fn(x, 1.0, training=True) == 0).all())
    module = getattr(kiln.nn, "AlphaDropout" if name == "alpha_dropout"
                     else "FeatureAlphaDropout")(0.4)
    module.eval()
    assert bool((module(x) == x).all())
    oracle.record("nn." + name + "_identity")


def test_gumbel_softmax_samples_the_softmax():
    kiln.manual_seed(2)
    logits = kiln.tensor([[0.5, -1.0, 1.5, 0.0]]).expand(20000, 4)
    soft = kiln.nn.functional.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(1).numpy(), 1.0, rtol=1e-5)
    hard = kiln.nn.functional.gumbel_softmax(logits, tau=0.5, hard=True)
    assert bool(((hard == 0) | (hard == 1)).all()) and bool((hard.sum(1) == 1).all())
    # the argmax of logits + Gumbel noise is distributed as softmax(logits)
    frequencies = hard.mean(0).numpy()
    expected = torch.softmax(torch.tensor([0.5, -1.0, 1.5, 0.0]), 0).numpy()
    np.testing.assert_allclose(frequencies, expected, atol=0.015)
    oracle.record("nn.gumbel_softmax_statistics")


def test_gumbel_softmax_hard_has_the_soft_gradient():
    logits = kiln.tensor([[0.2, 1.0, -0.5], [1.0, 0.0, 0.3]])
    logits.requires_grad_(True)
    weights = kiln.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
    kiln.manual_seed(3)
    (kiln.nn.functional.gumbel_softmax(logits, hard=True) * weights).sum().backward()
    hard_grad = logits.grad.numpy().copy()
    logits.grad = None
    kiln.manual_seed(3)
    (kiln.nn.functional.gumbel_softmax(logits) * weights).sum().backward()
    np.testing.assert_allclose(hard_grad, logits.grad.numpy(), rtol=1e-6)
    oracle.record("nn.gumbel_softmax_straight_through")


# --- bad arguments: torch's exception classes --------------------------------------------

ERRORS = {
    "lrn_2d_input": lambda L: _F(L).local_response_norm(L.ones(2, 3), 2),
    "unpool_indices_shape": lambda L: _F(L).max_unpool2d(
        L.ones(1, 1, 2, 2), L.zeros(1, 1, 2, 1, dtype=L.int64), 2),
    "unpool_bad_output_size": lambda L: _F(L).max_unpool2d(
        L.ones(1, 1, 2, 2), L.zeros(1, 1, 2, 2, dtype=L.int64), 2, output_size=(9, 9)),
    "unpool_index_out_of_range": lambda L: _F(L).max_unpool1d(
        L.ones(1, 1, 2), L.tensor([[[0, 7]]]), 2),
    "alpha_dropout_p": lambda L: _F(L).alpha_dropout(L.ones(3), 1.5),
    "AlphaDropout_p": lambda L: L.nn.AlphaDropout(-0.1),
    "channel_shuffle_indivisible": lambda L: _F(L).channel_shuffle(L.ones(1, 5, 2), 2),
    "channel_shuffle_2d": lambda L: _F(L).channel_shuffle(L.ones(4, 2), 2),
    "pdist_3d": lambda L: _F(L).pdist(L.ones(2, 3, 4)),
    "multilabel_target_shape": lambda L: _F(L).multilabel_margin_loss(
        L.ones(2, 3), L.zeros(2, 4, dtype=L.int64)),
    "bag_mode": lambda L: _F(L).embedding_bag(L.tensor([0, 1]), L.ones(3, 2), L.tensor([0]),
                                              mode="median"),
    "bag_2d_with_offsets": lambda L: _F(L).embedding_bag(L.tensor([[0, 1]]), L.ones(3, 2),
                                                         L.tensor([0])),
    "bag_1d_without_offsets": lambda L: _F(L).embedding_bag(L.tensor([0, 1]), L.ones(3, 2)),
    "bag_3d_input": lambda L: _F(L).embedding_bag(L.zeros(1, 1, 1, dtype=L.int64),
                                                  L.ones(3, 2)),
    "bag_weights_mean": lambda L: _F(L).embedding_bag(
        L.tensor([0, 1]), L.ones(3, 2), L.tensor([0]), per_sample_weights=L.ones(2)),
    "bag_weights_shape": lambda L: _F(L).embedding_bag(
        L.tensor([0, 1]), L.ones(3, 2), L.tensor([0]), mode="sum",
        per_sample_weights=L.ones(3)),
    "bag_1d_weight": lambda L: _F(L).embedding_bag(L.tensor([0]), L.ones(3), L.tensor([0])),
    "bag_first_offset": lambda L: _F(L).embedding_bag(L.tensor([0, 1]), L.ones(3, 2),
                                                      L.tensor([1])),
    "EmbeddingBag_padding_idx": lambda L: L.nn.EmbeddingBag(3, 2, padding_idx=5),
    "affine_grid_int_theta": lambda L: _F(L).affine_grid(L.zeros(1, 2, 3, dtype=L.int64),
                                                         [1, 1, 2, 2], False),
    "affine_grid_theta_shape": lambda L: _F(L).affine_grid(L.zeros(1, 3, 3), [1, 1, 2, 2],
                                                           False),
    "affine_grid_size_len": lambda L: _F(L).affine_grid(L.zeros(1, 2, 3), [1, 2, 2], False),
    "affine_grid_zero_size": lambda L: _F(L).affine_grid(L.zeros(1, 2, 3), [1, 1, 0, 2],
                                                         False),
    "grid_sample_mode": lambda L: _F(L).grid_sample(L.ones(1, 1, 2, 2), L.zeros(1, 1, 1, 2),
                                                    mode="area", align_corners=False),
    "grid_sample_padding": lambda L: _F(L).grid_sample(
        L.ones(1, 1, 2, 2), L.zeros(1, 1, 1, 2), padding_mode="wrap", align_corners=False),
    "grid_sample_grid_last_dim": lambda L: _F(L).grid_sample(
        L.ones(1, 1, 2, 2), L.zeros(1, 1, 1, 3), align_corners=False),
    "grid_sample_batch": lambda L: _F(L).grid_sample(L.ones(2, 1, 2, 2), L.zeros(1, 1, 1, 2),
                                                     align_corners=False),
    "grid_sample_bicubic_3d": lambda L: _F(L).grid_sample(
        L.ones(1, 1, 2, 2, 2), L.zeros(1, 1, 1, 1, 3), mode="bicubic", align_corners=False),
    "ctc_input_length_too_long": lambda L: _F(L).ctc_loss(
        L.zeros(3, 1, 4), L.tensor([[1, 2]]), L.tensor([5]), L.tensor([2])),
    "ctc_blank_out_of_range": lambda L: _F(L).ctc_loss(
        L.zeros(3, 1, 4), L.tensor([[1, 2]]), L.tensor([3]), L.tensor([2]), blank=4),
    "ctc_lengths_batch": lambda L: _F(L).ctc_loss(
        L.zeros(3, 2, 4), L.tensor([[1, 2], [1, 1]]), L.tensor([3]), L.tensor([2, 2])),
    "ctc_targets_too_short": lambda L: _F(L).ctc_loss(
        L.zeros(3, 1, 4), L.tensor([[1, 2]]), L.tensor([3]), L.tensor([3])),
    "CrossMapLRN2d_3d": lambda L: L.nn.CrossMapLRN2d(3)(L.ones(2, 3, 4)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_like_torch(name):
    oracle.check_same_error_class(ERRORS[name], "nn.error_" + name)
