"""biject_to / transform_to (kiln.distributions.constraint_registry) and the transforms they
need (CorrCholeskyTransform, CatTransform, StackTransform) against torch.distributions 2.13:
for every constraint torch's registries cover, the transform maps random unconstrained
inputs into the support (constraint.check), inverts them, and has torch's forward values and
log_abs_det_jacobian on the same inputs; the registries raise where torch's do."""
import zlib

import numpy as np
import pytest
import torch

import kiln
import kiln.distributions as KD
import torch.distributions as TD
from test_distributions_util import DTYPES, K, T, close, npd

# (id, constraint factory given the constraints module and numpy->tensor converter,
#  unconstrained input shape)
CONSTRAINTS = [
    ("real", lambda C, cv: C.real, (3, 4)),
    ("positive", lambda C, cv: C.positive, (3, 4)),
    ("nonnegative", lambda C, cv: C.nonnegative, (3, 4)),
    ("greater_than", lambda C, cv: C.greater_than(1.5), (3, 4)),
    ("greater_than_eq", lambda C, cv: C.greater_than_eq(-2.0), (3, 4)),
    ("greater_than_tensor", lambda C, cv: C.greater_than(cv(np.array([0.0, 1.0, -1.0, 2.0]))),
     (3, 4)),
    ("less_than", lambda C, cv: C.less_than(2.0), (3, 4)),
    ("interval", lambda C, cv: C.interval(-1.0, 3.0), (3, 4)),
    ("interval_tensor", lambda C, cv: C.interval(cv(np.array([-1.0, 0.0, 2.0, -5.0])),
                                                 cv(np.array([1.0, 0.5, 4.0, 5.0]))), (3, 4)),
    ("half_open_interval", lambda C, cv: C.half_open_interval(-1.0, 3.0), (3, 4)),
    ("unit_interval", lambda C, cv: C.unit_interval, (3, 4)),
    ("unit_half_open", lambda C, cv: C.half_open_interval(0, 1), (3, 4)),
    ("simplex", lambda C, cv: C.simplex, (3, 4)),
    ("lower_cholesky", lambda C, cv: C.lower_cholesky, (2, 3, 3)),
    ("positive_definite", lambda C, cv: C.positive_definite, (2, 3, 3)),
    ("positive_semidefinite", lambda C, cv: C.positive_semidefinite, (2, 3, 3)),
    ("corr_cholesky", lambda C, cv: C.corr_cholesky, (2, 6)),
    ("corr_cholesky_2", lambda C, cv: C.corr_cholesky, (5, 1)),
    ("real_vector", lambda C, cv: C.real_vector, (3, 4)),
    ("independent_positive", lambda C, cv: C.independent(C.positive, 1), (3, 4)),
    ("independent_interval", lambda C, cv: C.independent(C.interval(0.0, 2.0), 2), (3, 4)),
    ("cat", lambda C, cv: C.cat([C.positive, C.real, C.unit_interval], dim=-1,
                                lengths=[1, 2, 1]), (3, 4)),
    ("cat_dim0", lambda C, cv: C.cat([C.less_than(0.0), C.interval(-2.0, 2.0)], dim=0,
                                     lengths=[2, 1]), (3, 4)),
    ("stack", lambda C, cv: C.stack([C.positive, C.real, C.interval(-1.0, 1.0)], dim=0),
     (3, 4)),
    ("stack_last", lambda C, cv: C.stack([C.positive, C.greater_than(1.0), C.real,
                                          C.unit_interval], dim=-1), (3, 4)),
]
REGISTRIES = ["biject_to", "transform_to"]


