"""InverseGamma, GeneralizedPareto, VonMises, LKJCholesky, Wishart and the cross-family /
infinite KL pairs against torch.distributions 2.13: values and parameter gradients in float32
and float64, supports and arg_constraints, validation errors, and samples checked
statistically with a fixed seed."""
import contextlib
import math

import zlib

import numpy as np
import pytest
import torch

import kiln
import kiln.distributions as KD
import torch.distributions as TD
from test_distributions_util import (DTYPES, K, T, close, compare_attr, ecdf_check,
                                     grads_match, moments_check, npd, same_error)


@contextlib.contextmanager
def torch_default_dtype(dtype):
    """torch's GeneralizedPareto compares its concentration with torch.tensor(0.0) (the
    default dtype), which fails for float64 parameters; run torch's reference under a float64
    default there."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _wishart_params(rng, dtype="float64"):
    A = rng.standard_normal((2, 3, 3))
    L = np.tril(A, -1) + np.diag(rng.uniform(0.5, 1.5, 3))[None]
    return {"df": np.array([3.5, 6.0]), "scale_tril": L}


# name -> (params(rng): dict of numpy arrays, make(M, P), value(rng, torch dist), tol f32/f64)
FAMILIES = {
    "InverseGamma": (
        lambda r: {"c": r.uniform(0.5, 4.0, 5), "r": r.uniform(0.5, 2.0, 5)},
        lambda M, P: M.InverseGamma(P["c"], P["r"]),
        lambda r, d: r.uniform(0.1, 3.0, 5), None),
    "GeneralizedPareto": (
        lambda r: {"loc": r.uniform(-1, 1, 5), "scale": r.uniform(0.5, 2.0, 5),
                   "conc": np.array([-0.4, 0.0, 0.3, 0.7, 1.3])},
        lambda M, P: M.GeneralizedPareto(P["loc"], P["scale"], P["conc"]),
        lambda r, d: d.icdf(torch.from_numpy(r.uniform(0.05, 0.95, 5)).to(d.loc.dtype))
        .detach().numpy(), None),
    "VonMises": (
        lambda r: {"loc": r.uniform(-3, 3, 5), "conc": np.array([0.01, 0.5, 2.0, 3.9, 20.0])},
        lambda M, P: M.VonMises(P["loc"], P["conc"]),
        lambda r, d: r.uniform(-6, 6, 5),
        # torch's log I0 / I1 are polynomial approximations (~1e-7 relative); kiln's exact.
        (1e-5, 1e-6)),
    "LKJCholesky": (
        lambda r: {"conc": r.uniform(0.3, 3.0, 4)},
        lambda M, P: M.LKJCholesky(4, P["conc"]),
        lambda r, d: d.sample().numpy(), None),
    "Wishart": (
        _wishart_params,
        # .tril(): torch's cholesky_solve backward gives the (unread) upper triangle of
        # scale_tril a nonzero gradient, kiln's gives it 0; through tril both are 0 there.
        lambda M, P: M.Wishart(P["df"], scale_tril=P["scale_tril"].tril()),
        lambda r, d: d.sample().numpy(), None),
}
NAMES = list(FAMILIES)


def _pair(name, dtype, requires_grad=False, seed=0):
    params, make, value, tol = FAMILIES[name]
    rng = _rng(seed)
    P = {k: v.astype(npd(dtype)) for k, v in params(rng).items()}
    kp = {k: K(v, requires_grad) for k, v in P.items()}
    tp = {k: T(v, requires_grad) for k, v in P.items()}
    with torch_default_dtype(dtype), warnings_off():
        td = make(TD, tp)
        torch.manual_seed(seed)
        v = np.asarray(value(rng, td)).astype(npd(dtype))
    kd = make(KD, kp)
    return kd, td, kp, tp, v, tol


@contextlib.contextmanager
def warnings_off():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_family_values_against_torch(name, dtype):
    kd, td, _, _, v, tol = _pair(name, dtype)
    assert tuple(kd.batch_shape) == tuple(td.batch_shape)
    assert tuple(kd.event_shape) == tuple(td.event_shape)
    with torch_default_dtype(dtype):
        compare_attr(kd, td, "log_prob", dtype, v, tol=tol)
        for attr in ("mean", "mode", "variance", "stddev", "entropy"):
            compare_attr(kd, td, attr, dtype, tol=tol)
        if name == "GeneralizedPareto":
            u = _rng(1).uniform(0.01, 0.99, 5).astype(npd(dtype))
            compare_attr(kd, td, "cdf", dtype, v)
            compare_attr(kd, td, "icdf", dtype, u)
            compare_attr(kd, td, "log_cdf", dtype, v)
            compare_attr(kd, td, "log_survival_function", dtype, v)
        if name == "InverseGamma":
            compare_attr(kd, td, "cdf", dtype, v)
    # Expanded copies agree too.
    shape = (3,) + tuple(kd.batch_shape)
    ke, te = kd.expand(shape), td.expand(torch.Size(shape))
    assert tuple(ke.batch_shape) == tuple(te.batch_shape)
    with torch_default_dtype(dtype):
        compare_attr(ke, te, "log_prob", dtype, v, tol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_family_gradients_against_torch(name, dtype):
    kd, td, kp, tp, v, tol = _pair(name, dtype, requires_grad=True)
    with torch_default_dtype(dtype):
        kout, tout = kd.log_prob(K(v)).sum(), td.log_prob(T(v)).sum()
        if name != "VonMises":  # torch has no VonMises entropy
            try:
                tout = tout + td.entropy().sum()
                kout = kout + kd.entropy().sum()
            except NotImplementedError:
                pass
    gtol = None if tol is None else (tol[0] * 10, tol[1] * 10)
    grads_match(list(kp.values()), list(tp.values()), kout, tout, dtype, what=name, tol=gtol)


@pytest.mark.parametrize("name", NAMES)
def test_family_support_and_arg_constraints(name):
    kd, td, _, _, _, _ = _pair(name, "float64")
    assert sorted(kd.arg_constraints) == sorted(td.arg_constraints)
    for key in kd.arg_constraints:
        assert (type(kd.arg_constraints[key]).__name__
                == type(td.arg_constraints[key]).__name__), key
    assert type(kd.support).__name__ == type(td.support).__name__
    assert kd.support.event_dim == td.support.event_dim
    assert kd.has_rsample == td.has_rsample
    # The support holds torch's samples.
    with warnings_off(), torch_default_dtype("float64"):
        s = td.sample((4,))
    assert bool(kd.support.check(K(s)).all())


def test_generalized_pareto_support_bounds():
    kd = KD.GeneralizedPareto(K(np.array([0.0, 1.0])), K(np.array([2.0, 1.0])),
                              K(np.array([-0.5, 0.5])))
    td = TD.GeneralizedPareto(T(np.array([0.0, 1.0])), T(np.array([2.0, 1.0])),
                              T(np.array([-0.5, 0.5])))
    close(kd.support.lower_bound, td.support.lower_bound)
    close(kd.support.upper_bound, td.support.upper_bound)  # [0, 4] and [1, inf)


VALIDATION = [
    ("InverseGamma neg conc", lambda M, c: M.InverseGamma(c([-1.0]), c([1.0]))),
    ("InverseGamma neg rate", lambda M, c: M.InverseGamma(c([1.0]), c([0.0]))),
    ("InverseGamma value", lambda M, c: M.InverseGamma(c([1.0]), c([1.0])).log_prob(c([-1.0]))),
    ("GP scale", lambda M, c: M.GeneralizedPareto(c([0.0]), c([-1.0]), c([0.1]))),
    ("GP nan conc", lambda M, c: M.GeneralizedPareto(c([0.0]), c([1.0]), c([math.nan]))),
    ("GP value below loc", lambda M, c: M.GeneralizedPareto(c([1.0]), c([1.0]), c([0.1]))
     .log_prob(c([0.5]))),
    ("GP value above bound", lambda M, c: M.GeneralizedPareto(c([0.0]), c([1.0]), c([-0.5]))
     .log_prob(c([2.5]))),
    ("VonMises conc", lambda M, c: M.VonMises(c([0.0]), c([-1.0]))),
    ("VonMises value shape", lambda M, c: M.VonMises(c([0.0, 1.0]), c([1.0, 1.0]))
     .log_prob(c([0.0, 1.0, 2.0]))),
    ("LKJ dim", lambda M, c: M.LKJCholesky(1, 1.0)),
    ("LKJ conc", lambda M, c: M.LKJCholesky(3, c([-0.5]))),
    ("LKJ value", lambda M, c: M.LKJCholesky(2, c([1.0])).log_prob(c([[[1.0, 0.0],
                                                                        [0.6, 0.6]]]))),
    ("Wishart df", lambda M, c: M.Wishart(c([1.5]), covariance_matrix=c(np.eye(3)[None]))),
    ("Wishart two params", lambda M, c: M.Wishart(c([4.0]), covariance_matrix=c(np.eye(2)),
                                                  scale_tril=c(np.eye(2)))),
    ("Wishart no param", lambda M, c: M.Wishart(c([4.0]))),
    ("Wishart 1d", lambda M, c: M.Wishart(c([4.0]), scale_tril=c([1.0, 2.0]))),
    ("Wishart not pd", lambda M, c: M.Wishart(c([4.0]), covariance_matrix=c(
        np.array([[1.0, 2.0], [2.0, 1.0]])))),
    ("Wishart value", lambda M, c: M.Wishart(c([4.0]), covariance_matrix=c(np.eye(2)))
     .log_prob(c(np.array([[1.0, 2.0], [2.0, 1.0]])))),
]


@pytest.mark.parametrize("case", VALIDATION, ids=[c[0] for c in VALIDATION])
def test_validation_errors_match_torch(case):
    _, fn = case

    def conv(lib):
        return lambda a: (K if lib is KD else T)(np.asarray(a, dtype=np.float64))
    with warnings_off():
        err = same_error(lambda: fn(KD, conv(KD)), lambda: fn(TD, conv(TD)))
    assert err is not None


# --------------------------------------------------------------------------------------------
# Sampling.

def test_inverse_gamma_samples_and_rsample_gradient():
    kiln.manual_seed(11)
    c = K(np.array([3.0, 5.0, 9.0]), requires_grad=True)
    r = K(np.array([1.0, 2.0, 0.5]), requires_grad=True)
    d = KD.InverseGamma(c, r)
    s = d.rsample((20000,))
    moments_check(T(s), T(d.mean), T(d.variance))
    assert bool((s > 0).all())
    # Pathwise gradient of the sample mean: d E[x] / d rate = 1 / (c - 1), d / d c =
    # -rate / (c - 1)^2 (within the sampling error of these averages).
    s.mean(0).sum().backward()
    want_r = 1 / (np.array([3.0, 5.0, 9.0]) - 1)
    want_c = -np.array([1.0, 2.0, 0.5]) / (np.array([3.0, 5.0, 9.0]) - 1) ** 2
    np.testing.assert_allclose(r.grad.numpy(), want_r, rtol=0.05)
    np.testing.assert_allclose(c.grad.numpy(), want_c, rtol=0.1)


@pytest.mark.parametrize("conc", [-0.4, 0.0, 0.3])
def test_generalized_pareto_samples_ecdf(conc):
    kiln.manual_seed(5)
    kd = KD.GeneralizedPareto(0.5, 2.0, conc)
    td = TD.GeneralizedPareto(0.5, 2.0, conc)
    s = T(kd.sample((20000,)))
    assert s.dtype == torch.float32
    assert bool(kd.support.check(K(s)).all())
    points = td.icdf(torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95]))
    ecdf_check(s, lambda x: td.cdf(x), points)


def test_von_mises_samples_circular_moments():
    kiln.manual_seed(7)
    loc = np.array([0.5, -2.0, 3.0, 0.0])
    conc = np.array([0.3, 1.0, 4.0, 50.0])
    d = KD.VonMises(K(loc), K(conc))
    n = 20000
    s = d.sample((n,)).numpy()
    assert s.dtype == np.float64 and s.shape == (n, 4)
    assert (s >= -math.pi).all() and (s < math.pi).all()
    # E cos(x - loc) = I1(k) / I0(k) = 1 - circular variance; E sin(x - loc) = 0.
    r1 = 1 - d.variance.numpy()
    c, sn = np.cos(s - loc), np.sin(s - loc)
    assert (np.abs(c.mean(0) - r1) <= 6 * c.std(0) / math.sqrt(n)).all(), (c.mean(0), r1)
    assert (np.abs(sn.mean(0)) <= 6 * sn.std(0) / math.sqrt(n)).all()
    # The empirical cdf of the centred angle (for kappa = 4, against torch's density
    # integrated numerically).
    grid = np.linspace(-math.pi, math.pi, 20001)
    dens = TD.VonMises(torch.tensor(0.0, dtype=torch.float64),
                       torch.tensor(4.0, dtype=torch.float64)).log_prob(
        torch.from_numpy(grid)).exp().numpy()
    cdf = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(grid))])
    centred = torch.from_numpy((s[:, 2] - 3.0 + math.pi) % (2 * math.pi) - math.pi)
    ecdf_check(centred, lambda x: np.interp(x, grid, cdf), [-0.8, -0.3, 0.0, 0.2, 0.7])


def test_von_mises_sampler_terminates_for_tiny_concentration_float32():
    kiln.manual_seed(1)
    d = KD.VonMises(K(np.array([0.0, 1.0], np.float32)), K(np.array([1e-6, 1e-3], np.float32)))
    s = d.sample((2000,))
    assert s.dtype == kiln.float32
    # Nearly uniform on the circle: E cos and E sin close to 0.
    assert abs(float(kiln.cos(s).mean())) < 6 / math.sqrt(4000)


@pytest.mark.parametrize("dim,eta", [(2, 1.0), (3, 0.5), (5, 2.0)])
def test_lkj_samples_marginal(dim, eta):
    """Each off-diagonal correlation of LKJ(dim, eta) has the marginal law
    2 Beta(b, b) - 1 with b = eta - 1 + dim / 2: mean 0, variance 1 / (2 b + 1)."""
    kiln.manual_seed(3)
    d = KD.LKJCholesky(dim, eta)
    n = 10000
    L = d.sample((n,))
    assert tuple(L.shape) == (n, dim, dim)
    assert bool(KD.constraints.corr_cholesky.check(L).all())
    C = (L @ L.mT).numpy()
    np.testing.assert_allclose(np.diagonal(C, axis1=1, axis2=2), 1.0, atol=1e-5)
    b = eta - 1 + dim / 2
    var = 1 / (2 * b + 1)
    for i in range(1, dim):
        for j in range(i):
            r = C[:, i, j].astype(np.float64)
            assert abs(r.mean()) <= 6 * math.sqrt(var / n), (i, j, r.mean())
            # Var of r^2 = E r^4 - var^2, E r^4 = 3 / ((2b + 1)(2b + 3)) for this Beta.
            var_r2 = 3 / ((2 * b + 1) * (2 * b + 3)) - var ** 2
            assert abs((r ** 2).mean() - var) <= 6 * math.sqrt(var_r2 / n), (i, j)
    # The log density is normalised: for dim = 2, L is determined by L_10 = cos t, and
    # the density over L_10 in (-1, 1) must integrate to 1.
    if dim == 2:
        t = np.linspace(1e-7, math.pi - 1e-7, 20001)
        l10 = np.cos(t)
        vals = np.stack([np.stack([np.ones_like(t), np.zeros_like(t)], -1),
                         np.stack([l10, np.sin(t)], -1)], -2)
        dens = d.log_prob(K(vals)).exp().numpy()
        # density over L_10 in [-1, 1]; d L_10 = sin t dt
        integral = np.trapezoid(dens * np.sin(t), t)
        assert abs(integral - 1) < 1e-4, integral


def test_wishart_samples_moments_and_rsample_gradient():
    kiln.manual_seed(9)
    rng = _rng(2)
    P = _wishart_params(rng, "float64")
    df = K(P["df"], requires_grad=True)
    L = K(P["scale_tril"], requires_grad=True)
    d = KD.Wishart(df, scale_tril=L)
    import warnings
    with warnings.catch_warnings():
        # Only a singular draw warns (torch 2.13 warns "Singular sample detected" on every
        # rsample: its check is inverted); none is singular for these df.
        warnings.simplefilter("error")
        s = d.rsample((4000,))
    assert tuple(s.shape) == (4000, 2, 3, 3)
    assert bool(d.support.check(s).all())
    moments_check(T(s), T(d.mean), T(d.variance))
    # Pathwise gradients: E[X] = df L L^T, so d sum(mean(X)) / d df = sum(L L^T).
    s.mean(0).sum().backward()
    want_df = (P["scale_tril"] @ P["scale_tril"].transpose(0, 2, 1)).sum((-2, -1))
    np.testing.assert_allclose(df.grad.numpy(), want_df, rtol=0.1)
    assert L.grad is not None and bool(kiln.isfinite(L.grad).all())


def test_wishart_other_parametrisations_match():
    rng = _rng(4)
    P = _wishart_params(rng, "float64")
    L = P["scale_tril"]
    cov = L @ L.transpose(0, 2, 1)
    prec = np.linalg.inv(cov)
    with warnings_off():
        v = TD.Wishart(T(P["df"]), covariance_matrix=T(cov)).sample().numpy()
    for kw in ({"covariance_matrix": cov}, {"precision_matrix": prec}):
        kd = KD.Wishart(K(P["df"]), **{k: K(a) for k, a in kw.items()})
        td = TD.Wishart(T(P["df"]), **{k: T(a) for k, a in kw.items()})
        close(kd.log_prob(K(v)), td.log_prob(T(v)), "float64")
        close(kd.scale_tril, td.scale_tril, "float64")
        close(kd.precision_matrix, td.precision_matrix, "float64")
    # A scalar df broadcasts against batched matrices.
    kd = KD.Wishart(5.0, scale_tril=K(L))
    td = TD.Wishart(5.0, scale_tril=T(L))
    close(kd.log_prob(K(v)), td.log_prob(T(v)), "float64")
    close(kd.entropy(), td.entropy(), "float64")


# --------------------------------------------------------------------------------------------
# KL pairs.

def _kl_params(rng):
    def u(lo, hi):
        return rng.uniform(lo, hi, 4)
    return {
        "Beta": [u(0.5, 3), u(0.5, 3)], "ContinuousBernoulli": [u(0.1, 0.9)],
        "Exponential": [u(0.5, 2)], "Gamma": [u(0.5, 3), u(0.5, 2)],
        "Gumbel": [u(-1, 1), u(0.5, 2)], "Laplace": [u(-1, 1), u(0.5, 2)],
        "Normal": [u(-1, 1), u(0.5, 2)],
        # alpha across 1 and 2, where the Pareto-* pairs turn infinite.
        "Pareto": [u(0.5, 2), np.array([0.5, 1.5, 2.5, 3.5])],
        "Uniform": [u(0.1, 0.4), u(0.6, 0.9)], "Poisson": [u(0.5, 3)],
        "Bernoulli": [u(0.1, 0.9)], "Binomial": [np.full(4, 5.0), u(0.1, 0.9)],
    }


_FAMS = set(_kl_params(_rng()))
CROSS_PAIRS = sorted((p.__name__, q.__name__) for p, q in TD.kl._KL_REGISTRY
                     if p.__name__ in _FAMS and q.__name__ in _FAMS and p is not q)


def test_every_torch_kl_pair_is_registered():
    ours = {(p.__name__, q.__name__) for p, q in KD.kl._KL_REGISTRY}
    theirs = {(p.__name__, q.__name__) for p, q in TD.kl._KL_REGISTRY}
    assert theirs <= ours, sorted(theirs - ours)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pair", CROSS_PAIRS, ids=["-".join(p) for p in CROSS_PAIRS])
def test_cross_kl_against_torch(pair, dtype):
    rng = _rng(zlib.crc32("-".join(pair).encode()))  # (hash() of str varies per process)
    P = {k: [a.astype(npd(dtype)) for a in v] for k, v in _kl_params(rng).items()}
    discrete = {"Poisson", "Bernoulli", "Binomial"}
    grad = not (set(pair) & discrete)
    kparams = [K(a, grad) for a in P[pair[0]] + P[pair[1]]]
    tparams = [T(a, grad) for a in P[pair[0]] + P[pair[1]]]
    n = len(P[pair[0]])
    kp, kq = getattr(KD, pair[0])(*kparams[:n]), getattr(KD, pair[1])(*kparams[n:])
    tp, tq = getattr(TD, pair[0])(*tparams[:n]), getattr(TD, pair[1])(*tparams[n:])
    kv, tv = KD.kl_divergence(kp, kq), TD.kl_divergence(tp, tq)
    close(kv, tv, dtype, what=f"KL{pair}")
    fin = torch.isfinite(tv)
    if grad and bool(fin.any()):
        # Some gradients are sums that nearly cancel: an absolute floor of 1e-9 in float64.
        grads_match(kparams, tparams, kv[K(fin.numpy())].sum(), tv[fin].sum(), dtype,
                    what=f"KL{pair}", tol=(2e-3, 2e-4) if dtype == "float32" else (1e-7, 1e-9))


def test_kl_boundary_differences_from_torch():
    """Where kiln differs on purpose: x log x at 0 is 0 (torch: nan), so a Uniform starting at
    0 has a finite KL against a Beta / Gamma (the limit of torch's value as low -> 0); and a
    ContinuousBernoulli against Uniform(0, 1) is -entropy (torch: inf at equal bounds)."""
    q_beta = (T(np.array([2.0])), T(np.array([3.0])))
    kv = KD.kl_divergence(KD.Uniform(K(np.array([0.0])), K(np.array([0.5]))),
                          KD.Beta(K(q_beta[0]), K(q_beta[1])))
    tv = TD.kl_divergence(TD.Uniform(T(np.array([1e-200])), T(np.array([0.5]))),
                          TD.Beta(*q_beta))
    close(kv, tv, "float64")
    kv = KD.kl_divergence(KD.Uniform(K(np.array([0.0])), K(np.array([2.0]))),
                          KD.Gamma(K(np.array([2.0])), K(np.array([1.5]))))
    tv = TD.kl_divergence(TD.Uniform(T(np.array([1e-200])), T(np.array([2.0]))),
                          TD.Gamma(T(np.array([2.0])), T(np.array([1.5]))))
    close(kv, tv, "float64")
    probs = np.array([0.2, 0.7])
    kv = KD.kl_divergence(KD.ContinuousBernoulli(K(probs)),
                          KD.Uniform(K(np.zeros(2)), K(np.ones(2))))
    close(kv, -TD.ContinuousBernoulli(T(probs)).entropy(), "float64")
    kv = KD.kl_divergence(KD.Uniform(K(np.zeros(2)), K(np.ones(2))),
                          KD.ContinuousBernoulli(K(probs)))
    tp = TD.ContinuousBernoulli(T(probs))
    close(kv, -tp.log_prob(torch.linspace(0, 1, 200001, dtype=torch.float64)[:, None])
          .mean(0), "float64", tol=(1e-6, 1e-8))


@pytest.mark.parametrize("dtype", DTYPES)
def test_kl_multivariate_normal_low_rank_pairs(dtype):
    rng = _rng(8)
    c = npd(dtype)
    loc1, loc2 = rng.standard_normal((2, 3)).astype(c), rng.standard_normal(3).astype(c)
    A = rng.standard_normal((3, 3))
    cov = (A @ A.T + np.eye(3)).astype(c)
    W = rng.standard_normal((2, 3, 2)).astype(c)
    D = rng.uniform(0.5, 2.0, (2, 3)).astype(c)
    ka = [K(a, True) for a in (loc1, cov, loc2, W, D)]
    ta = [T(a, True) for a in (loc1, cov, loc2, W, D)]
    for order in (0, 1):
        for g in ka + ta:
            g.grad = None
        kf = KD.MultivariateNormal(ka[0], covariance_matrix=ka[1])
        kl = KD.LowRankMultivariateNormal(ka[2], ka[3], ka[4])
        tf = TD.MultivariateNormal(ta[0], covariance_matrix=ta[1])
        tl = TD.LowRankMultivariateNormal(ta[2], ta[3], ta[4])
        kv = KD.kl_divergence(kf, kl) if order == 0 else KD.kl_divergence(kl, kf)
        tv = TD.kl_divergence(tf, tl) if order == 0 else TD.kl_divergence(tl, tf)
        tol = (1e-3, 1e-4) if dtype == "float32" else None
        close(kv, tv, dtype, tol=tol)
        grads_match(ka, ta, kv.sum(), tv.sum(), dtype, tol=(1e-3, 1e-4) if tol else None)
    with pytest.raises(ValueError):
        KD.kl_divergence(KD.MultivariateNormal(K(np.zeros(2)), K(np.eye(2))),
                         KD.LowRankMultivariateNormal(ka[2], ka[3], ka[4]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_kl_new_families_same_family(dtype):
    """Wishart-Wishart (Bregman divergence of the exponential family) and
    InverseGamma-InverseGamma (a common transform of two Gammas), as torch."""
    rng = _rng(6)
    P1 = {k: v.astype(npd(dtype)) for k, v in _wishart_params(rng, dtype).items()}
    P2 = {k: v.astype(npd(dtype)) for k, v in _wishart_params(rng, dtype).items()}
    kv = KD.kl_divergence(KD.Wishart(K(P1["df"]), scale_tril=K(P1["scale_tril"])),
                          KD.Wishart(K(P2["df"]), scale_tril=K(P2["scale_tril"])))
    tv = TD.kl_divergence(TD.Wishart(T(P1["df"]), scale_tril=T(P1["scale_tril"])),
                          TD.Wishart(T(P2["df"]), scale_tril=T(P2["scale_tril"])))
    close(kv, tv, dtype, tol=(1e-3, 1e-4) if dtype == "float32" else (1e-8, 1e-10))
    a = [rng.uniform(0.5, 3, 4).astype(npd(dtype)) for _ in range(4)]
    kv = KD.kl_divergence(KD.InverseGamma(K(a[0]), K(a[1])), KD.InverseGamma(K(a[2]), K(a[3])))
    tv = TD.kl_divergence(TD.InverseGamma(T(a[0]), T(a[1])), TD.InverseGamma(T(a[2]), T(a[3])))
    close(kv, tv, dtype)
