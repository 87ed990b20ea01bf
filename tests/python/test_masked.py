"""kiln.masked against torch.masked on identical inputs: every masked reduction and
normalization with full-shape, broadcast, non-bool and absent masks, dim forms (None, int,
negative, tuple, list, ()), keepdim, dtype, integer inputs and their identities (dtype
min/max), fully masked-out slices (identity, NaN), gradients, the private helpers torch
exports, the errors (class and message); and MaskedTensor: construction checks, printing,
reductions, elementwise and view operations, autograd through it."""
import re
import warnings

import numpy as np
import pytest
import torch

import kiln
import kiln.masked
import oracle

KM, TM = kiln.masked, torch.masked
DTYPES = ["float32", "float64"]

# torch's MaskedTensor warns on every construction that its API is a prototype
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# --- helpers ------------------------------------------------------------------------------

def rand(shape, dtype, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def rand_mask(shape, seed=1):
    """About 60% True, with the slices [1, :, 2] and [2, 3, :] (of a 3-d shape) all False,
    so that reductions over dim 1 or 2 meet fully masked-out slices."""
    m = np.random.default_rng(seed).random(shape) < 0.6
    if len(shape) == 3:
        m[1, :, 2] = False
        m[2, 3, :] = False
    return m


def both(a):
    """A numpy array (or None) as a (kiln, torch) pair of tensors."""
    if a is None:
        return None, None
    return kiln.tensor(a), torch.tensor(a)


def same(k, t, where="", tol=1.0):
    oracle.assert_same(k, t, tol, where=where)


def same_error(fn_kiln, fn_torch, message=True):
    """Both raise the same exception class; message: the same text too (the library's
    name normalized)."""
    with pytest.raises(Exception) as te:
        fn_torch()
    with pytest.raises(type(te.value)) as ke:
        fn_kiln()
    if message:
        def norm(msg):
            return re.sub(r"\bkiln\b", "torch", msg)
        assert norm(str(ke.value)) == norm(str(te.value))
    oracle.record("masked errors")


def call(lib_fn, L, x, mask, args, kwargs):
    return lib_fn(x, *args, **kwargs) if mask is None else lib_fn(x, *args, mask=mask, **kwargs)


# --- the namespace ------------------------------------------------------------------------

def test_exports_match_torch():
    public = [n for n in dir(TM) if not n.startswith("_") and n != "maskedtensor"]
    missing = [n for n in public if not hasattr(KM, n)]
    assert not missing
    for n in ("_canonical_dim", "_input_mask", "_output_mask", "_reduction_identity", "_where",
              "_combine_input_and_mask", "maskedtensor"):
        assert hasattr(KM, n), n


# --- reductions ---------------------------------------------------------------------------

SHAPE = (3, 4, 5)
MASKS = {
    "full": lambda: rand_mask(SHAPE),
    "bcast_2d": lambda: rand_mask((4, 5), seed=3),
    "bcast_1d": lambda: np.array([True, False, True, True, False]),
    "bcast_keepdims": lambda: np.array([True, False, True, False]).reshape(1, 4, 1),
    "float": lambda: (np.random.default_rng(4).random(SHAPE) < 0.5) * 2.5,
    "none": lambda: None,
}
MULTI_DIMS = [None, 0, -1, (0, 2), [1, 2], ()]
ONE_DIMS = [0, 1, -1, 2]

# name: (argument tuples before dim, dims to try, extra kwargs)
REDUCTIONS = {
    "sum": ((), MULTI_DIMS, {}),
    "prod": ((), MULTI_DIMS, {}),
    "amax": ((), MULTI_DIMS, {}),
    "amin": ((), MULTI_DIMS, {}),
    "logsumexp": ((), MULTI_DIMS, {}),
    "mean": ((), MULTI_DIMS, {}),
    "norm": ((2.0,), MULTI_DIMS, {}),
    "norm_1": ((1.0,), [None, 1, (0, 2)], {}),
    "norm_inf": ((float("inf"),), [None, 1, (0, 2)], {}),
    "norm_ninf": ((float("-inf"),), [None, 1, (0, 2)], {}),
    "var": ((), MULTI_DIMS, {}),
    "std": ((), MULTI_DIMS, {}),
    "var_biased": ((), [None, 1, (0, 2)], {"unbiased": False}),
    "std_correction": ((), [None, 2, (0, 1)], {"correction": 2}),
    "argmax": ((), [None] + ONE_DIMS, {}),
    "argmin": ((), [None] + ONE_DIMS, {}),
    "median": ((), [None] + ONE_DIMS, {}),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions(name, dtype):
    pre, dims, extra = REDUCTIONS[name]
    fn = name.split("_")[0]
    kx, tx = both(rand(SHAPE, dtype))
    n = 0
    for mname, make_mask in MASKS.items():
        km, tm = both(make_mask())
        for dim in dims:
            for keepdim in (False, True):
                args = pre + (dim,)
                kw = dict(extra, keepdim=keepdim)
                where = f"{name} mask={mname} dim={dim} keepdim={keepdim}"
                same(call(getattr(KM, fn), kiln, kx, km, args, kw),
                     call(getattr(TM, fn), torch, tx, tm, args, kw), where, tol=4.0)
                n += 1
    oracle.record(f"masked.{fn}", n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_identities(dtype):
    """Every element masked out: each reduction gives its identity (or NaN)."""
    kx, tx = both(rand((2, 3), dtype))
    km, tm = both(np.zeros((2, 3), bool))
    for fn, args in [("sum", (1,)), ("prod", (1,)), ("amax", (1,)), ("amin", (1,)),
                     ("argmax", (1,)), ("argmin", (1,)), ("mean", (1,)), ("median", (1,)),
                     ("logsumexp", (1,)), ("norm", (2.0, 1)), ("norm", (float("-inf"), 1)),
                     ("var", (1,)), ("std", (None,)), ("softmax", (1,)), ("log_softmax", (1,)),
                     ("softmin", (0,)), ("normalize", (2.0, 1)), ("cumsum", (1,)),
                     ("cumprod", (0,))]:
        k = getattr(KM, fn)(kx, *args, mask=km)
        t = getattr(TM, fn)(tx, *args, mask=tm)
        same(k, t, f"{fn} fully masked")
    # the values themselves, not only agreement with torch
    assert KM.amax(kx, 1, mask=km).tolist() == [-float("inf")] * 2
    assert KM.amin(kx, mask=km).item() == float("inf")
    assert np.isnan(KM.mean(kx, mask=km).item())


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_dim_input(dtype):
    """0-d inputs: dim None, 0 or -1 all name the one element."""
    kx, tx = both(np.asarray(1.5, dtype))
    for specified in (True, False):
        km, tm = both(np.asarray(specified))
        for fn, args in [("sum", ()), ("sum", (0,)), ("prod", (-1,)), ("amax", ()),
                         ("argmin", (0,)), ("mean", ()), ("median", ()), ("median", (0,)),
                         ("logsumexp", (0,)), ("norm", (2.0,)), ("var", ()),
                         ("softmax", (0,)), ("cumsum", (0,)), ("normalize", (2.0, 0))]:
            for keepdim in ((False, True) if fn not in ("softmax", "cumsum", "normalize")
                            else (None,)):
                kw = {} if keepdim is None else {"keepdim": keepdim}
                same(getattr(KM, fn)(kx, *args, mask=km, **kw),
                     getattr(TM, fn)(tx, *args, mask=tm, **kw),
                     f"{fn}{args} of a 0-d tensor, specified={specified} {kw}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_argument(dtype):
    kx, tx = both(rand(SHAPE, dtype))
    km, tm = both(rand_mask(SHAPE))
    other = {"float32": "float64", "float64": "float32"}[dtype]
    for fn, args, out in [("sum", (1,), other), ("prod", ((0, 2),), other),
                          ("amax", (1,), other), ("amin", (None,), other),
                          ("argmax", (1,), "int64"), ("argmin", (None,), "int32"),
                          ("mean", (2,), other), ("logsumexp", (1,), other),
                          ("norm", (2.0, 1), other), ("var", (1,), other),
                          ("std", ((0, 1),), other), ("softmax", (1,), other),
                          ("log_softmax", (2,), other), ("softmin", (0,), other),
                          ("normalize", (1.0, 1), other), ("cumsum", (2,), other),
                          ("cumprod", (1,), other), ("median", (1,), other)]:
        kr, ke, tr, te = oracle.run_both(
            lambda: getattr(KM, fn)(kx, *args, mask=km, dtype=getattr(kiln, out)),
            lambda: getattr(TM, fn)(tx, *args, mask=tm, dtype=getattr(torch, out)))
        where = f"{fn} dtype={out}"
        if te is not None:  # norm refuses a narrowing dtype
            assert type(ke) is type(te) and str(ke) == str(te), f"{where}: {ke!r} vs {te!r}"
            continue
        assert ke is None, f"{where}: kiln raised {ke!r}"
        same(kr, tr, where, tol=4.0)


INT_CASES = [
    ("sum", (1,)), ("sum", (None,)), ("prod", (1,)), ("amax", (1,)), ("amin", (2,)),
    ("argmax", (1,)), ("argmin", (None,)), ("logsumexp", (1,)), ("cumsum", (2,)),
    ("cumprod", (1,)), ("var", (1,)), ("std", (2,)), ("median", (0,))]


@pytest.mark.parametrize("int_dtype", ["int32", "int64", "int16", "int8", "uint8", "bool"])
def test_integer_inputs(int_dtype):
    """Integer identities (the dtype's min / max), int64 accumulation for sum and prod,
    float32 for var / std, the dtype kept by cumsum / cumprod / argmax."""
    rng = np.random.default_rng(5)
    a = rng.integers(0 if int_dtype in ("uint8", "bool") else -3, 4, size=SHAPE)
    a = a.astype(bool) if int_dtype == "bool" else a.astype(int_dtype)
    kx, tx = both(a)
    km, tm = both(rand_mask(SHAPE))
    km_all, tm_all = both(np.ones(SHAPE, bool))
    for fn, args in INT_CASES:
        # median of an integer tensor needs every slice to have a masked-in element
        k_mask, t_mask = (km_all, tm_all) if fn == "median" else (km, tm)
        kr, ke, tr, te = oracle.run_both(lambda: getattr(KM, fn)(kx, *args, mask=k_mask),
                                         lambda: getattr(TM, fn)(tx, *args, mask=t_mask))
        where = f"{fn}{args} on {int_dtype}"
        if isinstance(te, NotImplementedError) and int_dtype == "bool" and fn.startswith("cum"):
            continue  # torch has no bool cumsum / cumprod kernel; kiln's computes one
        if te is not None:
            assert ke is not None and type(ke) is type(te), f"{where}: {ke!r} vs {te!r}"
            continue
        assert ke is None, f"{where}: kiln raised {ke!r}"
        same(kr, tr, where)


def test_integer_errors():
    kx, tx = both(np.arange(12, dtype="int32").reshape(3, 4))
    km, tm = both(np.array([[True, False, True, False]] * 2 + [[False] * 4]))
    same_error(lambda: KM.mean(kx, 1, mask=km), lambda: TM.mean(tx, 1, mask=tm))
    same_error(lambda: KM.median(kx, 1, mask=km), lambda: TM.median(tx, 1, mask=tm))
    same_error(lambda: KM.norm(kx, 2.0, 1, mask=km), lambda: TM.norm(tx, 2.0, 1, mask=tm))
    same_error(lambda: KM.norm(kx, float("-inf"), 1, mask=km),
               lambda: TM.norm(tx, float("-inf"), 1, mask=tm))
    kb, tb = both(np.ones((2, 2), bool))
    same_error(lambda: KM.amax(kb, 1, mask=kb), lambda: TM.amax(tb, 1, mask=tb))
    # softmax of integers: both refuse (the kernels' messages differ)
    same_error(lambda: KM.softmax(kx, 1, mask=km), lambda: TM.softmax(tx, 1, mask=tm),
               message=False)
    # mean of integers with a floating dtype is fine
    same(KM.mean(kx, 1, mask=km, dtype=kiln.float64), TM.mean(tx, 1, mask=tm,
                                                               dtype=torch.float64))


# --- normalizations and logaddexp ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin", "cumsum", "cumprod",
                                  "normalize_2", "normalize_1", "normalize_inf"])
def test_normalizations(name, dtype):
    fn, _, ord = name.partition("_") if name.startswith("normalize") else (name, "", "")
    pre = (float(ord),) if ord else ()
    kx, tx = both(rand(SHAPE, dtype))
    n = 0
    for mname, make_mask in MASKS.items():
        km, tm = both(make_mask())
        for dim in (0, 1, -1):
            where = f"{name} mask={mname} dim={dim}"
            same(call(getattr(KM, fn), kiln, kx, km, pre + (dim,), {}),
                 call(getattr(TM, fn), torch, tx, tm, pre + (dim,), {}), where, tol=4.0)
            n += 1
    oracle.record(f"masked.{fn}", n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_normalize_eps(dtype):
    kx, tx = both(rand((2, 3), dtype) * 1e-9)
    km, tm = both(np.array([True, False, True]))
    same(KM.normalize(kx, 2.0, 1, eps=1e-3, mask=km),
         TM.normalize(tx, 2.0, 1, eps=1e-3, mask=tm), "normalize with a large eps")


@pytest.mark.parametrize("dtype", DTYPES)
def test_logaddexp(dtype):
    ka, ta = both(rand((3, 4), dtype, seed=1))
    kb, tb = both(rand((3, 4), dtype, seed=2))
    m1 = rand_mask((3, 4), seed=3)
    m2 = np.array([True, False, False, True])
    for im, om in [(m1, m2), (None, m2), (m1, None), (None, None), (m2, m2)]:
        kim, tim = both(im)
        kom, tom = both(om)
        same(KM.logaddexp(ka, kb, input_mask=kim, other_mask=kom),
             TM.logaddexp(ta, tb, input_mask=tim, other_mask=tom), f"logaddexp {im} {om}")
    same(KM.logaddexp(ka, kb, dtype=kiln.float64, input_mask=kiln.tensor(m2)),
         TM.logaddexp(ta, tb, dtype=torch.float64, input_mask=torch.tensor(m2)),
         "logaddexp dtype")
    # both masked out: -inf
    assert KM.logaddexp(ka, kb, input_mask=kiln.tensor(m2), other_mask=kiln.tensor(m2)
                        )[0, 1].item() == -float("inf")


# --- gradients ----------------------------------------------------------------------------

GRAD_CASES = [
    ("sum", (1,)), ("prod", ((0, 2),)), ("amax", (2,)), ("amin", (None,)),
    ("logsumexp", (1,)), ("mean", (1,)), ("norm", (2.0, 2)), ("norm", (1.0, 1)),
    ("var", (1,)), ("std", (2,)), ("softmax", (1,)), ("log_softmax", (2,)),
    ("softmin", (0,)), ("normalize", (2.0, 1)), ("cumsum", (2,)), ("cumprod", (1,)),
    ("median", (2,))]


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients(dtype):
    """Gradients reach only masked-in elements and match torch's (a mask without fully
    masked-out slices: there torch and kiln may pick different subgradients)."""
    a = rand(SHAPE, dtype, seed=7)
    mask = np.random.default_rng(8).random(SHAPE) < 0.7
    mask[:, 0, :] = True
    mask[:, :, 0] = True
    mask[0, :, :] = True
    for fn, args in GRAD_CASES:
        kx = kiln.tensor(a).requires_grad_()
        tx = torch.tensor(a).requires_grad_()
        k = getattr(KM, fn)(kx, *args, mask=kiln.tensor(mask))
        t = getattr(TM, fn)(tx, *args, mask=torch.tensor(mask))
        if fn == "log_softmax":  # -inf at masked-out elements: pick the finite ones
            k = k.masked_fill(~kiln.tensor(mask), 0)
            t = t.masked_fill(~torch.tensor(mask), 0)
        g = rand(tuple(t.shape), dtype, seed=9)
        k.backward(kiln.tensor(g))
        t.backward(torch.tensor(g))
        same(kx.grad, tx.grad, f"grad of {fn}{args}", tol=8.0)
        assert not kx.grad.numpy()[~mask].any(), f"{fn}: gradient at masked-out elements"
    oracle.record("masked gradients", len(GRAD_CASES))


# --- private helpers and errors -----------------------------------------------------------

def test_private_helpers():
    for dim, ndim in [(None, 3), (1, 3), (-1, 3), ((2, 0), 3), ([1], 2), ((), 2), (0, 0),
                      (None, 0)]:
        assert KM._canonical_dim(dim, ndim) == TM._canonical_dim(dim, ndim)
    kx, tx = both(rand(SHAPE, "float32"))
    km, tm = both(rand_mask((4, 5)))
    for op, args, kw in [("sum", (1,), {}), ("amax", ((0, 2),), {"keepdim": True}),
                         ("norm", (2.0, 2), {}), ("softmax", (1,), {}),
                         ("mean", (), {"dim": -1})]:
        same(KM._output_mask(getattr(KM, op), kx, *args, mask=km, **kw),
             TM._output_mask(getattr(TM, op), tx, *args, mask=tm, **kw), f"_output_mask {op}")
    same(KM._input_mask(kx, mask=km), TM._input_mask(tx, mask=tm), "_input_mask")
    for op, dt in [("amax", "int32"), ("amin", "uint8"), ("argmin", "int8"),
                   ("sum", "float64"), ("prod", "int16"), ("logsumexp", "float32"),
                   ("median", "int64"), ("median", "float64"), ("cumprod", "bool")]:
        k = KM._reduction_identity(op, kiln.zeros(2, dtype=getattr(kiln, dt)))
        t = TM._reduction_identity(op, torch.zeros(2, dtype=getattr(torch, dt)))
        same(k, t, f"identity of {op} on {dt}")
    for op in ("mean", "var", "std"):
        assert KM._reduction_identity(op, kx) is None
    same(KM._reduction_identity("norm", kx, float("-inf")),
         TM._reduction_identity("norm", tx, float("-inf")), "identity of norm -inf")
    same(KM._combine_input_and_mask(KM.amin, kx, km),
         TM._combine_input_and_mask(TM.amin, tx, tm), "_combine_input_and_mask")


ERROR_CASES = {
    "mask_more_dims": lambda M, L: M.sum(L.ones(3, 4), 1, mask=L.ones(1, 3, 4, dtype=L.bool)),
    "mask_not_broadcastable": lambda M, L: M.amax(L.ones(3, 4), 1, mask=L.ones(3, dtype=L.bool)),
    "dim_repeated": lambda M, L: M.sum(L.ones(3, 4), (1, 1), mask=L.ones(4, dtype=L.bool)),
    "dim_repeated_negative": lambda M, L: M.prod(L.ones(3, 4), (1, -1),
                                                 mask=L.ones(4, dtype=L.bool)),
    "dim_out_of_range": lambda M, L: M.logsumexp(L.ones(3, 4), 2, mask=L.ones(4, dtype=L.bool)),
    "dim_too_negative": lambda M, L: M.softmax(L.ones(3, 4), -3, mask=L.ones(4, dtype=L.bool)),
    "dim_out_of_range_mean": lambda M, L: M.mean(L.ones(3, 4), 5, mask=L.ones(4, dtype=L.bool)),
    "var_unbiased_and_correction": lambda M, L: M.var(L.ones(3, 4), 1, True, correction=1),
    "median_dim_of_0d": lambda M, L: M.median(L.ones(()), 1, mask=L.ones((), dtype=L.bool)),
    "norm_narrowing_dtype": lambda M, L: M.norm(L.ones(3, dtype=L.float64), 2.0,
                                                dtype=L.float32),
    "norm_integer_dtype": lambda M, L: M.norm(L.ones(3), 2.0, dtype=L.int64),
    "input_mask_without_mask": lambda M, L: M._input_mask(L.ones(3)),
    "output_mask_not_masked_op": lambda M, L: M._output_mask(L.exp, L.ones(3),
                                                             mask=L.ones(3, dtype=L.bool)),
    "output_mask_not_callable": lambda M, L: M._output_mask("sum", L.ones(3)),
    "identity_unknown": lambda M, L: M._reduction_identity("cummax", L.ones(3)),
}


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_errors(name):
    case = ERROR_CASES[name]
    # _output_mask's message names the op's module, which differs by library
    same_error(lambda: case(KM, kiln), lambda: case(TM, torch),
               message=name != "output_mask_not_masked_op")


# --- MaskedTensor -------------------------------------------------------------------------

def mts(data, mask, **kw):
    """The same MaskedTensor in both libraries."""
    return (KM.masked_tensor(kiln.tensor(data), kiln.tensor(mask), **kw),
            TM.masked_tensor(torch.tensor(data), torch.tensor(mask), **kw))


def same_mt(k, t, where=""):
    """Same mask, dtype, shape, and the same specified values."""
    assert KM.is_masked_tensor(k), f"{where}: kiln returned {type(k).__name__}"
    assert TM.is_masked_tensor(t)
    same(k.get_mask(), t.get_mask(), f"{where}: mask")
    fill = False if t.dtype == torch.bool else 0
    same(k.to_tensor(fill), t.to_tensor(fill), f"{where}: specified values", tol=4.0)
    oracle.record("MaskedTensor")


X23 = np.array([[1.0, -2.0, 3.5], [4.0, 0.5, -6.0]], "float32")
M23 = np.array([[True, False, True], [False, False, False]])


def test_maskedtensor_construction_errors():
    x, m = X23, M23
    for build in [
        lambda L, M: M.masked_tensor([1.0], L.tensor(m)),
        lambda L, M: M.masked_tensor(L.tensor(x), [True]),
        lambda L, M: M.masked_tensor(L.tensor(x), L.tensor(m).int()),
        lambda L, M: M.masked_tensor(L.tensor(x).to(L.uint8), L.tensor(m)),
        lambda L, M: M.masked_tensor(L.tensor(x).to(L.bfloat16), L.tensor(m)),
        lambda L, M: M.masked_tensor(L.tensor(x), L.tensor(m)[0]),
        lambda L, M: M.masked_tensor(L.tensor(x), L.tensor(m)[:, :2]),
        lambda L, M: M.MaskedTensor(M.masked_tensor(L.tensor(x), L.tensor(m)), L.tensor(m)),
    ]:
        same_error(lambda: build(kiln, KM), lambda: build(torch, TM))


def test_maskedtensor_basics_and_repr():
    k, t = mts(X23, M23)
    assert KM.is_masked_tensor(k) and not KM.is_masked_tensor(k.get_data())
    assert isinstance(k, KM.MaskedTensor)
    assert repr(k) == repr(t)
    assert tuple(k.shape) == tuple(t.shape) and k.dim() == 2 and k.numel() == 6
    assert len(k) == 2 and str(k.dtype) == "kiln.float32" and k.size(1) == 3
    same(k.get_data(), t.get_data(), "get_data")
    same(k.get_mask(), t.get_mask(), "get_mask")
    same(k.to_tensor(-1.5), t.to_tensor(-1.5), "to_tensor")
    # the constructor copies: changing the source does not change the MaskedTensor
    src = kiln.tensor(X23)
    mt = KM.masked_tensor(src, kiln.tensor(M23))
    src.add_(1.0)
    assert mt.get_data().tolist() == X23.tolist()
    for data, mask in [(np.float64(2.5), True), (np.int64(3), False), ([1, 2], [True, False]),
                       ([True, False], [False, True]), (np.arange(8.0).reshape(2, 2, 2),
                                                        np.eye(2, dtype=bool)[None].repeat(2, 0))]:
        k, t = mts(np.asarray(data), np.asarray(mask))
        assert repr(k) == repr(t)
        assert repr(k.sum()) == repr(t.sum())


MT_REDUCTIONS = [
    ("sum", ()), ("sum", (1,)), ("sum", (0, True)), ("sum", ((0, 1),)), ("mean", ()),
    ("mean", (1,)), ("amax", (0,)), ("amin", ()), ("argmax", (1,)), ("argmin", ()),
    ("prod", (1,)), ("std", ()), ("sum", (-1,))]


def test_maskedtensor_reductions():
    x = rand((3, 4), "float32", seed=2)
    m = rand_mask((3, 4), seed=3)
    m[1] = False
    k, t = mts(x, m)
    for name, args in MT_REDUCTIONS:
        same_mt(getattr(k, name)(*args), getattr(t, name)(*args), f"{name}{args}")
    same_mt(k.sum(dim=1, keepdim=True), t.sum(dim=1, keepdim=True), "sum keywords")
    same_mt(k.mean(1, dtype=kiln.float64), t.mean(1, dtype=torch.float64), "mean dtype")
    same_mt(k.var(1), t.var(1), "var(1)")
    same_mt((k > 0).all(), (t > 0).all(), "all()")
    same_mt((k > 0).all(1), (t > 0).all(1), "all(1)")
    same_mt(k.softmax(1), torch.softmax(t, 1), "softmax")
    # the function form takes a MaskedTensor's own mask
    same(KM.sum(k, 1), TM.sum(t, 1), "masked.sum(MaskedTensor)")
    same(KM.amax(k), TM.amax(t), "masked.amax(MaskedTensor)")
    ki, ti = mts(np.arange(12, dtype="int32").reshape(3, 4), m)
    same_mt(ki.sum(1), ti.sum(1), "sum of int32")


UNARY = [("exp", ()), ("abs", ()), ("neg", ()), ("sin", ()), ("tanh", ()), ("sigmoid", ()),
         ("floor", ()), ("clamp", (-0.5, 0.5)), ("pow", (2,)), ("square", ()),
         ("sign", ()), ("round", ()), ("isnan", ()), ("nan_to_num", ())]


def test_maskedtensor_elementwise():
    x = rand((3, 4), "float64", seed=4)
    m = rand_mask((3, 4), seed=5)
    k, t = mts(x, m)
    for name, args in UNARY:
        same_mt(getattr(k, name)(*args), getattr(t, name)(*args), f"{name}{args}")
    pos_k, pos_t = mts(np.abs(x) + 0.1, m)
    for name in ("log", "sqrt", "rsqrt", "reciprocal"):
        same_mt(getattr(pos_k, name)(), getattr(pos_t, name)(), name)
    same_mt(k.clamp(min=0.0), t.clamp(min=0.0), "clamp(min=)")
    same_mt(-k, -t, "-mt")
    same_mt(abs(k), abs(t), "abs(mt)")
    same_mt(k ** 2, t ** 2, "mt ** 2")
    k2, t2 = mts(rand((3, 4), "float64", seed=6), m)
    other = rand((3, 4), "float64", seed=7)
    for name, ka, ta in [("add", k2, t2), ("sub", k2, t2), ("mul", k2, t2), ("div", k2, t2),
                         ("maximum", k2, t2), ("atan2", k2, t2), ("logaddexp", k2, t2),
                         ("add", kiln.tensor(other), torch.tensor(other)),
                         ("mul", kiln.tensor(other[0]), torch.tensor(other[0])),
                         ("sub", 2.5, 2.5), ("eq", k2, t2), ("gt", 0.0, 0.0),
                         ("floor_divide", 0.7, 0.7), ("remainder", 0.7, 0.7)]:
        same_mt(getattr(k, name)(ka), getattr(t, name)(ta), f"{name} with {type(ta).__name__}")
    same_mt(k + k2, t + t2, "+")
    same_mt(k - 1.5, t - 1.5, "-")
    same_mt(k * kiln.tensor(other), t * torch.tensor(other), "* tensor")
    same_mt(k / 3, t / 3, "/")
    same_mt(2 + k, 2 + t, "2 + mt")
    same_mt(2 * k, 2 * t, "2 * mt")
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        same_mt(getattr(k, op)(0.1), getattr(t, op)(0.1), op)
    # torch refuses the reflected non-commutative operators; kiln defines them
    assert (1 - k).to_tensor(0).tolist() == (1 - k.get_data()).masked_fill(
        ~k.get_mask(), 0).tolist()
    # masks must match
    k3, t3 = mts(x, ~m)
    same_error(lambda: k + k3, lambda: t + t3)
    same_error(lambda: k.mul(k3), lambda: t.mul(t3))
    same_error(lambda: k.add(k2, alpha=2), lambda: t.add(t2, alpha=2))
    same_error(lambda: k.clamp(min=kiln.tensor(x)), lambda: t.clamp(min=torch.tensor(x)))
    # in place: the same object, updated data, same mask
    kk, tt = k.clone(), t.clone()
    assert kk.exp_() is kk
    tt.exp_()
    same_mt(kk, tt, "exp_")
    kk.add_(k2)
    tt.add_(t2)
    same_mt(kk, tt, "add_")
    kk += 1
    tt += 1
    same_mt(kk, tt, "+=")


def test_maskedtensor_views():
    x = rand((3, 4), "float32", seed=8)
    m = rand_mask((3, 4), seed=9)
    k, t = mts(x, m)
    for name, fn in [("[0]", lambda a: a[0]), ("[:, 1:]", lambda a: a[:, 1:]),
                     ("[1, 2]", lambda a: a[1, 2]), ("t", lambda a: a.t()),
                     ("transpose", lambda a: a.transpose(0, 1)),
                     ("view", lambda a: a.view(2, 6)), ("reshape", lambda a: a.reshape(4, 3)),
                     ("unsqueeze", lambda a: a.unsqueeze(1)),
                     ("expand", lambda a: a[:1].expand(2, 4)),
                     ("unfold", lambda a: a.unfold(1, 2, 1)),
                     ("to", lambda a: a.to(getattr(kiln if a.__module__.startswith("kiln")
                                                   else torch, "float64"))),
                     ("double", lambda a: a.double()), ("int", lambda a: a.int())]:
        same_mt(fn(k), fn(t), name)
    for i, (a, b) in enumerate(zip(k.split(2), t.split(2))):
        same_mt(a, b, f"split[{i}]")
    assert [row.get_mask().tolist() for row in k] == m.tolist()


def test_maskedtensor_autograd():
    x = rand((2, 3), "float32", seed=10)
    k, t = mts(x, M23 | np.array([False, True, False]), requires_grad=True)
    assert k.requires_grad and k.is_leaf
    (k * k).sum().backward()
    (t * t).sum().backward()
    same_mt(k.grad, t.grad, "grad of (mt * mt).sum()")
    k, t = mts(x, M23, requires_grad=True)
    k.exp().softmax(1).amax(1).sum().backward()
    t.exp().softmax(1).amax(1).sum().backward()
    same_mt(k.grad, t.grad, "grad through exp, softmax, amax")
    # as_masked_tensor is differentiable: the gradient reaches the source tensor (a plain
    # tensor in kiln, zero where masked out; torch hands back a MaskedTensor)
    ks = kiln.tensor(x).requires_grad_()
    ts = torch.tensor(x).requires_grad_()
    KM.as_masked_tensor(ks, kiln.tensor(M23)).mean().backward()
    TM.as_masked_tensor(ts, torch.tensor(M23)).mean().backward()
    tgrad = ts.grad.to_tensor(0) if TM.is_masked_tensor(ts.grad) else ts.grad
    same(ks.grad, tgrad, "grad through as_masked_tensor")
    # masked_tensor copies and detaches
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not KM.masked_tensor(ks, kiln.tensor(M23)).requires_grad
