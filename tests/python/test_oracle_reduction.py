"""Reductions against PyTorch: every dim/keepdim/dtype variant on contiguous, non-contiguous,
0-d and empty inputs, forward and backward."""
import pytest

from oracle import ALL, FLOATS, Op, params, run_op

SHAPES = [((3, 4),), (("t", (4, 5)),), (("s", (2, 3, 4)),), ((1, 5),), ((0, 3),), ((),)]
DIMS = [{}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"dim": (0, 1)}]
ONE_DIM = [{}, {"dim": 1}, {"dim": 0, "keepdim": True}]


def red(name, kwargs=DIMS, dtypes=ALL, fn=None, shapes=SHAPES, tol=4.0, **kw):
    fn = fn or (lambda L, x, _n=name, **k: getattr(L, _n)(x, **k))
    return Op(name, fn, shapes, dtypes=list(dtypes), kwargs=kwargs, tol=tol, **kw)


def values(r):
    return r[0] if isinstance(r, tuple) else r


REDUCTIONS = [
    red("sum"),
    red("sum_dtype", kwargs=[{"dtype": None}, {"dim": 1, "dtype": None}],
        fn=lambda L, x, dtype=None, **k: L.sum(x, dtype=L.float64, **k)),
    red("Tensor.sum", fn=lambda L, x, **k: x.sum(**k)),
    red("mean"), red("nansum_like_mean_dtype", kwargs=[{"dim": 1}],
                     fn=lambda L, x, **k: L.mean(x, dtype=L.float64, **k)),
    red("prod", kwargs=ONE_DIM, domain="small_pos"),
    red("amax"), red("amin"),
    red("max", kwargs=ONE_DIM, domain="spread", grad_of=values),
    red("min", kwargs=ONE_DIM, domain="spread", grad_of=values),
    red("argmax", kwargs=ONE_DIM, domain="spread"), red("argmin", kwargs=ONE_DIM, domain="spread"),
    red("var", kwargs=DIMS + [{"dim": 0, "correction": 0}, {"dim": 1, "unbiased": False}]),
    red("std", kwargs=DIMS + [{"dim": 0, "correction": 0}]),
    red("norm", kwargs=[{}, {"p": 1}, {"p": float("inf"), "dim": 1}, {"p": 3, "dim": 0,
                                                                       "keepdim": True}],
        domain="nonzero"),
    red("logsumexp", kwargs=[{"dim": 1}, {"dim": (0, 1)}, {"dim": 0, "keepdim": True}]),
    red("all", kwargs=ONE_DIM), red("any", kwargs=ONE_DIM),
    red("cumsum", kwargs=[{"dim": 0}, {"dim": -1}]),
    red("cumprod", kwargs=[{"dim": 0}, {"dim": -1}], domain="small_pos"),
    red("softmax", kwargs=[{"dim": -1}, {"dim": 0}], dtypes=FLOATS),
    red("log_softmax", kwargs=[{"dim": -1}, {"dim": 0}], dtypes=FLOATS),
    red("max_binary", kwargs=[{}], fn=lambda L, x: L.max(x, L.zeros_like(x))),
]


@pytest.mark.parametrize("op,dtype", params(REDUCTIONS))
def test_reduction(op, dtype):
    run_op(op, dtype)


@pytest.mark.parametrize("op,dtype", params(REDUCTIONS, dtypes_filter=("float32", "int64")))
def test_reduction_on_testing_device(op, dtype):
    run_op(op, dtype, device="testing:0")
