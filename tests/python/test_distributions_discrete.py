"""Discrete distributions of kiln.distributions against torch.distributions 2.13: Bernoulli,
Categorical, OneHotCategorical, Geometric, Multinomial, Binomial, Poisson, NegativeBinomial:
moments, log_prob, entropy, enumerate_support, gradients, and sample frequencies."""
import math

import numpy as np
import pytest
import torch

import kiln
import kiln.distributions as KD
import torch.distributions as TD
from test_distributions_util import (DTYPES, K, T, close, compare_attr, grads_match,
                                     needs_binomial, needs_gamma, needs_poisson, npd)

B = (2, 3)


def probs(r, shape=B):
    return r.uniform(0.05, 0.95, shape)


CASES = [
    ("BernoulliProbs", lambda D, P: D.Bernoulli(probs=P["p"]),
     lambda r: {"p": np.array([[0.1, 0.5, 0.7], [0.0, 1.0, 0.3]])},
     lambda r, p: r.integers(0, 2, B).astype(float)),
    ("BernoulliLogits", lambda D, P: D.Bernoulli(logits=P["l"]),
     lambda r: {"l": r.standard_normal(B) * 3}, lambda r, p: r.integers(0, 2, B).astype(float)),
    ("CategoricalProbs", lambda D, P: D.Categorical(probs=P["p"]),
     lambda r: {"p": r.uniform(0.0, 1.0, B + (4,))}, lambda r, p: r.integers(0, 4, B)),
    ("CategoricalLogits", lambda D, P: D.Categorical(logits=P["l"]),
     lambda r: {"l": r.standard_normal(B + (4,))}, lambda r, p: r.integers(0, 4, B)),
    ("OneHotCategorical", lambda D, P: D.OneHotCategorical(probs=P["p"]),
     lambda r: {"p": r.uniform(0.0, 1.0, B + (4,))},
     lambda r, p: np.eye(4)[r.integers(0, 4, B)]),
    ("OneHotCategoricalLogits", lambda D, P: D.OneHotCategorical(logits=P["l"]),
     lambda r: {"l": r.standard_normal(B + (4,))},
     lambda r, p: np.eye(4)[r.integers(0, 4, B)]),
    ("GeometricProbs", lambda D, P: D.Geometric(probs=P["p"]),
     lambda r: {"p": np.array([[0.1, 0.5, 0.7], [0.9, 1.0, 0.3]])},
     lambda r, p: np.array([[0, 3, 1], [7, 0, 2]], dtype=float)),
    ("GeometricLogits", lambda D, P: D.Geometric(logits=P["l"]),
     lambda r: {"l": r.standard_normal(B)}, lambda r, p: r.integers(0, 6, B).astype(float)),
    ("Multinomial", lambda D, P: D.Multinomial(5, probs=P["p"]),
     lambda r: {"p": r.uniform(0.1, 1.0, B + (3,))},
     lambda r, p: np.array([[[5, 0, 0], [1, 2, 2], [0, 4, 1]], [[3, 1, 1], [2, 2, 1], [0, 0, 5]]],
                           dtype=float)),
    ("MultinomialLogits", lambda D, P: D.Multinomial(4, logits=P["l"]),
     lambda r: {"l": r.standard_normal(B + (3,))},
     lambda r, p: np.array([[[4, 0, 0], [1, 2, 1], [0, 3, 1]], [[2, 1, 1], [2, 2, 0], [0, 0, 4]]],
                           dtype=float)),
    ("Binomial", lambda D, P: D.Binomial(P["n"], probs=P["p"]),
     lambda r: {"n": np.array([[3.0, 10.0, 7.0], [1.0, 0.0, 20.0]]), "p": probs(r)},
     lambda r, p: np.minimum(np.array([[1, 4, 7], [0, 0, 13]], dtype=float), p["n"])),
    ("BinomialHomogeneous", lambda D, P: D.Binomial(6, logits=P["l"]),
     lambda r: {"l": r.standard_normal(B) * 2}, lambda r, p: r.integers(0, 7, B).astype(float)),
    ("Poisson", lambda D, P: D.Poisson(P["rate"]),
     lambda r: {"rate": np.array([[0.5, 3.0, 10.0], [0.0, 1.0, 25.0]])},
     lambda r, p: np.array([[0, 2, 11], [0, 4, 22]], dtype=float)),
    ("NegativeBinomial", lambda D, P: D.NegativeBinomial(P["n"], probs=P["p"]),
     lambda r: {"n": np.array([[1.0, 2.5, 7.0], [0.5, 10.0, 3.0]]), "p": probs(r)},
     lambda r, p: r.integers(0, 12, B).astype(float)),
    ("NegativeBinomialLogits", lambda D, P: D.NegativeBinomial(P["n"], logits=P["l"]),
     lambda r: {"n": np.array([[1.0, 2.5, 7.0], [0.5, 10.0, 3.0]]), "l": r.standard_normal(B)},
     lambda r, p: r.integers(0, 12, B).astype(float)),
]
IDS = [c[0] for c in CASES]


