"""The torch functions kiln composes from its ops (python/kiln/_composite.py, decision 0074)
against PyTorch 2.13: values, dtypes and shapes (float32 / float64, with gradients where the
function is differentiable; integer and bool inputs where torch takes them), NaN / inf / -0
inputs for the elementwise ones, and the exceptions torch raises."""
import numpy as np
import pytest
import torch

import kiln
import oracle
from oracle import Op

FP = ["float32", "float64"]
NUM = ["int64", "float32", "float64"]


def _unary(name, domain="real", dtypes=FP, shapes=((4, 5), ("t", (3, 4))), special=True,
           grad=True, pre=lambda x: x):
    """kiln.name(pre(x)) and pre(x).name(); pre maps the domain's values into the function's."""
    f = lambda L, x, _n=name: getattr(L, _n)(pre(x))  # noqa: E731
    ops = [Op(f"{name}", f, [(s,) for s in shapes], dtypes=dtypes, domain=domain, grad=grad),
           Op(f"Tensor.{name}", lambda L, x, _n=name: getattr(pre(x), _n)(), [((3, 4),)],
              dtypes=dtypes, domain=domain, grad=grad)]
    if special:
        ops.append(Op(f"{name}_special", f, [((6, 7),)], dtypes=FP, domain="special",
                      grad=False))
    return ops


def _binary(name, domain="real", dtypes=FP, grad=True, special=True):
    f = lambda L, a, b, _n=name: getattr(L, _n)(a, b)  # noqa: E731
    ops = [Op(name, f, [((4, 5), (4, 5)), ((4, 5), (5,)), ((2, 1, 3), (4, 1))], dtypes=dtypes,
              domain=domain, grad=grad)]
    if special:
        ops.append(Op(f"{name}_special", f, [((6, 7), (6, 7))], dtypes=FP, domain="special",
                      grad=False))
    return ops


