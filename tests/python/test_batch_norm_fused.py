"""Training-mode batch norm through the fused native_batch_norm op and its fused backward
(decision 0051), float32 and bfloat16 on contiguous inputs, against PyTorch 2.13 in float64:
the output, the gradients of input, weight and bias, the running statistics, inputs of 2, 3,
4 and 5 dims, without affine parameters, and the double backward (create_graph), which takes
the composite formulas."""
import numpy as np
import pytest
import torch

import kiln

SHAPES = [(8, 16, 5, 7), (6, 4), (4, 3, 9), (2, 5, 3, 4, 2), (3, 2, 64, 64)]


def _pair(a, dtype):
    """A kiln tensor in dtype and the float64 torch tensor of the same (rounded) values."""
    k = kiln.from_numpy(a).to(dtype)
    return k, torch.from_numpy(k.float().numpy().astype(np.float64))


def _np(t):
    return t.detach().float().numpy() if isinstance(t, kiln.Tensor) else t.detach().numpy()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("affine", [True, False])
def test_training_batch_norm_matches_torch(shape, dtype, affine):
    kd = getattr(kiln, dtype)
    rng = np.random.default_rng(len(shape) * 10 + affine)
    c = shape[1]
    # An offset mean: the variance is taken around it, not around 0.
    kx, tx = _pair((rng.standard_normal(shape) * 2 + 3).astype(np.float32), kd)
    kgo, tgo = _pair(rng.standard_normal(shape).astype(np.float32), kd)
    kw, tw = _pair(rng.uniform(0.5, 1.5, c).astype(np.float32), kd)
    kb, tb = _pair(rng.standard_normal(c).astype(np.float32), kd)
    if not affine:
        kw = kb = tw = tb = None
    rm, rv = kiln.zeros([c], dtype=kd), kiln.ones([c], dtype=kd)
    trm, trv = torch.zeros(c, dtype=torch.float64), torch.ones(c, dtype=torch.float64)
    for t in (kx, kw, kb):
        if t is not None:
            t.requires_grad_()
    for t in (tx, tw, tb):
        if t is not None:
            t.requires_grad_()
    ky = kiln.nn.functional.batch_norm(kx, rm, rv, kw, kb, training=True, momentum=0.3,
                                       eps=1e-5)
    ty = torch.nn.functional.batch_norm(tx, trm, trv, tw, tb, training=True, momentum=0.3,
                                        eps=1e-5)
    (ky * kgo).sum().backward()
    (ty * tgo).sum().backward()
    # float32: a few ulps of values of order 1-10; bfloat16: its rounding of the output
    # (2^-8 relative) plus the rounding of the inputs' normalised values.
    rtol, atol = (1e-5, 1e-5) if dtype == "float32" else (2e-2, 2e-2)
    np.testing.assert_allclose(_np(ky), _np(ty), rtol=rtol, atol=atol)
    np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=rtol, atol=atol * 10)
    if affine:
        n = np.prod(shape) / c
        gtol = atol * np.sqrt(n) * 4
        np.testing.assert_allclose(_np(kw.grad), _np(tw.grad), rtol=rtol, atol=gtol)
        np.testing.assert_allclose(_np(kb.grad), _np(tb.grad), rtol=rtol, atol=gtol)
    np.testing.assert_allclose(_np(rm), _np(trm), rtol=rtol, atol=atol)
    np.testing.assert_allclose(_np(rv), _np(trv), rtol=rtol, atol=atol)


def test_double_backward_matches_torch():
    # create_graph=True takes the composite formulas (ops), so the first gradient is itself
    # differentiable: d/dx of sum(grad_x * v) against PyTorch in float64.
    rng = np.random.default_rng(7)
    shape = (4, 3, 5, 2)
    kx, tx = _pair(rng.standard_normal(shape).astype(np.float32), kiln.float32)
    kw, tw = _pair(rng.uniform(0.5, 1.5, 3).astype(np.float32), kiln.float32)
    kv, tv = _pair(rng.standard_normal(shape).astype(np.float32), kiln.float32)
    kgo, tgo = _pair(rng.standard_normal(shape).astype(np.float32), kiln.float32)
    for t in (kx, kw, tx, tw):
        t.requires_grad_()
    got, want = [], []
    for L, x, w, go, v, out in ((kiln, kx, kw, kgo, kv, got), (torch, tx, tw, tgo, tv, want)):
        y = L.nn.functional.batch_norm(x, None, None, w, None, training=True)
        (gx,) = L.autograd.grad((y * go).sum(), [x], create_graph=True)
        out.append(_np(gx))
        out.extend(_np(g) for g in L.autograd.grad((gx * v).sum(), [x, w]))
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-4)

