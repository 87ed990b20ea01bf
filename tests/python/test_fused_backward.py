"""The fused backward ops that autograd runs where no graph of the backward is recorded,
against PyTorch 2.13 in float64 on the same (rounded) values: softmax / log_softmax
(_softmax_backward_data, _log_softmax_backward_data) along each dim, including long rows and
causally masked rows; layer_norm / rms_norm (native_layer_norm_backward,
native_rms_norm_backward) over one or two normalised dims, with and without affine
parameters; float32, bfloat16 and float64. The double backward (create_graph) and
statistics that receive gradients take the composite formulas, checked here too. Also the
gradient a leaf takes as its .grad without a copy (AccumulateGrad): it must not alias
anything else the caller can see."""
import numpy as np
import pytest
import torch

import kiln

DTYPES = {"float32": (1e-5, 1e-5), "bfloat16": (2e-2, 2e-2), "float64": (1e-10, 1e-10)}


def _pair(a, dtype):
    """A kiln tensor in dtype and the float64 torch tensor of the same (rounded) values."""
    k = kiln.from_numpy(a.astype(np.float64)).to(getattr(kiln, dtype))
    return k, torch.from_numpy(k.to(kiln.float64).numpy())


def _np(t):
    if isinstance(t, kiln.Tensor):
        return t.detach().to(kiln.float64).numpy()
    return t.detach().numpy()


SOFTMAX_CASES = [((4, 3, 16, 16), -1), ((6, 33), 1), ((5, 6, 7), 1), ((5, 6, 7), 0),
                 ((3, 5003), -1), ((2, 70), -1), ((1, 1), 0), ((9,), 0)]


@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward_matches_torch(shape, dim, dtype, log):
    rng = np.random.default_rng(len(shape) * 7 + (dim % 4) + 3 * log)
    kx, tx = _pair(rng.standard_normal(shape) * 3, dtype)
    kg, tg = _pair(rng.standard_normal(shape), dtype)
    kx.requires_grad_()
    tx.requires_grad_()
    f_k = kiln.log_softmax if log else kiln.softmax
    f_t = torch.log_softmax if log else torch.softmax
    f_k(kx, dim).backward(kg)
    f_t(tx, dim).backward(tg)
    rtol, atol = DTYPES[dtype]
    # log_softmax's gradient holds g - exp(y) * sum(g): the sum over a row of n values has a
    # magnitude of about sqrt(n), and bfloat16 rounds the result at that scale.
    scale = np.sqrt(shape[dim]) if log else 1.0
    np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=rtol, atol=atol * scale)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_softmax_backward_of_causally_masked_rows(dtype):
    rng = np.random.default_rng(5)
    s = 37
    mask = np.triu(np.ones((s, s), dtype=bool), 1)
    kx, tx = _pair(rng.standard_normal((2, 3, s, s)), dtype)
    kg, tg = _pair(rng.standard_normal((2, 3, s, s)), dtype)
    kx.requires_grad_()
    tx.requires_grad_()
    ky = kx.masked_fill(kiln.from_numpy(mask), float("-inf")).softmax(-1)
    ty = tx.masked_fill(torch.from_numpy(mask), float("-inf")).softmax(-1)
    ky.backward(kg)
    ty.backward(tg)
    rtol, atol = DTYPES[dtype]
    got = _np(kx.grad)
    np.testing.assert_allclose(got, _np(tx.grad), rtol=rtol, atol=atol)
    assert np.all(got[..., mask] == 0)  # masked entries get exactly nothing


