"""Multivariate distributions of kiln.distributions against torch.distributions 2.13:
MultivariateNormal (three parametrisations), LowRankMultivariateNormal, Dirichlet,
Independent, MixtureSameFamily, LogisticNormal, RelaxedOneHotCategorical; values,
gradients and sample moments."""
import numpy as np
import pytest
import torch

import kiln
import kiln.distributions as KD
import torch.distributions as TD
from test_distributions_util import (DTYPES, K, T, compare_attr, grads_match,
                                     moments_check, needs_gamma, npd)


def spd(rng, batch, n):
    A = rng.standard_normal(batch + (n, n))
    return A @ np.swapaxes(A, -1, -2) + n * np.eye(n)


CASES = [
    ("MVN_cov", lambda D, P: D.MultivariateNormal(P["loc"], covariance_matrix=P["cov"]),
     lambda r: {"loc": r.standard_normal((2, 3)), "cov": spd(r, (2,), 3)}, (4, 2, 3)),
    ("MVN_tril", lambda D, P: D.MultivariateNormal(P["loc"], scale_tril=P["L"]),
     lambda r: {"loc": r.standard_normal((3,)),
                "L": np.linalg.cholesky(spd(r, (2,), 3))}, (4, 2, 3)),
    ("MVN_prec", lambda D, P: D.MultivariateNormal(P["loc"], precision_matrix=P["P"]),
     lambda r: {"loc": r.standard_normal((2, 3)), "P": spd(r, (), 3)}, (4, 2, 3)),
    ("LowRankMVN", lambda D, P: D.LowRankMultivariateNormal(P["loc"], P["W"], P["d"]),
     lambda r: {"loc": r.standard_normal((2, 4)), "W": r.standard_normal((2, 4, 2)),
                "d": r.uniform(0.5, 2.0, (2, 4))}, (3, 2, 4)),
    ("Dirichlet", lambda D, P: D.Dirichlet(P["c"]),
     lambda r: {"c": r.uniform(0.3, 4.0, (2, 4))}, None),
    ("IndependentNormal", lambda D, P: D.Independent(D.Normal(P["loc"], P["scale"]), 1),
     lambda r: {"loc": r.standard_normal((2, 3)), "scale": r.uniform(0.5, 2, (2, 3))},
     (4, 2, 3)),
    ("IndependentNormal2", lambda D, P: D.Independent(D.Normal(P["loc"], P["scale"]), 2),
     lambda r: {"loc": r.standard_normal((2, 3)), "scale": r.uniform(0.5, 2, (2, 3))},
     (4, 2, 3)),
    ("MixtureNormal", lambda D, P: D.MixtureSameFamily(D.Categorical(logits=P["w"]),
                                                       D.Normal(P["loc"], P["scale"])),
     lambda r: {"w": r.standard_normal((2, 3)), "loc": r.standard_normal((2, 3)),
                "scale": r.uniform(0.5, 2, (2, 3))}, (4, 2)),
    ("MixtureMVN", lambda D, P: D.MixtureSameFamily(
        D.Categorical(probs=P["w"]), D.Independent(D.Normal(P["loc"], P["scale"]), 1)),
     lambda r: {"w": r.uniform(0.1, 1, (3,)), "loc": r.standard_normal((3, 2)),
                "scale": r.uniform(0.5, 2, (3, 2))}, (5, 2)),
    ("LogisticNormal", lambda D, P: D.LogisticNormal(P["loc"], P["scale"]),
     lambda r: {"loc": r.standard_normal((2, 3)), "scale": r.uniform(0.5, 2, (2, 3))}, None),
    ("RelaxedOneHotCategorical",
     lambda D, P: D.RelaxedOneHotCategorical(P["t"], probs=P["p"]),
     lambda r: {"t": np.array(0.8), "p": r.uniform(0.1, 1.0, (2, 3))}, None),
]
IDS = [c[0] for c in CASES]


def simplex_values(rng, shape):
    x = rng.uniform(0.1, 1.0, shape)
    return x / x.sum(-1, keepdims=True)


