"""pointwise_program: kiln's fused float32 elementwise chain (include/kiln/ops/pointwise_program.h;
nn.Hardswish / nn.Hardsigmoid record it, and so would graph fusion). Its one int[] attribute
is the program encoded by encode_pointwise_program; it is decoded here and each step becomes
the ONNX node it stands for, over named registers."""
import struct

import kiln

from .registry import translates, unsupported

# PointwiseOp, in its C++ order
_BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min"]
_UNARY = {6: "Relu", 7: "Neg", 8: "Abs", 10: "Erf", 11: "Sqrt"}
_CLAMP = 9
_REGISTER, _SCALAR, _CHANNEL = range(3)  # PointwiseOperand


def _float(bits):
    """A float32 constant stored by its bits (an int64 holding the uint32)."""
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def decode(code):
    """The program as (registers, steps, scalars, channels, last_dim); a step is the tuple
    (op, dst, a, kind, b, reversed). Mirrors decode_pointwise_program."""
    it = iter(code)
    registers = next(it)
    steps = [tuple(next(it) for _ in range(6)) for _ in range(next(it))]
    scalars = [_float(next(it)) for _ in range(next(it))]
    last_dim = bool(next(it))
    count, length = next(it), next(it)
    channels = [[_float(next(it)) for _ in range(length)] for _ in range(count)]
    return registers, steps, scalars, channels, last_dim


@translates("pointwise_program")
def pointwise_program(b, n):
    _, steps, scalars, channels, last_dim = decode(list(n.attr("program")))
    rank = len(b.shape(n.inputs[0]))
    f32 = kiln.float32

    def channel(k):
        # a channel vector broadcasts along dim 1 ([C, 1, ...] against the trailing dims), or
        # along the last dim when the program's vectors run there
        shape = [len(channels[k])] + ([] if last_dim else [1] * (rank - 2))
        return b.initializer(kiln.tensor(channels[k], dtype=f32).reshape(shape), "channel")

    regs = {0: b.name(n.inputs[0])}
    for i, (op, dst, a, kind, operand, reversed_) in enumerate(steps):
        if op < len(_BINARY):
            if kind == _REGISTER:
                other = regs[operand]
            elif kind == _SCALAR:
                other = b.const(scalars[operand], f32)
            elif kind == _CHANNEL:
                other = channel(operand)
            else:
                raise unsupported(n, f"(step {i} has an unknown operand kind {kind})")
            lhs, rhs = (other, regs[a]) if reversed_ else (regs[a], other)
            regs[dst] = b.add(_BINARY[op], [lhs, rhs])
        elif op == _CLAMP:
            lo, hi = b.const(scalars[operand], f32), b.const(scalars[operand + 1], f32)
            regs[dst] = b.add("Clip", [regs[a], lo, hi])
        elif op in _UNARY:
            regs[dst] = b.add(_UNARY[op], [regs[a]])
        else:
            raise unsupported(n, f"(step {i} has an unknown operation {op})")
    result = regs[steps[-1][1]]
    b.bind(n.results[0], b.add("Identity", [result], [b.result_name(n)]))
