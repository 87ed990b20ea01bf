"""Tensors over foreign memory (kiln.from_numpy, kiln.from_dlpack) written by their owner
between calls: kiln's packed-weight caches key on the version counter, which such writes do
not change, so they must not cache packed copies of foreign memory (a Linear with 64 rows
once returned the product with the old weight after the NumPy array was doubled).
References: PyTorch 2.13 on the same values."""
import numpy as np
import pytest
import torch

import kiln

KF = kiln.nn.functional


def torch_of(k):
    return torch.from_numpy(k.float().numpy().copy())


@pytest.mark.parametrize("rows", [1, 4, 64])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("source", ["numpy", "dlpack"])
def test_linear_and_matmul_see_owner_writes(rows, dtype, source):
    g = torch.Generator().manual_seed(rows)
    w_t = torch.randn(96, 64, generator=g)
    if source == "numpy":
        w_np = w_t.numpy().copy()
        w = kiln.from_numpy(w_np)
    else:
        w_owner = w_t.clone()
        w = kiln.from_dlpack(w_owner)
    x = kiln.from_numpy(torch.randn(rows, 64, generator=g).numpy().copy())
    if dtype == "bfloat16":  # the weight stays foreign float32; x and the product bfloat16
        x = x.to(kiln.bfloat16)
    wx = w if dtype == "float32" else w.to(kiln.bfloat16)  # a kiln-owned copy for bf16
    for step in range(3):
        y_lin = KF.linear(x, w if dtype == "float32" else wx)
        y_mm = kiln.matmul(x.float(), w.t())
        want = torch_of(x) @ torch_of(w).t()
        tol = 1e-4 if dtype == "float32" else 0.5
        assert (torch_of(y_mm) - want).abs().max().item() < 1e-4, step
        if dtype == "float32":
            assert (torch_of(y_lin) - want).abs().max().item() < tol, step
        # the owner writes the weight in place
        if source == "numpy":
            w_np *= 2
        else:
            w_owner.mul_(2)


@pytest.mark.parametrize("source", ["numpy", "dlpack"])
def test_convolution_sees_owner_writes(source):
    g = torch.Generator().manual_seed(3)
    w_t = torch.randn(32, 16, 3, 3, generator=g) * 0.1
    owner = w_t.numpy().copy() if source == "numpy" else w_t.clone()
    w = kiln.from_numpy(owner) if source == "numpy" else kiln.from_dlpack(owner)
    x_t = torch.randn(2, 16, 20, 20, generator=g)
    x = kiln.from_numpy(x_t.numpy().copy())
    for step in range(3):
        got = torch_of(KF.conv2d(x, w, None, 1, 1))
        want = torch.nn.functional.conv2d(x_t, torch_of(w), None, 1, 1)
        assert (got - want).abs().max().item() < 1e-3 * (2 ** step), step
        if source == "numpy":
            owner *= -1.5
        else:
            owner.mul_(-1.5)


def test_own_memory_still_tracks_in_place_writes():
    """kiln-owned weights keep their cached packed copy until an in-place op changes them."""
    w = kiln.randn(96, 64)
    x = kiln.randn(64, 64)
    KF.linear(x, w)
    w.mul_(2)
    want = torch_of(x) @ torch_of(w).t()
    assert (torch_of(KF.linear(x, w)) - want).abs().max().item() < 1e-4


@pytest.mark.parametrize("export", ["numpy", "dlpack", "buffer"])
def test_exported_kiln_memory_written_outside(export):
    """A kiln weight handed out without a copy (Tensor.numpy(), torch.from_dlpack, the buffer
    protocol) and written there: products see the new values while the export lives and after
    it is released; once released and unchanged, the weight is cached again."""
    w = kiln.randn(96, 64)
    x = kiln.randn(64, 64)
    KF.linear(x, w)
    KF.linear(x, w)  # packed and cached
    if export == "numpy":
        outside = w.numpy()
    elif export == "dlpack":
        outside = torch.from_dlpack(w)
    else:
        outside = np.asarray(memoryview(w))
    outside *= 2
    want = torch_of(x) @ torch_of(w).t()
    assert (torch_of(KF.linear(x, w)) - want).abs().max().item() < 1e-4
    outside *= -1  # still exported: still not cached
    want = torch_of(x) @ torch_of(w).t()
    assert (torch_of(KF.linear(x, w)) - want).abs().max().item() < 1e-4
    del outside  # released: the version changed, so the copy is packed afresh
    assert (torch_of(KF.linear(x, w)) - want).abs().max().item() < 1e-4
    assert (torch_of(KF.linear(x, w)) - want).abs().max().item() < 1e-4
