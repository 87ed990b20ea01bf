"""kiln.utils.checkpoint against torch.utils.checkpoint 2.13 and against running without it:
outputs and gradients (float64, identical weights), dropout replayed from the saved random
state, several outputs, non-tensor and keyword arguments, autograd.grad, checkpoint_sequential,
the warnings / errors torch gives, and that the activations are really not kept."""
import functools

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as TC

import kiln
from kiln.utils import checkpoint as KC


def mlp(lib, width=6, depth=3, dropout=0.0, seed=0):
    rng = np.random.default_rng(seed)
    layers = []
    for _ in range(depth):
        lin = lib.nn.Linear(width, width).double()
        with (torch.no_grad() if lib is torch else kiln.no_grad()):
            lin.weight.copy_(K_or_T(lib, rng.standard_normal((width, width)) * 0.5))
            lin.bias.copy_(K_or_T(lib, rng.standard_normal(width) * 0.1))
        layers += [lin, lib.nn.Tanh()]
        if dropout:
            layers.append(lib.nn.Dropout(dropout))
    return lib.nn.Sequential(*layers)


def K_or_T(lib, a):
    return torch.from_numpy(np.ascontiguousarray(a)) if lib is torch else \
        kiln.from_numpy(np.ascontiguousarray(a))


def pair(seed, n=5):
    a = np.random.default_rng(seed).standard_normal(n)
    return K_or_T(kiln, a).requires_grad_(), K_or_T(torch, a).requires_grad_()


def grads(model, x):
    return [p.grad.numpy().copy() for p in model.parameters()] + \
        ([x.grad.numpy().copy()] if x.grad is not None else [])


def zero(model, x):
    for p in model.parameters():
        p.grad = None
    x.grad = None


@pytest.mark.parametrize("use_reentrant", [True, False])
@pytest.mark.parametrize("dropout", [0.0, 0.4])
def test_gradients_equal_running_without_checkpoint(use_reentrant, dropout):
    m = mlp(kiln, dropout=dropout)
    x = kiln.from_numpy(np.random.default_rng(1).standard_normal((5, 6))).requires_grad_()
    kiln.manual_seed(7)
    y = KC.checkpoint(m, x, use_reentrant=use_reentrant)
    (y * y).sum().backward()
    got = grads(m, x)
    zero(m, x)
    kiln.manual_seed(7)
    ref = m(x)
    (ref * ref).sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), ref.detach().numpy())
    for a, b in zip(got, grads(m, x)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_matches_torch_checkpoint(use_reentrant):
    km, tm = mlp(kiln, depth=4), mlp(torch, depth=4)
    xa = np.random.default_rng(2).standard_normal((7, 6))
    kx, tx = K_or_T(kiln, xa).requires_grad_(), K_or_T(torch, xa).requires_grad_()

    def kf(a, scale, *, shift=0.0):
        h = km(a) * scale
        return h + shift, h.sum(-1)

    def tf(a, scale, *, shift=0.0):
        h = tm(a) * scale
        return h + shift, h.sum(-1)
    kwargs = {} if use_reentrant else {"shift": 0.25}
    ky, ks = KC.checkpoint(kf, kx, 1.5, use_reentrant=use_reentrant, **kwargs)
    ty, ts = TC.checkpoint(tf, tx, 1.5, use_reentrant=use_reentrant, **kwargs)
    ((ky ** 2).sum() + ks.sum()).backward()
    ((ty ** 2).sum() + ts.sum()).backward()
    np.testing.assert_allclose(ky.detach().numpy(), ty.detach().numpy(), rtol=1e-13)
    for a, b in zip(grads(km, kx), grads(tm, tx)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_non_reentrant_autograd_grad_and_inputs_without_grad():
    m = mlp(kiln)
    x = kiln.from_numpy(np.random.default_rng(3).standard_normal((4, 6)))  # no grad
    closure_w = kiln.from_numpy(np.random.default_rng(4).standard_normal(6)).requires_grad_()

    def f(a):
        return m(a) * closure_w

    y = KC.checkpoint(f, x, use_reentrant=False)
    assert y.requires_grad
    params = list(m.parameters()) + [closure_w]
    got = kiln.autograd.grad(y.sum(), params)
    ref = kiln.autograd.grad(f(x).sum(), params)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13, atol=1e-15)
    # a functools.partial and a bound method are searched too
    y2 = KC.checkpoint(functools.partial(m.forward), x, use_reentrant=False)
    assert y2.requires_grad


def test_reentrant_without_inputs_requiring_grad_warns_as_torch():
    m = mlp(kiln)
    x = kiln.zeros(2, 6, dtype=kiln.float64)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        y = KC.checkpoint(m, x, use_reentrant=True)
    assert not y.requires_grad
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
        KC.checkpoint(m, x.requires_grad_())
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        KC.checkpoint(m, x, use_reentrant=True, foo=1)
    with pytest.raises(ValueError, match="determinism_check"):
        KC.checkpoint(m, x, use_reentrant=False, determinism_check="strict")


def test_recomputation_that_changes_shape_is_an_error():
    calls = []

    def f(a):
        calls.append(1)
        return a[: len(calls)] * 2

    x = kiln.ones(4, requires_grad=True)
    y = KC.checkpoint(f, x, use_reentrant=False)
    with pytest.raises(KC.CheckpointError):
        y.sum().backward()
    # Without the check, saved tensors that backward never reads may differ (torch: the
    # same gradient); one that it reads must unpack to the saved shape, where torch goes on
    # with the recomputed value.
    calls.clear()
    y = KC.checkpoint(f, x, use_reentrant=False, determinism_check="none")
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 0.0, 0.0]

    def g(a):
        calls.append(1)
        return (a[: len(calls)] * 2).exp()  # exp's backward reads its output
    calls.clear()
    y = KC.checkpoint(g, x, use_reentrant=False, determinism_check="none")
    with pytest.raises(RuntimeError, match="unpack hook returned a tensor of shape"):
        y.sum().backward()


