"""The piecewise activations' derivatives through the fused ops (threshold_backward,
clamp_backward, leaky_relu_backward, softplus_backward, and hardswish / hardsigmoid recorded as
ops with their own backward ops) against PyTorch 2.13's, float32 and bfloat16 (hardswish and
hardsigmoid also forward, and float64): a dense gradient, the gradient of sum() (expanded
ones), a transposed input, values on the kinks and NaN; selects of the gradient equal
PyTorch's bit for bit. (hardtanh and relu6 are clamp in kiln, whose derivative keeps the
gradient at the bounds and drops it for NaN; PyTorch's hardtanh_backward does the opposite, so
their kinks are left out here.)"""
import numpy as np
import pytest
import torch

import kiln

ACTIVATIONS = {
    "relu": (lambda L, x: L.nn.functional.relu(x), True),
    "relu6": (lambda L, x: L.nn.functional.relu6(x), True),
    "hardtanh": (lambda L, x: L.nn.functional.hardtanh(x, -1.5, 2.0), True),
    "clamp_min": (lambda L, x: x.clamp(min=0.5), True),
    "clamp_max": (lambda L, x: x.clamp(max=-0.5), True),
    "leaky_relu": (lambda L, x: L.nn.functional.leaky_relu(x, 0.2), False),
    "softplus": (lambda L, x: L.nn.functional.softplus(x, beta=2.0, threshold=3.0), False),
    "hardswish": (lambda L, x: L.nn.functional.hardswish(x), True),
    "hardsigmoid": (lambda L, x: L.nn.functional.hardsigmoid(x), True),
}


def _values(shape, seed, kinks=True):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    flat = x.reshape(-1)
    if kinks:  # kinks, thresholds, NaN
        flat[:11] = [0.0, -0.0, 6.0, -1.5, 2.0, 0.5, -0.5, 1.5, np.nan, 3.0, -3.0]
    else:  # away from every bound, also after rounding to bfloat16
        for bound in (0.0, 6.0, -1.5, 2.0):
            flat[np.abs(flat - bound) < 0.1] += 0.25
    return x, rng.standard_normal(shape).astype(np.float32)


def _np(t):
    return t.detach().double().numpy()


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("grad", ["dense", "sum", "transposed"])
def test_activation_gradient_matches_torch(name, dtype, grad):
    fn, exact = ACTIVATIONS[name]
    x, g = _values((37, 129), 3, kinks=name not in ("relu6", "hardtanh"))
    kx = kiln.from_numpy(x).to(getattr(kiln, dtype))
    tx = torch.from_numpy(x).to(getattr(torch, dtype))
    kg = kiln.from_numpy(g).to(getattr(kiln, dtype))
    tg = torch.from_numpy(g).to(getattr(torch, dtype))
    if grad == "transposed":
        kx, tx, kg, tg = kx.t(), tx.t(), kg.t(), tg.t()
    kx.requires_grad_()
    tx.requires_grad_()
    ky, ty = fn(kiln, kx), fn(torch, tx)
    if grad == "sum":
        ky.sum().backward()
        ty.sum().backward()
    else:
        ky.backward(kg)
        ty.backward(tg)
    if exact:
        np.testing.assert_array_equal(_np(kx.grad), _np(tx.grad))
    else:
        tol = 1e-6 if dtype == "float32" else 8e-3
        np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(set(ACTIVATIONS) - {"hardsigmoid"}))  # not in torch
def test_activation_double_backward_matches_torch(name):
    """create_graph keeps the op chains: the second derivative through them."""
    fn, _ = ACTIVATIONS[name]
    x, _ = _values((5, 7), 4)
    x = x[np.isfinite(x)] + 0.01  # off the kinks, where both libraries define it alike
    grads = []
    for lib, t in ((kiln, kiln.from_numpy(x).double()), (torch, torch.from_numpy(x).double())):
        t.requires_grad_()
        (gx,) = lib.autograd.grad((fn(lib, t) ** 2).sum(), [t], create_graph=True)
        (gx * gx).sum().backward()
        grads.append(_np(t.grad))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_hard_sigmoid_family_recorded_forward_matches_torch(name, dtype):
    """The forward that autograd records (the op, not the no-grad pointwise program)."""
    fn, _ = ACTIVATIONS[name]
    x, g = _values((9, 70), 5)
    kx = kiln.from_numpy(x).to(getattr(kiln, dtype)).requires_grad_()
    tx = torch.from_numpy(x).to(getattr(torch, dtype)).requires_grad_()
    ky, ty = fn(kiln, kx), fn(torch, tx)
    assert ky.requires_grad
    np.testing.assert_array_equal(_np(ky), _np(ty))
    ky.backward(kiln.from_numpy(g).to(getattr(kiln, dtype)))
    ty.backward(torch.from_numpy(g).to(getattr(torch, dtype)))
    if dtype == "float64" and name == "hardsigmoid":  # PyTorch multiplies by float32's 1 / 6
        np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=2e-7)
        want = np.where((x > -3) & (x < 3), g.astype(np.float64) / 6, 0.0)
        np.testing.assert_allclose(_np(kx.grad), want, rtol=1e-15, atol=0)
    else:
        np.testing.assert_array_equal(_np(kx.grad), _np(tx.grad))