def _parts(t):
    """The class names of a transform's structure, to compare with torch's choice."""
    name = type(t).__name__
    if hasattr(t, "parts"):
        return (name, tuple(_parts(p) for p in t.parts))
    if hasattr(t, "base_transform"):
        return (name, _parts(t.base_transform))
    if hasattr(t, "transforms"):
        return (name, tuple(_parts(p) for p in t.transforms))
    return name


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("registry", REGISTRIES)
@pytest.mark.parametrize("case", CONSTRAINTS, ids=[c[0] for c in CONSTRAINTS])
def test_registry_against_torch(case, registry, dtype):
    name, make, shape = case
    cast = npd(dtype)
    kc = make(KD.constraints, lambda a: K(a.astype(cast)))
    tc = make(TD.constraints, lambda a: T(a.astype(cast)))
    kreg, treg = getattr(KD, registry), getattr(TD, registry)
    try:
        tt = treg(tc)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            kreg(kc)
        return
    kt = kreg(kc)
    assert _parts(kt) == _parts(tt)
    assert kt.bijective == tt.bijective
    assert kt.domain.event_dim == tt.domain.event_dim
    assert kt.codomain.event_dim == tt.codomain.event_dim

    rng = np.random.default_rng(zlib.crc32(name.encode()))  # (hash() varies per process)
    x = rng.standard_normal(shape).astype(cast)
    kx, tx = K(x), T(x)
    ky, ty = kt(kx), tt(tx)
    close(ky, ty, dtype, what=f"{name} forward")
    # Lands in the support.
    assert bool(kc.check(ky).all()), (name, ky)
    # Round trip: x back for a bijection; for a surjection (softmax, the matrix transforms
    # onto a lower-dimensional set), y back from the inverse's representative.
    loose = (1e-3, 1e-4) if dtype == "float32" else (1e-9, 1e-10)
    kx_back = kt.inv(ky)
    close(kx_back, tt.inv(ty), dtype, tol=loose, what=f"{name} inverse vs torch")
    if kt.bijective:
        close(kx_back, tx, dtype, tol=loose, what=f"{name} round trip x")
    close(kt(kx_back), ty, dtype, tol=loose, what=f"{name} round trip y")
    assert (tuple(kt.forward_shape(kiln.Size(shape)))
            == tuple(tt.forward_shape(torch.Size(shape))))
    try:
        want = tt.log_abs_det_jacobian(tx, ty)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            kt.log_abs_det_jacobian(kx, ky)
        return
    close(kt.log_abs_det_jacobian(kx, ky), want, dtype, what=f"{name} ladj")


def test_registry_register_and_errors():
    reg = KD.constraint_registry.ConstraintRegistry()

    class _Odd(KD.constraints.Constraint):
        def check(self, value):
            return value != 0

    @reg.register(_Odd)
    def _factory(constraint):
        assert isinstance(constraint, _Odd)
        return KD.ExpTransform()

    assert isinstance(reg(_Odd()), KD.ExpTransform)
    # Registration through an instance registers its class; a later one replaces it.
    reg.register(KD.constraints.positive, lambda c: KD.SoftplusTransform())
    assert isinstance(reg(KD.constraints.greater_than(3.0)), KD.SoftplusTransform)
    with pytest.raises(TypeError):
        reg.register(int, _factory)
    with pytest.raises(TypeError):
        TD.constraint_registry.ConstraintRegistry().register(int, _factory)
    # Unregistered constraints: NotImplementedError in both libraries.
    for cname in ("boolean", "square", "symmetric", "nonnegative_integer", "one_hot"):
        for registry in REGISTRIES:
            with pytest.raises(NotImplementedError):
                getattr(TD, registry)(getattr(TD.constraints, cname))
            with pytest.raises(NotImplementedError):
                getattr(KD, registry)(getattr(KD.constraints, cname))
    # The global registries accept new constraint classes too.
    try:
        KD.biject_to.register(_Odd, _factory)
        assert isinstance(KD.biject_to(_Odd()), KD.ExpTransform)
    finally:
        del KD.biject_to._registry[_Odd]


