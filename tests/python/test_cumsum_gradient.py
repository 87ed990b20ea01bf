"""cumsum's derivative, the reversed cumulative sum of the gradient (flip, cumsum, flip, as
PyTorch), against PyTorch 2.13: along each dim, float32 / bfloat16 / float64, a gradient whose
first value dwarfs the rest (total - prefix sums would lose the tail's digits), the expanded
gradient of sum(), and double backward."""
import numpy as np
import pytest
import torch

import kiln


def _np(t):
    return t.detach().double().numpy()


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_cumsum_gradient_keeps_a_small_tail(dim, dtype):
    rng = np.random.default_rng(abs(dim) + 3)
    x = rng.standard_normal((6, 40, 5)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, (6, 40, 5)).astype(np.float32)
    g[(slice(None),) * (dim % 3) + (0,)] = 1e8  # the first value along dim
    res = []
    for lib in (kiln, torch):
        d = getattr(lib, dtype)
        t = lib.from_numpy(x.copy()).to(d).requires_grad_()
        t.cumsum(dim).backward(lib.from_numpy(g.copy()).to(d))
        res.append(_np(t.grad))
    tol = {"float32": 1e-6, "bfloat16": 1e-2, "float64": 1e-13}[dtype]
    np.testing.assert_allclose(res[0], res[1], rtol=tol, atol=0)


@pytest.mark.parametrize("dim", [0, -1])
def test_cumsum_gradient_of_sum_and_double_backward(dim):
    res = []
    for lib in (kiln, torch):
        t = lib.from_numpy(np.linspace(-2, 3, 60).reshape(6, 10)).requires_grad_()
        t.cumsum(dim).sum().backward()
        first = _np(t.grad)
        t.grad = None
        (gx,) = lib.autograd.grad((t.cumsum(dim) ** 2).sum(), [t], create_graph=True)
        (gx * gx).sum().backward()
        res.append((first, _np(t.grad)))
    for k, t in zip(*res):
        np.testing.assert_allclose(k, t, rtol=1e-12, atol=1e-12)
