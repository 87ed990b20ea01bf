"""The factorisations of kiln.linalg (C++ ops over LAPACK, decision 0076) with torch.linalg's
signatures and named return types."""
from collections import namedtuple as _namedtuple

from . import _C
from . import return_types as _return_types

_L = _C._linalg
LinAlgError = _C._LinAlgError


def _return_type(name, fields):
    t = _namedtuple(name, fields)
    setattr(_return_types, name, t)  # kiln.return_types.<name>, as torch.return_types
    return t


_cholesky_ex_t = _return_type("linalg_cholesky_ex", ["L", "info"])
_lu_factor_t = _return_type("linalg_lu_factor", ["LU", "pivots"])
_lu_factor_ex_t = _return_type("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_solve_ex_t = _return_type("linalg_solve_ex", ["result", "info"])
_inv_ex_t = _return_type("linalg_inv_ex", ["inverse", "info"])
_slogdet_t = _return_type("linalg_slogdet", ["sign", "logabsdet"])
_qr_t = _return_type("linalg_qr", ["Q", "R"])
_eigh_t = _return_type("linalg_eigh", ["eigenvalues", "eigenvectors"])
_eig_t = _return_type("linalg_eig", ["eigenvalues", "eigenvectors"])
_svd_t = _return_type("linalg_svd", ["U", "S", "Vh"])


def _out(result, out):
    """out=: the result stored into the given tensor(s) by kiln's out= rules (_out_forms.store:
    an empty out takes the result, as torch's)."""
    from ._out_forms import store
    return store("linalg", out, result)


def _require_pivot(fn, pivot):
    if not pivot:
        raise RuntimeError(f"{fn}: LU without pivoting is not implemented on the CPU")


def cholesky(A, *, upper=False, out=None):
    return _out(_L.cholesky(A, upper), out)


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    if check_errors:
        _L.cholesky(A, upper)
    return _out(_cholesky_ex_t(*_L.cholesky_ex(A, upper)), out)


def lu_factor(A, *, pivot=True, out=None):
    _require_pivot("linalg.lu_factor", pivot)
    return _out(_lu_factor_t(*_L.lu_factor(A)), out)


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    _require_pivot("linalg.lu_factor_ex", pivot)
    if check_errors:
        _L.lu_factor(A)
    return _out(_lu_factor_ex_t(*_L.lu_factor_ex(A)), out)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    return _out(_L.lu_solve(LU, pivots, B, left, adjoint), out)


def solve(A, B, *, left=True, out=None):
    return _out(_L.solve(A, B, left), out)


def _info_of_A(info, A):
    """torch's info has A's batch shape (one LU per matrix of A); the op's is broadcast to
    B's too: its copies of one matrix's info are equal, so keep the first of each."""
    batch = tuple(A.shape[:-2])
    if tuple(info.shape) == batch:
        return info
    info = info[(0,) * (info.dim() - len(batch))] if info.dim() > len(batch) else info
    for d, size in enumerate(batch):
        if size == 1 and info.shape[d] != 1:
            info = info.narrow(d, 0, 1)
    return info.contiguous()


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    if check_errors:
        _L.solve(A, B, left)
    result, info = _L.solve_ex(A, B, left)
    return _out(_solve_ex_t(result, _info_of_A(info, A)), out)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    if A.dtype != B.dtype and A.dtype.is_floating_point and B.dtype.is_floating_point:
        B = B.to(A.dtype)  # torch solves in A's dtype here (solve and lstsq refuse a mix)
    return _out(_L.solve_triangular(A, B, upper, left, unitriangular), out)


def inv(A, *, out=None):
    return _out(_L.inv(A), out)


def inv_ex(A, *, check_errors=False, out=None):
    if check_errors:
        _L.inv(A)
    return _out(_inv_ex_t(*_L.inv_ex(A)), out)


def det(A, *, out=None):
    return _out(_L.det(A), out)


def slogdet(A, *, out=None):
    return _out(_slogdet_t(*_L.slogdet(A)), out)


def qr(A, mode="reduced", *, out=None):
    return _out(_qr_t(*_L.qr(A, mode)), out)


def eigh(A, UPLO="L", *, out=None):
    return _out(_eigh_t(*_L.eigh(A, UPLO)), out)


def eigvalsh(A, UPLO="L", *, out=None):
    return _out(_L.eigvalsh(A, UPLO), out)


def svd(A, full_matrices=True, *, driver=None, out=None):
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    return _out(_svd_t(*_L.svd(A, full_matrices)), out)


def svdvals(A, *, driver=None, out=None):
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    return _out(_L.svdvals(A), out)


def eig(A, *, out=None):
    return _out(_eig_t(*_L.eig(A)), out)


def eigvals(A, *, out=None):
    return _out(_L.eigvals(A), out)
