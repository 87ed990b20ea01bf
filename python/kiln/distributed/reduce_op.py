"""ReduceOp (torch.distributed.ReduceOp) and the numpy function that applies each one.

torch's ReduceOp.SUM is a member of the nested enum ReduceOp.RedOpType; kiln keeps that
shape so `dist.ReduceOp.SUM`, `dist.ReduceOp.RedOpType.SUM` and comparisons between them all
work."""
import enum

import numpy as np

__all__ = ["ReduceOp", "reduce_op"]


class _RedOpType(enum.Enum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8
    UNUSED = 9

    def __repr__(self):
        return f"<RedOpType.{self.name}: {self.value}>"

    def __str__(self):
        return f"RedOpType.{self.name}"


_RedOpType.__name__ = _RedOpType.__qualname__ = "RedOpType"


class ReduceOp:
    """The reduction applied by all_reduce / reduce / reduce_scatter."""
    RedOpType = _RedOpType
    SUM = _RedOpType.SUM
    AVG = _RedOpType.AVG
    PRODUCT = _RedOpType.PRODUCT
    MIN = _RedOpType.MIN
    MAX = _RedOpType.MAX
    BAND = _RedOpType.BAND
    BOR = _RedOpType.BOR
    BXOR = _RedOpType.BXOR
    PREMUL_SUM = _RedOpType.PREMUL_SUM
    UNUSED = _RedOpType.UNUSED


class reduce_op:  # noqa: N801  (torch's deprecated lower-case alias)
    SUM = ReduceOp.SUM
    PRODUCT = ReduceOp.PRODUCT
    MIN = ReduceOp.MIN
    MAX = ReduceOp.MAX


# AVG is reduced as a SUM and divided once at the end (dividing every partial sum would
# round differently on every rank).
_UFUNCS = {
    _RedOpType.SUM: np.add,
    _RedOpType.AVG: np.add,
    _RedOpType.PRODUCT: np.multiply,
    _RedOpType.MIN: np.minimum,
    _RedOpType.MAX: np.maximum,
    _RedOpType.BAND: np.bitwise_and,
    _RedOpType.BOR: np.bitwise_or,
    _RedOpType.BXOR: np.bitwise_xor,
}

_BITWISE = (_RedOpType.BAND, _RedOpType.BOR, _RedOpType.BXOR)


def resolve(op, dtype_is_integral, dtype_is_complex=False):
    """The RedOpType for `op`, checked against the tensor's dtype with torch's messages."""
    if not isinstance(op, _RedOpType):
        raise TypeError(f"op should be a torch.distributed.ReduceOp, got {op!r}")
    if op not in _UFUNCS:
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with Gloo")
    if op in _BITWISE and not dtype_is_integral:
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
    if op in (_RedOpType.MIN, _RedOpType.MAX) and dtype_is_complex:
        raise RuntimeError(f"all_reduce does not support {op.name} on complex tensors")
    return op


def ufunc(op):
    """The in-place-capable numpy function that combines two partial results."""
    return _UFUNCS[op]