def make_both(case, dtype, requires_grad=False):
    name, factory, params, values = case
    rng = np.random.default_rng(0)
    p = {k: np.asarray(v, dtype=npd(dtype)) for k, v in params(rng).items()}
    kp = {k: K(v, requires_grad and k not in ("n",)) for k, v in p.items()}
    tp = {k: T(v, requires_grad and k not in ("n",)) for k, v in p.items()}
    v = values(rng, p)
    v = v.astype(np.int64) if name.startswith("Categorical") else v.astype(npd(dtype))
    return factory(KD, kp), factory(TD, tp), kp, tp, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_against_torch(case, dtype):
    kd, td, kp, tp, v = make_both(case, dtype)
    assert kd.batch_shape == tuple(td.batch_shape) and kd.event_shape == tuple(td.event_shape)
    assert kd.has_enumerate_support == td.has_enumerate_support
    for attr in ["mean", "mode", "variance", "stddev", "entropy", "probs", "logits"]:
        tol = None
        if attr == "entropy" and case[0].startswith("Multinomial") and dtype == "float64":
            # torch computes lgamma(total_count + 1) on an integer tensor, i.e. in float32;
            # kiln in the parameters' dtype, so the float64 results differ by ~1e-8.
            tol = (1e-7, 1e-9)
        compare_attr(kd, td, attr, dtype, tol=tol)
    assert compare_attr(kd, td, "log_prob", dtype, v)
    if td.has_enumerate_support:
        for expand in (True, False):
            try:
                want = td.enumerate_support(expand)
            except NotImplementedError:
                with pytest.raises(NotImplementedError):
                    kd.enumerate_support(expand)
                continue
            got = kd.enumerate_support(expand)
            close(got, want, dtype, what="enumerate_support")
            close(kd.log_prob(got), td.log_prob(want), dtype, what="log_prob(support)")
    assert repr(kd.support).split("(")[0] == repr(td.support).split("(")[0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_against_torch(case, dtype):
    kd, td, kp, tp, v = make_both(case, dtype, requires_grad=True)
    kout, tout = kd.log_prob(K(v)).sum(), td.log_prob(T(v)).sum()
    try:
        tent = td.entropy()
        kent = kd.entropy()
        fin = torch.isfinite(tent)
        if bool(fin.all()):
            tout, kout = tout + tent.sum(), kout + kent.sum()
    except NotImplementedError:
        pass
    try:
        tm = td.mean
        if bool(torch.isfinite(tm).all()):
            tout, kout = tout + tm.sum(), kout + kd.mean.sum()
    except NotImplementedError:
        pass
    names = [n for n in kp if n != "n"]
    grads_match([kp[n] for n in names], [tp[n] for n in names], kout, tout, dtype, case[0])


def test_binomial_inhomogeneous_entropy_raises():
    same = [KD.Binomial(K(np.array([2.0, 3.0])), probs=K(np.array([0.5, 0.5]))),
            TD.Binomial(torch.tensor([2.0, 3.0]), probs=torch.tensor([0.5, 0.5]))]
    for d in same:
        with pytest.raises(NotImplementedError):
            d.entropy()
        with pytest.raises(NotImplementedError):
            d.enumerate_support()


def test_categorical_zero_probability_entropy():
    p = np.array([[0.0, 0.3, 0.7], [1.0, 0.0, 0.0]])
    close(KD.Categorical(probs=K(p)).entropy(), TD.Categorical(probs=T(p)).entropy())
    close(KD.Categorical(probs=K(p)).log_prob(K(np.array([1, 0]))),
          TD.Categorical(probs=T(p)).log_prob(torch.tensor([1, 0])))


def test_straight_through():
    p = np.array([0.2, 0.3, 0.5])
    kp = K(p, True)
    kiln.manual_seed(0)
    d = KD.OneHotCategoricalStraightThrough(probs=kp)
    s = d.rsample((10,))
    assert tuple(s.shape) == (10, 3) and bool((s.detach().sum(-1) == 1).all())
    (s * K(np.array([1.0, 2.0, 3.0]))).sum().backward()
    # The gradient flows through probs = p / sum(p): d/dp_j sum_i c_i p_i / S.
    c = np.array([1.0, 2.0, 3.0])
    want = 10 * (c - (c * p).sum()) / p.sum()
    np.testing.assert_allclose(kp.grad.numpy(), want, rtol=1e-10)


# --------------------------------------------------------------------------------------------
# sampling: frequencies of each value against exp(log_prob)

N = 20000


def freq_check(samples, td, support_values, n_se=6.0):
    """samples: torch tensor (N,) of values; frequencies of support_values against pmf."""
    n = samples.shape[0]
    for k in support_values:
        p = float(td.log_prob(torch.tensor(float(k), dtype=torch.float64)).exp())
        f = float((samples == k).double().mean())
        se = math.sqrt(max(p * (1 - p), 1e-12) / n)
        assert abs(f - p) <= n_se * se + 1.0 / n, (k, f, p)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bernoulli_geometric_samples(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(5)
    s = KD.Bernoulli(probs=kiln.tensor(0.3, dtype=kdt)).sample((N,))
    assert tuple(s.shape) == (N,) and s.dtype == kdt
    freq_check(T(s).double(), TD.Bernoulli(probs=torch.tensor(0.3, dtype=torch.float64)), [0, 1])
    g = KD.Geometric(probs=kiln.tensor(0.35, dtype=kdt)).sample((N,))
    assert g.dtype == kdt and bool(KD.constraints.nonnegative_integer.check(g).all())
    freq_check(T(g).double(), TD.Geometric(probs=torch.tensor(0.35, dtype=torch.float64)),
               range(6))
    bl = KD.Bernoulli(logits=kiln.tensor([[-1.0, 2.0]], dtype=kdt)).sample((3, 4))
    assert tuple(bl.shape) == (3, 4, 1, 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_categorical_samples(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(6)
    p = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]])
    kd = KD.Categorical(probs=kiln.tensor(p.tolist(), dtype=kdt))
    s = kd.sample((N,))
    assert tuple(s.shape) == (N, 2) and s.dtype == kiln.int64
    ts = T(s)
    for b in range(2):
        freq_check(ts[:, b].double(), TD.Categorical(probs=torch.tensor(p[b])), range(4))
    oh = KD.OneHotCategorical(probs=kiln.tensor(p.tolist(), dtype=kdt)).sample((N,))
    assert tuple(oh.shape) == (N, 2, 4) and oh.dtype == kdt
    freq = T(oh).double().mean(0)
    assert bool(((freq - torch.tensor(p)).abs() < 6 * (torch.tensor(p * (1 - p)) / N).sqrt()).all())


@pytest.mark.parametrize("dtype", DTYPES)
def test_multinomial_samples(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(8)
    p = np.array([0.2, 0.3, 0.5])
    s = KD.Multinomial(10, probs=kiln.tensor(p.tolist(), dtype=kdt)).sample((5000,))
    assert tuple(s.shape) == (5000, 3) and s.dtype == kdt
    ts = T(s).double()
    assert bool((ts.sum(-1) == 10).all())
    mean = ts.mean(0)
    se = (torch.tensor(10 * p * (1 - p)) / 5000).sqrt()
    assert bool(((mean - torch.tensor(10 * p)).abs() < 6 * se).all())


@needs_poisson
@pytest.mark.parametrize("dtype", DTYPES)
def test_poisson_samples(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(9)
    for rate in [0.7, 4.0, 30.0]:
        s = KD.Poisson(kiln.tensor(rate, dtype=kdt)).sample((N,))
        assert tuple(s.shape) == (N,) and s.dtype == kdt
        td = TD.Poisson(torch.tensor(rate, dtype=torch.float64))
        freq_check(T(s).double(), td, range(int(rate) - 2 if rate > 3 else 0, int(rate) + 3))


@needs_binomial
@pytest.mark.parametrize("dtype", DTYPES)
def test_binomial_samples(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(10)
    kd = KD.Binomial(kiln.tensor(12.0, dtype=kdt), probs=kiln.tensor(0.3, dtype=kdt))
    s = kd.sample((N,))
    assert tuple(s.shape) == (N,) and s.dtype == kdt
    assert bool(kd.support.check(s).all())
    freq_check(T(s).double(), TD.Binomial(12, probs=torch.tensor(0.3, dtype=torch.float64)),
               range(0, 9))


@needs_gamma
@needs_poisson
@pytest.mark.parametrize("dtype", DTYPES)
def test_negative_binomial_samples(dtype):
    kdt = getattr(kiln, dtype)
    kiln.manual_seed(12)
    kd = KD.NegativeBinomial(kiln.tensor(3.0, dtype=kdt), probs=kiln.tensor(0.4, dtype=kdt))
    s = kd.sample((N,))
    assert tuple(s.shape) == (N,) and s.dtype == kdt
    td = TD.NegativeBinomial(torch.tensor(3.0, dtype=torch.float64),
                             probs=torch.tensor(0.4, dtype=torch.float64))
    freq_check(T(s).double(), td, range(0, 8))
