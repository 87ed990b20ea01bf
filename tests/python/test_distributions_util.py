"""kiln.distributions against torch.distributions 2.13: shared helpers (imported by the other
test_distributions_* files) and the tests of utils, constraints and the Distribution base
(validate_args, expand, shapes, set_default_validate_args)."""
import math

import numpy as np
import pytest
import torch

import kiln
import kiln.distributions as KD
import torch.distributions as TD

DTYPES = ["float32", "float64"]
TOL = {"float32": (2e-4, 2e-5), "float64": (1e-9, 1e-11)}
HAS_GAMMA = hasattr(kiln, "_standard_gamma")
HAS_POISSON = hasattr(kiln, "poisson")
HAS_BINOMIAL = hasattr(kiln, "binomial")
needs_gamma = pytest.mark.skipif(not HAS_GAMMA, reason="kiln._standard_gamma not built yet")
needs_poisson = pytest.mark.skipif(not HAS_POISSON, reason="kiln.poisson not built yet")
needs_binomial = pytest.mark.skipif(not HAS_BINOMIAL, reason="kiln.binomial not built yet")


def K(a, requires_grad=False):
    """numpy array or torch tensor -> kiln tensor (a copy)."""
    if isinstance(a, torch.Tensor):
        a = a.detach().numpy()
    t = kiln.from_numpy(np.array(a, order="C", copy=True))
    if requires_grad:
        t.requires_grad_()
    return t


def T(a, requires_grad=False):
    """numpy array or kiln tensor -> torch tensor (a copy)."""
    if isinstance(a, kiln.Tensor):
        a = a.detach().numpy()
    t = torch.from_numpy(np.array(a, order="C", copy=True))
    if requires_grad:
        t.requires_grad_()
    return t


def npd(dtype):
    return np.float32 if dtype == "float32" else np.float64


def close(got, want, dtype=None, tol=None, what=""):
    """kiln result vs torch result: same shape, same dtype, nan / inf at the same places,
    finite values within the dtype's tolerance (relative to |want|, plus an absolute floor)."""
    assert isinstance(got, kiln.Tensor), (what, type(got))
    assert tuple(got.shape) == tuple(want.shape), (what, tuple(got.shape), tuple(want.shape))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (
        what, got.dtype, want.dtype)
    g = torch.from_numpy(np.array(got.detach().numpy(), copy=True))
    w = want.detach()
    if not (w.is_floating_point()):
        assert torch.equal(g, w), (what, g, w)
        return
    if dtype is None:
        dtype = str(w.dtype).split(".")[-1]
    rtol, atol = tol if tol is not None else TOL[dtype]
    g64, w64 = g.double(), w.double()
    assert torch.equal(torch.isnan(g64), torch.isnan(w64)), (what, g64, w64)
    inf = torch.isinf(w64)
    assert torch.equal(g64[inf], w64[inf]), (what, g64, w64)
    fin = torch.isfinite(w64)
    torch.testing.assert_close(g64[fin], w64[fin], rtol=rtol, atol=atol,
                               msg=lambda m: f"{what}: {m}")


def same_error(kfn, tfn):
    """Both raise, with the same exception type (or neither raises)."""
    t_exc = k_exc = None
    try:
        tfn()
    except Exception as e:  # noqa: BLE001
        t_exc = e
    try:
        kfn()
    except Exception as e:  # noqa: BLE001
        k_exc = e
    assert (t_exc is None) == (k_exc is None), (t_exc, k_exc)
    if t_exc is not None:
        assert type(k_exc).__name__ == type(t_exc).__name__, (t_exc, k_exc)
    return k_exc


def compare_attr(kd, td, name, dtype, *args, tol=None):
    """Compare one method or property (args: numpy arrays, converted for each library); a
    NotImplementedError in torch must be one in kiln."""
    def get(d, conv):
        v = getattr(d, name)
        return v(*[conv(a) for a in args]) if callable(v) else v
    try:
        want = get(td, T)
    except (NotImplementedError, AttributeError) as e:
        with pytest.raises(type(e)):
            get(kd, K)
        return False
    got = get(kd, K)
    close(got, want, dtype, tol=tol, what=f"{type(td).__name__}.{name}")
    return True


def grads_match(kparams, tparams, kout, tout, dtype, what="", tol=None):
    """Backward of a scalar in both libraries; the parameter gradients must agree."""
    kout.backward()
    tout.backward()
    for i, (kp, tp) in enumerate(zip(kparams, tparams)):
        if tp.grad is None:
            assert kp.grad is None or bool((kp.grad == 0).all()), (what, i)
            continue
        assert kp.grad is not None, (what, i)
        rtol, atol = TOL[dtype]
        close(kp.grad, tp.grad, dtype, tol=tol or (rtol * 10, atol * 10), what=f"{what} grad {i}")


