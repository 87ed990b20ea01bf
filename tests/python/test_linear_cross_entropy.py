"""nn.functional.linear_cross_entropy / nn.LinearCrossEntropyLoss / LinearCrossEntropyOptions
against torch 2.13 (cross_entropy of linear in float64 as the reference; torch's own
linear_cross_entropy for options handling): losses and input / weight / bias gradients for
every reduction, class weights, label smoothing, ignored rows and chunk sizes."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF


def K(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


def problem(n=37, d=16, c=50, seed=0, ignore=(3,)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    w = rng.standard_normal((c, d)) * 0.3
    b = rng.standard_normal(c)
    t = rng.integers(0, c, n)
    for i in ignore:
        if i < n:
            t[i] = -100
    cw = rng.random(c) + 0.5
    return x, w, b, t, cw


def run_both(x, w, b, t, cw, reduction, eps, options, dtype="float64", use_bias=True):
    kd = getattr(kiln, dtype)
    kx, kw = K(x).to(kd).requires_grad_(), K(w).to(kd).requires_grad_()
    tx, tw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    kb = K(b).to(kd).requires_grad_() if use_bias else None
    tb = torch.from_numpy(b).requires_grad_() if use_bias else None
    kl = KF.linear_cross_entropy(kx, kw, K(t), linear_bias=kb,
                                 weight=None if cw is None else K(cw).to(kd),
                                 reduction=reduction, label_smoothing=eps, options=options)
    tl = TF.cross_entropy(TF.linear(tx, tw, tb), torch.from_numpy(t),
                          weight=None if cw is None else torch.from_numpy(cw),
                          reduction=reduction, label_smoothing=eps)
    assert kl.dtype == kd
    g = np.linspace(0.5, 1.5, x.shape[0]) if reduction == "none" else np.array(1.0)
    (kl * K(g).to(kd)).sum().backward()
    (tl * torch.from_numpy(g)).sum().backward()
    f64 = kiln.float64
    out = [(kl.detach().to(f64).numpy(), tl.detach().numpy()),
           (kx.grad.to(f64).numpy(), tx.grad.numpy()), (kw.grad.to(f64).numpy(), tw.grad.numpy())]
    if use_bias:
        out.append((kb.grad.to(f64).numpy(), tb.grad.numpy()))
    return out


@pytest.mark.parametrize("chunk", [None, 1, 8, 37, 100])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.3])
@pytest.mark.parametrize("weighted", [False, True])
def test_chunked_matches_the_composition_float64(chunk, reduction, eps, weighted):
    x, w, b, t, cw = problem()
    opts = None if chunk is None else \
        kiln.nn.LinearCrossEntropyOptions(batch_chunk_size=chunk)
    for got, want in run_both(x, w, b, t, cw if weighted else None, reduction, eps, opts):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("dtype,rtol", [("float32", 2e-5), ("bfloat16", 3e-2)])
@pytest.mark.parametrize("use_bias", [False, True])
def test_low_precision_inputs(dtype, rtol, use_bias):
    x, w, b, t, cw = problem(n=64, d=32, c=300, seed=1)
    opts = kiln.nn.LinearCrossEntropyOptions(batch_chunk_size=16)
    for got, want in run_both(x, w, b, t, None, "mean", 0.1, opts, dtype=dtype,
                              use_bias=use_bias):
        scale = np.abs(want).max()
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def test_chunking_methods_and_validation():
    x, w, b, t, _ = problem(n=64, d=8, c=40)
    for method in ("auto", "aspect_ratio", "aspect_ratio:4", None):
        opts = kiln.nn.LinearCrossEntropyOptions(chunking_method=method)
        for got, want in run_both(x, w, b, t, None, "mean", 0.0, opts):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13)
    # rows per chunk: next power of two of N / ceil(C / in), divided by N
    opts = kiln.nn.LinearCrossEntropyOptions(chunking_method="aspect_ratio")
    assert opts.chunk_rows(64, 40, 8) == 16
    assert kiln.nn.LinearCrossEntropyOptions().chunk_rows(64, 40, 8) == 64  # (64 MiB cap)
    assert kiln.nn.LinearCrossEntropyOptions().chunk_rows(4096, 50257, 768) == 256
    for bad in (dict(chunking_method="square"), dict(chunking_method="aspect_ratio:0"),
                dict(acc_policy="fast"), dict(batch_chunk_size=0)):
        with pytest.raises(ValueError):
            kiln.nn.LinearCrossEntropyOptions(**bad)
    with pytest.raises(ValueError, match="disagrees"):
        KF.linear_cross_entropy(K(x), K(w), K(t), options=kiln.nn.LinearCrossEntropyOptions(
            batch_chunk_size=5, chunking_method="aspect_ratio"))


def test_second_backward_needs_allow_retain_graph():
    x, w, b, t, _ = problem()
    for allow in (False, True):
        kx = K(x).requires_grad_()
        loss = KF.linear_cross_entropy(kx, K(w), K(t), options=kiln.nn.LinearCrossEntropyOptions(
            batch_chunk_size=8, allow_retain_graph=allow))
        loss.backward(retain_graph=True)
        first = kx.grad.numpy().copy()
        if allow:
            loss.backward()
            np.testing.assert_allclose(kx.grad.numpy(), 2 * first, rtol=1e-12)
        else:
            with pytest.raises(RuntimeError, match="allow_retain_graph"):
                loss.backward()


def test_unsupported_configurations_fall_back_with_a_warning():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 5))
    w = rng.standard_normal((4, 5))
    probs = rng.random((6, 4))
    probs /= probs.sum(1, keepdims=True)
    opts = kiln.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    with pytest.warns(UserWarning, match="class-probability targets"):
        got = KF.linear_cross_entropy(K(x), K(w), K(probs), options=opts)
    want = TF.cross_entropy(TF.linear(torch.from_numpy(x), torch.from_numpy(w)),
                            torch.from_numpy(probs))
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    # K-dimensional weight (C, d1, in): logits (N, C, d1), targets (N, d1)
    wk = rng.standard_normal((4, 3, 5))
    tk = rng.integers(0, 4, (6, 3))
    with pytest.warns(UserWarning, match="K-dimensional"):
        got = KF.linear_cross_entropy(K(x), K(wk), K(tk), options=opts)
    want = torch.nn.functional.linear_cross_entropy(torch.from_numpy(x), torch.from_numpy(wk),
                                                    torch.from_numpy(tk))
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    # the reference path needs no options: unbatched input too
    got = KF.linear_cross_entropy(K(x[0]), K(w), kiln.tensor(2))
    want = torch.nn.functional.linear_cross_entropy(torch.from_numpy(x[0]), torch.from_numpy(w),
                                                    torch.tensor(2))
    assert got.item() == pytest.approx(want.item(), rel=1e-12)


def test_errors_and_all_rows_ignored():
    x, w, b, t, _ = problem(n=5, ignore=())
    opts = kiln.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    bad = t.copy()
    bad[1] = 50
    with pytest.raises(IndexError, match="out of bounds"):
        KF.linear_cross_entropy(K(x), K(w), K(bad), options=opts)
    with pytest.raises(ValueError, match="reduction"):
        KF.linear_cross_entropy(K(x), K(w), K(t), reduction="avg")
    with pytest.raises(RuntimeError, match="features"):
        KF.linear_cross_entropy(K(x[:, :3]), K(w), K(t), options=opts)
    ignored = np.full(5, -100)
    got = KF.linear_cross_entropy(K(x), K(w), K(ignored), options=opts)
    want = TF.cross_entropy(TF.linear(torch.from_numpy(x), torch.from_numpy(w)),
                            torch.from_numpy(ignored))
    assert np.isnan(got.item()) and np.isnan(want.item())
    got = KF.linear_cross_entropy(K(x), K(w), K(t), ignore_index=int(t[0]), options=opts)
    want = TF.cross_entropy(TF.linear(torch.from_numpy(x), torch.from_numpy(w)),
                            torch.from_numpy(t), ignore_index=int(t[0]))
    assert got.item() == pytest.approx(want.item(), rel=1e-12)


def test_module_matches_torch():
    kiln.manual_seed(0)
    km = kiln.nn.LinearCrossEntropyLoss(16, 50, bias=True, label_smoothing=0.1,
                                        options=kiln.nn.LinearCrossEntropyOptions(
                                            batch_chunk_size=10))
    tm = torch.nn.LinearCrossEntropyLoss(16, 50, bias=True, label_smoothing=0.1)
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    with torch.no_grad():
        tm.linear.weight.copy_(torch.from_numpy(km.linear.weight.detach().numpy()))
        tm.linear.bias.copy_(torch.from_numpy(km.linear.bias.detach().numpy()))
    x, _, _, t, _ = problem(n=23, d=16, c=50, seed=4)
    kx = K(x.astype(np.float32))
    tx = torch.from_numpy(x.astype(np.float32))
    kl, tl = km(kx, K(t)), tm(tx, torch.from_numpy(t))
    kl.backward()
    tl.backward()
    assert kl.item() == pytest.approx(tl.item(), rel=1e-5)
    np.testing.assert_allclose(km.linear.weight.grad.numpy(), tm.linear.weight.grad.numpy(),
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(km.linear.bias.grad.numpy(), tm.linear.bias.grad.numpy(),
                               rtol=1e-4, atol=1e-6)
    assert "num_classes=50" in repr(km)