def test_softmax_backward_of_a_transposed_input_and_gradient():
    rng = np.random.default_rng(6)
    kx, tx = _pair(rng.standard_normal((40, 24)), "float32")
    kg, tg = _pair(rng.standard_normal((24, 40)), "float32")
    kx.requires_grad_()
    tx.requires_grad_()
    kx.t().softmax(-1).backward(kg)
    tx.t().softmax(-1).backward(tg)
    np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_double_backward_matches_torch(log):
    rng = np.random.default_rng(7)
    kx, tx = _pair(rng.standard_normal((3, 9)), "float64")
    kg, tg = _pair(rng.standard_normal((3, 9)), "float64")
    kx.requires_grad_()
    tx.requires_grad_()
    f_k = kiln.log_softmax if log else kiln.softmax
    f_t = torch.log_softmax if log else torch.softmax
    (gk,) = kiln.autograd.grad((f_k(kx, 1) * kg).sum(), kx, create_graph=True)
    (gt,) = torch.autograd.grad((f_t(tx, 1) * tg).sum(), tx, create_graph=True)
    (gk * gk).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(_np(gk), _np(gt), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=1e-10, atol=1e-12)


NORM_CASES = [((4, 16, 48), 1), ((64, 96), 1), ((7, 33), 1), ((5, 6, 7), 2), ((3, 5), 2),
              ((2, 70), 1), ((1, 16), 1), ((300, 40), 1)]


def _norm(lib, kind, x, ns, w, b):
    F = lib.nn.functional
    if kind == "layer":
        return F.layer_norm(x, ns, w, b, eps=1e-5)
    return F.rms_norm(x, ns, w, eps=1e-5)


@pytest.mark.parametrize("shape,k", NORM_CASES)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("affine", [True, False])
def test_norm_backward_matches_torch(shape, k, dtype, kind, affine):
    rng = np.random.default_rng(len(shape) * 11 + k + 2 * affine + (kind == "rms"))
    ns = shape[-k:]
    kx, tx = _pair(rng.standard_normal(shape) * 2 + 0.5, dtype)
    kg, tg = _pair(rng.standard_normal(shape), dtype)
    kw, tw = _pair(rng.uniform(0.5, 1.5, ns), dtype)
    kb, tb = _pair(rng.standard_normal(ns), dtype)
    if not affine:
        kw = kb = tw = tb = None
    for t in (kx, kw, kb, tx, tw, tb):
        if t is not None:
            t.requires_grad_()
    _norm(kiln, kind, kx, ns, kw, kb).backward(kg)
    _norm(torch, kind, tx, ns, tw, tb).backward(tg)
    rtol, atol = DTYPES[dtype]
    np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=rtol, atol=atol * 10)
    if affine:
        # The weight's and bias's gradients are sums over the rows (about sqrt(rows) in size).
        rows = int(np.prod(shape[:-k]))
        stol = atol * np.sqrt(rows) * 4
        np.testing.assert_allclose(_np(kw.grad), _np(tw.grad), rtol=rtol, atol=stol)
        if kind == "layer":
            np.testing.assert_allclose(_np(kb.grad), _np(tb.grad), rtol=rtol, atol=stol)


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_norm_double_backward_matches_torch(kind):
    rng = np.random.default_rng(8)
    kx, tx = _pair(rng.standard_normal((4, 10)), "float64")
    kw, tw = _pair(rng.uniform(0.5, 1.5, 10), "float64")
    kb, tb = _pair(rng.standard_normal(10), "float64")
    for t in (kx, kw, kb, tx, tw, tb):
        t.requires_grad_()
    kout = _norm(kiln, kind, kx, (10,), kw, kb)
    tout = _norm(torch, kind, tx, (10,), tw, tb)
    (gk,) = kiln.autograd.grad((kout ** 2).sum(), kx, create_graph=True)
    (gt,) = torch.autograd.grad((tout ** 2).sum(), tx, create_graph=True)
    (gk ** 2).sum().backward()
    (gt ** 2).sum().backward()
    np.testing.assert_allclose(_np(gk), _np(gt), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(_np(kw.grad), _np(tw.grad), rtol=1e-9, atol=1e-10)


def test_leaf_takes_an_unshared_gradient_and_copies_a_shared_one():
    rng = np.random.default_rng(9)
    a = kiln.from_numpy(rng.standard_normal((5, 4)).astype(np.float32)).requires_grad_()
    b = kiln.from_numpy(rng.standard_normal((5, 4)).astype(np.float32)).requires_grad_()
    # One gradient tensor reaches both leaves: each needs its own copy.
    (a + b).sum().backward()
    a.grad.add_(1.0)
    np.testing.assert_array_equal(b.grad.numpy(), np.ones((5, 4), np.float32))
    np.testing.assert_array_equal(a.grad.numpy(), np.full((5, 4), 2, np.float32))


@pytest.mark.parametrize("w2_used_first", [False, True])
def test_gradient_viewed_for_one_leaf_and_whole_for_another_is_copied(w2_used_first):
    # The view's storage belongs to a gradient that another leaf receives as well. Which leaf
    # takes its gradient first follows the order the graph was built in (w2_used_first: w2's
    # accumulator is the older node, so it runs last).
    rng = np.random.default_rng(11)
    w = kiln.from_numpy(rng.standard_normal((5, 3)).astype(np.float32)).requires_grad_()
    w2 = kiln.from_numpy(rng.standard_normal((3, 5)).astype(np.float32)).requires_grad_()
    c = kiln.from_numpy(rng.standard_normal((3, 5)).astype(np.float32))
    unused = w2 * 1.0 if w2_used_first else None
    ((w.view(3, 5) + w2) * c).sum().backward()
    del unused
    np.testing.assert_array_equal(w.grad.numpy(), c.numpy().reshape(5, 3))
    np.testing.assert_array_equal(w2.grad.numpy(), c.numpy())
    w.grad.add_(1.0)
    np.testing.assert_array_equal(w2.grad.numpy(), c.numpy())
    w2.grad.mul_(0.0)
    np.testing.assert_array_equal(w.grad.numpy(), c.numpy().reshape(5, 3) + 1)


def test_weight_gradient_through_a_transpose_is_its_own_row_major_tensor():
    rng = np.random.default_rng(10)
    x = kiln.from_numpy(rng.standard_normal((6, 3)).astype(np.float32))
    w = kiln.from_numpy(rng.standard_normal((5, 3)).astype(np.float32)).requires_grad_()
    tx, tw = torch.from_numpy(x.numpy()), torch.from_numpy(w.detach().numpy()).requires_grad_()
    kiln.nn.functional.linear(x, w).sum().backward()
    torch.nn.functional.linear(tx, tw).sum().backward()
    assert w.grad.is_contiguous() and list(w.grad.shape) == [5, 3]
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)
    before = w.grad.numpy().copy()
    # A second backward adds into the same buffer.
    kiln.nn.functional.linear(x, w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * before, rtol=1e-6)