def ecdf_check(samples, cdf_fn, points, n_se=6.0):
    """Empirical cdf of 1-D samples (torch tensor) at points vs the true cdf: within n_se
    binomial standard errors (plus 1 / N for the discreteness of the empirical cdf)."""
    n = samples.numel()
    for x in points:
        F = float(cdf_fn(x))
        Fhat = float((samples <= x).double().mean())
        se = math.sqrt(max(F * (1 - F), 1e-12) / n)
        assert abs(Fhat - F) <= n_se * se + 1.0 / n, (x, Fhat, F, se)


def moments_check(samples, mean, var, n_se=6.0):
    """Sample mean within n_se standard errors of the true mean (elementwise over the trailing
    dims; samples is a torch tensor with draws in dim 0)."""
    s = samples.double()
    n = s.shape[0]
    mean = mean.double().expand(s.shape[1:])
    var = var.double().expand(s.shape[1:])
    m = s.mean(0)
    se = (var / n).sqrt()
    assert bool(((m - mean).abs() <= n_se * se + 1e-12).all()), (m, mean, se)
    # The variance with a generous bound (the standard error of a sample variance depends on
    # the fourth moment): 15 % relative for these sample sizes.
    v = s.var(0)
    assert bool(((v - var).abs() <= 0.15 * var + 1e-12).all()), (v, var)


# --------------------------------------------------------------------------------------------
# utils


@pytest.mark.parametrize("dtype", DTYPES)
def test_probs_logits_roundtrip(dtype):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.99, (3, 4)).astype(npd(dtype))
    close(KD.utils.probs_to_logits(K(p), is_binary=True),
          TD.utils.probs_to_logits(T(p), is_binary=True), dtype)
    close(KD.utils.probs_to_logits(K(p)), TD.utils.probs_to_logits(T(p)), dtype)
    close(KD.utils.logits_to_probs(K(p), is_binary=True),
          TD.utils.logits_to_probs(T(p), is_binary=True), dtype)
    close(KD.utils.logits_to_probs(K(p)), TD.utils.logits_to_probs(T(p)), dtype)
    edge = np.array([0.0, 1.0, 0.5], dtype=npd(dtype))
    close(KD.utils.clamp_probs(K(edge)), TD.utils.clamp_probs(T(edge)), dtype)


def test_broadcast_all():
    a = kiln.zeros(3, 1, dtype=kiln.float64)
    x, y, z = KD.utils.broadcast_all(a, 2.0, kiln.ones(4, dtype=kiln.float64))
    assert tuple(x.shape) == tuple(y.shape) == tuple(z.shape) == (3, 4)
    assert y.dtype == kiln.float64
    (s,) = KD.utils.broadcast_all(1.5)
    assert s.dtype == kiln.get_default_dtype() and tuple(s.shape) == ()
    with pytest.raises(ValueError):
        KD.utils.broadcast_all("x")


def test_lazy_property():
    d = KD.Bernoulli(logits=K(np.array([0.3, -2.0])))
    assert "probs" not in d.__dict__
    p = d.probs
    assert "probs" in d.__dict__ and d.probs is p
    assert isinstance(KD.Bernoulli.probs, KD.utils.lazy_property)


# --------------------------------------------------------------------------------------------
# constraints


CONSTRAINT_CASES = [
    ("real", lambda C: C.real, [1.0, float("nan"), -float("inf")]),
    ("positive", lambda C: C.positive, [1.0, 0.0, -1.0]),
    ("nonnegative", lambda C: C.nonnegative, [1.0, 0.0, -1.0]),
    ("unit_interval", lambda C: C.unit_interval, [0.0, 1.0, 1.5, -0.1]),
    ("interval", lambda C: C.interval(-1.0, 2.0), [-1.0, 2.0, 2.1]),
    ("half_open_interval", lambda C: C.half_open_interval(-1.0, 2.0), [-1.0, 2.0, 1.9]),
    ("greater_than", lambda C: C.greater_than(1.0), [1.0, 1.1]),
    ("greater_than_eq", lambda C: C.greater_than_eq(1.0), [1.0, 0.9]),
    ("less_than", lambda C: C.less_than(1.0), [1.0, 0.9]),
    ("boolean", lambda C: C.boolean, [0.0, 1.0, 0.5]),
    ("nonnegative_integer", lambda C: C.nonnegative_integer, [0.0, 3.0, 2.5, -1.0]),
    ("positive_integer", lambda C: C.positive_integer, [0.0, 3.0, 1.0]),
    ("integer_interval", lambda C: C.integer_interval(1, 4), [0.0, 1.0, 4.0, 5.0, 2.5]),
]


