"""Transforms, TransformedDistribution and kl_divergence of kiln.distributions against
torch.distributions 2.13: forward / inverse / log_abs_det_jacobian, shapes, domains, the
KL closed forms (values and parameter gradients) and register_kl's dispatch."""
import numpy as np
import pytest
import torch

import kiln
import kiln.distributions as KD
import torch.distributions as TD
from test_distributions_util import DTYPES, K, T, close, grads_match, npd

TRANSFORMS = [
    ("Exp", lambda M, P: M.ExpTransform(), lambda r: r.standard_normal((2, 3))),
    ("Affine", lambda M, P: M.AffineTransform(P["a"], P["b"]),
     lambda r: r.standard_normal((2, 3))),
    ("AffineScalar", lambda M, P: M.AffineTransform(0.5, -2.0),
     lambda r: r.standard_normal((2, 3))),
    ("AffineEvent", lambda M, P: M.AffineTransform(P["a"], P["b"], event_dim=1),
     lambda r: r.standard_normal((2, 3))),
    ("Sigmoid", lambda M, P: M.SigmoidTransform(), lambda r: r.standard_normal((2, 3)) * 3),
    ("Tanh", lambda M, P: M.TanhTransform(), lambda r: r.standard_normal((2, 3))),
    ("Softplus", lambda M, P: M.SoftplusTransform(), lambda r: r.standard_normal((2, 3)) * 3),
    ("Power", lambda M, P: M.PowerTransform(P["e"]), lambda r: r.uniform(0.2, 3.0, (2, 3))),
    ("Abs", lambda M, P: M.AbsTransform(), lambda r: r.standard_normal((2, 3))),
    ("Softmax", lambda M, P: M.SoftmaxTransform(), lambda r: r.standard_normal((2, 3))),
    ("StickBreaking", lambda M, P: M.StickBreakingTransform(), lambda r: r.standard_normal((2, 3))),
    ("LowerCholesky", lambda M, P: M.LowerCholeskyTransform(),
     lambda r: r.standard_normal((2, 3, 3))),
    ("PositiveDefinite", lambda M, P: M.PositiveDefiniteTransform(),
     lambda r: r.standard_normal((2, 3, 3))),
    ("Reshape", lambda M, P: M.ReshapeTransform((3,), (3, 1)), lambda r: r.standard_normal((2, 3))),
    ("Independent", lambda M, P: M.IndependentTransform(M.ExpTransform(), 1),
     lambda r: r.standard_normal((2, 3))),
    ("Compose", lambda M, P: M.ComposeTransform([M.ExpTransform(),
                                                 M.AffineTransform(P["a"], P["b"]),
                                                 M.SigmoidTransform().inv.inv]),
     lambda r: r.standard_normal((2, 3)) * 0.3),
    ("ComposeEventDims", lambda M, P: M.ComposeTransform([M.AffineTransform(P["a"], P["b"]),
                                                          M.StickBreakingTransform()]),
     lambda r: r.standard_normal((2, 3))),
    ("Inverse", lambda M, P: M.ExpTransform().inv, lambda r: r.uniform(0.2, 3.0, (2, 3))),
]


def tparams(rng, dtype):
    return {"a": rng.standard_normal(3).astype(npd(dtype)),
            "b": rng.uniform(0.5, 2.0, 3).astype(npd(dtype)),
            "e": rng.uniform(0.5, 2.0, (2, 3)).astype(npd(dtype))}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", TRANSFORMS, ids=[c[0] for c in TRANSFORMS])
