"""erfc, erfinv, lgamma, digamma and polygamma(1, x) (C++ kernels: libm's erfc / lgamma_r,
special_functions.h) against PyTorch 2.13: every float dtype, gradients in float32 / float64
(lgamma' = digamma, digamma' = trigamma, erfinv' from its output), negative arguments and
poles, NaN / inf / -0, and int inputs promoted to float."""
import pytest

import oracle
from oracle import Op

FLOATS = ["float16", "bfloat16", "float32", "float64"]


def _fn(name):
    return lambda L, x: getattr(L, name)(x)


OPS = []
for name, domain in [("erfc", "real"), ("erfinv", "unit"), ("lgamma", "real"),
                     ("digamma", "real"), ("lgamma", "pos"), ("digamma", "pos")]:
    OPS += [Op(f"{name}_{domain}", _fn(name), [((4, 5),), (("t", (3, 4)),)], dtypes=FLOATS,
               domain=domain),
            Op(f"Tensor.{name}_{domain}", lambda L, x, _n=name: getattr(x, _n)(), [((3, 4),)],
               dtypes=["float32", "float64"], domain=domain)]
for name in ("erfc", "erfinv", "lgamma", "digamma"):
    OPS.append(Op(f"{name}_special", _fn(name), [((6, 7),)], dtypes=["float32", "float64"],
                  domain="special", grad=False))
    OPS.append(Op(f"{name}_int", _fn(name), [((3, 4),)], dtypes=["int64"], domain="index",
                  grad=False))
OPS += [
    Op("erfinv_edges", lambda L, x: L.erfinv(x * 0 + L.tensor([-1.0, -0.9999999, 0.0, 1e-9,
                                                             0.99999, 1.0, 1.5])),
       [((7,),)], dtypes=["float64"], grad=False),
    Op("lgamma_poles", lambda L, x: (L.lgamma(x * 0 + L.tensor([0.0, -1.0, -2.0, -2.5, 1e-8,
                                                                 171.5, 1e30])),
                                     L.digamma(x * 0 + L.tensor([0.0, -0.0, -1.0, -2.5, 1e-8,
                                                                  171.5, 1e30]))),
       [((7,),)], dtypes=["float64"], grad=False),
    Op("polygamma1", lambda L, x: L.polygamma(1, x), [((4, 5),)], dtypes=["float32", "float64"],
       domain="pos", tol=10),
    Op("polygamma1_negative", lambda L, x: x.polygamma(1), [((4, 5),)],
       dtypes=["float32", "float64"], domain="real", grad=False, tol=100),
    Op("polygamma0", lambda L, x: L.polygamma(0, x), [((4, 5),)], dtypes=["float32", "float64"],
       domain="pos"),
    # n >= 2: the Hurwitz zeta series (src/kiln/ops/polygamma.cpp); gradients through it.
    *[Op(f"polygamma{n}", (lambda n: lambda L, x: L.polygamma(n, x))(n), [((4, 5),)],
         dtypes=["float32", "float64"], domain="pos", tol=10) for n in (2, 3, 4, 7)],
    Op("polygamma3_real", lambda L, x: (x * 3).polygamma(3), [((4, 5),)],
       dtypes=["float64"], domain="real", grad=False, tol=100),
    Op("polygamma_far", lambda L, x: (L.polygamma(2, x * 0 + L.tensor([1e-3, 0.5, 7.25, 40.0, 1e4, -7.5, -30.25])),
                                       L.polygamma(5, x * 0 + L.tensor([1e-3, 0.5, 7.25, 40.0, 1e4, -7.5, -30.25]))),
       [((7,),)], dtypes=["float64"], grad=False, tol=100),
    Op("polygamma_poles", lambda L, x: L.polygamma(2, x * 0 + L.tensor([0.0, -1.0, -3.0, 1.0])),
       [((4,),)], dtypes=["float64"], grad=False),
]


@pytest.mark.parametrize("op,dtype", oracle.params(OPS))
def test_special_vs_torch(op, dtype):
    oracle.run_op(op, dtype)


def _sp(name, *args):
    return lambda L, x: getattr(L.special, name)(x, *args)


SPECIAL = [Op(f"special.{n}", _sp(n), [((4, 5),)], dtypes=["float32", "float64"], domain=d,
              grad=g, tol=t)
           for n, d, g, t in [("erf", "real", True, 1), ("erfc", "real", True, 1),
                              ("erfcx", "real", True, 10), ("erfinv", "unit", True, 1),
                              ("expit", "real", True, 1), ("logit", "unit", False, 1),
                              ("gammaln", "pos", True, 1), ("digamma", "pos", True, 1),
                              ("psi", "real", True, 1), ("ndtr", "real", True, 1),
                              ("ndtri", "unit", True, 1), ("log_ndtr", "real", True, 10),
                              ("sinc", "real", True, 1), ("entr", "real", True, 1),
                              ("i0", "real", True, 10), ("log1p", "pos", True, 1),
                              ("expm1", "real", True, 1), ("exp2", "real", True, 1)]]
SPECIAL += [
    Op("special.erfcx_wide", lambda L, x: L.special.erfcx(x * 15.0), [((6, 7),)],
       dtypes=["float64"], grad=False, tol=1000),
    Op("special.log_ndtr_wide", lambda L, x: L.special.log_ndtr(x * 12.0), [((6, 7),)],
       dtypes=["float64"], grad=False, tol=1000),
    Op("special.i0_wide", lambda L, x: L.special.i0(x * 40.0), [((6, 7),)],
       dtypes=["float64"], grad=False, tol=10000),
    Op("special.xlog1py", lambda L, x, y: L.special.xlog1py(x, y), [((4, 5), (4, 5))],
       dtypes=["float32", "float64"], domain=("real", "pos")),
    Op("special.multigammaln", lambda L, x: L.special.multigammaln(x + 2.0, 3), [((4, 5),)],
       dtypes=["float32", "float64"], domain="pos"),
    Op("special.polygamma", lambda L, x: L.special.polygamma(1, x), [((4, 5),)],
       dtypes=["float64"], domain="pos", grad=False, tol=10),
    Op("special.softmax", lambda L, x: (L.special.softmax(x, 1), L.special.log_softmax(x, 0),
                                        L.special.logsumexp(x, 1)), [((4, 5),)],
       dtypes=["float32", "float64"], grad_of=lambda r: r[0]),
    Op("special_edges", lambda L, x: (L.special.entr(x * 0 + L.tensor([0.0, -1.0, 2.0])),
                                      L.special.sinc(x * 0 + L.tensor([0.0, 1.0, 0.5]))),
       [((3,),)], dtypes=["float64"], grad=False),
]


@pytest.mark.parametrize("op,dtype", oracle.params(SPECIAL))
def test_special_namespace_vs_torch(op, dtype):
    oracle.run_op(op, dtype)