@pytest.mark.parametrize("name,make,vals", CONSTRAINT_CASES, ids=[c[0] for c in CONSTRAINT_CASES])
def test_scalar_constraints(name, make, vals):
    v = np.array(vals, dtype=np.float64)
    close(make(KD.constraints).check(K(v)), make(TD.constraints).check(T(v)), what=name)
    assert make(KD.constraints).is_discrete == make(TD.constraints).is_discrete
    assert make(KD.constraints).event_dim == make(TD.constraints).event_dim
    assert repr(make(KD.constraints)) == repr(make(TD.constraints))


def test_vector_and_matrix_constraints():
    C, TC = KD.constraints, TD.constraints
    simplex = np.array([[0.2, 0.8], [0.5, 0.6], [1.2, -0.2]])
    close(C.simplex.check(K(simplex)), TC.simplex.check(T(simplex)))
    onehot = np.array([[0.0, 1.0], [1.0, 1.0], [0.5, 0.5]])
    close(C.one_hot.check(K(onehot)), TC.one_hot.check(T(onehot)))
    rv = np.array([[0.0, 1.0], [np.nan, 1.0]])
    close(C.real_vector.check(K(rv)), TC.real_vector.check(T(rv)))
    ind = C.independent(C.positive, 1)
    close(ind.check(K(simplex)), TC.independent(TC.positive, 1).check(T(simplex)))
    assert ind.event_dim == 1
    rng = np.random.default_rng(1)
    A = rng.standard_normal((3, 3, 3))
    spd = A @ A.transpose(0, 2, 1) + 3 * np.eye(3)
    mats = np.stack([spd[0], -spd[1], np.tril(A[2])])
    for name in ["lower_triangular", "lower_cholesky", "positive_definite",
                 "positive_semidefinite", "symmetric", "square"]:
        close(getattr(C, name).check(K(mats)), getattr(TC, name).check(T(mats)), what=name)
    L = np.linalg.cholesky(spd)
    close(C.lower_cholesky.check(K(L)), TC.lower_cholesky.check(T(L)))
    corr = L / np.linalg.norm(L, axis=-1, keepdims=True)
    close(C.corr_cholesky.check(K(corr)), TC.corr_cholesky.check(T(corr)))
    close(C.corr_cholesky.check(K(L)), TC.corr_cholesky.check(T(L)))
    x = np.array([[0.5, -1.0, 3.0], [2.0, 0.5, -3.0]])
    cat_k = C.cat([C.unit_interval, C.real, C.positive], dim=-1, lengths=[1, 1, 1])
    cat_t = TC.cat([TC.unit_interval, TC.real, TC.positive], dim=-1, lengths=[1, 1, 1])
    close(cat_k.check(K(x)), cat_t.check(T(x)))
    st_k = C.stack([C.unit_interval, C.real, C.positive], dim=-1)
    st_t = TC.stack([TC.unit_interval, TC.real, TC.positive], dim=-1)
    close(st_k.check(K(x)), st_t.check(T(x)))
    assert C.is_dependent(C.dependent) and not C.is_dependent(C.real)
    with pytest.raises(ValueError):
        C.dependent.check(K(x))


# --------------------------------------------------------------------------------------------
# Distribution base


def test_validate_args_errors_match_torch():
    cases = [
        (lambda D, t: D.Normal(t([0.0, 1.0]), t([1.0, -1.0]))),
        (lambda D, t: D.Normal(t([np.nan]), t([1.0]))),
        (lambda D, t: D.Uniform(t([1.0]), t([0.0]))),
        (lambda D, t: D.Exponential(t([0.0]))),
        (lambda D, t: D.Bernoulli(probs=t([1.5]))),
        (lambda D, t: D.Bernoulli(probs=t([0.5]), logits=t([0.0]))),
        (lambda D, t: D.Bernoulli()),
        (lambda D, t: D.Categorical(probs=t([[0.5, -0.5]]))),
        (lambda D, t: D.Geometric(probs=t([0.0]))),
        (lambda D, t: D.Gamma(t([1.0]), t([-1.0]))),
        (lambda D, t: D.Beta(t([0.0]), t([1.0]))),
        (lambda D, t: D.Dirichlet(t([1.0, -1.0]))),
        (lambda D, t: D.Binomial(t([2.5]), probs=t([0.5]))),
        (lambda D, t: D.Poisson(t([-1.0]))),
        (lambda D, t: D.MultivariateNormal(t([0.0, 0.0]),
                                           covariance_matrix=t([[1.0, 2.0], [2.0, 1.0]]))),
        (lambda D, t: D.MultivariateNormal(t([0.0, 0.0]), scale_tril=t([[1.0, 0.0], [0.5, -1.0]]))),
        (lambda D, t: D.MultivariateNormal(t([0.0, 0.0]))),
        (lambda D, t: D.LowRankMultivariateNormal(t([0.0, 0.0]), t([[1.0], [1.0]]), t([1.0, 0.0]))),
        (lambda D, t: D.Independent(D.Normal(t([0.0]), t([1.0])), 2)),
        (lambda D, t: D.StudentT(t([-1.0]))),
        (lambda D, t: D.Pareto(t([1.0]), t([0.0]))),
        (lambda D, t: D.ContinuousBernoulli(probs=t([1.5]), validate_args=True)),
    ]
    for i, make in enumerate(cases):
        def kt(v):
            return K(np.array(v, dtype=np.float64))

        def tt(v):
            return T(np.array(v, dtype=np.float64))
        exc = same_error(lambda: make(KD, kt), lambda: make(TD, tt))
        assert exc is not None, i


