"""group_norm (and instance_norm without running statistics) through the fused
native_group_norm op and its fused backward, against PyTorch 2.13 in float64: float32,
bfloat16, float16 and float64, inputs of 2-5 dims, one channel per group and one group,
without affine parameters or with only a weight, channels-last and transposed inputs, the
module forms, and the double backward (create_graph), which takes the formulas in ops."""
import numpy as np
import pytest
import torch

import kiln

CASES = [((8, 16, 5, 7), 4), ((6, 4), 2), ((4, 6, 9), 6), ((2, 8, 3, 4, 2), 1),
         ((3, 32, 33, 35), 8), ((1, 4, 70, 70), 2)]
TOL = {"float32": 1e-5, "float64": 1e-10, "bfloat16": 2e-2, "float16": 3e-3}


def _pair(a, dtype):
    """A kiln tensor in dtype and the float64 torch tensor of the same (rounded) values."""
    k = kiln.from_numpy(a).to(dtype)
    return k, torch.from_numpy(k.double().numpy())


def _np(t):
    return t.detach().double().numpy()


def _leaves(*ts):
    for t in ts:
        if t is not None:
            t.requires_grad_()


@pytest.mark.parametrize("shape,groups", CASES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_group_norm_matches_torch(shape, groups, dtype, affine):
    kd = getattr(kiln, dtype)
    rng = np.random.default_rng(len(shape) * 100 + groups)
    c = shape[1]
    # An offset mean: the variance and the gradient's sums are taken around it.
    kx, tx = _pair((rng.standard_normal(shape) * 2 + 3).astype(np.float32), kd)
    kgo, tgo = _pair(rng.standard_normal(shape).astype(np.float32), kd)
    kw, tw = _pair(rng.uniform(0.5, 1.5, c).astype(np.float32), kd)
    kb, tb = _pair(rng.standard_normal(c).astype(np.float32), kd)
    if affine != "both":
        kb = tb = None
    if affine == "none":
        kw = tw = None
    _leaves(kx, kw, kb, tx, tw, tb)
    ky = kiln.nn.functional.group_norm(kx, groups, kw, kb, eps=1e-5)
    ty = torch.nn.functional.group_norm(tx, groups, tw, tb, eps=1e-5)
    (ky * kgo).sum().backward()
    (ty * tgo).sum().backward()
    tol = TOL[dtype]
    assert ky.dtype == kd and tuple(ky.shape) == shape
    np.testing.assert_allclose(_np(ky), _np(ty), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=tol, atol=tol * 4)
    # The parameters' gradients sum N * P products: their error grows with the count.
    n = np.prod(shape) / c
    gtol = tol * np.sqrt(n) * 4
    if kw is not None:
        np.testing.assert_allclose(_np(kw.grad), _np(tw.grad), rtol=gtol, atol=gtol)
    if kb is not None:
        np.testing.assert_allclose(_np(kb.grad), _np(tb.grad), rtol=gtol, atol=gtol)


@pytest.mark.parametrize("layout", ["channels_last", "transposed"])
def test_group_norm_of_strided_inputs(layout):
    rng = np.random.default_rng(5)
    kx, tx = _pair(rng.standard_normal((4, 12, 6, 10)).astype(np.float32), kiln.float32)
    kw, tw = _pair(rng.uniform(0.5, 1.5, 12).astype(np.float32), kiln.float32)
    kgo, tgo = _pair(rng.standard_normal((4, 12, 6, 10)).astype(np.float32), kiln.float32)
    if layout == "channels_last":
        kx = kx.contiguous(memory_format=kiln.channels_last)
    else:
        kx, tx, kgo, tgo = kx.transpose(2, 3), tx.transpose(2, 3), kgo.transpose(2, 3), \
            tgo.transpose(2, 3)
    _leaves(kx, kw, tx, tw)
    ky = kiln.nn.functional.group_norm(kx, 3, kw, None)
    ty = torch.nn.functional.group_norm(tx, 3, tw, None)
    (ky * kgo).sum().backward()
    (ty * tgo).sum().backward()
    np.testing.assert_allclose(_np(ky), _np(ty), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=1e-5, atol=4e-5)
    np.testing.assert_allclose(_np(kw.grad), _np(tw.grad), rtol=1e-4, atol=1e-4)


def test_group_norm_and_instance_norm_modules():
    kiln.manual_seed(3)
    rng = np.random.default_rng(6)
    kx, tx = _pair(rng.standard_normal((2, 6, 9, 8)).astype(np.float32), kiln.float32)
    for km, tm in ((kiln.nn.GroupNorm(3, 6), torch.nn.GroupNorm(3, 6)),
                   (kiln.nn.InstanceNorm2d(6, affine=True), torch.nn.InstanceNorm2d(6, affine=True))):
        tm = tm.double()
        with torch.no_grad():
            tm.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, 6)))
            tm.bias.copy_(torch.from_numpy(rng.standard_normal(6)))
        km.weight.data.copy_(kiln.from_numpy(tm.weight.detach().float().numpy()))
        km.bias.data.copy_(kiln.from_numpy(tm.bias.detach().float().numpy()))
        xk, xt = kx.detach().requires_grad_(), tx.detach().requires_grad_()
        yk, yt = km(xk), tm(xt)
        (yk * yk).sum().backward()
        (yt * yt).sum().backward()
        np.testing.assert_allclose(_np(yk), _np(yt), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_np(xk.grad), _np(xt.grad), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(_np(km.weight.grad), _np(tm.weight.grad), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(_np(km.bias.grad), _np(tm.bias.grad), rtol=1e-4, atol=1e-4)


def test_group_norm_double_backward_matches_torch():
    """create_graph: the gradient of a function of the first gradient (the ops formulas)."""
    rng = np.random.default_rng(7)
    kx, tx = _pair((rng.standard_normal((3, 6, 5)) + 2).astype(np.float32), kiln.float64)
    kw, tw = _pair(rng.uniform(0.5, 1.5, 6).astype(np.float32), kiln.float64)
    kb, tb = _pair(rng.standard_normal(6).astype(np.float32), kiln.float64)
    _leaves(kx, kw, kb, tx, tw, tb)
    results = []
    for lib, x, w, b in ((kiln, kx, kw, kb), (torch, tx, tw, tb)):
        y = lib.nn.functional.group_norm(x, 3, w, b)
        gx, gw = lib.autograd.grad((y * y * y).sum(), [x, w], create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum()).backward()
        results.append([x.grad, w.grad, b.grad])
    for k, t in zip(*results):
        np.testing.assert_allclose(_np(k), _np(t), rtol=1e-9, atol=1e-9)


def test_group_norm_rejects_bad_arguments():
    x = kiln.ones([2, 6, 4])
    with pytest.raises(ValueError, match=r"channels \(6\).*num_groups \(4\)"):
        kiln.nn.functional.group_norm(x, 4)
    with pytest.raises(Exception, match=r"weight of shape \[6\], got \[3\]"):
        kiln.nn.functional.group_norm(x, 2, kiln.ones([3]))
