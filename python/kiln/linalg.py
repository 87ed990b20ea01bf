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


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    x = _composite._float(x)
    dims = tuple(range(x.dim())) if dim is None else (dim if isinstance(dim, (tuple, list))
                                                      else (dim,))
    a = _C.abs(x)
    if ord == _math.inf:
        return a.amax(dims, keepdim) if x.dim() else a
    if ord == -_math.inf:
        return a.amin(dims, keepdim) if x.dim() else a
    if ord == 0:  # a count: zero gradient (kept in the graph, as torch's)
        return (a != 0).to(x.dtype).sum(dims, keepdim) + (x * 0).sum(dims, keepdim)
    if ord == 1:
        return a.sum(dims, keepdim)
    if ord == 2:
        return _C.sqrt((a * a).sum(dims, keepdim))
    return (a ** ord).sum(dims, keepdim) ** (1.0 / ord)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    if dtype is not None:
        A = A.to(dtype)
    d0, d1 = dim
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in (1, -1):  # largest / smallest absolute column sum
        s = _C.abs(A).sum(d0, True)
        r = s.amax(d1, True) if ord == 1 else s.amin(d1, True)
    elif ord in (_math.inf, -_math.inf):  # largest / smallest absolute row sum
        s = _C.abs(A).sum(d1, True)
        r = s.amax(d0, True) if ord == _math.inf else s.amin(d0, True)
    elif ord in (2, -2, "nuc"):
        return _linalg_derived.matrix_norm_from_spectrum(A, ord, (d0, d1), keepdim)
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    return r if keepdim else r.squeeze(_b.max(d0 % A.dim(), d1 % A.dim())).squeeze(
        _b.min(d0 % A.dim(), d1 % A.dim()))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    if isinstance(dim, int) or (dim is None and (ord is None or A.dim() == 1)):
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None:
        dim = (-2, -1)
    if len(dim) == 1:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
