"""Gradients summed back to a broadcast operand's shape when the incoming gradient is itself
expanded (stride 0: the gradient of sum() and mean()): autograd's sum_to takes one slice times
the number of copies. Against PyTorch 2.13 in float32, bfloat16 and float64, for operands
broadcast along leading, middle and trailing dims, partly expanded gradients, and under
create_graph."""
import numpy as np
import pytest
import torch

import kiln

CASES = [((64, 300), (300,)), ((64, 300), (64, 1)), ((4, 5, 6), (5, 1)), ((4, 5, 6), (1, 5, 1)),
         ((4, 5, 6), ()), ((3, 1, 7), (2, 1))]


def _np(t):
    return t.detach().double().numpy()


@pytest.mark.parametrize("xshape,bshape", CASES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("reduce", ["sum", "mean", "partial"])
def test_broadcast_operand_gradient_from_an_expanded_gradient(xshape, bshape, dtype, reduce):
    rng = np.random.default_rng(len(xshape) * 10 + len(bshape))
    x = rng.standard_normal(xshape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    out_shape = np.broadcast_shapes(xshape, bshape)
    g = rng.standard_normal(out_shape[1:]).astype(np.float32)  # for "partial"
    grads = []
    for lib in (kiln, torch):
        d = getattr(lib, dtype)
        tx = lib.from_numpy(x.copy()).to(d).requires_grad_()
        tb = lib.from_numpy(b.copy()).to(d).requires_grad_()
        y = tx + tb  # the expanded gradient reaches add's sum_to as it is
        if reduce == "sum":
            y.sum().backward()
        elif reduce == "mean":
            y.mean().backward()
        else:  # a gradient expanded along its first dim only
            y.backward(lib.from_numpy(g.copy()).to(d).expand(y.shape))
        grads.append((_np(tx.grad), _np(tb.grad)))
    tol = {"float32": 1e-6, "bfloat16": 1e-2, "float64": 1e-12}[dtype]
    for k, t in zip(grads[0], grads[1]):
        np.testing.assert_allclose(k, t, rtol=tol, atol=tol)


def test_expanded_gradient_under_create_graph():
    grads = []
    for lib in (kiln, torch):
        x = lib.arange(12, dtype=lib.float64).reshape(3, 4).requires_grad_()
        b = lib.tensor([0.5, -1.0, 2.0, 0.25], dtype=lib.float64).requires_grad_()
        (gb,) = lib.autograd.grad((x * b * b + b).sum(), [b], create_graph=True)
        (gb * gb).sum().backward()
        grads.append((_np(x.grad), _np(b.grad)))
    for k, t in zip(grads[0], grads[1]):
        np.testing.assert_allclose(k, t, rtol=1e-12)
