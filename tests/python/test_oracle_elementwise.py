"""Elementwise ops against PyTorch: unary, binary (functions, methods and operators, with
broadcasting, scalars, non-contiguous, 0-d and empty inputs), ternary; every dtype."""
import pytest

from oracle import ALL, FLOATS, INTS, NUMERIC, Op, nnf, params, run_op

UNARY_SHAPES = [((),), ((0,),), ((7,),), ((3, 4),), (("t", (3, 4)),), (("s", (2, 3, 4)),)]
BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)), ((2, 3, 4), (4,)),
                 ((0, 3), (1, 3)), (("t", (3, 4)), ("s", (3, 4))), ((2, 3), ()),
                 ((4,), "scalar")]
REFLECTED_SHAPES = [("scalar", (3, 4)), ("scalar", ("t", (2, 3))), ("scalar", ())]
TERNARY_SHAPES = [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (4,)), ((), (2, 3), ()),
                  (("t", (3, 4)), (3, 4), ("s", (3, 4))), ((0, 2), (1, 2), (2,))]


def unary(name, fn=None, domain="real", dtypes=ALL, grad=True, **kw):
    fn = fn or (lambda L, x, _n=name: getattr(L, _n)(x))
    return Op(name, fn, UNARY_SHAPES, dtypes=list(dtypes), domain=domain, grad=grad, **kw)


UNARY = [
    unary("abs"), unary("neg", dtypes=NUMERIC), unary("exp"), unary("exp2"),
    unary("log", domain="pos"), unary("log2", domain="pos"), unary("log1p", domain="pos"),
    unary("expm1"), unary("sqrt", domain="pos"), unary("rsqrt", domain="pos"),
    unary("sin"), unary("cos"), unary("tan", domain="unit"), unary("tanh"), unary("sigmoid"),
    unary("relu", dtypes=NUMERIC), unary("erf"), unary("floor"), unary("ceil"),
    unary("round"), unary("trunc"), unary("sign"), unary("reciprocal", domain="nonzero"),
    unary("logical_not"), unary("isnan", domain="special"), unary("isinf", domain="special"),
    unary("isfinite", domain="special"),
    unary("nan_to_num", domain="special", dtypes=FLOATS),
    unary("silu", lambda L, x: nnf(L).silu(x), dtypes=FLOATS),
    unary("gelu", lambda L, x: nnf(L).gelu(x), dtypes=FLOATS),
    unary("gelu_tanh", lambda L, x: nnf(L).gelu(x, approximate="tanh"), dtypes=FLOATS),
    unary("softplus", lambda L, x: nnf(L).softplus(x, beta=2, threshold=3), dtypes=FLOATS),
    unary("clamp", lambda L, x: L.clamp(x, min=-1, max=2)),
    unary("clamp_min", lambda L, x: L.clamp(x, min=-1)),
    unary("clamp_max", lambda L, x: x.clamp(max=0.5)),
    unary("Tensor.exp", lambda L, x: x.exp()),
    unary("Tensor.abs_", lambda L, x: x.clone().abs_(), dtypes=NUMERIC),
    unary("Tensor.sqrt_", lambda L, x: x.clone().sqrt_(), domain="pos", dtypes=FLOATS),
    unary("operator-", lambda L, x: -x), unary("operator~", lambda L, x: ~x, grad=False),
    unary("abs()", lambda L, x: abs(x)),
    unary("bitwise_not", lambda L, x: L.bitwise_not(x), grad=False),
]


def binary(name, fn=None, domain="real", dtypes=ALL, shapes=BINARY_SHAPES, **kw):
    fn = fn or (lambda L, a, b, _n=name: getattr(L, _n)(a, b))
    return Op(name, fn, shapes, dtypes=list(dtypes), domain=domain, **kw)


