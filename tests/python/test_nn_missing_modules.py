"""AdaptiveLogSoftmaxWithLoss, fractional max pooling, SyncBatchNorm and DataParallel
(python/kiln/nn/modules/{adaptive,fractional,parallel}.py) against PyTorch with identical
weights and random samples."""
import numpy as np
import pytest
import torch

import kiln
import kiln.nn as nn
import kiln.nn.functional as F

TOL = {torch.float64: 1e-10, torch.float32: 1e-5}
KDT = {torch.float64: kiln.float64, torch.float32: kiln.float32}


def K(t, device=None):
    r = kiln.tensor(t.detach().numpy())
    return r.to(device) if device else r


def N(t):
    return t.detach().cpu().numpy() if hasattr(t, "cpu") else np.asarray(t)


def close(k, t, dt):
    np.testing.assert_allclose(N(k), t.detach().numpy(), rtol=TOL[dt], atol=TOL[dt])


def load_from_torch(kmod, tmod, device=None):
    kmod.load_state_dict({k: K(v, device) for k, v in tmod.state_dict().items()})


# --- AdaptiveLogSoftmaxWithLoss ---------------------------------------------------------

ASM_CASES = [
    (16, 20, [5, 12], 4.0, False, torch.float64),
    (16, 20, [5, 12], 4.0, True, torch.float32),
    (12, 10, [3], 2.0, False, torch.float64),
    (10, 30, [2, 7, 19], 1.5, True, torch.float64),
]


@pytest.mark.parametrize("inf,ncls,cutoffs,div,hb,dt", ASM_CASES)
def test_adaptive_log_softmax_matches_torch(inf, ncls, cutoffs, div, hb, dt):
    torch.manual_seed(0)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(inf, ncls, cutoffs, div_value=div,
                                             head_bias=hb).to(dt)
    km = nn.AdaptiveLogSoftmaxWithLoss(inf, ncls, cutoffs, div_value=div, head_bias=hb,
                                       dtype=KDT[dt])
    assert list(km.state_dict()) == list(tm.state_dict())
    assert repr(km) == repr(tm)
    load_from_torch(km, tm)
    x = torch.randn(13, inf, dtype=dt) * 2
    tgt = torch.randint(0, ncls, (13,))
    tgt[0], tgt[1] = 0, ncls - 1
    tx = x.clone().requires_grad_()
    kx = K(x).requires_grad_()
    to = tm(tx, tgt)
    ko = km(kx, K(tgt))
    assert type(ko).__name__ == "_ASMoutput" and ko._fields == ("output", "loss")
    close(ko.output, to.output, dt)
    close(ko.loss, to.loss, dt)
    to.loss.backward()
    ko.loss.backward()
    close(kx.grad, tx.grad, dt)
    kparams = dict(km.named_parameters())
    for name, p in tm.named_parameters():
        close(kparams[name].grad, p.grad, dt)
    close(km.log_prob(K(x)), tm.log_prob(x), dt)
    assert np.array_equal(N(km.predict(K(x))), tm.predict(x).numpy())
    # unbatched input, 0-d target
    to1 = tm(x[3], tgt[3])
    ko1 = km(K(x[3]), K(tgt[3]))
    assert tuple(ko1.output.shape) == ()
    close(ko1.output, to1.output, dt)
    close(ko1.loss, to1.loss, dt)


def test_adaptive_log_softmax_single_cluster_targets_and_predict_paths():
    torch.manual_seed(1)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 12, [4, 8]).double()
    km = nn.AdaptiveLogSoftmaxWithLoss(8, 12, [4, 8], dtype=kiln.float64)
    load_from_torch(km, tm)
    x = torch.randn(6, 8, dtype=torch.float64)
    for tgt in (torch.tensor([0, 1, 2, 3, 0, 1]), torch.tensor([9, 10, 11, 8, 8, 9])):
        close(km(K(x), K(tgt)).loss, tm(x, tgt).loss, torch.float64)
    # head biased so that predict takes each branch: all shortlist, all tail, mixed
    with torch.no_grad():
        for bias_row, scale in ((0, 50.0), (4, 50.0), (5, 0.0)):
            tm.head.weight.zero_()
            tm.head.weight[bias_row] = scale
            if scale == 0.0:
                tm.head.weight.normal_()
            load_from_torch(km, tm)
            xs = torch.rand(7, 8, dtype=torch.float64) + 0.5
            assert np.array_equal(N(km.predict(K(xs))), tm.predict(xs).numpy())


