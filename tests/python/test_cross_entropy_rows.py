"""cross_entropy of [N, C] float32 / bfloat16 logits with class indices under autograd runs as
one op (cross_entropy_rows, decision 0126): the loss and the logits' gradient against PyTorch
2.13 in float64 on the same values, for each reduction, ignored targets (some and all), long
rows (a vocabulary), non-contiguous logits, under autocast, the double backward (create_graph:
the composite gradient), and out-of-range targets as errors."""
import numpy as np
import pytest
import torch

import kiln

F, KF = torch.nn.functional, kiln.nn.functional


def _pair(a, dtype):
    k = kiln.from_numpy(a.astype(np.float32)).to(getattr(kiln, dtype))
    return k, torch.from_numpy(k.to(kiln.float64).numpy())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("n,c", [(7, 5), (64, 1000), (3, 50257), (300, 17)])
def test_loss_and_gradient_match_float64(dtype, reduction, n, c):
    rng = np.random.default_rng(n + c)
    kx, tx = _pair(rng.standard_normal((n, c)) * 3, dtype)
    t = rng.integers(0, c, n)
    t[::4] = -100  # ignored
    kt, tt = kiln.from_numpy(t), torch.from_numpy(t)
    kx.requires_grad_()
    tx.requires_grad_()
    kl = KF.cross_entropy(kx, kt, reduction=reduction)
    tl = F.cross_entropy(tx, tt, reduction=reduction)
    assert kl.dtype == kx.dtype
    tol = 1e-5 if dtype == "float32" else 1e-2
    np.testing.assert_allclose(kl.detach().to(kiln.float64).numpy(), tl.detach().numpy(), rtol=tol,
                               atol=tol)
    g = rng.standard_normal(tl.shape)
    kg, tg = _pair(g, dtype)
    kl.backward(kg)
    tl.backward(tg)
    np.testing.assert_allclose(kx.grad.to(kiln.float64).numpy(), tx.grad.numpy(), rtol=tol,
                               atol=tol * 0.1 + (0 if dtype == "float32" else 1e-3))


def test_all_targets_ignored_gives_nan_mean_and_zero_gradient():
    kx = kiln.randn([4, 6]).requires_grad_()
    kt = kiln.from_numpy(np.full(4, -100))
    loss = KF.cross_entropy(kx, kt)
    assert np.isnan(loss.item())
    loss.backward()
    assert np.all(kx.grad.numpy() == 0) or np.all(np.isnan(kx.grad.numpy()))
    tx = torch.from_numpy(kx.detach().numpy()).requires_grad_()
    tl = F.cross_entropy(tx, torch.full((4,), -100))
    tl.backward()
    np.testing.assert_array_equal(np.isnan(kx.grad.numpy()), np.isnan(tx.grad.numpy()))


def test_transposed_logits_and_autocast():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 9)).astype(np.float32)
    t = rng.integers(0, 40, 9)
    kx = kiln.from_numpy(a).requires_grad_()
    tx = torch.from_numpy(a).requires_grad_()
    KF.cross_entropy(kx.t(), kiln.from_numpy(t)).backward()
    F.cross_entropy(tx.t(), torch.from_numpy(t)).backward()
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)
    lin, klin = torch.nn.Linear(9, 40), kiln.nn.Linear(9, 40)
    klin.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy())
                          for k, v in lin.state_dict().items()})
    x = torch.from_numpy(rng.standard_normal((12, 9)).astype(np.float32))
    tgt = torch.from_numpy(rng.integers(0, 40, 12))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tl = F.cross_entropy(lin(x), tgt)
    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        kl = KF.cross_entropy(klin(kiln.from_numpy(x.numpy())), kiln.from_numpy(tgt.numpy()))
    assert kl.dtype == kiln.float32
    np.testing.assert_allclose(kl.item(), tl.item(), rtol=1e-5)
    tl.backward()
    kl.backward()
    np.testing.assert_allclose(klin.weight.grad.numpy(), lin.weight.grad.numpy(), rtol=2e-2,
                               atol=2e-3)


def test_double_backward_matches_torch():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 7))
    t = np.array([1, -100, 6, 0, 3])
    kx = kiln.from_numpy(a.astype(np.float32)).requires_grad_()
    tx = torch.from_numpy(a.astype(np.float32)).requires_grad_()
    (kg,) = kiln.autograd.grad(KF.cross_entropy(kx, kiln.from_numpy(t)), kx, create_graph=True)
    (tg,) = torch.autograd.grad(F.cross_entropy(tx, torch.from_numpy(t)), tx, create_graph=True)
    np.testing.assert_allclose(kg.detach().numpy(), tg.detach().numpy(), rtol=1e-5, atol=1e-7)
    (kg * kg).sum().backward()
    (tg * tg).sum().backward()
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-7)


def test_out_of_range_target_is_an_index_error():
    kx = kiln.randn([3, 4]).requires_grad_()
    with pytest.raises(IndexError, match="out of bounds"):
        KF.cross_entropy(kx, kiln.from_numpy(np.array([0, 4, 1])))


def test_no_classes_with_every_target_ignored():
    kx = kiln.zeros([3, 0]).requires_grad_()
    tx = torch.zeros(3, 0, requires_grad=True)
    t = np.full(3, -100)
    kl = KF.cross_entropy(kx, kiln.from_numpy(t), reduction="sum")
    tl = F.cross_entropy(tx, torch.from_numpy(t), reduction="sum")
    assert kl.item() == tl.item() == 0.0
    kl.backward()
    assert list(kx.grad.shape) == [3, 0]
