"""Univariate continuous distributions of kiln.distributions against torch.distributions
2.13 (float32 and float64): mean / mode / variance / stddev / entropy / log_prob / cdf / icdf,
parameter gradients of log_prob and entropy, and samples checked statistically (empirical
cdf and moments) with a fixed seed."""

import numpy as np
import pytest
import torch

import kiln
import kiln.distributions as KD
import torch.distributions as TD
from test_distributions_util import (DTYPES, K, T, close, compare_attr, ecdf_check,
                                     grads_match, moments_check, needs_gamma, npd)

B = (2, 3)  # batch shape of the parameters


def pos(rng, lo=0.5, hi=3.0, shape=B):
    return rng.uniform(lo, hi, shape)


def real(rng, shape=B):
    return rng.standard_normal(shape)


# name, factory(D, P), parameters(rng) -> dict, values(rng, P) -> array inside the support,
# whether the family samples through kiln._standard_gamma.
CASES = [
    ("Normal", lambda D, P: D.Normal(P["loc"], P["scale"]),
     lambda r: {"loc": real(r), "scale": pos(r)}, lambda r, p: real(r) * 2, False),
    ("Uniform", lambda D, P: D.Uniform(P["low"], P["high"]),
     lambda r: {"low": real(r) - 1, "high": real(r) * 0.1 + 1.5},
     lambda r, p: p["low"] + r.uniform(0.01, 0.99, B) * (p["high"] - p["low"]), False),
    ("Exponential", lambda D, P: D.Exponential(P["rate"]),
     lambda r: {"rate": pos(r)}, lambda r, p: pos(r, 0.0, 4.0), False),
    ("Laplace", lambda D, P: D.Laplace(P["loc"], P["scale"]),
     lambda r: {"loc": real(r), "scale": pos(r)}, lambda r, p: real(r) * 3, False),
    ("Cauchy", lambda D, P: D.Cauchy(P["loc"], P["scale"]),
     lambda r: {"loc": real(r), "scale": pos(r)}, lambda r, p: real(r) * 3, False),
    ("HalfNormal", lambda D, P: D.HalfNormal(P["scale"]),
     lambda r: {"scale": pos(r)}, lambda r, p: pos(r, 0.01, 4.0), False),
    ("HalfCauchy", lambda D, P: D.HalfCauchy(P["scale"]),
     lambda r: {"scale": pos(r)}, lambda r, p: pos(r, 0.01, 4.0), False),
    ("LogNormal", lambda D, P: D.LogNormal(P["loc"], P["scale"]),
     lambda r: {"loc": real(r) * 0.5, "scale": pos(r, 0.2, 1.0)}, lambda r, p: pos(r, 0.05, 5.0),
     False),
    ("Gumbel", lambda D, P: D.Gumbel(P["loc"], P["scale"]),
     lambda r: {"loc": real(r), "scale": pos(r)}, lambda r, p: real(r) * 2, False),
    ("Weibull", lambda D, P: D.Weibull(P["scale"], P["concentration"]),
     lambda r: {"scale": pos(r), "concentration": pos(r, 0.6, 3.0)},
     lambda r, p: pos(r, 0.05, 4.0), False),
    ("Pareto", lambda D, P: D.Pareto(P["scale"], P["alpha"]),
     lambda r: {"scale": pos(r), "alpha": pos(r, 0.5, 5.0)},
     lambda r, p: p["scale"] * pos(r, 1.01, 3.0), False),
    ("Kumaraswamy", lambda D, P: D.Kumaraswamy(P["c1"], P["c0"]),
     lambda r: {"c1": pos(r, 0.5, 4.0), "c0": pos(r, 0.5, 4.0)},
     lambda r, p: r.uniform(0.02, 0.98, B), False),
    ("ContinuousBernoulli", lambda D, P: D.ContinuousBernoulli(probs=P["probs"]),
     lambda r: {"probs": np.array([[0.1, 0.4995, 0.7], [0.3, 0.9, 0.5004]])},
     lambda r, p: r.uniform(0.0, 1.0, B), False),
    ("ContinuousBernoulliLogits", lambda D, P: D.ContinuousBernoulli(logits=P["logits"]),
     lambda r: {"logits": real(r) * 2}, lambda r, p: r.uniform(0.0, 1.0, B), False),
    ("Gamma", lambda D, P: D.Gamma(P["concentration"], P["rate"]),
     lambda r: {"concentration": pos(r, 0.3, 4.0), "rate": pos(r)},
     lambda r, p: pos(r, 0.05, 4.0), True),
    ("Chi2", lambda D, P: D.Chi2(P["df"]),
     lambda r: {"df": pos(r, 0.5, 6.0)}, lambda r, p: pos(r, 0.05, 6.0), True),
    ("Beta", lambda D, P: D.Beta(P["c1"], P["c0"]),
     lambda r: {"c1": pos(r, 0.4, 4.0), "c0": pos(r, 0.4, 4.0)},
     lambda r, p: r.uniform(0.02, 0.98, B), True),
    ("StudentT", lambda D, P: D.StudentT(P["df"], P["loc"], P["scale"]),
     lambda r: {"df": np.array([[0.8, 1.5, 3.0], [5.0, 2.5, 10.0]]), "loc": real(r),
                "scale": pos(r)}, lambda r, p: real(r) * 3, True),
    ("FisherSnedecor", lambda D, P: D.FisherSnedecor(P["df1"], P["df2"]),
     lambda r: {"df1": np.array([[1.5, 3.0, 6.0], [2.0, 10.0, 4.0]]),
                "df2": np.array([[1.5, 3.0, 5.0], [8.0, 4.5, 12.0]])},
     lambda r, p: pos(r, 0.05, 4.0), True),
    ("RelaxedBernoulli", lambda D, P: D.RelaxedBernoulli(P["temperature"], probs=P["probs"]),
     lambda r: {"temperature": np.array(0.7), "probs": r.uniform(0.1, 0.9, B)},
     lambda r, p: r.uniform(0.05, 0.95, B), False),
]
IDS = [c[0] for c in CASES]
# (case, attribute) pairs where torch is not the reference: torch 2.13's Kumaraswamy.mode is
# nan for every parameter (its formula swaps the concentrations); checked analytically below.
NOT_AGAINST_TORCH = {("Kumaraswamy", "mode")}