def test_adaptive_log_softmax_errors():
    for bad in ([3, 3], [6, 3], [3, 10], [0, 3], [-1], [3, 11]):
        with pytest.raises(ValueError):
            torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, bad)
        with pytest.raises(ValueError):
            nn.AdaptiveLogSoftmaxWithLoss(8, 10, bad)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6])
    km = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6])
    x = torch.randn(4, 8)
    cases = [(x, torch.tensor([0, 1, 2, 10])), (x, torch.tensor([0, 1, 2, -1])),
             (x, torch.tensor([0, 1, 2])), (x[0], torch.tensor([[0]])),
             (x.reshape(2, 2, 8), torch.tensor([0, 1])), (x, torch.tensor(1))]
    for xi, ti in cases:
        with pytest.raises(RuntimeError) as te:
            tm(xi, ti)
        with pytest.raises(RuntimeError) as ke:
            km(K(xi), K(ti))
        if "Target values" in str(te.value):
            assert str(ke.value) == str(te.value)


def test_adaptive_log_softmax_xpu():
    torch.manual_seed(2)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 15, [4, 9])
    km = nn.AdaptiveLogSoftmaxWithLoss(8, 15, [4, 9]).to("xpu")
    load_from_torch(km, tm, "xpu")
    x = torch.randn(9, 8)
    tgt = torch.randint(0, 15, (9,))
    kx = K(x, "xpu").requires_grad_()
    ko = km(kx, K(tgt, "xpu"))
    tx = x.clone().requires_grad_()
    to = tm(tx, tgt)
    close(ko.output, to.output, torch.float32)
    ko.loss.backward()
    to.loss.backward()
    close(kx.grad, tx.grad, torch.float32)
    close(km.log_prob(K(x, "xpu")), tm.log_prob(x), torch.float32)


# --- fractional max pooling -------------------------------------------------------------

FMP_CASES = [
    # nd, input shape, kernel, output_size, output_ratio, dtype
    (2, (2, 3, 9, 9), 3, (5, 4), None, torch.float32),
    (2, (2, 3, 10, 7), 2, (6, 5), None, torch.float64),
    (2, (1, 2, 25, 25), (3, 2), (11, 13), None, torch.float32),
    (2, (3, 17, 13), 2, (9, 1), None, torch.float32),          # unbatched
    (2, (2, 3, 9, 9), 3, 7, None, torch.float64),              # largest allowed output
    (2, (2, 2, 32, 20), 2, None, (0.5, 0.7), torch.float32),
    (2, (2, 3, 100, 100), 3, (37, 61), None, torch.float32),
    (3, (2, 2, 7, 8, 9), (2, 3, 2), (4, 5, 3), None, torch.float32),
    (3, (1, 2, 9, 6, 11), 2, (5, 3, 7), None, torch.float64),
    (3, (2, 10, 12, 7), 2, None, (0.5, 0.5, 0.6), torch.float64),   # unbatched
]


def _fmp(nd):
    return getattr(torch.nn.functional, f"fractional_max_pool{nd}d")


@pytest.mark.parametrize("nd,shape,k,osz,ratio,dt", FMP_CASES)
def test_fractional_max_pool_matches_torch_exactly(nd, shape, k, osz, ratio, dt):
    torch.manual_seed(3)
    x = torch.randn(*shape, dtype=dt)
    n = shape[0] if len(shape) == nd + 2 else 1
    s = torch.rand(n, shape[-nd - 1], nd, dtype=dt)
    tx = x.clone().requires_grad_()
    to, ti = _fmp(nd)(tx, k, output_size=osz, output_ratio=ratio, return_indices=True,
                      _random_samples=s)
    kx = K(x).requires_grad_()
    ko, ki = getattr(F, f"fractional_max_pool{nd}d")(kx, k, output_size=osz,
                                                      output_ratio=ratio,
                                                      return_indices=True,
                                                      _random_samples=K(s))
    assert np.array_equal(N(ko), to.detach().numpy())
    assert np.array_equal(N(ki), ti.numpy())
    g = torch.randn(to.shape, dtype=dt)
    to.backward(g)
    ko.backward(K(g))
    close(kx.grad, tx.grad, dt)
    # the _with_indices variant and the module agree
    kv, kj = getattr(F, f"fractional_max_pool{nd}d_with_indices")(
        K(x), k, output_size=osz, output_ratio=ratio, _random_samples=K(s))
    assert np.array_equal(N(kj), ti.numpy())
    mod = getattr(nn, f"FractionalMaxPool{nd}d")(k, output_size=osz, output_ratio=ratio,
                                                 _random_samples=K(s))
    assert np.array_equal(N(mod(K(x))), to.detach().numpy())


