"""kiln tensors as the numpy arrays the algorithms work on, and the argument checks that
every collective applies to its tensors.

numpy() of a CPU tensor shares its memory (also for strided views), so a contiguous
tensor is sent straight from its own memory and written in place; a non-contiguous one goes
through a contiguous copy that is written back at the end. bfloat16 has no numpy type: it
travels as its raw 16-bit patterns, and is reduced in float32."""
import numpy as np

from .. import _C
from .reduce_op import ReduceOp, resolve

# torch's names for the dtypes in its type errors
_TORCH_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
                     "uint8": "Byte", "bool": "Bool"}


def check_tensor(t, arg="tensor"):
    if not isinstance(t, _C.Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{arg}` of type "
                        f"torch.Tensor\n             but got {type(t)} instead.")
    if t.device.type != "cpu":
        raise RuntimeError(f"No backend type associated with device type {t.device.type}")


def check_tensor_list(tensors, arg):
    if not isinstance(tensors, (list, tuple)) or \
            not all(isinstance(t, _C.Tensor) for t in tensors):
        raise TypeError(f"Invalid function argument. Expected parameter `{arg}` of type "
                        "List[torch.Tensor]\n             but got "
                        f"{type(tensors)} instead.")
    for t in tensors:
        check_tensor(t, arg)


def check_same_dtype(tensors):
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        a, b = list(dtypes)[:2]
        raise ValueError(f"Invalid usage of tensors with different dtypesFound {a} and  {b}")


def _raw(t):
    t = t.detach()
    if t.dtype == _C.bfloat16:
        t = t.view(_C.int16)
    return t.numpy()


def flat_view(t):
    """(flat, write_back): a contiguous 1-D array over t's data; write_back() stores flat
    into t when it had to be a copy."""
    a = _raw(t)
    if a.flags.c_contiguous:
        return a.reshape(-1), lambda: None
    flat = np.ascontiguousarray(a).reshape(-1)
    return flat, lambda: a.__setitem__(Ellipsis, flat.reshape(a.shape))


def flat_input(t):
    """A contiguous 1-D array with t's data (t's own memory when possible)."""
    return np.ascontiguousarray(_raw(t)).reshape(-1)


def reduction_input(t):
    """flat_input, but bfloat16 as float32 (what reductions compute in)."""
    if t.dtype == _C.bfloat16:
        return t.detach().float().numpy().reshape(-1)
    return flat_input(t)


def reduction_view(t, op):
    """(flat, write_back, op) for reducing t with `op` (checked against its dtype)."""
    is_int = not t.dtype.is_floating_point and not t.dtype.is_complex
    op = resolve(op, is_int, t.dtype.is_complex)
    if op == ReduceOp.AVG and is_int:
        name = _TORCH_TYPE_NAMES.get(str(t.dtype).split(".")[-1], str(t.dtype))
        raise RuntimeError(f"result type Float can't be cast to the desired output type {name}")
    if t.dtype == _C.bfloat16:
        wide = t.detach().float().numpy().reshape(-1).copy()

        def write_back():
            t.detach().copy_(_C.from_numpy(wide.reshape(tuple(t.shape))).to(_C.bfloat16))
        return wide, write_back, op
    flat, write_back = flat_view(t)
    return flat, write_back, op


def same_size_arrays(tensors, like, what, arg):
    """Contiguous 1-D views (with write-backs) of output tensors that must each have
    `like`'s shape and dtype, as gloo requires; RuntimeError naming the first that does
    not."""
    for i, t in enumerate(tensors):
        if tuple(t.shape) != tuple(like.shape):
            raise RuntimeError(f"ProcessGroupGloo::{what}: invalid tensor size at index {i} "
                               f"(expected {_shape(like)}, got {_shape(t)})")
        if t.dtype != like.dtype:
            raise ValueError(f"Invalid usage of tensors with different dtypesFound "
                             f"{t.dtype} and  {like.dtype}")
    views = [flat_view(t) for t in tensors]
    return [v[0] for v in views], [v[1] for v in views]


def _shape(t):
    return "(" + ", ".join(str(d) for d in t.shape) + ")"
