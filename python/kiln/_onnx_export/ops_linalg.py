"""Matrix products: mm / matmul / bmm / dot as MatMul, addmm as Gemm, baddbmm, and
fused_linear (kiln's Linear with its activation and residual fused) spelled out."""
from .registry import translates

import math


def _operands(b, n, count):
    dtype = b.dtype(n.results[0])
    return [b.value_as(v, dtype) for v in n.inputs[:count]]


def _scale(b, n, name, factor):
    if factor == 1:
        return name
    return b.add("Mul", [name, b.const(factor, b.dtype(n.results[0]))])


@translates("mm", "matmul", "bmm", "dot")
def matmul(b, n):
    b.bind(n.results[0], b.add("MatMul", _operands(b, n, 2), [b.result_name(n)]))


@translates("addmm")
def addmm(b, n):
    """beta * self + alpha * (mat1 @ mat2): Gemm's exact form (its C broadcasts)."""
    c, a, m = _operands(b, n, 3)
    r = b.add("Gemm", [a, m, c], [b.result_name(n)], alpha=float(n.attr("alpha")),
              beta=float(n.attr("beta")))
    b.bind(n.results[0], r)


@translates("baddbmm")
def baddbmm(b, n):
    c, x, y = _operands(b, n, 3)
    prod = _scale(b, n, b.add("MatMul", [x, y]), n.attr("alpha"))
    r = b.add("Add", [_scale(b, n, c, n.attr("beta")), prod], [b.result_name(n)])
    b.bind(n.results[0], r)


# fused_linear's activation codes (kiln::LinearActivation)
_NONE, _RELU, _GELU, _GELU_TANH, _SILU = range(5)


def _activation(b, n, y, code, dtype):
    if code == _NONE:
        return y
    if code == _RELU:
        return b.add("Relu", [y])
    if code == _SILU:
        return b.add("Mul", [y, b.add("Sigmoid", [y])])
    c = lambda v: b.const(v, dtype)  # noqa: E731
    if code == _GELU:
        t = b.add("Erf", [b.add("Div", [y, c(math.sqrt(2.0))])])
    else:
        cube = b.add("Mul", [b.add("Mul", [y, y]), y])
        inner = b.add("Add", [y, b.add("Mul", [cube, c(0.044715)])])
        t = b.add("Tanh", [b.add("Mul", [inner, c(math.sqrt(2.0 / math.pi))])])
    return b.add("Mul", [b.add("Mul", [y, c(0.5)]), b.add("Add", [t, c(1.0)])])


@translates("fused_linear")
def fused_linear(b, n):
    """act(x @ weight.T + bias) + residual, then converted to out_dtype."""
    x_id, w_id, bias_id, res_id = n.inputs[:4]
    dtype = b.dtype(x_id)
    x, w = b.name(x_id), b.name(w_id)
    if len(b.shape(x_id)) == 2:
        inputs = [x, w] + ([b.name(bias_id)] if bias_id >= 0 else [])
        y = b.add("Gemm", inputs, transB=1)
    else:
        y = b.add("MatMul", [x, b.add("Transpose", [w], perm=[1, 0])])
        if bias_id >= 0:
            y = b.add("Add", [y, b.name(bias_id)])
    y = _activation(b, n, y, n.attr("activation"), dtype)
    if res_id >= 0:
        y = b.add("Add", [y, b.value_as(res_id, dtype)])
    out_dtype = b.dtype(n.results[0])
    if out_dtype != dtype:
        y = b.cast(y, dtype, out_dtype)
    b.bind(n.results[0], b.add("Identity", [y], [b.result_name(n)]))
