"""out= on kiln's elementwise functions, matmul / mm / bmm, cat / stack, sum / mean and the
other single-result functions torch gives out= (prod, amax, var, clamp, where, addmm, ...)
against torch 2.13: the values written, the object returned (out itself), writes into a view
of a larger tensor, casting into a wider dtype, broadcasting, an empty out that takes the
result's shape, an out overlapping an input, and the errors torch raises (a float result into
an integer out, an argument that requires grad); kiln refuses a non-empty out of the wrong
shape, which torch resizes with a deprecation warning."""
import numpy as np
import pytest
import torch

import kiln


def both(shape, seed, lo=-2.0, hi=2.0):
    a = np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)
    return kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())


def npy(x):
    return x.detach().numpy()


UNARY = ["neg", "abs", "exp", "log1p", "sqrt", "sin", "tanh", "sigmoid", "erf",
         "floor", "sign", "reciprocal"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_out_matches_torch(name):
    k, t = both((3, 17), 1, 0.1, 2.0)
    ko, to = kiln.empty(3, 17), torch.empty(3, 17)
    r = getattr(kiln, name)(k, out=ko)
    getattr(torch, name)(t, out=to)
    assert r is ko
    np.testing.assert_allclose(npy(ko), npy(to), rtol=1e-6, atol=1e-6)


BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "atan2", "fmod"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_out_with_broadcast_matches_torch(name):
    ka, ta = both((4, 5), 2, 0.5, 2.0)
    kb, tb = both((5,), 3, 0.5, 2.0)
    ko, to = kiln.zeros(4, 5), torch.zeros(4, 5)
    r = getattr(kiln, name)(ka, kb, out=ko)
    getattr(torch, name)(ta, tb, out=to)
    assert r is ko
    np.testing.assert_allclose(npy(ko), npy(to), rtol=1e-6, atol=1e-6)


def test_scalar_other_alpha_and_rounding_mode():
    ka, ta = both((6,), 4, -5, 5)
    for kf, tf in [
        (lambda o: kiln.add(ka, 2.5, alpha=3, out=o), lambda o: torch.add(ta, 2.5, alpha=3, out=o)),
        (lambda o: kiln.sub(ka, ka, alpha=0.5, out=o), lambda o: torch.sub(ta, ta, alpha=0.5, out=o)),
        (lambda o: kiln.mul(ka, -2, out=o), lambda o: torch.mul(ta, -2, out=o)),
        (lambda o: kiln.div(ka, 1.5, rounding_mode="floor", out=o),
         lambda o: torch.div(ta, 1.5, rounding_mode="floor", out=o)),
    ]:
        ko, to = kiln.empty(6), torch.empty(6)
        kf(ko), tf(to)
        np.testing.assert_allclose(npy(ko), npy(to), rtol=1e-6, atol=1e-6)


def test_out_is_a_view_of_a_larger_tensor():
    ka, ta = both((3, 4), 5)
    kbig, tbig = kiln.full((3, 10), 7.0), torch.full((3, 10), 7.0)
    kiln.exp(ka, out=kbig[:, 2:6])
    torch.exp(ta, out=tbig[:, 2:6])
    np.testing.assert_allclose(npy(kbig), npy(tbig), rtol=1e-6)


def test_cast_into_wider_dtype_and_comparison_into_bool():
    ka, ta = both((8,), 6)
    ko, to = kiln.empty(8, dtype=kiln.float64), torch.empty(8, dtype=torch.float64)
    kiln.mul(ka, ka, out=ko)
    torch.mul(ta, ta, out=to)
    assert ko.dtype == kiln.float64
    np.testing.assert_allclose(npy(ko), npy(to), rtol=1e-12)
    kb, tb = kiln.empty(8, dtype=kiln.bool), torch.empty(8, dtype=torch.bool)
    kiln.gt(ka, 0, out=kb)
    torch.gt(ta, 0, out=tb)
    assert (npy(kb) == npy(tb)).all()


def test_empty_out_takes_the_result():
    ka, ta = both((2, 3), 7)
    ko, to = kiln.empty(0), torch.empty(0)
    r = kiln.add(ka, 1, out=ko)
    torch.add(ta, 1, out=to)
    assert r is ko and tuple(ko.shape) == tuple(to.shape) == (2, 3)
    np.testing.assert_allclose(npy(ko), npy(to), rtol=1e-6)


def test_errors():
    ka, ta = both((4,), 8)
    # A float result cannot go into an integer out (torch: RuntimeError too).
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.exp(ta, out=torch.empty(4, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="can't be cast"):
        kiln.exp(ka, out=kiln.empty(4, dtype=kiln.int64))
    # Autograd: refused while an argument requires grad (torch's message).
    kr = kiln.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        kiln.mul(kr, 2, out=kiln.empty(4))
    with kiln.no_grad():
        kiln.mul(kr, 2, out=kiln.empty(4))
    # A non-empty out of another shape: kiln refuses (torch resizes it with a warning).
    with pytest.raises(RuntimeError, match="out has shape"):
        kiln.add(ka, ka, out=kiln.empty(3))
    # out must be a tensor.
    with pytest.raises(TypeError):
        kiln.add(ka, ka, out=[0.0] * 4)


def test_products_and_joins_store_into_out():
    ka, ta = both((3, 4), 9)
    kb, tb = both((4, 5), 10)
    for kf, tf, shape in [
        (lambda o: kiln.matmul(ka, kb, out=o), lambda o: torch.matmul(ta, tb, out=o), (3, 5)),
        (lambda o: kiln.mm(ka, kb, out=o), lambda o: torch.mm(ta, tb, out=o), (3, 5)),
        (lambda o: kiln.bmm(ka.unsqueeze(0), kb.unsqueeze(0), out=o),
         lambda o: torch.bmm(ta.unsqueeze(0), tb.unsqueeze(0), out=o), (1, 3, 5)),
        (lambda o: kiln.cat([ka, ka], 0, out=o), lambda o: torch.cat([ta, ta], 0, out=o), (6, 4)),
        (lambda o: kiln.stack([ka, ka], dim=1, out=o),
         lambda o: torch.stack([ta, ta], dim=1, out=o), (3, 2, 4)),
    ]:
        ko, to = kiln.empty(*shape), torch.empty(*shape)
        assert kf(ko) is ko
        tf(to)
        np.testing.assert_allclose(npy(ko), npy(to), rtol=1e-6, atol=1e-6)
        ke = kiln.empty(0)
        kf(ke)
        assert tuple(ke.shape) == shape
    # out overlapping an input: the product goes through a temporary.
    ks = kiln.from_numpy(np.eye(3, dtype=np.float32) * 2)
    kx = ka[:, :3].contiguous()
    kiln.mm(kx, ks, out=kx)
    np.testing.assert_allclose(npy(kx), npy(ta[:, :3]) * 2, rtol=1e-6)
    with pytest.raises(RuntimeError, match="out has shape"):
        kiln.matmul(ka, kb, out=kiln.empty(5, 3))


def test_sum_and_mean_store_into_out():
    ka, ta = both((4, 6, 5), 11)
    for kf, tf, shape in [
        (lambda o: kiln.sum(ka, 1, out=o), lambda o: torch.sum(ta, 1, out=o), (4, 5)),
        (lambda o: kiln.sum(ka, (0, 2), keepdim=True, out=o),
         lambda o: torch.sum(ta, (0, 2), keepdim=True, out=o), (1, 6, 1)),
        (lambda o: kiln.mean(ka, -1, out=o), lambda o: torch.mean(ta, -1, out=o), (4, 6)),
    ]:
        ko, to = kiln.empty(*shape), torch.empty(*shape)
        assert kf(ko) is ko
        tf(to)
        np.testing.assert_allclose(npy(ko), npy(to), rtol=1e-5, atol=1e-6)
    ko, to = kiln.empty(4, 5, dtype=kiln.float64), torch.empty(4, 5, dtype=torch.float64)
    kiln.sum(ka, 1, dtype=kiln.float64, out=ko)
    torch.sum(ta, 1, dtype=torch.float64, out=to)
    np.testing.assert_allclose(npy(ko), npy(to), rtol=1e-12)
    with pytest.raises(RuntimeError, match="out has shape"):
        kiln.mean(ka, 0, out=kiln.empty(4, 5))


# The other single-result functions: (name, build) where build(module, a, b, c) gives the
# positional and keyword arguments for kiln or torch from three float inputs.
GENERIC = [
    ("prod", lambda m, a, b, c: ((a, 1), {"keepdim": True})),
    ("amax", lambda m, a, b, c: ((a, (0, 1)), {})),
    ("amin", lambda m, a, b, c: ((a, 1), {})),
    ("var", lambda m, a, b, c: ((a, 1), {"correction": 0})),
    ("std", lambda m, a, b, c: ((a, (0, 1)), {"keepdim": True})),
    ("norm", lambda m, a, b, c: ((a,), {"dim": 1})),
    ("logsumexp", lambda m, a, b, c: ((a, 0), {})),
    ("all", lambda m, a, b, c: ((a > 0, 1), {})),
    ("any", lambda m, a, b, c: ((a > 1, 0), {})),
    ("argmax", lambda m, a, b, c: ((a, 1), {})),
    ("argmin", lambda m, a, b, c: ((a,), {"dim": 0, "keepdim": True})),
    ("cumsum", lambda m, a, b, c: ((a, 1), {})),
    ("cumprod", lambda m, a, b, c: ((a, 0), {})),
    ("clamp", lambda m, a, b, c: ((a, -0.5, 0.75), {})),
    ("clamp", lambda m, a, b, c: ((a,), {"min": b})),  # a tensor bound
    ("clip", lambda m, a, b, c: ((a,), {"max": 0.25})),
    ("where", lambda m, a, b, c: ((a > 0, b, c), {})),
    ("where", lambda m, a, b, c: ((a > 0, b, 0.5), {})),
    ("lerp", lambda m, a, b, c: ((a, b, 0.3), {})),
    ("addcmul", lambda m, a, b, c: ((a, b, c), {"value": 0.5})),
    ("addcdiv", lambda m, a, b, c: ((a, b, c.abs() + 1), {"value": 2})),
    ("addmm", lambda m, a, b, c: ((a, b, c.t()), {"beta": 0.5, "alpha": 2})),
    ("baddbmm", lambda m, a, b, c: ((a.reshape(1, 4, 4), b.reshape(1, 4, 4),
                                     c.reshape(1, 4, 4)), {"alpha": -1})),
    ("outer", lambda m, a, b, c: ((a.reshape(-1)[:3], b.reshape(-1)[:5]), {})),
    ("dot", lambda m, a, b, c: ((a.reshape(-1), b.reshape(-1)), {})),
    ("tril", lambda m, a, b, c: ((a, -1), {})),
    ("triu", lambda m, a, b, c: ((a,), {"diagonal": 1})),
    ("nan_to_num", lambda m, a, b, c: ((a.log(),), {"nan": 7.0})),
]


@pytest.mark.parametrize("case", range(len(GENERIC)))
def test_other_functions_write_out_as_torch(case):
    name, build = GENERIC[case]
    ka, ta = both((4, 4), 30 + case, -1.5, 1.5)
    kb, tb = both((4, 4), 60 + case, -1.5, 1.5)
    kc, tc = both((4, 4), 90 + case, -1.5, 1.5)
    targs, tkw = build(torch, ta, tb, tc)
    want = getattr(torch, name)(*targs, **tkw)
    kdt = {torch.float32: kiln.float32, torch.int64: kiln.int64, torch.bool: kiln.bool}[want.dtype]
    kargs, kkw = build(kiln, ka, kb, kc)
    ko = kiln.full(tuple(want.shape), 3, dtype=kdt)  # stale values: every element is written
    r = getattr(kiln, name)(*kargs, out=ko, **kkw)
    assert r is ko
    np.testing.assert_allclose(npy(ko), npy(want), rtol=1e-5, atol=1e-5)
    # an empty out takes the result; a non-empty one of another shape is refused
    ke = kiln.empty(0, dtype=kdt)
    getattr(kiln, name)(*kargs, out=ke, **kkw)
    assert tuple(ke.shape) == tuple(want.shape)
    np.testing.assert_allclose(npy(ke), npy(want), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="out has shape"):
        getattr(kiln, name)(*kargs, out=kiln.empty(7, 7, 7, dtype=kdt), **kkw)


def test_other_functions_out_errors_as_torch():
    ka, _ = both((3, 3), 5)
    # a float result into an integer out: torch's RuntimeError
    with pytest.raises(RuntimeError, match="can't be cast"):
        kiln.clamp(ka, 0, 1, out=kiln.empty(3, 3, dtype=kiln.int64))
    # out= under autograd
    g = ka.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        kiln.prod(g, 0, out=kiln.empty(3))
    # out must be a tensor; without out=, bad arguments still get the plain TypeError
    with pytest.raises(RuntimeError, match="must be Tensor"):
        kiln.amax(ka, 0, out=[1, 2, 3])
    with pytest.raises(TypeError):
        kiln.amax(ka, "zero")
    # a result that is not one tensor (the one-argument where gives a tuple)
    with pytest.raises(RuntimeError, match="returns one tensor"):
        kiln.where(ka > 0, out=kiln.empty(0))
