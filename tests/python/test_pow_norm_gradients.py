"""Gradients of pow with a scalar exponent and of norm (p = 2 and general p), whose derivatives
take a scalar fast path / per-slice factors: against PyTorch 2.13 in float32, bfloat16 and
float64, including rows of zeros (norm 0), zero and negative bases, exponents 0, 1, 2 and
fractional, reductions over one dim, several dims and everything, keepdim, and double
backward (away from zero norms, where the second derivative is undefined: PyTorch gives NaN
for p = 2 and 0 for p = 3)."""
import numpy as np
import pytest
import torch

import kiln


def _np(t):
    return t.detach().double().numpy()


def _data(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(shape[0], -1)[1] = 0.0  # a slice whose norm is 0
    return x, rng.standard_normal(shape).astype(np.float32)


TOL = {"float32": 2e-6, "bfloat16": 1e-2, "float64": 1e-12}


@pytest.mark.parametrize("exponent", [0.0, 1.0, 2.0, 3.0, 0.5, -1.0, 2.5])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_pow_scalar_exponent_gradient(exponent, dtype):
    x, g = _data((6, 33), 1)
    if exponent < 1 and exponent != 0:
        x = np.abs(x) + 0.5  # defined and finite
    res = []
    for lib in (kiln, torch):
        d = getattr(lib, dtype)
        t = lib.from_numpy(x.copy()).to(d).requires_grad_()
        y = t ** exponent if exponent != 3.0 else t.pow(exponent)
        y.backward(lib.from_numpy(g.copy()).to(d))
        res.append(_np(t.grad))
    np.testing.assert_allclose(res[0], res[1], rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("p", [2, 3, 1.5])
@pytest.mark.parametrize("dim,keepdim", [(-1, False), (1, True), ((0, 2), False), (None, False)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_norm_gradient(p, dim, keepdim, dtype):
    x, _ = _data((4, 5, 6), 2)
    res = []
    for lib in (kiln, torch):
        t = lib.from_numpy(x.copy()).to(getattr(lib, dtype)).requires_grad_()
        n = t.norm(p=p, dim=dim, keepdim=keepdim) if dim is not None else t.norm(p=p)
        g = lib.from_numpy(np.linspace(-1, 2, n.numel()).astype(np.float32)).to(
            getattr(lib, dtype)).reshape(n.shape)
        n.backward(g)
        res.append(_np(t.grad))
    np.testing.assert_allclose(res[0], res[1], rtol=TOL[dtype] * 2, atol=TOL[dtype] * 2)


@pytest.mark.parametrize("fn", ["norm2", "norm3", "pow2", "pow3"])
def test_pow_norm_double_backward(fn):
    x = np.random.default_rng(3).standard_normal((3, 7)).astype(np.float32)  # no zero norms
    res = []
    for lib in (kiln, torch):
        t = lib.from_numpy(x.copy()).double().requires_grad_()
        y = {"norm2": lambda: t.norm(dim=1), "norm3": lambda: t.norm(p=3, dim=1),
             "pow2": lambda: t ** 2, "pow3": lambda: t ** 3}[fn]()
        (gx,) = lib.autograd.grad((y * y).sum(), [t], create_graph=True)
        (gx * gx).sum().backward()
        res.append(_np(t.grad))
    np.testing.assert_allclose(res[0], res[1], rtol=1e-10, atol=1e-12)
