"""kiln.linalg: torch.linalg. Products and norms over kiln's ops (decision 0074); the
factorisations (cholesky, lu, solve, inv, det, qr, eigh, svd) are C++ ops over LAPACK, and
pinv, lstsq, matrix_rank, cond, matrix_exp, ... compose them (decision 0076)."""
import builtins as _b
import math as _math

from . import _C
from . import _composite

from ._linalg_factor import (LinAlgError, cholesky, cholesky_ex, lu_factor,  # noqa: F401
                             lu_factor_ex, lu_solve, solve, solve_ex, solve_triangular, inv,
                             inv_ex, det, slogdet, qr, eigh, eigvalsh, svd, svdvals, eig,
                             eigvals)
from ._linalg_derived import (lu, pinv, matrix_rank, lstsq, cond, matrix_power,  # noqa: F401
                              matrix_exp, tensorinv, tensorsolve, vander,
                              householder_product)
from . import _linalg_derived

__all__ = ["matmul", "vecdot", "multi_dot", "vector_norm", "matrix_norm", "norm", "cross",
           "diagonal", "outer", "LinAlgError", "cholesky", "cholesky_ex", "lu_factor",
           "lu_factor_ex", "lu_solve", "solve", "solve_ex", "solve_triangular", "inv", "inv_ex",
           "det", "slogdet", "qr", "eigh", "eigvalsh", "svd", "svdvals", "eig", "eigvals", "lu",
           "pinv", "matrix_rank", "lstsq", "cond", "matrix_power", "matrix_exp", "tensorinv",
           "tensorsolve", "vander", "householder_product"]

matmul = _C.matmul
outer = _C.outer
cross = _composite.cross


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return A.diagonal(offset, dim1, dim2)


def vecdot(x, y, *, dim=-1):
    return (x * y).sum(dim)


def multi_dot(tensors):
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got " + str(len(ts)))
    first_1d, last_1d = ts[0].dim() == 1, ts[-1].dim() == 1
    if first_1d:
        ts[0] = ts[0].unsqueeze(0)
    if last_1d:
        ts[-1] = ts[-1].unsqueeze(1)
    r = ts[0]
    for t in ts[1:]:
        r = _C.matmul(r, t)
    if first_1d:
        r = r.squeeze(0)
    if last_1d:
        r = r.squeeze(-1)
    return r


# torch's names of the scalar types, for the messages of the norms' checks ("Long", "Half")
_TYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
               "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
               "float64": "Double", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}
_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, _math.inf, -_math.inf)


def _type_name(dtype):
    name = str(dtype).rsplit(".", 1)[-1]
    return _TYPE_NAMES.get(name, name)


def _check_input(fn, x, low_precision=True):
    """torch's norms take floating or complex inputs only (dtype= does not lift that), and
    the ones from singular values (LAPACK) no 16-bit ones."""
    if not (x.is_floating_point() or x.is_complex()):
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{_type_name(x.dtype)}")
    if not low_precision and x.dtype in (_C.float16, _C.bfloat16):
        raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got "
                           f"{_type_name(x.dtype)}")


def _check_dtype(fn, x, dtype):
    """dtype= (the dtype computed in) must be floating or complex as the input is, and hold
    the input's values without narrowing, as torch's."""
    if dtype is None:
        return
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"{fn}: dtype should be floating point or complex, but got "
                           f"{_type_name(dtype)}")
    if x.is_complex() != dtype.is_complex:
        kind = "complex" if x.is_complex() else "real"
        raise RuntimeError(f"{fn}: dtype should be {kind} for {kind} inputs, but got "
                           f"{_type_name(dtype)}")
    if _C.promote_types(x.dtype, dtype) != dtype:
        raise RuntimeError(f"{fn}: the dtype of the input ({_type_name(x.dtype)}) should be "
                           f"convertible without narrowing to the specified dtype "
                           f"({_type_name(dtype)})")


def _wrap_dim(d, n):
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d % n


def _check_identity(x, ord, dims):
    """ord < 0 and +-inf have no identity, so torch refuses them over an empty dim (dims:
    as given, None for every dim); dims are checked in order, each wrapped (IndexError)."""
    if x.numel() != 0 or not (ord < 0 or ord in (_math.inf, -_math.inf)):
        return
    what = f"linalg.vector_norm cannot compute the {ord:g} norm on"
    if dims is None:
        raise RuntimeError(f"{what} an empty tensor because the operation does not have an "
                           "identity")
    for d in dims:
        if x.shape[_wrap_dim(d, x.dim())] == 0:
            raise RuntimeError(f"{what} the dimension {d}because this dimension is empty and the "
                               "operation does not have an identity")  # torch's spacing


