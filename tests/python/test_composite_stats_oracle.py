"""Order statistics, running extremes, counting, in-place forms and random fills of
python/kiln/_composite_stats.py (decision 0074) against PyTorch 2.13 (values, indices,
gradients; NaN lines; ties for cummax / cummin; error classes) and, for the random fills,
against their distributions."""
import math

import numpy as np
import pytest
import torch

import kiln
import oracle
from oracle import Op

FP = ["float32", "float64"]
NUM = ["int64", "float32", "float64"]

OPS = [
    Op("median", lambda L, x: L.median(x), [((4, 5),), ((7,),)], dtypes=NUM, domain="spread"),
    Op("median_dim", lambda L, x, **kw: tuple(L.median(x, **kw)), [((4, 5),)],
       kwargs=[{"dim": 1}, {"dim": 0, "keepdim": True}], dtypes=NUM, domain="spread",
       grad_of=lambda r: r[0]),
    Op("median_nan", lambda L, x, **kw: L.median(x, **kw)[0] if kw else L.median(x), [((6, 7),)],
       kwargs=[{}, {"dim": 1}], dtypes=FP, domain="special", grad=False),
    Op("nanmedian", lambda L, x, **kw: L.nanmedian(x, **kw)[0] if kw else L.nanmedian(x),
       [((6, 7),)], kwargs=[{}, {"dim": 1}], dtypes=FP, domain="special", grad=False),
    Op("Tensor.median", lambda L, x: x.median(1).values, [((4, 5),)], dtypes=FP,
       domain="spread"),
    Op("kthvalue", lambda L, x, **kw: tuple(L.kthvalue(x, **kw)), [((4, 5),)],
       kwargs=[{"k": 2}, {"k": 4, "dim": 0, "keepdim": True}], dtypes=NUM, domain="spread",
       grad_of=lambda r: r[0]),
    Op("msort", lambda L, x: L.msort(x), [((4, 5),)], dtypes=NUM, domain="spread"),
    Op("quantile", lambda L, x, **kw: L.quantile(x, 0.3, **kw), [((4, 5),), ((7,),)],
       kwargs=[{}, {"dim": -1}, {"dim": 0, "keepdim": True}] +
       [{"interpolation": m, "dim": -1} for m in ("lower", "higher", "midpoint", "nearest")],
       dtypes=FP),
    Op("quantile_tensor_q", lambda L, x, **kw: L.quantile(x, L.tensor([0.1, 0.5, 1.0]).to(
        x.dtype), **kw), [((4, 5),)], kwargs=[{}, {"dim": 1}, {"dim": 1, "keepdim": True}],
       dtypes=FP),
    Op("quantile_nan", lambda L, x: L.quantile(x, 0.4, dim=1), [((6, 7),)], dtypes=FP,
       domain="special", grad=False),
    Op("nanquantile", lambda L, x, **kw: L.nanquantile(x, 0.75, **kw), [((6, 7),)],
       kwargs=[{}, {"dim": 1}], dtypes=FP, domain="special", grad=False),
    Op("cummax", lambda L, x, **kw: tuple(L.cummax(x, **kw)), [((4, 6),)],
       kwargs=[{"dim": 1}, {"dim": 0}], dtypes=NUM, domain="index", grad_of=lambda r: r[0]),
    Op("cummin", lambda L, x, **kw: tuple(L.cummin(x, **kw)), [((4, 6),), ((9,),)],
       kwargs=[{"dim": -1}], dtypes=NUM, domain="index", grad_of=lambda r: r[0]),
    Op("cummax_real", lambda L, x: tuple(x.cummax(1)), [((3, 17),)], dtypes=FP,
       grad_of=lambda r: r[0]),
    Op("cummax_nan", lambda L, x: tuple(L.cummax(x, 1)), [((6, 7),)], dtypes=FP,
       domain="special", grad=False),
    Op("bincount", lambda L, x, **kw: L.bincount((x * 3).long(), **kw), [((20,),)],
       kwargs=[{}, {"minlength": 12}], dtypes=["float32"], domain="pos", grad=False),
    Op("bincount_weights", lambda L, x, w: L.bincount((x * 3).long(), w), [((20,), (20,))],
       dtypes=FP, domain=("pos", "real"), grad=False),
    Op("histc", lambda L, x, **kw: L.histc(x, **kw), [((50,),)],
       kwargs=[{}, {"bins": 7, "min": -1.0, "max": 2.0}, {"bins": 5}], dtypes=FP,
       grad=False),
    Op("index_add_", lambda L, x, s: x.clone().index_add_(1, L.tensor([0, 2, 0]), s),
       [((4, 5), (4, 3))], dtypes=FP),
    Op("index_fill_", lambda L, x: x.clone().index_fill_(0, L.tensor([1]), 7.0), [((4, 5),)],
       dtypes=FP),
    Op("tril_", lambda L, x: (x.clone().tril_(1), x.clone().triu_(-1)), [((4, 5),)],
       dtypes=NUM, grad_of=lambda r: r[0]),
    Op("scatter_add_", lambda L, x, s: x.clone().scatter_add_(1, L.tensor([[0, 1], [4, 4],
                                                                          [2, 2], [0, 0]]), s),
       [((4, 5), (4, 2))], dtypes=FP),
    Op("masked_scatter", lambda L, x, s: x.masked_scatter(x > 0, s), [((4, 5), (30,))],
       dtypes=FP),
    Op("masked_scatter_", lambda L, x, s: x.clone().masked_scatter_(x[0] > 0, s),
       [((4, 5), (30,))], dtypes=FP),
    Op("fill_diagonal_", lambda L, x, **kw: x.clone().fill_diagonal_(2.5, **kw),
       [((4, 3),), ((3, 5),), ((7, 3),)], kwargs=[{}, {"wrap": True}], dtypes=FP),
    Op("fill_diagonal_3d", lambda L, x: x.clone().fill_diagonal_(-1.0), [((3, 3, 3),)],
       dtypes=FP),
    Op("mH", lambda L, x: (x.mH, x[0].mH, x[0].H), [((2, 3, 4),)], dtypes=FP,
       grad_of=lambda r: r[0]),
]