def test_no_grad_runs_the_function_directly():
    m = mlp(kiln)
    x = kiln.ones(2, 6, dtype=kiln.float64, requires_grad=True)
    with kiln.no_grad():
        y = KC.checkpoint(m, x, use_reentrant=False)
    assert not y.requires_grad


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_matches_torch(use_reentrant):
    km, tm = mlp(kiln, depth=5), mlp(torch, depth=5)
    xa = np.random.default_rng(5).standard_normal((3, 6))
    kx, tx = K_or_T(kiln, xa).requires_grad_(), K_or_T(torch, xa).requires_grad_()
    ky = KC.checkpoint_sequential(km, 3, kx, use_reentrant=use_reentrant)
    ty = TC.checkpoint_sequential(tm, 3, tx, use_reentrant=use_reentrant)
    ky.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(ky.detach().numpy(), ty.detach().numpy(), rtol=1e-13)
    for a, b in zip(grads(km, kx), grads(tm, tx)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_activations_are_not_kept():
    # 16 Linear + Tanh layers on a [512, 512] float32 batch: each layer keeps about 2 MB of
    # activations for backward without checkpointing; checkpointed, only the input is kept.
    kiln.manual_seed(0)
    layers = []
    for _ in range(16):
        layers += [kiln.nn.Linear(512, 512), kiln.nn.Tanh()]
    m = kiln.nn.Sequential(*layers)
    x = kiln.randn(512, 512, requires_grad=True)
    cpu = kiln.device("cpu")

    def kept(run):
        base = kiln.memory_allocated(cpu)
        y = run()
        held = kiln.memory_allocated(cpu) - base
        y.sum().backward()
        return held
    plain = kept(lambda: m(x))
    ckpt = kept(lambda: KC.checkpoint(m, x, use_reentrant=False))
    assert plain > 16 * 512 * 512 * 4  # at least one activation per layer
    assert ckpt <= 2 * 512 * 512 * 4   # the output (and nothing per layer)


_GLOBAL_W = None


def _uses_global(a):
    return (a * _GLOBAL_W).sin()


def test_non_reentrant_leaf_reached_through_a_global():
    # The recorded graph links to every leaf the function used, a global's included, so
    # .backward() and autograd.grad both reach it (as torch's hook-based algorithm).
    global _GLOBAL_W
    _GLOBAL_W = kiln.from_numpy(np.linspace(0.5, 1.5, 4)).requires_grad_()
    x = kiln.from_numpy(np.linspace(-1, 1, 4)).requires_grad_()
    outer = x * 3  # a graph before the checkpoint
    KC.checkpoint(_uses_global, outer, use_reentrant=False).sum().backward()
    gw, gx = _GLOBAL_W.grad.numpy().copy(), x.grad.numpy().copy()
    _GLOBAL_W.grad, x.grad = None, None
    _uses_global(x * 3).sum().backward()
    np.testing.assert_allclose(gw, _GLOBAL_W.grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-14)
    y = KC.checkpoint(_uses_global, x * 3, use_reentrant=False).sum()
    g, = kiln.autograd.grad(y, _GLOBAL_W)
    np.testing.assert_allclose(g.numpy(), gw, rtol=1e-14)


def test_non_reentrant_recomputes_once_and_frees_with_the_graph():
    calls = []

    def f(a, b):
        calls.append(1)
        return (a.exp() * b).tanh() * a

    ka, ta = pair(seed=11)
    kb, tb = pair(seed=12)
    ky = KC.checkpoint(f, ka, kb, use_reentrant=False)
    ty = TC.checkpoint(f, ta, tb, use_reentrant=False)
    assert len(calls) == 2
    ky.sum().backward(retain_graph=True)
    ty.sum().backward()
    assert len(calls) == 4  # one recomputation each, for all the saved tensors at once
    np.testing.assert_allclose(ka.grad.numpy(), ta.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(kb.grad.numpy(), tb.grad.numpy(), rtol=1e-13)
    ka.grad = None
    ky.sum().backward()  # retain_graph kept the recomputed values: no third run
    assert len(calls) == 4
    np.testing.assert_allclose(ka.grad.numpy(), ta.grad.numpy(), rtol=1e-13)


def test_non_reentrant_nested_checkpoints_and_double_backward():
    def inner(a):
        return a.sin() * a

    def outer(a):
        return KC.checkpoint(inner, a * 2, use_reentrant=False).exp()

    ka, ta = pair(seed=13)
    ky = KC.checkpoint(outer, ka, use_reentrant=False).sum()
    ty = (inner(ta * 2).exp()).sum()
    kg, = kiln.autograd.grad(ky, ka, create_graph=True)
    tg, = torch.autograd.grad(ty, ta, create_graph=True)
    np.testing.assert_allclose(kg.detach().numpy(), tg.detach().numpy(), rtol=1e-12)
    kg.sum().backward()
    tg.sum().backward()
    np.testing.assert_allclose(ka.grad.numpy(), ta.grad.numpy(), rtol=1e-12)


def test_non_reentrant_input_modified_in_place_after_the_forward_is_an_error():
    for lib, ckpt in [(kiln, KC.checkpoint), (torch, TC.checkpoint)]:
        x = lib.zeros(3, dtype=lib.float64)
        w = lib.ones(3, dtype=lib.float64, requires_grad=True)
        y = ckpt(lambda a: (a.exp() * w).sum(), x, use_reentrant=False)
        x.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