@pytest.mark.parametrize("dtype", DTYPES)
def test_registry_parameters_optimise_in_unconstrained_space(dtype):
    """The use case: an unconstrained leaf mapped by transform_to(arg constraint) gives a
    valid parameter whose log_prob gradient reaches the leaf, as in torch."""
    rng = np.random.default_rng(5)
    u = rng.standard_normal(4).astype(npd(dtype))
    value = rng.uniform(0.2, 2.0, 4).astype(npd(dtype))
    ku, tu = K(u, requires_grad=True), T(u, requires_grad=True)
    kscale = KD.transform_to(KD.Normal.arg_constraints["scale"])(ku)
    tscale = TD.transform_to(TD.Normal.arg_constraints["scale"])(tu)
    kl = KD.Normal(K(np.zeros(4, npd(dtype))), kscale).log_prob(K(value)).sum()
    tl = TD.Normal(T(np.zeros(4, npd(dtype))), tscale).log_prob(T(value)).sum()
    close(kl, tl, dtype)
    kl.backward()
    tl.backward()
    close(ku.grad, tu.grad, dtype)


# --------------------------------------------------------------------------------------------
# The new transforms directly.

NEW_TRANSFORMS = [
    ("CorrCholesky3", lambda M: M.CorrCholeskyTransform(), (2, 3)),
    ("CorrCholesky5", lambda M: M.CorrCholeskyTransform(), (4, 10)),
    ("CorrCholeskyBig", lambda M: M.CorrCholeskyTransform(), (6,)),
    ("CatBatchDim", lambda M: M.CatTransform([M.ExpTransform(), M.SigmoidTransform(),
                                              M.AffineTransform(1.0, -2.0)],
                                             dim=0, lengths=[1, 2, 1]), (4, 3)),
    ("CatEventDim", lambda M: M.CatTransform(
        [M.IndependentTransform(M.ExpTransform(), 1), M.identity_transform,
         M.IndependentTransform(M.TanhTransform(), 1)], dim=-1, lengths=[2, 1, 2]), (3, 5)),
    ("CatLastBatch", lambda M: M.CatTransform([M.ExpTransform(), M.SoftplusTransform()],
                                              dim=-1, lengths=[2, 2]), (3, 4)),
    ("CatNested", lambda M: M.CatTransform(
        [M.CatTransform([M.ExpTransform(), M.identity_transform], dim=0, lengths=[1, 1]),
         M.SigmoidTransform()], dim=0, lengths=[2, 2]), (4, 2)),
    ("Stack0", lambda M: M.StackTransform([M.ExpTransform(), M.identity_transform,
                                           M.SigmoidTransform()], dim=0), (3, 4)),
    ("StackLast", lambda M: M.StackTransform([M.ExpTransform(), M.TanhTransform()], dim=-1),
     (3, 2)),
    ("StackMiddle", lambda M: M.StackTransform([M.SoftplusTransform(), M.ExpTransform()],
                                               dim=1), (3, 2, 2)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", NEW_TRANSFORMS, ids=[c[0] for c in NEW_TRANSFORMS])
def test_new_transform_against_torch(case, dtype):
    name, make, shape = case
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 1.5).astype(npd(dtype))
    kt, tt = make(KD), make(TD)
    kx, tx = K(x, requires_grad=True), T(x, requires_grad=True)
    ky, ty = kt(kx), tt(tx)
    close(ky, ty, dtype, what=f"{name} forward")
    try:
        tt.codomain.check(ty)
    except RuntimeError:
        # torch's cat constraint cannot check parts of different event_dims (it concatenates
        # per-part results of different ranks); kiln's is the same code path.
        with pytest.raises(RuntimeError):
            kt.codomain.check(ky)
    else:
        assert bool(kt.codomain.check(ky).all())
    close(kt.inv(ky), tt.inv(ty), dtype, tol=(1e-3, 1e-4) if dtype == "float32" else None,
          what=f"{name} inverse")
    kl, tl = kt.log_abs_det_jacobian(kx, ky), tt.log_abs_det_jacobian(tx, ty)
    close(kl, tl, dtype, what=f"{name} ladj")
    close(kt.inv.log_abs_det_jacobian(ky, kx), tt.inv.log_abs_det_jacobian(ty, tx), dtype,
          what=f"{name} inverse ladj")
    # Gradient of the log-Jacobian through forward and inverse, as torch.
    kl.sum().backward()
    tl.sum().backward()
    close(kx.grad, tx.grad, dtype, tol=(2e-3, 2e-4) if dtype == "float32" else (1e-8, 1e-9),
          what=f"{name} ladj grad")
    assert kt.bijective == tt.bijective
    assert kt.event_dim == tt.event_dim if not name.startswith("CorrCholesky") else True
    assert kt.domain.event_dim == tt.domain.event_dim
    assert kt.codomain.event_dim == tt.codomain.event_dim
    assert (tuple(kt.forward_shape(kiln.Size(shape)))
            == tuple(tt.forward_shape(torch.Size(shape))))
    assert tuple(kt.inverse_shape(ky.shape)) == tuple(tt.inverse_shape(ty.shape))
    assert kt.inv.inv is kt
    # Cached versions return the cached input for the cached output.
    kc = kt.with_cache(1)
    y = kc(kx)
    assert kc.inv(y) is kx


def test_corr_cholesky_transform_shapes_and_extremes():
    t = KD.CorrCholeskyTransform()
    with pytest.raises(ValueError):
        t.forward_shape(kiln.Size((2, 4)))  # 4 is not D (D - 1) / 2
    with pytest.raises(ValueError):
        t.inverse_shape(kiln.Size((3, 4)))
    # Large inputs saturate tanh: still a valid factor (rows of unit norm, positive diagonal).
    x = K(np.array([[30.0, -30.0, 30.0], [-40.0, 0.0, 40.0]]))
    y = t(x)
    assert bool(KD.constraints.corr_cholesky.check(y).all())
    close(y, TD.CorrCholeskyTransform()(T(x)), "float64")
    # And x = 0 gives the identity (all correlations 0).
    close(t(K(np.zeros((2, 6)))), torch.eye(4, dtype=torch.float64).expand(2, 4, 4), "float64")


def test_cat_stack_transform_errors_match_torch():
    for M in (KD, TD):
        t = M.CatTransform([M.ExpTransform(), M.ExpTransform()], dim=0, lengths=[1, 1])
        conv = K if M is KD else T
        with pytest.raises(AssertionError):
            t(conv(np.zeros(3)))  # wrong length along dim
        with pytest.raises(AssertionError):
            M.CatTransform([M.ExpTransform()], lengths=[1, 2])
        s = M.StackTransform([M.ExpTransform(), M.ExpTransform()], dim=0)
        with pytest.raises(AssertionError):
            s(conv(np.zeros(3)))
        with pytest.raises(AssertionError):
            M.StackTransform([1.0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_corr_cholesky_transformed_distribution(dtype):
    """A TransformedDistribution through CorrCholeskyTransform: log_prob as torch, and its
    samples are valid correlation Cholesky factors."""
    rng = np.random.default_rng(11)
    loc = rng.standard_normal(3).astype(npd(dtype))
    kd = KD.TransformedDistribution(KD.Independent(KD.Normal(K(loc), 1.0), 1),
                                    KD.CorrCholeskyTransform())
    td = TD.TransformedDistribution(TD.Independent(TD.Normal(T(loc), 1.0), 1),
                                    TD.CorrCholeskyTransform())
    assert tuple(kd.event_shape) == tuple(td.event_shape) == (3, 3)
    value = td.sample((5,))
    close(kd.log_prob(K(value)), td.log_prob(value), dtype,
          tol=(1e-3, 1e-4) if dtype == "float32" else None)
    kiln.manual_seed(0)
    s = kd.sample((7,))
    assert tuple(s.shape) == (7, 3, 3)
    assert bool(KD.constraints.corr_cholesky.check(s).all())