def test_transform_against_torch(case, dtype):
    name, make, xs = case
    rng = np.random.default_rng(0)
    P = tparams(rng, dtype)
    kt = make(KD.transforms, {k: K(v) for k, v in P.items()})
    tt = make(TD.transforms, {k: T(v) for k, v in P.items()})
    x = xs(rng).astype(npd(dtype))
    ky, ty = kt(K(x)), tt(T(x))
    close(ky, ty, dtype, what=f"{name} forward")
    close(kt.inv(ky), tt.inv(ty), dtype, tol=(1e-3, 1e-4) if dtype == "float32" else None,
          what=f"{name} inverse")
    assert kt.bijective == tt.bijective
    assert kt.domain.event_dim == tt.domain.event_dim
    assert kt.codomain.event_dim == tt.codomain.event_dim
    assert (tuple(kt.forward_shape(kiln.Size(x.shape)))
            == tuple(tt.forward_shape(torch.Size(x.shape))))
    assert tuple(kt.inverse_shape(ky.shape)) == tuple(tt.inverse_shape(ty.shape))
    assert kt.inv.inv is kt
    try:
        want = tt.log_abs_det_jacobian(T(x), ty)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            kt.log_abs_det_jacobian(K(x), ky)
        return
    close(kt.log_abs_det_jacobian(K(x), ky), want, dtype, what=f"{name} ladj")
    close(kt.inv.log_abs_det_jacobian(ky, K(x)), tt.inv.log_abs_det_jacobian(ty, T(x)), dtype,
          what=f"{name} inverse ladj")


def test_transform_sign_cache_and_equality():
    assert KD.ExpTransform().sign == 1 and KD.AffineTransform(0.0, -2.0).sign == -1
    assert KD.ExpTransform() == KD.ExpTransform()
    assert KD.ComposeTransform([KD.ExpTransform()]) == KD.ComposeTransform([KD.ExpTransform()])
    t = KD.ExpTransform(cache_size=1)
    x = kiln.tensor([0.5])
    y = t(x)
    assert t.inv(y) is x and t(x) is y
    with pytest.raises(ValueError):
        KD.ExpTransform(cache_size=2)
    with pytest.raises(ValueError):
        KD.ReshapeTransform((2, 3), (5,))
    assert KD.identity_transform(x) is x


def test_transform_ladj_gradient():
    """log|det J| of StickBreaking equals the log determinant of the autograd Jacobian of the
    first K coordinates (a square map R^K -> R^K), and its parameter gradient matches torch."""
    x0 = np.array([0.3, -0.7, 1.1])
    kt, tt = KD.StickBreakingTransform(), TD.StickBreakingTransform()
    J = torch.autograd.functional.jacobian(lambda v: tt(v)[:-1], T(x0))
    want = torch.logdet(J).item()
    got = kt.log_abs_det_jacobian(K(x0), kt(K(x0))).item()
    assert abs(got - want) < 1e-10
    kx, tx = K(x0, True), T(x0, True)
    grads_match([kx], [tx], kt.log_abs_det_jacobian(kx, kt(kx)),
                tt.log_abs_det_jacobian(tx, tt(tx)), "float64", "stickbreaking ladj")