def test_validation_message_names_parameter_and_constraint():
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(2,\)\).*"
                                         r"GreaterThan\(lower_bound=0.0\)"):
        KD.Normal(K(np.zeros(2)), K(np.array([1.0, -1.0])))


def test_validate_sample_errors():
    kd = KD.Normal(K(np.zeros(3)), K(np.ones(3)))
    td = TD.Normal(torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    same_error(lambda: kd.log_prob(K(np.zeros(4))), lambda: td.log_prob(torch.zeros(4).double()))
    same_error(lambda: kd.log_prob(1.0), lambda: td.log_prob(1.0))
    kb = KD.Bernoulli(probs=K(np.array([0.3])))
    tb = TD.Bernoulli(probs=torch.tensor([0.3], dtype=torch.float64))
    same_error(lambda: kb.log_prob(K(np.array([0.5]))),
               lambda: tb.log_prob(torch.tensor([0.5], dtype=torch.float64)))
    ke = KD.Exponential(K(np.array([2.0])))
    with pytest.raises(ValueError, match="to be within the support"):
        ke.log_prob(K(np.array([-1.0])))
    # validate_args=False skips the check (and log_prob is then computed anyway).
    ke2 = KD.Exponential(K(np.array([2.0])), validate_args=False)
    ke2.log_prob(K(np.array([-1.0])))
    KD.Normal(K(np.zeros(1)), K(-np.ones(1)), validate_args=False)


def test_set_default_validate_args():
    try:
        KD.Distribution.set_default_validate_args(False)
        KD.Normal(K(np.zeros(1)), K(-np.ones(1)))  # no error
        with pytest.raises(ValueError):
            KD.Normal(K(np.zeros(1)), K(-np.ones(1)), validate_args=True)
    finally:
        KD.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        KD.Normal(K(np.zeros(1)), K(-np.ones(1)))
    with pytest.raises(ValueError):
        KD.Distribution.set_default_validate_args(3)


def test_shapes_expand_and_sample_shapes():
    kd = KD.Normal(K(np.zeros((2, 1))), K(np.ones((1, 3))))
    assert kd.batch_shape == (2, 3) and kd.event_shape == ()
    assert isinstance(kd.batch_shape, kiln.Size)
    e = kd.expand((4, 2, 3))
    assert e.batch_shape == (4, 2, 3) and type(e) is KD.Normal
    assert tuple(e.sample((5,)).shape) == (5, 4, 2, 3)
    assert tuple(kd.sample().shape) == (2, 3)
    assert tuple(kd.rsample(kiln.Size([2, 2])).shape) == (2, 2, 2, 3)
    m = KD.MultivariateNormal(K(np.zeros(3)), K(np.eye(3)))
    assert m.batch_shape == () and m.event_shape == (3,)
    assert tuple(m.expand((2,)).sample((4,)).shape) == (4, 2, 3)
    assert tuple(KD.Independent(kd, 1).sample((7,)).shape) == (7, 2, 3)
    assert KD.Independent(kd, 1).event_shape == (3,)
    assert repr(kd).startswith("Normal(loc: ")
    d = KD.Normal(0.0, 1.0)
    assert d.batch_shape == () and d.loc.dtype == kiln.float32
    assert KD.Normal.has_rsample and not KD.Bernoulli.has_rsample
    assert KD.Bernoulli.has_enumerate_support and not KD.Normal.has_enumerate_support
    assert KD.Normal.arg_constraints["scale"] is KD.constraints.positive
    assert KD.Uniform(0.0, 1.0).support.lower_bound.item() == 0.0
    with pytest.warns(UserWarning):
        assert tuple(kd.sample_n(3).shape) == (3, 2, 3)
    x = e.sample((2,))
    assert tuple(e.log_prob(x).shape) == (2, 4, 2, 3)


def test_perplexity():
    p = np.array([[0.2, 0.3, 0.5], [0.9, 0.05, 0.05]])
    close(KD.Categorical(probs=K(p)).perplexity(), TD.Categorical(probs=T(p)).perplexity())