@pytest.mark.parametrize("op,dtype", oracle.params(OPS))
def test_stats_vs_torch(op, dtype):
    oracle.run_op(op, dtype)


ERRORS = {
    "kthvalue_range": lambda L: L.kthvalue(L.ones(3), 4),
    "quantile_q": lambda L: L.quantile(L.ones(3), 1.5),
    "quantile_int": lambda L: L.quantile(L.ones(3, dtype=L.int64), 0.5),
    "quantile_interpolation": lambda L: L.quantile(L.ones(3), 0.5, interpolation="cubic"),
    "bincount_negative": lambda L: L.bincount(L.tensor([1, -1])),
    "bincount_2d": lambda L: L.bincount(L.ones(2, 2, dtype=L.int64)),
    "fill_diagonal_1d": lambda L: L.ones(3).fill_diagonal_(1.0),
    "fill_diagonal_unequal": lambda L: L.ones(2, 3, 4).fill_diagonal_(1.0),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_like_torch(name):
    oracle.check_same_error_class(ERRORS[name], "error_" + name)


@pytest.mark.parametrize("fill,kw,mean,var", [
    ("exponential_", {"lambd": 2.0}, 0.5, 0.25),
    ("geometric_", {"p": 0.25}, 4.0, 12.0),
    ("log_normal_", {"mean": 0.0, "std": 0.5}, math.exp(0.125),
     (math.exp(0.25) - 1) * math.exp(0.25)),
])
def test_random_fills_have_their_distributions(fill, kw, mean, var):
    kiln.manual_seed(3)
    x = getattr(kiln.empty(200000, dtype=kiln.float64), fill)(**kw).numpy()
    assert abs(x.mean() - mean) < 0.02 * max(1.0, mean), x.mean()
    assert abs(x.var() - var) < 0.05 * var, x.var()
    if fill == "geometric_":
        assert np.all(x >= 1) and np.all(x == np.round(x))
    oracle.record("random_" + fill)


def test_cauchy_fill_has_its_quartiles():
    kiln.manual_seed(4)
    x = kiln.empty(200000).cauchy_(1.0, 2.0).numpy()
    q1, q2, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    assert abs(q2 - 1.0) < 0.05 and abs(q1 - -1.0) < 0.05 and abs(q3 - 3.0) < 0.05
    oracle.record("random_cauchy_")