def test_fractional_max_pool_random_windows_many():
    """Many random shapes / samples: the window rule matches torch everywhere."""
    rng = np.random.default_rng(0)
    for trial in range(40):
        nd = 2 + trial % 2
        dt = (torch.float32, torch.float64)[trial % 3 == 0]
        k = tuple(int(v) for v in rng.integers(1, 4, nd))
        inp = tuple(int(ki + v) for ki, v in zip(k, rng.integers(1, 12, nd)))
        lim = [i - ki + (1 if nd == 2 else 0) for i, ki in zip(inp, k)]
        out = tuple(int(rng.integers(1, max(2, lm + 1))) for lm in lim)
        out = tuple(min(o, lm) for o, lm in zip(out, lim))
        if min(out) < 1:
            continue
        x = torch.randn(2, 2, *inp, dtype=dt)
        s = torch.rand(2, 2, nd, dtype=dt)
        to, ti = _fmp(nd)(x, k, output_size=out, return_indices=True, _random_samples=s)
        ko, ki = getattr(F, f"fractional_max_pool{nd}d")(K(x), k, output_size=out,
                                                          return_indices=True,
                                                          _random_samples=K(s))
        assert np.array_equal(N(ki), ti.numpy()), (nd, inp, k, out)
        assert np.array_equal(N(ko), to.numpy())


def test_fractional_max_pool_without_samples_uses_kiln_rng():
    x = kiln.randn(2, 3, 11, 11, dtype=kiln.float64)
    kiln.manual_seed(5)
    a, ia = F.fractional_max_pool2d(x, 2, output_ratio=0.5, return_indices=True)
    kiln.manual_seed(5)
    b = nn.FractionalMaxPool2d(2, output_ratio=0.5)(x)
    assert tuple(a.shape) == (2, 3, 5, 5) and np.array_equal(N(a), N(b))
    # values are the input at the returned flat indices
    flat = N(x).reshape(2, 3, -1)
    assert np.array_equal(np.take_along_axis(flat, N(ia).reshape(2, 3, -1), 2).reshape(
        2, 3, 5, 5), N(a))
    m3 = nn.FractionalMaxPool3d(2, output_size=3, return_indices=True)
    v, i = m3(kiln.randn(3, 6, 6, 6))
    assert tuple(v.shape) == (3, 3, 3, 3) and i.dtype == kiln.int64