def make_both(case, dtype, seed=0, requires_grad=False):
    name, factory, params, values, _ = case
    rng = np.random.default_rng(seed)
    p = {k: np.asarray(v, dtype=npd(dtype)) for k, v in params(rng).items()}
    kp = {k: K(v, requires_grad) for k, v in p.items()}
    tp = {k: T(v, requires_grad) for k, v in p.items()}
    v = np.asarray(values(rng, p), dtype=npd(dtype))
    return factory(KD, kp), factory(TD, tp), kp, tp, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_against_torch(case, dtype):
    kd, td, kp, tp, v = make_both(case, dtype)
    assert kd.batch_shape == tuple(td.batch_shape) and kd.event_shape == tuple(td.event_shape)
    assert kd.has_rsample == td.has_rsample
    assert repr(kd.support) == repr(td.support) or case[0] in ("Uniform", "Pareto")
    checked = 0
    for attr in ["mean", "mode", "variance", "stddev", "entropy"]:
        if (case[0], attr) in NOT_AGAINST_TORCH:
            continue
        checked += compare_attr(kd, td, attr, dtype)
    checked += compare_attr(kd, td, "log_prob", dtype, v)
    checked += compare_attr(kd, td, "cdf", dtype, v)
    u = np.asarray(np.random.default_rng(5).uniform(0.05, 0.95, B), dtype=npd(dtype))
    checked += compare_attr(kd, td, "icdf", dtype, u)
    assert checked >= 1
    # Broadcasting a batch of values against the parameters.
    vv = np.stack([v, v])
    compare_attr(kd, td, "log_prob", dtype, vv)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_against_torch(case, dtype):
    kd, td, kp, tp, v = make_both(case, dtype, requires_grad=True)
    kout = kd.log_prob(K(v)).sum()
    tout = td.log_prob(T(v)).sum()
    try:
        tout = tout + td.entropy().sum()
        kout = kout + kd.entropy().sum()
    except NotImplementedError:
        pass
    if case[0] not in ("Cauchy", "HalfCauchy", "StudentT", "FisherSnedecor",
                       "RelaxedBernoulli"):
        tout = tout + td.mean.sum()  # nan / inf means would give nan gradients
        kout = kout + kd.mean.sum()
    names = list(kp)
    grads_match([kp[n] for n in names], [tp[n] for n in names], kout, tout, dtype, case[0])


