"""Pointwise ops: arithmetic, activations, comparisons, where / masked_fill / clamp, casts.
ONNX wants both operands of a binary op in one type, kiln promotes: operands are converted
to the dtype the op computes in (its result's, or for comparisons the promoted one)."""
import math

import kiln

from .dtypes import elem_type, promote
from .registry import translates, unsupported

_UNARY = {
    "neg": "Neg", "relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp",
    "log": "Log", "sqrt": "Sqrt", "abs": "Abs", "erf": "Erf", "floor": "Floor",
    "ceil": "Ceil", "sin": "Sin", "cos": "Cos", "tan": "Tan", "reciprocal": "Reciprocal",
    "sign": "Sign", "sgn": "Sign", "round": "Round",
}
_COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
            "ge": "GreaterOrEqual"}


def _x(b, n):
    """The first input in the result's dtype (the op computes in it)."""
    return b.value_as(n.inputs[0], b.dtype(n.results[0]))


def _c(b, value, n):
    """A scalar constant in the result's dtype."""
    return b.const(value, b.dtype(n.results[0]))


@translates(*_UNARY)
def unary(b, n):
    b.bind(n.results[0], b.add(_UNARY[n.op], [_x(b, n)], [b.result_name(n)]))


@translates("rsqrt")
def rsqrt(b, n):
    b.bind(n.results[0], b.add("Reciprocal", [b.add("Sqrt", [_x(b, n)])], [b.result_name(n)]))


@translates("log1p", "expm1", "log2", "exp2")
def log_exp_variants(b, n):
    x, out = _x(b, n), [b.result_name(n)]
    if n.op == "log1p":
        r = b.add("Log", [b.add("Add", [x, _c(b, 1.0, n)])], out)
    elif n.op == "expm1":
        r = b.add("Sub", [b.add("Exp", [x]), _c(b, 1.0, n)], out)
    elif n.op == "log2":
        r = b.add("Div", [b.add("Log", [x]), _c(b, math.log(2.0), n)], out)
    else:
        r = b.add("Pow", [_c(b, 2.0, n), x], out)
    b.bind(n.results[0], r)


@translates("silu")
def silu(b, n):
    x = _x(b, n)
    b.bind(n.results[0], b.add("Mul", [x, b.add("Sigmoid", [x])], [b.result_name(n)]))


@translates("gelu")
def gelu(b, n):
    """Opset 17 has no Gelu: exact 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    x = _x(b, n)
    if n.attr("approximate") == "tanh":
        cube = b.add("Mul", [b.add("Mul", [x, x]), x])
        inner = b.add("Add", [x, b.add("Mul", [cube, _c(b, 0.044715, n)])])
        t = b.add("Tanh", [b.add("Mul", [inner, _c(b, math.sqrt(2.0 / math.pi), n)])])
    else:
        t = b.add("Erf", [b.add("Div", [x, _c(b, math.sqrt(2.0), n)])])
    half_x = b.add("Mul", [x, _c(b, 0.5, n)])
    r = b.add("Mul", [half_x, b.add("Add", [t, _c(b, 1.0, n)])], [b.result_name(n)])
    b.bind(n.results[0], r)


@translates("leaky_relu")
def leaky_relu(b, n):
    r = b.add("LeakyRelu", [_x(b, n)], [b.result_name(n)], alpha=float(n.attr("negative_slope")))
    b.bind(n.results[0], r)


@translates("softplus")
def softplus(b, n):
    """softplus(beta x) / beta; kiln's linear region past `threshold` differs from it by less
    than float32's resolution (log1p(exp(-20)) ~ 2e-9), so it is not spelled out."""
    beta = float(n.attr("beta"))
    x = _x(b, n)
    if beta == 1.0:
        r = b.add("Softplus", [x], [b.result_name(n)])
    else:
        sp = b.add("Softplus", [b.add("Mul", [x, _c(b, beta, n)])])
        r = b.add("Div", [sp, _c(b, beta, n)], [b.result_name(n)])
    b.bind(n.results[0], r)


def _binary_inputs(b, n, dtype=None):
    dtype = dtype or b.dtype(n.results[0])
    return [b.value_as(v, dtype) for v in n.inputs[:2]]


def _scaled(b, n, name, scale):
    """`name` * scale (the alpha of add / sub), skipped when scale is 1."""
    if scale == 1:
        return name
    return b.add("Mul", [name, _c(b, scale, n)])


@translates("add", "sub")
def add_sub(b, n):
    x, y = _binary_inputs(b, n)
    y = _scaled(b, n, y, n.attr("alpha"))
    b.bind(n.results[0], b.add("Add" if n.op == "add" else "Sub", [x, y], [b.result_name(n)]))


@translates("mul", "maximum", "minimum")
def mul_max_min(b, n):
    op = {"mul": "Mul", "maximum": "Max", "minimum": "Min"}[n.op]
    b.bind(n.results[0], b.add(op, _binary_inputs(b, n), [b.result_name(n)]))