TRANSFORMED = [
    ("AffineExpOfNormal", lambda M, P: M.TransformedDistribution(
        M.Normal(P["loc"], P["scale"]), [M.AffineTransform(P["a"], P["b"]), M.ExpTransform()]),
     lambda r: r.uniform(0.1, 3.0, (2, 3))),
    ("NegAffineOfExponential", lambda M, P: M.TransformedDistribution(
        M.Exponential(P["scale"]), [M.AffineTransform(1.0, -2.0)]),
     lambda r: -r.uniform(0.1, 3.0, (2, 3))),
    ("SigmoidOfNormal", lambda M, P: M.TransformedDistribution(
        M.Normal(P["loc"], P["scale"]), M.SigmoidTransform()),
     lambda r: r.uniform(0.05, 0.95, (2, 3))),
    ("TanhOfNormal", lambda M, P: M.TransformedDistribution(
        M.Normal(P["loc"], P["scale"]), [M.TanhTransform()]),
     lambda r: r.uniform(-0.9, 0.9, (2, 3))),
    ("StickBreakingOfNormal", lambda M, P: M.TransformedDistribution(
        M.Normal(P["loc"], P["scale"]), M.StickBreakingTransform()),
     lambda r: (lambda v: v / v.sum(-1, keepdims=True))(r.uniform(0.1, 1, (2, 4)))),
    ("AffineBroadcast", lambda M, P: M.TransformedDistribution(
        M.Normal(P["loc"][0], P["scale"][0]), M.AffineTransform(P["a"], P["b"])),
     lambda r: r.standard_normal((2, 3))),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", TRANSFORMED, ids=[c[0] for c in TRANSFORMED])
def test_transformed_distribution(case, dtype):
    name, make, vs = case
    rng = np.random.default_rng(1)
    P = {"loc": rng.standard_normal((2, 3)), "scale": rng.uniform(0.5, 2.0, (2, 3)),
         "a": rng.standard_normal(3), "b": rng.uniform(0.5, 2.0, 3)}
    P = {k: v.astype(npd(dtype)) for k, v in P.items()}
    kp = {k: K(v, True) for k, v in P.items()}
    tp = {k: T(v, True) for k, v in P.items()}
    kd, td = make(KD, kp), make(TD, tp)
    assert kd.batch_shape == tuple(td.batch_shape) and kd.event_shape == tuple(td.event_shape)
    assert repr(kd.support) == repr(td.support) or "Independent" in repr(td.support)
    v = vs(rng).astype(npd(dtype))
    close(kd.log_prob(K(v)), td.log_prob(T(v)), dtype, what=f"{name} log_prob")
    if not td.event_shape:
        close(kd.cdf(K(v)), td.cdf(T(v)), dtype, what=f"{name} cdf")
        u = rng.uniform(0.1, 0.9, (2, 3)).astype(npd(dtype))
        close(kd.icdf(K(u)), td.icdf(T(u)), dtype, tol=(1e-3, 1e-4) if dtype == "float32" else None,
              what=f"{name} icdf")
    grads_match(list(kp.values()), list(tp.values()), kd.log_prob(K(v)).sum(),
                td.log_prob(T(v)).sum(), dtype, name)
    kiln.manual_seed(0)
    s = kd.rsample((5,))
    assert tuple(s.shape) == (5,) + tuple(td.batch_shape) + tuple(td.event_shape)
    assert bool(kd.support.check(s.detach()).all())
    e = kd.expand((4,) + tuple(kd.batch_shape))
    assert tuple(e.sample().shape) == (4,) + tuple(td.batch_shape) + tuple(td.event_shape)


# --------------------------------------------------------------------------------------------
# kl_divergence

def _pos(r, s=(2, 3)):
    return r.uniform(0.5, 3.0, s)


KL_CASES = [
    ("Normal", lambda D, P, i: D.Normal(P[f"a{i}"], P[f"p{i}"])),
    ("Bernoulli", lambda D, P, i: D.Bernoulli(probs=P[f"u{i}"])),
    ("Categorical", lambda D, P, i: D.Categorical(probs=P[f"s{i}"])),
    ("OneHotCategorical", lambda D, P, i: D.OneHotCategorical(logits=P[f"a{i}"])),
    ("Beta", lambda D, P, i: D.Beta(P[f"p{i}"], P[f"q{i}"])),
    ("Gamma", lambda D, P, i: D.Gamma(P[f"p{i}"], P[f"q{i}"])),
    ("Dirichlet", lambda D, P, i: D.Dirichlet(P[f"p{i}"])),
    ("Exponential", lambda D, P, i: D.Exponential(P[f"p{i}"])),
    ("Laplace", lambda D, P, i: D.Laplace(P[f"a{i}"], P[f"p{i}"])),
    ("Cauchy", lambda D, P, i: D.Cauchy(P[f"a{i}"], P[f"p{i}"])),
    ("Gumbel", lambda D, P, i: D.Gumbel(P[f"a{i}"], P[f"p{i}"])),
    ("Poisson", lambda D, P, i: D.Poisson(P[f"p{i}"])),
    ("Uniform", lambda D, P, i: D.Uniform(P[f"a{i}"] - 2 * i - 1,
                                          P[f"a{i}"] * 0 + P["a0"] + 1 + i)),
    ("UniformDisjoint", lambda D, P, i: D.Uniform(P[f"a{i}"] - 1, P[f"a{i}"] + 1)),
    ("Geometric", lambda D, P, i: D.Geometric(probs=P[f"u{i}"])),
    ("Binomial", lambda D, P, i: D.Binomial(5, probs=P[f"u{i}"])),
    ("HalfNormal", lambda D, P, i: D.HalfNormal(P[f"p{i}"])),
    ("LogNormal", lambda D, P, i: D.LogNormal(P[f"a{i}"], P[f"p{i}"])),
    ("Pareto", lambda D, P, i: D.Pareto(P[f"p{i}"], P[f"q{i}"])),
    ("Independent", lambda D, P, i: D.Independent(D.Normal(P[f"a{i}"], P[f"p{i}"]), 1)),
    ("MVN", lambda D, P, i: D.MultivariateNormal(P[f"a{i}"], scale_tril=P[f"L{i}"])),
    ("LowRankMVN", lambda D, P, i: D.LowRankMultivariateNormal(P[f"a{i}"], P[f"W{i}"], P[f"p{i}"])),
    ("ContinuousBernoulli", lambda D, P, i: D.ContinuousBernoulli(probs=P[f"u{i}"])),
    ("Exponential-Gamma", lambda D, P, i: D.Exponential(P["p0"]) if i == 0 else
     D.Gamma(P["p1"], P["q1"])),
    ("Uniform-Normal", lambda D, P, i: D.Uniform(P["a0"] - 1, P["a0"] + 1) if i == 0 else
     D.Normal(P["a1"], P["p1"])),
    ("Normal-Laplace", lambda D, P, i: D.Normal(P["a0"], P["p0"]) if i == 0 else
     D.Laplace(P["a1"], P["p1"])),
]


def kl_params(dtype):
    r = np.random.default_rng(2)
    P = {}
    for i in (0, 1):
        P[f"a{i}"] = r.standard_normal((2, 3))
        P[f"p{i}"] = _pos(r)
        P[f"q{i}"] = _pos(r)
        P[f"u{i}"] = r.uniform(0.05, 0.95, (2, 3))
        s = r.uniform(0.05, 1.0, (2, 3))
        P[f"s{i}"] = s / s.sum(-1, keepdims=True)
        A = r.standard_normal((2, 3, 3))
        P[f"L{i}"] = np.linalg.cholesky(A @ A.transpose(0, 2, 1) + 3 * np.eye(3))
        P[f"W{i}"] = r.standard_normal((2, 3, 2))
    P["u1"][0, 0] = P["u0"][0, 0]  # an equal pair: KL = 0
    return {k: v.astype(npd(dtype)) for k, v in P.items()}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", KL_CASES, ids=[c[0] for c in KL_CASES])
def test_kl_against_torch(case, dtype):
    name, make = case
    P = kl_params(dtype)
    kp = {k: K(v, True) for k, v in P.items()}
    tp = {k: T(v, True) for k, v in P.items()}
    kp_, kq_ = make(KD, kp, 0), make(KD, kp, 1)
    tp_, tq_ = make(TD, tp, 0), make(TD, tp, 1)
    want = TD.kl_divergence(tp_, tq_)
    got = KD.kl_divergence(kp_, kq_)
    close(got, want, dtype, tol=(5e-4, 5e-5) if dtype == "float32" else (1e-8, 1e-10),
          what=f"KL {name}")
    fin = torch.isfinite(want)
    if bool(fin.any()):
        grads_match(list(kp.values()), list(tp.values()),
                    got[K(fin.numpy())].sum() if not bool(fin.all()) else got.sum(),
                    want[fin].sum(), dtype, f"KL {name}",
                    # digamma / trigamma terms cancel in these gradients: ~4e-8 relative in float64
                    tol=(1e-6, 1e-9) if dtype == "float64" else None)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kl_exponential_family_bregman_fallback(dtype):
    """The generic same-family KL (Bregman divergence of the log normaliser through autograd)
    against torch's closed forms."""
    from kiln.distributions.kl import _kl_expfamily_expfamily
    P = kl_params(dtype)
    pairs = [(lambda D, i: D.Normal(P[f"a{i}"], P[f"p{i}"]), "Normal"),
             (lambda D, i: D.Gamma(P[f"p{i}"], P[f"q{i}"]), "Gamma"),
             (lambda D, i: D.Beta(P[f"p{i}"], P[f"q{i}"]), "Beta"),
             (lambda D, i: D.Bernoulli(probs=P[f"u{i}"]), "Bernoulli"),
             (lambda D, i: D.Dirichlet(P[f"p{i}"]), "Dirichlet")]
    conv = {KD: K, TD: T}
    for make, name in pairs:
        def build(D, i):
            return make(type("P", (), {"Normal": lambda *a: D.Normal(*[conv[D](x) for x in a]),
                                       "Gamma": lambda *a: D.Gamma(*[conv[D](x) for x in a]),
                                       "Beta": lambda *a: D.Beta(*[conv[D](x) for x in a]),
                                       "Dirichlet": lambda a: D.Dirichlet(conv[D](a)),
                                       "Bernoulli": lambda probs: D.Bernoulli(
                                           probs=conv[D](probs))}), i)
        got = _kl_expfamily_expfamily(build(KD, 0), build(KD, 1))
        want = TD.kl_divergence(build(TD, 0), build(TD, 1))
        close(got, want, dtype, tol=(2e-3, 2e-4) if dtype == "float32" else (1e-7, 1e-9),
              what=f"Bregman KL {name}")
    with pytest.raises(NotImplementedError):
        _kl_expfamily_expfamily(KD.Normal(0.0, 1.0), KD.Exponential(1.0))


def test_kl_not_implemented_and_dispatch():
    # Pairs torch 2.13 does not register either (no closed form known to it).
    with pytest.raises(NotImplementedError):
        KD.kl_divergence(KD.Normal(0.0, 1.0), KD.Cauchy(0.0, 1.0))
    with pytest.raises(NotImplementedError):
        TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Cauchy(0.0, 1.0))
    with pytest.raises(NotImplementedError):
        KD.kl_divergence(KD.Gamma(K(np.ones(1)), K(np.ones(1))),
                         KD.Laplace(K(np.ones(1)), K(np.ones(1))))
    # A registration for a subclass wins over the base-class one.

    class MyNormal(KD.Normal):
        pass

    @KD.register_kl(MyNormal, KD.Normal)
    def _kl_mine(p, q):
        return kiln.tensor(-123.0)

    try:
        assert KD.kl_divergence(MyNormal(0.0, 1.0), KD.Normal(0.0, 1.0)).item() == -123.0
        # The other direction still uses Normal-Normal (most specific match for the types).
        assert KD.kl_divergence(KD.Normal(0.0, 1.0), MyNormal(0.0, 1.0)).item() == 0.0
    finally:
        from kiln.distributions import kl as klmod
        del klmod._KL_REGISTRY[MyNormal, KD.Normal]
        klmod._KL_MEMOIZE.clear()
    # Transformed distributions with different transforms: not implemented (as torch).
    a = KD.TransformedDistribution(KD.Normal(0.0, 1.0), KD.ExpTransform())
    b = KD.TransformedDistribution(KD.Normal(0.0, 1.0), KD.SigmoidTransform())
    with pytest.raises(NotImplementedError):
        KD.kl_divergence(a, b)


def test_kl_matches_monte_carlo():
    """An independent check of one closed form: KL(Gumbel || Gumbel) against the Monte
    Carlo average of log p - log q over torch samples."""
    p = KD.Gumbel(K(np.array([0.3])), K(np.array([1.2])))
    q = KD.Gumbel(K(np.array([-0.4])), K(np.array([2.0])))
    torch.manual_seed(0)
    x = TD.Gumbel(torch.tensor([0.3], dtype=torch.float64),
                  torch.tensor([1.2], dtype=torch.float64)).sample((200000,))
    mc = (p.log_prob(K(x)) - q.log_prob(K(x))).numpy()
    assert abs(mc.mean() - KD.kl_divergence(p, q).item()) < 6 * mc.std() / np.sqrt(len(mc))
