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
       domain="pos", grad=False, tol=10),
    Op("polygamma1_negative", lambda L, x: x.polygamma(1), [((4, 5),)],
       dtypes=["float32", "float64"], domain="real", grad=False, tol=100),
    Op("polygamma0", lambda L, x: L.polygamma(0, x), [((4, 5),)], dtypes=["float32", "float64"],
       domain="pos"),
]


@pytest.mark.parametrize("op,dtype", oracle.params(OPS))
def test_special_vs_torch(op, dtype):
    oracle.run_op(op, dtype)