def test_fractional_max_pool_errors():
    x = torch.randn(2, 3, 9, 9)
    s = torch.rand(2, 3, 2)
    bad = [dict(kernel_size=3, output_size=8), dict(kernel_size=3, output_size=(7, 8)),
           dict(kernel_size=10, output_size=1),
           dict(kernel_size=3, output_size=4, _random_samples=torch.rand(2, 3, 3)),
           dict(kernel_size=3, output_size=4, _random_samples=torch.rand(1, 3, 2)),
           dict(kernel_size=3, output_size=4, _random_samples=s.double())]
    for kw in bad:
        with pytest.raises(RuntimeError) as te:
            torch.nn.functional.fractional_max_pool2d(x, **kw)
        kkw = {k: (K(v) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        with pytest.raises(RuntimeError) as ke:
            F.fractional_max_pool2d(K(x), **kkw)
        assert str(ke.value) == str(te.value)
    x3 = torch.randn(2, 3, 5, 5, 5)
    for osz in (4, (3, 4, 3), (3, 3, 4)):
        with pytest.raises(RuntimeError) as te:
            torch.nn.functional.fractional_max_pool3d(x3, 2, output_size=osz)
        with pytest.raises(RuntimeError) as ke:
            F.fractional_max_pool3d(K(x3), 2, output_size=osz)
        assert str(ke.value) == str(te.value)
    with pytest.raises(ValueError):
        F.fractional_max_pool2d(K(x), 3)
    for kw in (dict(), dict(output_size=3, output_ratio=0.5), dict(output_ratio=1.5)):
        with pytest.raises(ValueError):
            torch.nn.FractionalMaxPool2d(3, **kw)
        with pytest.raises(ValueError):
            nn.FractionalMaxPool2d(3, **kw)


def test_fractional_max_pool_xpu():
    torch.manual_seed(6)
    for nd, shape, k, osz in ((2, (2, 3, 12, 10), 2, (7, 5)), (3, (1, 2, 7, 8, 6), 2, (4, 5, 3))):
        x = torch.randn(*shape)
        s = torch.rand(shape[0], shape[1], nd)
        tx = x.clone().requires_grad_()
        to, ti = _fmp(nd)(tx, k, output_size=osz, return_indices=True, _random_samples=s)
        kx = K(x, "xpu").requires_grad_()
        ko, ki = getattr(F, f"fractional_max_pool{nd}d")(kx, k, output_size=osz,
                                                          return_indices=True,
                                                          _random_samples=K(s, "xpu"))
        assert str(ko.device).startswith("xpu")
        assert np.array_equal(N(ko), to.detach().numpy())
        assert np.array_equal(N(ki), ti.numpy())
        to.sum().backward()
        ko.sum().backward()
        close(kx.grad, tx.grad, torch.float32)
    v = F.fractional_max_pool2d(kiln.randn(1, 2, 8, 8).to("xpu"), 2, output_size=4)
    assert tuple(v.shape) == (1, 2, 4, 4)


# --- SyncBatchNorm ----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 4)])
def test_sync_batch_norm_is_local_batch_norm(shape):
    """torch 2.13 on CPU without an initialised process group runs SyncBatchNorm as a local
    batch norm (no error, no synchronisation); kiln does the same on every device."""
    torch.manual_seed(7)
    dt = torch.float64
    tm = torch.nn.SyncBatchNorm(3, momentum=0.3).to(dt)
    with torch.no_grad():
        tm.weight.normal_()
        tm.bias.normal_()
    km = nn.SyncBatchNorm(3, momentum=0.3, dtype=kiln.float64)
    assert repr(km) == repr(tm)
    assert list(km.state_dict()) == list(tm.state_dict())
    load_from_torch(km, tm)
    for step in range(2):
        x = torch.randn(*shape, dtype=dt)
        tx = x.clone().requires_grad_()
        kx = K(x).requires_grad_()
        to, ko = tm(tx), km(kx)
        close(ko, to, dt)
        g = torch.randn(shape, dtype=dt)
        to.backward(g)
        ko.backward(K(g))
        close(kx.grad, tx.grad, dt)
    close(km.weight.grad, tm.weight.grad, dt)
    close(km.bias.grad, tm.bias.grad, dt)
    close(km.running_mean, tm.running_mean, dt)
    close(km.running_var, tm.running_var, dt)
    assert int(km.num_batches_tracked.item()) == int(tm.num_batches_tracked.item()) == 2
    tm.eval()
    km.eval()
    x = torch.randn(*shape, dtype=dt)
    close(km(K(x)), tm(x), dt)
    for m in (tm, nn.SyncBatchNorm(3)):
        with pytest.raises(ValueError):
            m(torch.randn(3) if m is tm else kiln.randn(3))


def test_convert_sync_batchnorm_matches_torch():
    torch.manual_seed(8)
    tnet = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.BatchNorm2d(4),
                               torch.nn.Sequential(torch.nn.ReLU(), torch.nn.BatchNorm2d(4)))
    knet = nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4),
                         nn.Sequential(nn.ReLU(), nn.BatchNorm2d(4)))
    tnet(torch.randn(2, 2, 6, 6))  # non-trivial running stats
    load_from_torch(knet, tnet)
    old_w = knet[1].weight
    tconv = torch.nn.SyncBatchNorm.convert_sync_batchnorm(tnet)
    kconv = nn.SyncBatchNorm.convert_sync_batchnorm(knet)
    assert isinstance(kconv[1], nn.SyncBatchNorm) and isinstance(kconv[2][1], nn.SyncBatchNorm)
    assert kconv[1].weight is old_w   # parameters shared, as torch
    assert list(kconv.state_dict()) == list(tconv.state_dict())
    x = torch.randn(3, 2, 6, 6)
    close(kconv(K(x)), tconv(x), torch.float32)
    close(kconv[2][1].running_var, tconv[2][1].running_var, torch.float32)
    bn = nn.BatchNorm1d(5).eval()
    sbn = nn.SyncBatchNorm.convert_sync_batchnorm(bn)
    assert isinstance(sbn, nn.SyncBatchNorm) and not sbn.training


def test_sync_batch_norm_xpu():
    torch.manual_seed(9)
    tm = torch.nn.SyncBatchNorm(4)
    km = nn.SyncBatchNorm(4).to("xpu")
    x = torch.randn(5, 4, 3)
    close(km(K(x, "xpu")), tm(x), torch.float32)
    close(km.running_mean, tm.running_mean, torch.float32)


# --- DataParallel -----------------------------------------------------------------------

def test_data_parallel_single_device():
    torch.manual_seed(10)
    tdp = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()))
    inner = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    kdp = nn.DataParallel(inner, device_ids=None, output_device=None, dim=0)
    assert kdp.module is inner
    assert list(kdp.state_dict()) == list(tdp.state_dict())
    assert repr(kdp) == repr(tdp)
    load_from_torch(kdp, tdp)
    x = torch.randn(5, 4)
    close(kdp(K(x)), tdp(x), torch.float32)
    kx = K(x).requires_grad_()
    kdp(kx).sum().backward()
    tx = x.clone().requires_grad_()
    tdp(tx).sum().backward()
    close(kx.grad, tx.grad, torch.float32)
    close(kdp.module[0].weight.grad, tdp.module[0].weight.grad, torch.float32)
