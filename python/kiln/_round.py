"""round(input, decimals=d) as torch 2.13 computes it: round-half-to-even of input * 10^d,
divided by 10^d (for d < 0: of input / 10^-d, times 10^-d), in float32 for float16 / bfloat16
/ float32 inputs and float64 for float64, with 10^|d| computed in double and rounded to that
type (inf when it overflows, so huge |d| give nan, as in torch). Each step is one rounded
IEEE operation, so the results match torch's bit for bit. decimals=0 stays kiln's C++ op."""
import math as _math
import operator as _operator

import numpy as _np

from . import _C

_round0 = _C.round
_round0_ = _C.Tensor.round_


def _power_of_ten(d, dtype):
    try:
        p = _math.pow(10.0, d)
    except OverflowError:
        p = _math.inf
    if dtype == _C.float64:
        return p
    with _np.errstate(over="ignore"):
        return float(_np.float32(p))  # torch's float opmath: 10^d rounded to float32


def round(input, *, decimals=0):
    """Rounds to `decimals` decimal places (negative: to tens, hundreds, ...), halves to
    even; as torch.round."""
    decimals = _operator.index(decimals)
    if decimals == 0:
        return _round0(input)
    if not input.is_floating_point():
        raise NotImplementedError(f"round(decimals={decimals}) is not implemented for "
                                  f"{input.dtype}, as in torch (floating-point inputs only)")
    compute = _C.float64 if input.dtype == _C.float64 else _C.float32
    x = input if input.dtype == compute else input.to(compute)
    p = _power_of_ten(abs(decimals), compute)
    r = _round0(x * p) / p if decimals > 0 else _round0(x / p) * p
    return r if r.dtype == input.dtype else r.to(input.dtype)


def _round_(self, *, decimals=0):
    if _operator.index(decimals) == 0:
        return _round0_(self)
    return self.copy_(round(self, decimals=decimals))


def install(namespace, tensor_cls):
    from . import special
    namespace["round"] = round
    special.round = round  # torch.special.round takes decimals= too
    tensor_cls.round = round
    tensor_cls.round_ = _round_