@translates("div")
def div(b, n):
    mode = n.attr("rounding_mode") or None
    dtype = b.dtype(n.results[0])
    x, y = _binary_inputs(b, n)
    if mode is None or (mode == "trunc" and not dtype.is_floating_point):
        r = b.add("Div", [x, y], [b.result_name(n)])  # integer Div truncates
    elif mode == "floor" and dtype.is_floating_point:
        r = b.add("Floor", [b.add("Div", [x, y])], [b.result_name(n)])
    else:
        raise unsupported(n, f"with rounding_mode={mode!r} on {dtype}")
    b.bind(n.results[0], r)


@translates("pow")
def pow_(b, n):
    b.bind(n.results[0], b.add("Pow", _binary_inputs(b, n), [b.result_name(n)]))


@translates("fmod", "remainder")
def fmod_remainder(b, n):
    dtype = b.dtype(n.results[0])
    x, y = _binary_inputs(b, n)
    if n.op == "fmod":
        r = b.add("Mod", [x, y], [b.result_name(n)], fmod=1)
    elif not dtype.is_floating_point:
        r = b.add("Mod", [x, y], [b.result_name(n)])  # integer Mod takes the divisor's sign
    else:  # x - floor(x / y) * y: ONNX's float Mod only truncates
        q = b.add("Floor", [b.add("Div", [x, y])])
        r = b.add("Sub", [x, b.add("Mul", [q, y])], [b.result_name(n)])
    b.bind(n.results[0], r)


@translates(*_COMPARE, "ne")
def compare(b, n):
    dtype = promote(b.dtype(n.inputs[0]), b.dtype(n.inputs[1]))
    x, y = _binary_inputs(b, n, dtype)
    if n.op == "ne":
        r = b.add("Not", [b.add("Equal", [x, y])], [b.result_name(n)])
    else:
        r = b.add(_COMPARE[n.op], [x, y], [b.result_name(n)])
    b.bind(n.results[0], r)


@translates("logical_and", "logical_or", "logical_xor")
def logical(b, n):
    op = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}[n.op]
    x, y = _binary_inputs(b, n, kiln.bool)
    b.bind(n.results[0], b.add(op, [x, y], [b.result_name(n)]))


@translates("bitwise_and", "bitwise_or", "bitwise_xor")
def bitwise(b, n):
    """On bool tensors (masks combined with & | ^); the integer forms need opset 18."""
    if b.dtype(n.results[0]) != kiln.bool:
        raise unsupported(n, "on integers (ONNX's BitwiseAnd/Or/Xor need opset 18)")
    op = {"bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor"}[n.op]
    x, y = _binary_inputs(b, n, kiln.bool)
    b.bind(n.results[0], b.add(op, [x, y], [b.result_name(n)]))


@translates("logical_not")
def logical_not(b, n):
    b.bind(n.results[0], b.add("Not", [b.value_as(n.inputs[0], kiln.bool)], [b.result_name(n)]))


@translates("isnan", "isinf")
def isnan_isinf(b, n):
    op = "IsNaN" if n.op == "isnan" else "IsInf"
    b.bind(n.results[0], b.add(op, [b.name(n.inputs[0])], [b.result_name(n)]))


@translates("where")
def where(b, n):
    dtype = b.dtype(n.results[0])
    cond = b.value_as(n.inputs[0], kiln.bool)
    x, y = (b.value_as(v, dtype) for v in n.inputs[1:3])
    b.bind(n.results[0], b.add("Where", [cond, x, y], [b.result_name(n)]))


@translates("masked_fill")
def masked_fill(b, n):
    mask = b.value_as(n.inputs[1], kiln.bool)
    r = b.add("Where", [mask, _c(b, n.attr("value"), n), _x(b, n)], [b.result_name(n)])
    b.bind(n.results[0], r)


@translates("clamp")
def clamp(b, n):
    lo, hi = n.attr("min"), n.attr("max")
    inputs = [_x(b, n), "" if lo is None else _c(b, lo, n)]
    if hi is not None:
        inputs.append(_c(b, hi, n))
    b.bind(n.results[0], b.add("Clip", inputs, [b.result_name(n)]))


@translates("addcmul", "addcdiv")
def addcmul_addcdiv(b, n):
    dtype = b.dtype(n.results[0])
    s, t1, t2 = (b.value_as(v, dtype) for v in n.inputs[:3])
    prod = b.add("Mul" if n.op == "addcmul" else "Div", [t1, t2])
    prod = _scaled(b, n, prod, n.attr("value"))
    b.bind(n.results[0], b.add("Add", [s, prod], [b.result_name(n)]))


@translates("_to_copy")
def to_copy(b, n):
    """A dtype conversion (or a copy, which ONNX values need not make)."""
    dtype = b.dtype(n.results[0])
    src = n.inputs[0]
    if b.dtype(src) == dtype:
        r = b.add("Identity", [b.name(src)], [b.result_name(n)])
    else:
        r = b.add("Cast", [b.name(src)], [b.result_name(n)],
                  to=elem_type(dtype))
    b.bind(n.results[0], r)


@translates("dropout")
def dropout(b, n):
    """Exported for inference, as torch.onnx.export's TrainingMode.EVAL: dropout is the
    identity."""
    b.bind(n.results[0], b.add("Identity", [b.name(n.inputs[0])], [b.result_name(n)]))