OPS = (
    _unary("square", dtypes=NUM) + _unary("log10", domain="pos") + _unary("frac") +
    _unary("sgn", grad=False) + _unary("positive", dtypes=NUM) + _unary("deg2rad") +
    _unary("rad2deg") +
    _unary("asin", domain="unit") + _unary("acos", domain="unit") + _unary("atan") +
    _unary("sinh") + _unary("cosh") + _unary("asinh") + _unary("atanh", domain="unit") +
    _unary("arcsin", domain="unit") + _unary("arctan") +
    _unary("acosh", domain="pos", pre=lambda x: x + 1.0) +
    _unary("logit", domain="unit", pre=lambda x: x.abs() * 0.5 + 0.2) +
    _unary("signbit", dtypes=NUM, grad=False) + _unary("isneginf", grad=False) +
    _unary("isposinf", grad=False) + _unary("fliplr") + _unary("flipud") +
    _binary("xlogy", domain=("real", "pos")) + _binary("hypot") + _binary("logaddexp") +
    _binary("logaddexp2") + _binary("copysign") + _binary("fmax") + _binary("fmin") +
    _binary("float_power", domain=("pos", "real"), dtypes=["float32"]) + [
    Op("asinh_large", lambda L, x: L.asinh(x * 1e20), [((3, 4),)], dtypes=["float64"],
       grad=False),
    Op("sinh_small", lambda L, x: L.sinh(x * 1e-6), [((3, 4),)], dtypes=FP),
    Op("heaviside", lambda L, x, v: L.heaviside(x.round(), v), [((4, 5), (5,))], dtypes=FP,
       grad=False),
    Op("logit_eps", lambda L, x: L.logit(x, eps=0.1), [((4, 5),)], dtypes=FP, domain="unit"),
    Op("isclose", lambda L, a, b, **kw: L.isclose(a, b * 1e-5 + a, **kw),
       [((4, 5), (4, 5))], kwargs=[{}, {"rtol": 1e-7, "atol": 0.0}], dtypes=FP, grad=False),
    Op("isclose_special", lambda L, a, b, **kw: L.isclose(a, b, **kw), [((6, 7), (6, 7))],
       kwargs=[{}, {"equal_nan": True}], dtypes=FP, domain="special", grad=False),
    Op("isclose_same_special", lambda L, a, **kw: L.isclose(a, a.clone(), **kw), [((6, 7),)],
       kwargs=[{}, {"equal_nan": True}], dtypes=FP, domain="special", grad=False),
    Op("allclose", lambda L, a, b: L.allclose(a, a + b * 1e-9), [((4, 5), (4, 5))],
       dtypes=FP, grad=False),
    Op("equal", lambda L, a, b: (L.equal(a, a.clone()), L.equal(a, b), L.equal(a, a[:2])),
       [((4, 5), (4, 5))], dtypes=NUM, grad=False),
    Op("isin", lambda L, a, b, **kw: L.isin(a, b, **kw), [((4, 5), (7,)), ((9,), (3, 2))],
       kwargs=[{}, {"invert": True}], dtypes=["int64", "float32"], domain="index", grad=False),
    Op("count_nonzero", lambda L, a, **kw: L.count_nonzero(a.round(), **kw), [((4, 5),)],
       kwargs=[{}, {"dim": 1}], dtypes=FP, grad=False),
    Op("nansum", lambda L, a, **kw: L.nansum(a, **kw), [((4, 5),)],
       kwargs=[{}, {"dim": 1}, {"dim": 0, "keepdim": True}], dtypes=FP, domain="special",
       grad=False),
    Op("nansum_grad", lambda L, a: L.nansum(a, 1), [((4, 5),)], dtypes=FP),
    Op("nanmean", lambda L, a, **kw: L.nanmean(a, **kw), [((4, 5),)],
       kwargs=[{}, {"dim": 1}], dtypes=FP, domain="special", grad=False),
    Op("aminmax", lambda L, a, **kw: tuple(L.aminmax(a, **kw)), [((4, 5),)],
       kwargs=[{}, {"dim": 1}, {"dim": 0, "keepdim": True}], dtypes=NUM, grad=False),
    Op("var_mean", lambda L, a, **kw: L.var_mean(a, **kw), [((4, 5),)],
       kwargs=[{}, {"dim": 1}, {"dim": 0, "correction": 0, "keepdim": True}], dtypes=FP),
    Op("std_mean", lambda L, a, **kw: L.std_mean(a, **kw), [((4, 5),)],
       kwargs=[{}, {"dim": 1}], dtypes=FP),
    Op("diff", lambda L, a, **kw: L.diff(a, **kw), [((4, 5),)],
       kwargs=[{}, {"n": 2, "dim": 0}, {"dim": 1}], dtypes=NUM),
    Op("diff_prepend", lambda L, a, p: L.diff(a, dim=1, prepend=p, append=p), [((4, 5), (4, 2))],
       dtypes=FP),
    Op("take", lambda L, a, i: L.take(a, (i.abs() * 3).long() % 20), [((4, 5), (2, 3))],
       dtypes=FP, grad_of=lambda r: r),
    Op("take_along_dim", lambda L, a: L.take_along_dim(a, a.argsort(1), 1), [((4, 5),)],
       dtypes=FP),
    Op("take_along_dim_flat", lambda L, a: L.take_along_dim(a, a.reshape(-1).argsort()),
       [((4, 5),)], dtypes=FP),
    Op("index_add", lambda L, a, s: L.index_add(a, 0, L.tensor([0, 2, 0]), s, alpha=2),
       [((4, 5), (3, 5))], dtypes=FP),
    Op("index_copy", lambda L, a, s: L.index_copy(a, 1, L.tensor([3, 0]), s),
       [((4, 5), (4, 2))], dtypes=FP),
    Op("index_fill", lambda L, a: L.index_fill(a, 1, L.tensor([1, 4]), -2.5), [((4, 5),)],
       dtypes=FP),
    Op("searchsorted", lambda L, s, v, **kw: L.searchsorted(s.sort()[0], v, **kw),
       [((9,), (4, 5)), ((3, 9), (3, 5)), ((1,), (6,))],
       kwargs=[{}, {"right": True}, {"side": "right", "out_int32": True}], dtypes=NUM,
       domain="index", grad=False),
    Op("searchsorted_real", lambda L, s, v: L.searchsorted(s.sort()[0], v),
       [((33,), (4, 5))], dtypes=FP, grad=False),
    Op("bucketize", lambda L, v, b, **kw: L.bucketize(v, b.sort()[0], **kw),
       [((4, 5), (6,))], kwargs=[{}, {"right": True}], dtypes=FP, grad=False),
    Op("hstack", lambda L, a, b: L.hstack([a, b]), [((4, 5), (4, 2)), ((3,), (2,))],
       dtypes=NUM),
    Op("vstack", lambda L, a, b: L.vstack([a, b]), [((4, 5), (2, 5)), ((5,), (5,))],
       dtypes=NUM),
    Op("row_stack", lambda L, a, b: L.row_stack([a, b]), [((5,), (2, 5))], dtypes=FP),
    Op("dstack", lambda L, a, b: L.dstack([a, b]), [((4, 5), (4, 5)), ((3,), (3,))],
       dtypes=FP),
    Op("column_stack", lambda L, a, b: L.column_stack([a, b]), [((4,), (4, 3))], dtypes=FP),
    Op("atleast_3d", lambda L, a: (L.atleast_1d(a.sum()), L.atleast_2d(a[0]),
                                   L.atleast_3d(a)), [((4, 5),)], dtypes=FP,
       grad_of=lambda r: r[2]),
    Op("tile", lambda L, a, **kw: L.tile(a, **kw), [((2, 3),)],
       kwargs=[{"dims": (2,)}, {"dims": (2, 1, 3)}], dtypes=NUM),
    Op("meshgrid", lambda L, a, b, **kw: L.meshgrid(a, b, **kw), [((3,), (4,))],
       kwargs=[{"indexing": "ij"}, {"indexing": "xy"}], dtypes=FP, grad_of=lambda r: r[0]),
    Op("meshgrid3", lambda L, a, b, c: L.meshgrid(a, b, c, indexing="xy"),
       [((3,), (4,), (2,))], dtypes=FP, grad_of=lambda r: r[2]),
    Op("broadcast_tensors", lambda L, a, b: L.broadcast_tensors(a, b), [((4, 1), (5,))],
       dtypes=FP, grad_of=lambda r: r[1]),
    Op("tensor_split", lambda L, a, **kw: L.tensor_split(a, **kw), [((7, 4),)],
       kwargs=[{"sections": 3}, {"indices": [1, 5], "dim": 0}, {"indices": [3, 9], "dim": 1}],
       dtypes=FP, grad_of=lambda r: r[1]),
    Op("hsplit", lambda L, a: L.hsplit(a, 2), [((3, 4),)], dtypes=FP, grad_of=lambda r: r[0]),
    Op("vsplit", lambda L, a: L.vsplit(a, [1]), [((3, 4),)], dtypes=FP, grad_of=lambda r: r[1]),
    Op("rot90", lambda L, a, **kw: L.rot90(a, **kw), [((3, 4, 2),)],
       kwargs=[{}, {"k": 2}, {"k": 3, "dims": (1, 2)}, {"k": -1}], dtypes=FP),
    Op("diag", lambda L, a, **kw: L.diag(a, **kw), [((4,),), ((4, 5),)],
       kwargs=[{}, {"diagonal": 1}, {"diagonal": -2}], dtypes=NUM),
    Op("diag_embed", lambda L, a, **kw: L.diag_embed(a, **kw), [((2, 3),)],
       kwargs=[{}, {"offset": -1}, {"offset": 1, "dim1": 0, "dim2": 2}], dtypes=FP),
    Op("diagflat", lambda L, a: L.diagflat(a, 1), [((2, 2),)], dtypes=FP),
    Op("trace", lambda L, a: L.trace(a), [((4, 5),), ((3, 3),)], dtypes=NUM),
    Op("mv", lambda L, a, v: L.mv(a, v), [((4, 5), (5,))], dtypes=FP),
    Op("addmv", lambda L, x, a, v: L.addmv(x, a, v, beta=0.5, alpha=2.0),
       [((4,), (4, 5), (5,))], dtypes=FP),
    Op("addr", lambda L, x, a, b: L.addr(x, a, b, alpha=3.0), [((4, 5), (4,), (5,))],
       dtypes=FP),
    Op("inner", lambda L, a, b: L.inner(a, b), [((4, 5), (3, 5)), ((2, 3, 5), (5,)),
                                               ((5,), (5,))], dtypes=FP),
    Op("vdot", lambda L, a, b: L.vdot(a, b), [((5,), (5,))], dtypes=FP),
    Op("kron", lambda L, a, b: L.kron(a, b), [((2, 3), (3, 2)), ((2,), (2, 3))], dtypes=NUM),
    Op("cross", lambda L, a, b, **kw: L.cross(a, b, **kw), [((4, 3), (4, 3)), ((3, 2), (3, 2))],
       kwargs=[{"dim": None}], dtypes=FP),
    Op("block_diag", lambda L, a, b, c: L.block_diag(a, b, c), [((2, 3), (1,), ())],
       dtypes=FP),
    Op("cartesian_prod", lambda L, a, b: L.cartesian_prod(a, b), [((3,), (2,))], dtypes=NUM),
    Op("tril_indices", lambda L, a: (L.tril_indices(4, 5), L.triu_indices(4, 3, 1),
                                     L.tril_indices(3, 3, -1)), [((1,),)], dtypes=["int64"],
       grad=False),
    Op("cdist", lambda L, a, b, **kw: L.cdist(a, b, **kw), [((4, 3), (5, 3)),
                                                            ((2, 4, 3), (2, 5, 3))],
       kwargs=[{}, {"p": 1.0}], dtypes=FP, tol=10),
    Op("logspace", lambda L, a: L.logspace(-2, 2, 7) + a.sum() * 0, [((1,),)], dtypes=FP,
       grad=False),
])