def test_kumaraswamy_mode():
    a = np.array([2.0, 0.5, 3.0, 1.0, 5.0])
    b = np.array([3.0, 2.0, 0.5, 1.0, 1.2])
    m = KD.Kumaraswamy(K(a), K(b)).mode.numpy()
    want = ((a - 1) / (a * b - 1)) ** (1 / a)
    want[(a < 1) | (b < 1) | ((a == 1) & (b == 1))] = np.nan
    np.testing.assert_allclose(m, want, rtol=1e-12)
    # The mode maximises the density.
    f64 = torch.float64
    d = TD.Kumaraswamy(torch.tensor(2.0, dtype=f64), torch.tensor(3.0, dtype=f64))
    x = torch.linspace(0.01, 0.99, 9801, dtype=torch.float64)
    assert abs(float(x[d.log_prob(x).argmax()]) - m[0]) < 2e-4


def test_scalar_parameters_and_dtype():
    for name, make in [("Normal", lambda D: D.Normal(0.0, 1.0)),
                       ("Gumbel", lambda D: D.Gumbel(1.0, 2.0)),
                       ("Exponential", lambda D: D.Exponential(2.0)),
                       ("Beta", lambda D: D.Beta(2.0, 3.0)),
                       ("Gamma", lambda D: D.Gamma(2.0, 3.0))]:
        kd, td = make(KD), make(TD)
        assert kd.batch_shape == tuple(td.batch_shape), name
        close(kd.log_prob(kiln.tensor(0.5)), td.log_prob(torch.tensor(0.5)), what=name)
        close(kd.entropy(), td.entropy(), what=name)
    # A Python number next to a float64 tensor takes the tensor's dtype.
    d = KD.Normal(0.0, K(np.array([1.0, 2.0])))
    assert d.loc.dtype == kiln.float64 and tuple(d.batch_shape) == (2,)


def test_uniform_outside_support_without_validation():
    kd = KD.Uniform(K(np.array([0.0])), K(np.array([1.0])), validate_args=False)
    td = TD.Uniform(torch.tensor([0.0], dtype=torch.float64),
                    torch.tensor([1.0], dtype=torch.float64),
                    validate_args=False)
    for x in [-0.5, 0.0, 0.5, 1.0, 1.5]:
        close(kd.log_prob(K(np.array([x]))), td.log_prob(torch.tensor([x], dtype=torch.float64)))
        close(kd.cdf(K(np.array([x]))), td.cdf(torch.tensor([x], dtype=torch.float64)))


def test_halfnormal_negative_value_without_validation():
    kd = KD.HalfNormal(K(np.array([1.0])), validate_args=False)
    td = TD.HalfNormal(torch.tensor([1.0], dtype=torch.float64), validate_args=False)
    close(kd.log_prob(K(np.array([-1.0]))), td.log_prob(torch.tensor([-1.0], dtype=torch.float64)))


# --------------------------------------------------------------------------------------------
# sampling: a fixed seed, the empirical cdf at a few quantiles and the moments.