def make_both(case, dtype, requires_grad=False):
    name, factory, params, vshape = case
    rng = np.random.default_rng(0)
    p = {k: np.asarray(v, dtype=npd(dtype)) for k, v in params(rng).items()}
    kp = {k: K(v, requires_grad) for k, v in p.items()}
    tp = {k: T(v, requires_grad) for k, v in p.items()}
    kd, td = factory(KD, kp), factory(TD, tp)
    if vshape is None:  # on the simplex
        shape = tuple(td.batch_shape) + tuple(td.event_shape)
        v = simplex_values(rng, (3,) + shape)
    else:
        v = rng.standard_normal(vshape)
    return kd, td, kp, tp, np.asarray(v, dtype=npd(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_against_torch(case, dtype):
    kd, td, kp, tp, v = make_both(case, dtype)
    assert kd.batch_shape == tuple(td.batch_shape) and kd.event_shape == tuple(td.event_shape)
    for attr in ["mean", "mode", "variance", "stddev", "entropy", "covariance_matrix",
                 "precision_matrix", "scale_tril"]:
        if attr in ("covariance_matrix", "precision_matrix", "scale_tril") and not hasattr(
                td, "_unbroadcasted_scale_tril") and not hasattr(td, "cov_factor"):
            continue
        compare_attr(kd, td, attr, dtype)
    assert compare_attr(kd, td, "log_prob", dtype, v)
    if case[0].startswith("Mixture") and case[0] == "MixtureNormal":
        compare_attr(kd, td, "cdf", dtype, v)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_against_torch(case, dtype):
    kd, td, kp, tp, v = make_both(case, dtype, requires_grad=True)
    kout, tout = kd.log_prob(K(v)).sum(), td.log_prob(T(v)).sum()
    try:
        tout = tout + td.entropy().sum()
        kout = kout + kd.entropy().sum()
    except NotImplementedError:
        pass
    names = list(kp)
    grads_match([kp[n] for n in names], [tp[n] for n in names], kout, tout, dtype, case[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_mvn_samples(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(31)
    rng = np.random.default_rng(3)
    cov = spd(rng, (), 3)
    loc = rng.standard_normal(3)
    kd = KD.MultivariateNormal(K(loc.astype(npd(dtype))),
                               covariance_matrix=K(cov.astype(npd(dtype))))
    s = kd.sample((20000,))
    assert tuple(s.shape) == (20000, 3) and s.dtype == kdt
    ts = T(s).double()
    moments_check(ts, torch.tensor(loc), torch.tensor(np.diag(cov)))
    emp_cov = torch.cov(ts.T)
    bound = 0.1 * torch.tensor(np.diag(cov)).max()
    assert bool(((emp_cov - torch.tensor(cov)).abs() < bound).all())
    lr = KD.LowRankMultivariateNormal(K(loc), K(rng.standard_normal((3, 1))), K(np.ones(3)))
    s2 = T(lr.sample((20000,))).double()
    moments_check(s2, T(lr.mean), T(lr.variance))


def test_mvn_rsample_gradient():
    kiln.manual_seed(32)
    loc = kiln.tensor([0.5, -1.0], dtype=kiln.float64, requires_grad=True)
    L = kiln.tensor([[1.0, 0.0], [0.3, 2.0]], dtype=kiln.float64, requires_grad=True)
    x = KD.MultivariateNormal(loc, scale_tril=L).rsample((40,))
    x.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [40.0, 40.0])
    eps = np.linalg.solve(L.detach().numpy(), (x.detach().numpy() - loc.detach().numpy()).T).T
    # d sum(L eps) / d L_ij = sum over draws of eps_j, for every (i, j): the matrix is used
    # as given (as torch, the zero upper triangle also gets a gradient).
    want = np.tile(eps.sum(0), (2, 1))
    np.testing.assert_allclose(L.grad.numpy(), want, rtol=1e-8, atol=1e-8)


@needs_gamma
def test_dirichlet_samples_and_gradient():
    kiln.manual_seed(33)
    c = kiln.tensor([0.5, 2.0, 3.5], dtype=kiln.float64, requires_grad=True)
    d = KD.Dirichlet(c)
    s = d.rsample((20000,))
    assert tuple(s.shape) == (20000, 3)
    assert bool(KD.constraints.simplex.check(s.detach()).all())
    td = TD.Dirichlet(torch.tensor([0.5, 2.0, 3.5], dtype=torch.float64))
    moments_check(T(s).double(), td.mean, td.variance)
    # E[d x_0 / d c] = d E[x_0] / d c = (delta_0j a0 - c_0) / a0^2, a0 = sum(c).
    s[:, 0].sum().backward()
    a0 = 6.0
    want = np.array([a0 - 0.5, -0.5, -0.5]) / a0 ** 2
    np.testing.assert_allclose(c.grad.numpy() / 20000, want, atol=0.01)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mixture_logistic_relaxed_samples(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(34)
    w = np.array([0.3, 0.7])
    mix_k = KD.MixtureSameFamily(KD.Categorical(probs=K(w.astype(npd(dtype)))),
                                 KD.Normal(K(np.array([-2.0, 3.0], dtype=npd(dtype))),
                                           K(np.array([0.5, 1.0], dtype=npd(dtype)))))
    mix_t = TD.MixtureSameFamily(TD.Categorical(probs=torch.tensor(w)),
                                 TD.Normal(torch.tensor([-2.0, 3.0], dtype=torch.float64),
                                           torch.tensor([0.5, 1.0], dtype=torch.float64)))
    s = mix_k.sample((20000,))
    assert tuple(s.shape) == (20000,) and s.dtype == kdt
    moments_check(T(s).double().unsqueeze(-1), mix_t.mean.reshape(1), mix_t.variance.reshape(1))
    ln = KD.LogisticNormal(K(np.array([0.2, -0.5])), K(np.array([0.7, 1.2])))
    x = ln.rsample((1000,))
    assert tuple(x.shape) == (1000, 3) and bool(KD.constraints.simplex.check(x.detach()).all())
    ro = KD.RelaxedOneHotCategorical(kiln.tensor(0.5, dtype=kdt),
                                     probs=K(np.array([0.2, 0.3, 0.5], dtype=npd(dtype))))
    y = ro.rsample((20000,))
    assert y.dtype == kdt and bool(KD.constraints.simplex.check(y.detach()).all())
    # The argmax of a Concrete sample is distributed as the Categorical.
    counts = torch.bincount(T(y).argmax(-1), minlength=3).double() / 20000
    assert bool(((counts - torch.tensor([0.2, 0.3, 0.5])).abs() < 0.02).all())
    rb = KD.RelaxedBernoulli(kiln.tensor(0.5, dtype=kdt), probs=kiln.tensor(0.3, dtype=kdt))
    z = rb.rsample((20000,))
    assert bool(((z > 0) & (z < 1)).all())
    assert abs(float((T(z) > 0.5).double().mean()) - 0.3) < 0.02