def test_gradient_a_hook_keeps_is_not_the_leafs_grad():
    w = kiln.ones([4]).requires_grad_()
    seen = []
    w.register_hook(lambda g: seen.append(g))
    (w * 3).sum().backward()
    w.grad.mul_(0)
    np.testing.assert_array_equal(seen[0].numpy(), np.full(4, 3, np.float32))
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(4, np.float32))


def test_user_supplied_root_gradient_is_not_taken():
    w = kiln.ones([3]).requires_grad_()
    g = kiln.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    w.backward(g)
    w.grad.add_(10)
    np.testing.assert_array_equal(g.numpy(), np.array([1, 2, 3], np.float32))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gelu_backward_through_autograd_matches_torch(approximate, dtype):
    rng = np.random.default_rng(12)
    kx, tx = _pair(rng.standard_normal((4, 33, 96)) * 3, dtype)
    kg, tg = _pair(rng.standard_normal((4, 33, 96)), dtype)
    kx.requires_grad_()
    tx.requires_grad_()
    kiln.nn.functional.gelu(kx, approximate=approximate).backward(kg)
    torch.nn.functional.gelu(tx, approximate=approximate).backward(tg)
    rtol, atol = DTYPES[dtype]
    np.testing.assert_allclose(_np(kx.grad), _np(tx.grad), rtol=rtol, atol=atol * 10)
