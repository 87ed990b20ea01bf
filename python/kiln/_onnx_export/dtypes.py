"""kiln dtypes as ONNX element types, and tensors as TensorProto raw bytes."""
import kiln

from . import messages as M

_ELEM = {
    kiln.float32: M.FLOAT, kiln.float64: M.DOUBLE, kiln.float16: M.FLOAT16,
    kiln.bfloat16: M.BFLOAT16, kiln.int64: M.INT64, kiln.int32: M.INT32, kiln.int16: M.INT16,
    kiln.int8: M.INT8, kiln.uint8: M.UINT8, kiln.bool: M.BOOL,
}


def elem_type(dtype):
    try:
        return _ELEM[dtype]
    except KeyError:
        raise NotImplementedError(f"kiln.onnx.export: dtype {dtype} has no ONNX element type "
                                  f"here (supported: {', '.join(str(d) for d in _ELEM)})")


def raw_bytes(t):
    """The contents of a kiln tensor in row-major, little-endian order (TensorProto.raw_data).
    numpy has no bfloat16: its bits travel as int16, which is the same bytes."""
    t = t.detach().cpu().contiguous()
    if t.dtype == kiln.bfloat16:
        t = t.view(kiln.int16)
    return t.numpy().tobytes()


def is_float(dtype):
    return dtype.is_floating_point


def promote(a, b):
    """The dtype two operands compute in (kiln's promotion for the tensors ONNX sees: a float
    beats an integer, a wider type beats a narrower one, anything beats bool)."""
    if a == b:
        return a
    if a == kiln.bool:
        return b
    if b == kiln.bool:
        return a
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    return a if a.itemsize >= b.itemsize else b
