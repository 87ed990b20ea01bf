"""FLOP counts of kiln ops from their tensors' shapes, counted as torch.utils.flop_counter
counts them: a multiply-add is 2 FLOPs, and only matrix products and convolutions count
(bias adds, activations, reductions and other elementwise ops are 0). Used by
kiln.profiler.profile(with_flops=True) and kiln.utils.flop_counter.FlopCounterMode.

Each formula takes the op's input shapes and output shapes as the profiler records them
(tensor inputs only, in the op's schema order; an undefined optional input is ()). kiln's
scaled_dot_product_attention is not one op: it runs as matmuls (counted here) around a
softmax, so attention is counted through its products."""
from math import prod


def _mm(a, b):
    m, k = a
    return 2 * m * b[1] * k


def _bmm(a, b):
    batch, m, k = a
    return 2 * batch * m * b[2] * k


def _matmul(a, b, out):
    # torch runs a product by a vector as mv / dot, which its counter does not count; every
    # other matmul runs as one mm or bmm over the broadcast batch: 2 * (output elements) * K.
    if len(b) == 1:
        return 0
    return 2 * prod(out) * a[-1]


def _linear(x, out):
    # x [..., K] times a [N, K] weight: 2 * (output elements) * K, as addmm.
    return 2 * prod(out) * x[-1]


def conv_is_transposed(x, w, out):
    """Whether convolution(x, w) -> out was a transposed convolution. kiln's op takes
    `transposed` as an attribute, which the profiler does not record, so the shapes decide:
    a convolution's weight is [C_out, C_in / groups, *k], a transposed one's
    [C_in, C_out / groups, *k]. When both fit (C_in == C_out) a transposed convolution is
    the one that makes the image larger (equal sizes count the same either way)."""
    cin, cout = x[1], out[1]
    regular = (cout == w[0] and w[1] > 0 and cin % w[1] == 0
               and w[0] % max(cin // w[1], 1) == 0)
    transposed = cin == w[0] and w[1] > 0 and cout % w[1] == 0
    if regular != transposed:
        return transposed
    return prod(out[2:]) > prod(x[2:])


def _batched(x, w):
    # an unbatched input ([C, *spatial]) counts as a batch of one
    return x if len(x) == len(w) else (1, *x)


def _convolution(x, w, out):
    x, out = _batched(x, w), _batched(out, w)
    per_position = w[1] * prod(w[2:])  # multiply-adds per output (input, if transposed) value
    if conv_is_transposed(x, w, out):
        # each input value is spread over the kernel into C_out / groups channels
        return 2 * prod(x) * per_position
    return 2 * prod(out) * per_position


def _convolution_weight_grad(x, grad_out, w):
    x, grad_out = _batched(x, w), _batched(grad_out, w)
    # torch counts the weight gradient as conv(input^T, grad_output^T) without the groups:
    # 2 * N * C_in * C_out * kernel * positions (C_in * C_out / groups multiply-adds really
    # happen); kiln counts the same so that totals match torch's.
    positions = prod(x[2:]) if conv_is_transposed(x, w, grad_out) else prod(grad_out[2:])
    return 2 * x[0] * x[1] * grad_out[1] * prod(w[2:]) * positions


# op name -> formula(input_shapes, output_shapes) -> int
FORMULAS = {
    "mm": lambda i, o: _mm(i[0], i[1]),
    "int_mm": lambda i, o: _mm(i[0], i[1]),
    "addmm": lambda i, o: _mm(i[1], i[2]),
    "bmm": lambda i, o: _bmm(i[0], i[1]),
    "baddbmm": lambda i, o: _bmm(i[1], i[2]),
    "matmul": lambda i, o: _matmul(i[0], i[1], o[0]),
    "fused_linear": lambda i, o: _linear(i[0], o[0]),
    "ggml_linear": lambda i, o: _linear(i[0], o[0]),
    "convolution": lambda i, o: _convolution(i[0], i[1], o[0]),
    "convolution_activation": lambda i, o: _convolution(i[0], i[1], o[0]),
    "convolution_weight_grad": lambda i, o: _convolution_weight_grad(i[0], i[1], o[0]),
}


def has_formula(name):
    return name in FORMULAS


def flops_of(name, input_shapes, output_shapes):
    """The FLOPs of one call of op `name` (0 for ops without a formula, or when the shapes
    were not recorded)."""
    formula = FORMULAS.get(name)
    if formula is None or not input_shapes or not output_shapes:
        return 0
    return int(formula([tuple(s) for s in input_shapes], [tuple(s) for s in output_shapes]))
