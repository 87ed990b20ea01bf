"""Bit shifts of integer tensors composed of kiln's ops (decision 0080): a shift by k is a
product with (or floor division by) 2^k taken from a table per dtype, so that it wraps as the
machine shift does; shifts by a negative amount or by the width or more give 0 (left) or the
sign fill (right), as torch."""
from . import _C
from ._composite_more import export, write_back, METHODS

_BITS = {"uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _operands(name, input, other):
    a = input if isinstance(input, _C.Tensor) else None
    b = other if isinstance(other, _C.Tensor) else None
    if a is None and b is None:
        raise TypeError(f"{name}: expected a tensor operand")
    # a Python number operand becomes a 0-d tensor on the tensor operand's device
    a = a if a is not None else _C.full((), input, dtype=b.dtype, device=b.device)
    b = b if b is not None else _C.full((), other, dtype=a.dtype, device=a.device)
    dtype = _C.promote_types(a.dtype, b.dtype)
    word = str(dtype).split(".")[-1]
    if word not in _BITS:
        raise NotImplementedError(f'"{name}_cpu" not implemented for '
                                  f"'{word.capitalize()}'")
    return a.to(dtype), b.to(_C.int64), dtype, _BITS[word]


def _wrapped(value, bits, signed):
    value %= 2 ** bits
    return value - 2 ** bits if signed and value >= 2 ** (bits - 1) else value


@export()
def bitwise_left_shift(input, other):
    a, shift, dtype, bits = _operands("lshift", input, other)
    signed = dtype != _C.uint8
    powers = _C.tensor([_wrapped(1 << k, bits, signed) for k in range(bits)], dtype=_C.int64,
                        device=a.device)
    valid = (shift >= 0) & (shift < bits)
    factor = powers[shift.clamp(0, bits - 1)].to(dtype)
    return _C.where(valid, a * factor, _C.zeros_like(a * factor))


@export()
def bitwise_right_shift(input, other):
    a, shift, dtype, bits = _operands("rshift", input, other)
    wide = a.to(_C.int64)
    powers = _C.tensor([1 << k for k in range(63)], dtype=_C.int64, device=a.device)
    valid = (shift >= 0) & (shift < min(bits, 63))
    quotient = _C.floor_divide(wide, powers[shift.clamp(0, 62)])
    sign_fill = -(wide < 0).to(_C.int64)
    return _C.where(valid, quotient, sign_fill).to(dtype)


def bitwise_left_shift_(self, other):
    return write_back(self, bitwise_left_shift(self, other), "bitwise_left_shift_")


def bitwise_right_shift_(self, other):
    return write_back(self, bitwise_right_shift(self, other), "bitwise_right_shift_")


METHODS.update({
    "bitwise_left_shift_": bitwise_left_shift_, "bitwise_right_shift_": bitwise_right_shift_,
    "__lshift__": bitwise_left_shift, "__rshift__": bitwise_right_shift,
    "__rlshift__": lambda self, other: bitwise_left_shift(other, self),
    "__rrshift__": lambda self, other: bitwise_right_shift(other, self),
    "__ilshift__": bitwise_left_shift_, "__irshift__": bitwise_right_shift_})