def _vector_norm_checks(x, ord, dim, dtype):
    """torch's checks of vector_norm, in its order; the dims to reduce (None: every dim)."""
    if isinstance(ord, str) or ord is None:
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not "
                        f"{type(ord).__name__}")
    _check_input("linalg.vector_norm", x)
    dims = None
    if dim is not None and not (isinstance(dim, (tuple, list)) and len(dim) == 0):
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)  # (): every dim
    _check_identity(x, ord, dims)
    _check_dtype("linalg.vector_norm", x, dtype)
    return dims


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    dims = _vector_norm_checks(x, ord, dim, dtype)
    if dtype is not None:
        x = x.to(dtype)  # computed in dtype: float16 input, float32 sums
    if dims is None:
        dims = tuple(range(x.dim()))
    if ord == 2 and not x.is_complex():
        # The norm op: one pass, squares summed in double from the widened values, with its
        # own gradient (0 at a zero vector, as torch). abs, a square, a sum and a sqrt took
        # four passes and two temporaries: vector_norm(x, dim=-1) of [1024, 1024] float32
        # 517 us against PyTorch's 107. Strided layouts reduce in memory order or on a
        # contiguous copy inside the op (decision 0131): dim=0 of a [512, 384] column slice
        # 97 -> 38 us (PyTorch 153), dim=-1 of a row step 13.2 -> 8.5 us (9.0).
        return _C.norm(x, 2.0, list(dims), keepdim)
    a = _C.abs(x)  # real, also for complex x
    if ord in (_math.inf, -_math.inf) and x.dim() == 0:  # amax / amin want a dim to reduce
        for d in dims:
            _wrap_dim(d, 1)
        return a
    if ord == _math.inf:
        return a.amax(dims, keepdim)
    if ord == -_math.inf:
        return a.amin(dims, keepdim)
    if ord == 0:  # a count: zero gradient (kept in the graph, as torch's)
        return (a != 0).to(a.dtype).sum(dims, keepdim) + (a * 0).sum(dims, keepdim)
    if ord == 1:
        return a.sum(dims, keepdim)
    if ord == 2:
        return _C.sqrt((a * a).sum(dims, keepdim))
    return (a ** ord).sum(dims, keepdim) ** (1.0 / ord)


def _matrix_norm_checks(A, ord, dim, dtype):
    """torch's checks of matrix_norm, in its order (the order decides which message a call
    with several faults gets); the two dims wrapped."""
    fn = "linalg.matrix_norm"
    if ord not in _MATRIX_ORDS:
        shown = f"{ord:g}" if isinstance(ord, (int, float)) else ord
        raise RuntimeError(f"{fn}: Order {shown} not supported.")
    if A.dim() < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    _check_input(fn, A, low_precision=ord not in (2, -2, "nuc"))
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if len(dims) != 2:
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
    d0, d1 = (_wrap_dim(d, A.dim()) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"{fn}: dims must be different. Got ({d0}, {d1})")
    _check_dtype(fn, A, dtype)
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    d0, d1 = _matrix_norm_checks(A, ord, dim, dtype)
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in (1, -1):  # largest / smallest absolute column sum
        s = _C.abs(A).sum(d0, True)
        r = s.amax(d1, True) if ord == 1 else s.amin(d1, True)
    elif ord in (_math.inf, -_math.inf):  # largest / smallest absolute row sum
        s = _C.abs(A).sum(d1, True)
        r = s.amax(d0, True) if ord == _math.inf else s.amin(d0, True)
    else:  # 2, -2, 'nuc'
        return _linalg_derived.matrix_norm_from_spectrum(A, ord, (d0, d1), keepdim)
    return r if keepdim else r.squeeze(_b.max(d0, d1)).squeeze(_b.min(d0, d1))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm without ord, or over one dim; a matrix norm for a string ord, or an ord
    over two dims (given, or a 2-D input's when dim is not given)."""
    if dim is not None:
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        if len(dims) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                               f"Got {list(dims)}")
    elif ord is not None and A.dim() not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {A.dim()}D.")
    n_dims = A.dim() if dim is None else len(dims)
    if ord is not None and (isinstance(ord, str) or n_dims == 2):
        return matrix_norm(A, ord, (-2, -1) if dim is None else dims, keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
