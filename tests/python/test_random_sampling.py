"""kiln._standard_gamma / poisson / binomial / _standard_gamma_grad against exact moments,
torch 2.13's derivative and an mpmath reference; plus the gradient and
complex-random fixes of session 41 (bce_with_logits and logsigmoid at 0, sgn's derivative,
complex randn / rand / normal_ / uniform_, custom Functions with complex outputs)."""
import numpy as np
import pytest
import torch

import kiln


def K(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


def full(value, n, dtype=kiln.float64):
    return kiln.full([n], value, dtype=dtype)


def assert_moments(x, mean, var, n_sigma=6):
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    assert abs(x.mean() - mean) <= n_sigma * np.sqrt(var / n) + 1e-12, (x.mean(), mean)
    fourth = ((x - x.mean()) ** 4).mean()
    se_var = np.sqrt(max(fourth - x.var() ** 2, 0.0) / n)
    assert abs(x.var(ddof=1) - var) <= n_sigma * se_var + 1e-12, (x.var(ddof=1), var)


@pytest.mark.parametrize("alpha", [0.05, 0.7, 1.0, 3.5, 120.0])
def test_gamma_moments(alpha):
    g = kiln.Generator().manual_seed(3)
    x = kiln._standard_gamma(full(alpha, 50000), generator=g).numpy()
    assert (x > 0).all()
    assert_moments(x, alpha, alpha)


@pytest.mark.parametrize("rate", [0.0, 0.5, 6.0, 10.0, 250.0, 1e7])
def test_poisson_moments(rate):
    g = kiln.Generator().manual_seed(4)
    x = kiln.poisson(full(rate, 50000), generator=g).numpy()
    assert (x == np.floor(x)).all() and (x >= 0).all()
    assert_moments(x, rate, rate)


@pytest.mark.parametrize("n,p", [(12, 0.2), (400, 0.01), (80, 0.5), (5000, 0.97), (2e9, 0.4),
                                 (9, 1.0), (0, 0.3)])
def test_binomial_moments(n, p):
    g = kiln.Generator().manual_seed(5)
    x = kiln.binomial(full(n, 50000), full(p, 1), generator=g).numpy()
    assert (x == np.floor(x)).all() and (x >= 0).all() and (x <= n).all()
    assert_moments(x, n * p, n * p * (1 - p))


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_dtypes_shapes_and_seeds(dtype):
    dt = getattr(kiln, dtype)
    alpha = kiln.full([3, 4], 2.0, dtype=dt)
    for fn in (lambda g: kiln._standard_gamma(alpha, generator=g),
               lambda g: kiln.poisson(alpha, generator=g),
               lambda g: kiln.binomial(alpha * 5, alpha * 0.25, generator=g)):
        a = fn(kiln.Generator().manual_seed(8))
        b = fn(kiln.Generator().manual_seed(8))
        c = fn(kiln.Generator().manual_seed(9))
        assert a.dtype == dt and tuple(a.shape) == (3, 4)
        np.testing.assert_array_equal(a.float().numpy(), b.float().numpy())
        assert not np.array_equal(a.float().numpy(), c.float().numpy())
    # the global generator: kiln.manual_seed reproduces
    kiln.manual_seed(1)
    a = kiln.poisson(alpha).float().numpy()
    kiln.manual_seed(1)
    np.testing.assert_array_equal(a, kiln.poisson(alpha).float().numpy())


def test_binomial_broadcasts():
    count = kiln.full([3, 1], 10.0)
    prob = kiln.full([4], 0.5)
    # (torch 2.13 gives [3, 4] too, with a deprecation warning about resizing its output)
    assert tuple(kiln.binomial(count, prob).shape) == (3, 4)


GRID = [(0.05, 1e-6), (0.3, 0.01), (0.5, 0.3), (1.0, 2.0), (2.0, 0.5), (2.0, 2.5), (5.0, 12.0),
        (30.0, 22.0), (30.0, 45.0), (300.0, 280.0), (300.0, 330.0), (2e5, 2e5 - 900),
        (2e5, 2e5 + 1200), (3e6, 3e6 + 2000)]


def test_standard_gamma_grad_matches_torch():
    a = np.array([p[0] for p in GRID])
    x = np.array([p[1] for p in GRID])
    got = kiln._standard_gamma_grad(K(a), K(x)).numpy()
    ref = torch._standard_gamma_grad(torch.from_numpy(a), torch.from_numpy(x)).numpy()
    # torch's own derivative is an approximation (rational fits / asymptotic series)
    np.testing.assert_allclose(got, ref, rtol=2e-3)


def test_standard_gamma_grad_matches_mpmath():
    # d x / d alpha = -(dP/dalpha) / density with P mpmath's regularised incomplete gamma at 30
    # digits (mpmath comes with torch's sympy). kiln's series and continued fraction are exact
    # to rounding; from alpha = 1e5 the Wilson-Hilferty form is within 1e-8.
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30

    def reference(a, x):
        a, x = mpmath.mpf(a), mpmath.mpf(x)
        dp = mpmath.diff(lambda s: mpmath.gammainc(s, 0, x, regularized=True), a)
        return float(-dp / mpmath.exp((a - 1) * mpmath.log(x) - x - mpmath.loggamma(a)))

    for a, x in GRID[:13]:
        got = kiln._standard_gamma_grad(K(np.array([a])), K(np.array([x]))).item()
        assert got == pytest.approx(reference(a, x), rel=1e-12 if a < 1e5 else 1e-8), (a, x)


def test_gamma_sample_is_differentiable():
    alpha = K(np.array([0.3, 2.0, 40.0] * 2000)).requires_grad_()
    x = kiln._standard_gamma(alpha, generator=kiln.Generator().manual_seed(2))
    (x * 3).sum().backward()
    expected = 3 * kiln._standard_gamma_grad(alpha.detach(), x.detach()).numpy()
    np.testing.assert_allclose(alpha.grad.numpy(), expected, rtol=1e-12)
    # E[d x / d alpha] = d E[x] / d alpha = 1
    d = alpha.grad.numpy().reshape(-1, 3) / 3
    for j in range(3):
        assert abs(d[:, j].mean() - 1) < 6 * d[:, j].std() / np.sqrt(d.shape[0])


@pytest.mark.parametrize("fn,msg", [
    (lambda: kiln._standard_gamma(K(np.array([1.0, 0.0]))), "alpha"),
    (lambda: kiln._standard_gamma(K(np.array([np.nan]))), "alpha"),
    (lambda: kiln.poisson(K(np.array([-1.0]))), "Poisson rate"),
    (lambda: kiln.poisson(K(np.array([np.inf]))), "Poisson rate"),
    (lambda: kiln.binomial(K(np.array([2.5])), K(np.array([0.5]))), "count"),
    (lambda: kiln.binomial(K(np.array([3.0])), K(np.array([1.5]))), "probability"),
    (lambda: kiln.binomial(K(np.array([3.0])), K(np.array([np.nan]))), "probability"),
])
def test_bad_parameters_raise(fn, msg):
    with pytest.raises(RuntimeError, match=msg):
        fn()


def test_integer_inputs_are_refused():
    with pytest.raises(NotImplementedError, match="poisson"):
        kiln.poisson(kiln.ones([2], dtype=kiln.int64))
    with pytest.raises(NotImplementedError):
        kiln.binomial(kiln.ones([2], dtype=kiln.int64), kiln.ones([2]))


# --- gradient fixes ------------------------------------------------------------------------

@pytest.mark.parametrize("pos_weight", [None, 3.0])
def test_bce_with_logits_gradient_at_zero(pos_weight):
    logits = np.array([0.0, 0.0, 1.5, -2.0])
    target = np.array([0.5, 1.0, 0.2, 0.0])
    kl = K(logits).requires_grad_()
    tl = torch.from_numpy(logits).requires_grad_()
    kpw = None if pos_weight is None else K(np.array([pos_weight]))
    tpw = None if pos_weight is None else torch.tensor([pos_weight], dtype=torch.float64)
    kiln.nn.functional.binary_cross_entropy_with_logits(kl, K(target), pos_weight=kpw).backward()
    torch.nn.functional.binary_cross_entropy_with_logits(
        tl, torch.from_numpy(target), pos_weight=tpw).backward()
    np.testing.assert_allclose(kl.grad.numpy(), tl.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_logsigmoid_gradient_at_zero_and_tails():
    x = np.array([0.0, -0.0, -50.0, 30.0, 1e-8])
    kx = K(x).requires_grad_()
    tx = torch.from_numpy(x).requires_grad_()
    kiln.nn.functional.logsigmoid(kx).sum().backward()
    torch.nn.functional.logsigmoid(tx).sum().backward()
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(kiln.nn.functional.logsigmoid(K(x)).numpy(),
                               torch.nn.functional.logsigmoid(torch.from_numpy(x)).numpy(),
                               rtol=1e-14)


def test_double_backward_through_complex_abs():
    z = np.array([1 + 2j, 0j, -3 + 0.5j, 1e-3 - 2e-3j])
    kz = K(z).requires_grad_()
    tz = torch.from_numpy(z).requires_grad_()
    kg, = kiln.autograd.grad((kz.abs() ** 1.5).sum(), kz, create_graph=True)
    tg, = torch.autograd.grad((tz.abs() ** 1.5).sum(), tz, create_graph=True)
    kh, = kiln.autograd.grad((kg.real ** 2).sum() + (kg.imag * kg.real).sum(), kz)
    th, = torch.autograd.grad((tg.real ** 2).sum() + (tg.imag * tg.real).sum(), tz)
    np.testing.assert_allclose(kh.numpy(), th.numpy(), rtol=1e-12, atol=1e-12)
    # sgn itself
    ks = K(z).requires_grad_()
    ts = torch.from_numpy(z).requires_grad_()
    w = np.array([0.3 - 1j, 2, 1j, -1 + 1j])
    (kiln.sgn(ks) * K(w)).real.sum().backward()
    (torch.sgn(ts) * torch.from_numpy(w)).real.sum().backward()
    np.testing.assert_allclose(ks.grad.numpy(), ts.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_randn_rand_normal_uniform(dtype):
    dt = getattr(kiln, dtype)
    g = kiln.Generator().manual_seed(6)
    z = kiln.randn(100000, dtype=dt, generator=g).numpy()
    assert z.dtype == np.dtype(dtype)
    for part in (z.real, z.imag):  # each N(0, 1/2), as torch
        assert_moments(part, 0.0, 0.5)
    u = kiln.rand(100000, dtype=dt, generator=g).numpy()
    for part in (u.real, u.imag):
        assert part.min() >= 0 and part.max() < 1
        assert_moments(part, 0.5, 1 / 12)
    t = kiln.empty(100000, dtype=dt).normal_(2.0, 3.0, generator=g).numpy()
    for part in (t.real, t.imag):
        assert_moments(part, 2.0, 4.5)
    t = kiln.empty(100000, dtype=dt).uniform_(-1.0, 3.0, generator=g).numpy()
    for part in (t.real, t.imag):
        assert part.min() >= -1 and part.max() < 3
        assert_moments(part, 1.0, 16 / 12)


def test_custom_function_with_complex_output_joins_the_graph():
    class Scale(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    z = np.array([1 + 2j, -0.5 + 0.25j])
    kz = K(z).requires_grad_()
    out = Scale.apply(kz)
    assert out.requires_grad
    out.abs().sum().backward()
    tz = torch.from_numpy(z).requires_grad_()
    (tz * 2).abs().sum().backward()
    np.testing.assert_allclose(kz.grad.numpy(), tz.grad.numpy(), rtol=1e-12)