N = 20000
SAMPLE_PARAMS = [
    ("Normal", lambda D, t: D.Normal(t(1.5), t(2.0)), True),
    ("Uniform", lambda D, t: D.Uniform(t(-1.0), t(3.0)), True),
    ("Exponential", lambda D, t: D.Exponential(t(1.7)), True),
    ("Laplace", lambda D, t: D.Laplace(t(0.5), t(1.5)), True),
    ("Cauchy", lambda D, t: D.Cauchy(t(0.5), t(1.5)), False),
    ("HalfNormal", lambda D, t: D.HalfNormal(t(1.3)), True),
    ("HalfCauchy", lambda D, t: D.HalfCauchy(t(1.3)), False),
    ("LogNormal", lambda D, t: D.LogNormal(t(0.2), t(0.5)), True),
    ("Gumbel", lambda D, t: D.Gumbel(t(0.3), t(1.4)), True),
    ("Weibull", lambda D, t: D.Weibull(t(1.5), t(2.0)), True),
    ("Pareto", lambda D, t: D.Pareto(t(1.0), t(5.0)), True),
    ("Kumaraswamy", lambda D, t: D.Kumaraswamy(t(2.0), t(3.0)), True),
    ("ContinuousBernoulli", lambda D, t: D.ContinuousBernoulli(probs=t(0.8)), True),
    ("Gamma", lambda D, t: D.Gamma(t(2.5), t(1.5)), True),
    ("GammaSmall", lambda D, t: D.Gamma(t(0.3), t(1.0)), True),
    ("Chi2", lambda D, t: D.Chi2(t(3.0)), True),
    ("Beta", lambda D, t: D.Beta(t(2.0), t(0.7)), True),
    ("StudentT", lambda D, t: D.StudentT(t(5.0), t(0.5), t(2.0)), False),
    ("FisherSnedecor", lambda D, t: D.FisherSnedecor(t(4.0), t(9.0)), False),
]
GAMMA_BASED = {"Gamma", "GammaSmall", "Chi2", "Beta", "StudentT", "FisherSnedecor"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SAMPLE_PARAMS, ids=[c[0] for c in SAMPLE_PARAMS])
def test_samples(case, dtype):
    name, make, with_moments = case
    if name in GAMMA_BASED and not hasattr(kiln, "_standard_gamma"):
        pytest.skip("kiln._standard_gamma not built yet")
    kiln.manual_seed(1234)
    kdt = getattr(kiln, dtype)
    kd = make(KD, lambda x: kiln.tensor(x, dtype=kdt))
    td = make(TD, lambda x: torch.tensor(x, dtype=torch.float64))
    s = kd.sample((N,))
    assert tuple(s.shape) == (N,) and s.dtype == kdt
    assert bool(kd.support.check(s).all()), name
    ts = T(s).double()
    qs = td.icdf(torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95], dtype=torch.float64)) \
        if name not in ("Gamma", "GammaSmall", "Chi2", "Beta", "StudentT", "FisherSnedecor",
                        "Kumaraswamy", "Weibull", "Pareto") else None
    if qs is not None:
        ecdf_check(ts, td.cdf, qs)
    else:  # no icdf in torch: a grid of points with cdf or, failing that, of quantiles
        grid = torch.quantile(ts, torch.tensor([0.1, 0.3, 0.5, 0.7, 0.9], dtype=torch.float64))
        try:
            ecdf_check(ts, td.cdf, grid)
        except NotImplementedError:
            pass
    if with_moments:
        moments_check(ts.unsqueeze(-1), td.mean.reshape(1), td.variance.reshape(1))
    # rsample is sample with gradients (or the same NotImplementedError).
    if kd.has_rsample:
        r = kd.rsample((3,))
        assert tuple(r.shape) == (3,)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_samples_and_rsample_shapes(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(7)
    loc = kiln.tensor([[0.0, 5.0, -3.0]], dtype=kdt)
    scale = kiln.tensor([[1.0], [0.1]], dtype=kdt)
    d = KD.Normal(loc, scale)
    s = d.sample((4000,))
    assert tuple(s.shape) == (4000, 2, 3) and s.dtype == kdt
    m = T(s).double().mean(0)
    want = T(loc).double().expand(2, 3)
    se = (T(scale).double().expand(2, 3) ** 2 / 4000).sqrt()
    assert bool(((m - want).abs() < 6 * se).all())


@pytest.mark.parametrize("dtype", DTYPES)
def test_normal_rsample_pathwise_gradient(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(3)
    loc = kiln.tensor([0.5, -1.0], dtype=kdt, requires_grad=True)
    scale = kiln.tensor([2.0, 0.3], dtype=kdt, requires_grad=True)
    x = KD.Normal(loc, scale).rsample((50,))
    assert x.requires_grad
    x.sum().backward()
    eps = (x.detach() - loc.detach()) / scale.detach()
    np.testing.assert_allclose(loc.grad.numpy(), [50.0, 50.0], rtol=1e-6)
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0).numpy(), rtol=1e-4, atol=1e-4)
    s = KD.Normal(loc, scale).sample((5,))
    assert not s.requires_grad