DIV_DOMAIN = ("real", "nonzero")
BINARY = [
    binary("add"), binary("sub", dtypes=NUMERIC), binary("mul"), binary("div", domain=DIV_DOMAIN),
    binary("add_alpha", lambda L, a, b: L.add(a, b, alpha=2)),
    binary("sub_alpha", lambda L, a, b: L.sub(a, b, alpha=3), dtypes=NUMERIC),
    binary("div_floor", lambda L, a, b: L.div(a, b, rounding_mode="floor"), domain=DIV_DOMAIN,
           dtypes=NUMERIC),
    binary("div_trunc", lambda L, a, b: L.div(a, b, rounding_mode="trunc"), domain=DIV_DOMAIN,
           dtypes=NUMERIC),
    binary("floor_divide", domain=DIV_DOMAIN, dtypes=NUMERIC),
    binary("remainder", domain=DIV_DOMAIN, dtypes=NUMERIC),
    binary("fmod", domain=DIV_DOMAIN, dtypes=NUMERIC),
    binary("pow", domain=("pos", "exponent"), dtypes=NUMERIC),
    binary("maximum"), binary("minimum"), binary("atan2"),
    binary("eq"), binary("ne"), binary("lt"), binary("le"), binary("gt"), binary("ge"),
    binary("logical_and"), binary("logical_or"), binary("logical_xor"),
    binary("bitwise_and", dtypes=INTS + ["bool"]), binary("bitwise_or", dtypes=INTS + ["bool"]),
    binary("bitwise_xor", dtypes=INTS + ["bool"]),
    binary("Tensor.mul", lambda L, a, b: a.mul(b)),
    binary("Tensor.add_", lambda L, a, b: a.clone().add_(b), shapes=[((3, 4), (3, 4)),
           ((3, 4), (4,)), ((2, 3), ()), ((4,), "scalar")]),
    binary("Tensor.mul_", lambda L, a, b: a.clone().mul_(b), shapes=[((3, 4), (1, 4)),
           ((4,), "scalar")]),
    binary("operator+", lambda L, a, b: a + b), binary("operator-", lambda L, a, b: a - b,
                                                       dtypes=NUMERIC),
    binary("operator*", lambda L, a, b: a * b),
    binary("operator/", lambda L, a, b: a / b, domain=DIV_DOMAIN),
    binary("operator//", lambda L, a, b: a // b, domain=DIV_DOMAIN, dtypes=NUMERIC),
    binary("operator%", lambda L, a, b: a % b, domain=DIV_DOMAIN, dtypes=NUMERIC),
    binary("operator**", lambda L, a, b: a ** b, domain=("pos", "exponent"), dtypes=NUMERIC),
    binary("operator==", lambda L, a, b: a == b), binary("operator<", lambda L, a, b: a < b),
    binary("operator>=", lambda L, a, b: a >= b), binary("operator!=", lambda L, a, b: a != b),
    binary("operator&", lambda L, a, b: a & b, dtypes=INTS + ["bool"]),
    binary("operator|", lambda L, a, b: a | b, dtypes=INTS + ["bool"]),
    binary("operator^", lambda L, a, b: a ^ b, dtypes=INTS + ["bool"]),
    binary("operator+=", lambda L, a, b: _iop(a, b, "__iadd__"),
           shapes=[((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), "scalar")]),
    binary("operator*=", lambda L, a, b: _iop(a, b, "__imul__"),
           shapes=[((3, 4), (3, 1)), ((4,), "scalar")]),
    binary("operator/=", lambda L, a, b: _iop(a, b, "__itruediv__"), domain=DIV_DOMAIN,
           dtypes=FLOATS, shapes=[((3, 4), (3, 4)), ((4,), "scalar")]),
    binary("radd", lambda L, a, b: a + b, shapes=REFLECTED_SHAPES),
    binary("rsub", lambda L, a, b: a - b, shapes=REFLECTED_SHAPES, dtypes=NUMERIC),
    binary("rmul", lambda L, a, b: a * b, shapes=REFLECTED_SHAPES),
    binary("rtruediv", lambda L, a, b: a / b, shapes=REFLECTED_SHAPES, domain=DIV_DOMAIN),
    binary("rfloordiv", lambda L, a, b: a // b, shapes=REFLECTED_SHAPES, domain=DIV_DOMAIN,
           dtypes=NUMERIC),
    binary("rmod", lambda L, a, b: a % b, shapes=REFLECTED_SHAPES, domain=DIV_DOMAIN,
           dtypes=NUMERIC),
    binary("rpow", lambda L, a, b: a ** b, shapes=REFLECTED_SHAPES, domain=("pos", "exponent"),
           dtypes=FLOATS),
    binary("rand", lambda L, a, b: a & b, shapes=REFLECTED_SHAPES, dtypes=INTS + ["bool"]),
]


def _iop(a, b, name):
    a = a.clone()
    return getattr(a, name)(b)


def ternary(name, fn, domain="real", dtypes=FLOATS, shapes=TERNARY_SHAPES, **kw):
    return Op(name, fn, shapes, dtypes=list(dtypes), domain=domain, **kw)


TERNARY = [
    ternary("where", lambda L, c, a, b: L.where(c > 0, a, b), dtypes=ALL),
    ternary("where_scalar", lambda L, c, a, b: L.where(c > 0, a, 2.5),
            shapes=[((3, 4), (3, 4), ()), ((2, 1), (3,), ())]),
    ternary("lerp", lambda L, a, b, w: L.lerp(a, b, w)),
    ternary("lerp_scalar", lambda L, a, b, w: L.lerp(a, b, 0.3)),
    ternary("addcmul", lambda L, a, b, c: L.addcmul(a, b, c, value=0.5), dtypes=NUMERIC),
    ternary("addcdiv", lambda L, a, b, c: L.addcdiv(a, b, c, value=2),
            domain=("real", "real", "nonzero")),
    ternary("clamp_tensor", lambda L, x, lo, hi: L.clamp(x, min=lo, max=lo + hi.abs()),
            dtypes=NUMERIC),
]


@pytest.mark.parametrize("op,dtype", params(UNARY))
def test_unary(op, dtype):
    run_op(op, dtype)


@pytest.mark.parametrize("op,dtype", params(BINARY))
def test_binary(op, dtype):
    run_op(op, dtype)


@pytest.mark.parametrize("op,dtype", params(TERNARY))
def test_ternary(op, dtype):
    run_op(op, dtype)


@pytest.mark.parametrize("op,dtype", params(UNARY[:12] + BINARY[:6] + TERNARY[:2],
                                            dtypes_filter=("float32", "int64", "bool")))
def test_on_testing_device(op, dtype):
    """The same ops on kiln's asynchronous 'testing' device, against torch on the CPU."""
    run_op(op, dtype, device="testing:0")