@pytest.mark.parametrize("op,dtype", oracle.params(OPS))
def test_composite_vs_torch(op, dtype):
    oracle.run_op(op, dtype)


ERRORS = {
    "diag_3d": lambda L: L.diag(L.ones(2, 2, 2)),
    "trace_1d": lambda L: L.trace(L.ones(3)),
    "cross_no_3": lambda L: L.cross(L.ones(4, 2), L.ones(4, 2), dim=1),
    "meshgrid_indexing": lambda L: L.meshgrid(L.ones(2), L.ones(3), indexing="yx"),
    "tensor_split_zero": lambda L: L.tensor_split(L.ones(4), 0),
    "isclose_dtypes": lambda L: L.isclose(L.ones(2), L.ones(2, dtype=L.float64)),
    "nanmean_int": lambda L: L.nanmean(L.ones(2, dtype=L.int64)),
    "searchsorted_batch": lambda L: L.searchsorted(L.ones(2, 3), L.ones(3, 2)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_like_torch(name):
    oracle.check_same_error_class(ERRORS[name], "error_" + name)


def test_searchsorted_large_inputs_take_little_memory():
    # 1M values against 100k boundaries: a binary search, not a 10^11 comparison table.
    b = kiln.arange(0.0, 100000.0)
    v = kiln.rand(1000000) * 100000.0
    r = kiln.searchsorted(b, v)
    expect = np.searchsorted(b.numpy(), v.numpy())
    np.testing.assert_array_equal(r.numpy(), expect)
    oracle.record("searchsorted_large")


LINALG = [
    Op("linalg.vector_norm", lambda L, x, **kw: L.linalg.vector_norm(x, **kw), [((4, 5),)],
       kwargs=[{}, {"ord": 1, "dim": 1}, {"ord": float("inf"), "dim": 0, "keepdim": True},
               {"ord": 3.0, "dim": (0, 1)}, {"ord": 0}, {"ord": -float("inf"), "dim": 1}],
       dtypes=FP, tol=10),
    Op("linalg.matrix_norm", lambda L, x, **kw: L.linalg.matrix_norm(x, **kw), [((2, 4, 5),)],
       kwargs=[{}, {"ord": 1}, {"ord": -1, "keepdim": True}, {"ord": float("inf")},
               {"ord": "fro", "dim": (0, 2)}], dtypes=FP, tol=10),
    Op("linalg.norm", lambda L, x, **kw: L.linalg.norm(x, **kw), [((4, 5),)],
       kwargs=[{}, {"dim": 1}, {"ord": 1}, {"ord": 2, "dim": 0}], dtypes=FP, tol=10),
    Op("linalg.vecdot", lambda L, a, b: L.linalg.vecdot(a, b), [((4, 5), (4, 5))], dtypes=FP),
    Op("linalg.multi_dot", lambda L, a, b, c: L.linalg.multi_dot([a, b, c]),
       [((5,), (5, 3), (3, 4)), ((2, 5), (5, 3), (3,))], dtypes=FP),
    Op("linalg.cross", lambda L, a, b: L.linalg.cross(a, b), [((4, 3), (4, 3))], dtypes=FP),
    Op("linalg.diagonal", lambda L, a: L.linalg.diagonal(a, offset=1), [((2, 4, 5),)],
       dtypes=FP),
]


@pytest.mark.parametrize("op,dtype", oracle.params(LINALG))
def test_linalg_namespace_vs_torch(op, dtype):
    oracle.run_op(op, dtype)