@pytest.mark.parametrize("name,make,dx", [
    ("Exponential", lambda p: KD.Exponential(p), lambda x, p: -x / p),
    ("Uniform", lambda p: KD.Uniform(kiln.zeros_like(p), p), lambda x, p: x / p),
    ("Laplace", lambda p: KD.Laplace(kiln.zeros_like(p), p), lambda x, p: x / p),
    ("Cauchy", lambda p: KD.Cauchy(kiln.zeros_like(p), p), lambda x, p: x / p),
    ("LogNormal", lambda p: KD.LogNormal(kiln.zeros_like(p), p), lambda x, p: x * np.log(x) / p),
    ("Gumbel", lambda p: KD.Gumbel(kiln.zeros_like(p), p), lambda x, p: x / p),
])
def test_rsample_pathwise_gradients(name, make, dx):
    """d sample / d parameter against the derivative of the sampling map (a location-scale
    or power family: x = g(eps; p), dx/dp known in closed form in terms of x)."""
    kiln.manual_seed(11)
    p = kiln.tensor([1.3, 0.7], dtype=kiln.float64, requires_grad=True)
    x = make(p).rsample((200,))
    x.sum().backward()
    want = dx(x.detach().numpy(), p.detach().numpy()).sum(0)
    np.testing.assert_allclose(p.grad.numpy(), want, rtol=1e-8, atol=1e-8)


@needs_gamma
@pytest.mark.parametrize("alpha", [0.5, 2.0, 7.0])
def test_gamma_rsample_gradient_mean(alpha):
    """Implicit reparameterisation: E[dx / dalpha] = d E[x] / d alpha = 1 / rate."""
    kiln.manual_seed(21)
    n = 20000
    a = kiln.tensor([alpha], dtype=kiln.float64, requires_grad=True)
    rate = kiln.tensor([2.0], dtype=kiln.float64, requires_grad=True)
    x = KD.Gamma(a, rate).rsample((n,))
    x.sum().backward()
    g = a.grad.numpy()[0] / n
    # Var(dx/dalpha) is bounded by a few times alpha / rate^2 for these alphas; a loose check.
    assert abs(g - 1 / 2.0) < 0.05, g
    np.testing.assert_allclose(rate.grad.numpy()[0] / n, -alpha / 4.0, rtol=0.05)


@needs_gamma
def test_beta_rsample_gradient_mean():
    """d E[x] / d a for Beta(a, b): b / (a + b)^2; d / d b: -a / (a + b)^2."""
    kiln.manual_seed(22)
    n = 20000
    a = kiln.tensor(2.0, dtype=kiln.float64, requires_grad=True)
    b = kiln.tensor(3.0, dtype=kiln.float64, requires_grad=True)
    x = KD.Beta(a, b).rsample((n,))
    assert tuple(x.shape) == (n,)
    x.sum().backward()
    assert abs(a.grad.item() / n - 3 / 25) < 0.01
    assert abs(b.grad.item() / n + 2 / 25) < 0.01
