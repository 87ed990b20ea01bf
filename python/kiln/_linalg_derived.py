"""torch.linalg functions composed of kiln's factorisations (decision 0076): LU unpacking,
pseudo-inverses and ranks from the SVD, least squares, condition numbers, matrix powers and
exponentials, tensor inverses. Differentiable where their parts are."""
import builtins as _b
import math as _math

from . import _C
from . import _linalg_factor as _f

_lu_t = _f._return_type("linalg_lu", ["P", "L", "U"])
_lu_unpack_t = _f._return_type("lu_unpack", ["P", "L", "U"])
_lstsq_t = _f._return_type("linalg_lstsq", ["solution", "residuals", "rank",
                                            "singular_values"])


def _eps(dtype):
    return 1.1920928955078125e-07 if dtype == _C.float32 else 2.220446049250313e-16


def _eye_like(A, n):
    return _C.eye(n, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], n, n)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """A = P L U from lu_factor's packed factors and 1-based row interchanges."""
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = _b.min(m, n)
    L = U = P = _C.empty(0, dtype=LU_data.dtype, device=LU_data.device)
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + _C.eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
        U = LU_data[..., :k, :].triu()
    if unpack_pivots:
        # Apply the interchanges to 0..m-1 in order: row j of P^T A is row perm[j] of A.
        import numpy as np
        batch = _math.prod(LU_pivots.shape[:-1])  # not reshape(-1, k): a batch can be empty
        piv = np.asarray(LU_pivots.to(_C.int64).cpu().numpy()).reshape(
            batch, LU_pivots.shape[-1]) - 1
        if piv.size and (piv.min() < 0 or piv.max() >= m):
            raise RuntimeError(f"lu_unpack: pivots must be in [1, {m}], as lu_factor gives them")
        perm = np.tile(np.arange(m), (piv.shape[0], 1))
        rows = np.arange(piv.shape[0])
        for i in range(piv.shape[1]):
            a, b = perm[rows, i].copy(), perm[rows, piv[:, i]].copy()
            perm[rows, i], perm[rows, piv[:, i]] = b, a
        p = np.zeros((piv.shape[0], m, m))
        p[rows[:, None], perm, np.arange(m)[None, :]] = 1
        P = _C.tensor(p.reshape(*LU_data.shape[:-2], m, m)).to(dtype=LU_data.dtype,
                                                              device=LU_data.device)
    return _f._out(_lu_unpack_t(P, L, U), out)


def lu(A, *, pivot=True, out=None):
    _f._require_pivot("linalg.lu", pivot)
    LU, piv, _ = _f._L.lu_factor_ex(A)
    return _f._out(_lu_t(*lu_unpack(LU, piv)), out)


def _tolerance(S_max, dtype, m, n, atol, rtol):
    """torch's rule: rtol = eps * max(m, n) when neither is given, 0 when only atol is."""
    if rtol is None:
        rtol = 0.0 if atol is not None else _eps(dtype) * _b.max(m, n)
    tol = S_max * rtol if not hasattr(rtol, "shape") else S_max * rtol
    if atol is not None:
        tol = _C.maximum(tol, atol if hasattr(atol, "shape") else _C.full_like(tol, atol))
    return tol


def _spectrum(A, hermitian):
    """(values compared against the tolerance, the factors) of A."""
    if hermitian:
        L, Q = _f.eigh(A)
        return L.abs(), (L, Q)
    U, S, Vh = _f.svd(A, full_matrices=False)
    return S, (U, S, Vh)


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    if rcond is not None:
        rtol = rcond
    values, factors = _spectrum(A, hermitian)
    m, n = A.shape[-2], A.shape[-1]
    s_max = values.amax(-1, True) if values.shape[-1] else values.sum(-1, True)
    tol = _tolerance(s_max, A.dtype, m, n, atol, rtol)
    if hermitian:
        L, Q = factors
        keep = values > tol
        inv_l = _C.where(keep, 1 / _C.where(keep, L, _C.ones_like(L)), _C.zeros_like(L))
        return _f._out((Q * inv_l.unsqueeze(-2)) @ Q.mT, out)
    U, S, Vh = factors
    keep = S > tol
    inv_s = _C.where(keep, 1 / _C.where(keep, S, _C.ones_like(S)), _C.zeros_like(S))
    return _f._out((Vh.mT * inv_s.unsqueeze(-2)) @ U.mT, out)


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    if tol is not None:
        atol, rtol = tol, 0.0
    values, _ = _spectrum(A.detach(), hermitian)
    m, n = A.shape[-2], A.shape[-1]
    s_max = values.amax(-1, True) if values.shape[-1] else values.sum(-1, True)
    tol = _tolerance(s_max, A.dtype, m, n, atol, rtol)
    return _f._out((values > tol).sum(-1), out)


def _lstsq_by_qr(A, Bm, cut_ratio):
    """Least squares (m >= n) or the minimum-norm solution (m < n) from a QR factorisation,
    with the rank read off R's diagonal; None when some matrix is rank-deficient (the SVD then
    decides which directions to drop)."""
    m, n = A.shape[-2], A.shape[-1]
    Q, R = _f.qr(A if m >= n else A.mT)
    d = R.diagonal(0, -2, -1).abs()
    k = _b.min(m, n)
    if k and not bool((d > d.amax(-1, True) * cut_ratio).all().item()):
        return None
    if m >= n:
        return _f.solve_triangular(R, Q.mT @ Bm, upper=True), k
    return Q @ _f.solve_triangular(R.mT, Bm, upper=False), k


def lstsq(A, B, rcond=None, *, driver=None):
    """torch.linalg.lstsq. gels / gelsy (the default): from a QR factorisation when A has full
    rank, as LAPACK's drivers; gelsd / gelss and rank-deficient A: the minimum-norm solution
    from the SVD. The extra results follow the driver as torch's: residuals for m > n and full
    rank (not with gelsy), rank (not with gels), singular values (gelsd / gelss)."""
    drivers = (None, "gels", "gelsy", "gelsd", "gelss")
    if driver not in drivers:
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of "
                           f"(gels, gelsy, gelsd, gelss), got {driver}")
    driver = driver or "gelsy"
    if A.dtype != B.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {A.dtype} and other's dtype {B.dtype}")
    if A.dim() < 2 or B.dim() > A.dim() or A.dim() - B.dim() > 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    vector = B.dim() == A.dim() - 1
    Bm = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2], A.shape[-1]
    if Bm.shape[-2] != m:
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2), "
                           f"got {m} and {Bm.shape[-2]}")
    cut_ratio = _eps(A.dtype) * _b.max(m, n) if rcond is None or rcond < 0 else rcond
    empty = _C.empty(0, dtype=A.dtype, device=A.device)
    S = empty
    by_qr = _lstsq_by_qr(A, Bm, cut_ratio) if driver in ("gels", "gelsy") else None
    if by_qr is not None:
        X, k = by_qr
        rank = _C.full(tuple(A.shape[:-2]), k, dtype=_C.int64, device=A.device)
    else:
        U, S, Vh = _f.svd(A, full_matrices=False)
        s_max = S.amax(-1, True) if S.shape[-1] else S.sum(-1, True)
        keep = S > s_max * cut_ratio
        inv_s = _C.where(keep, 1 / _C.where(keep, S, _C.ones_like(S)), _C.zeros_like(S))
        X = Vh.mT @ (inv_s.unsqueeze(-1) * (U.mT @ Bm))
        rank = keep.sum(-1)
    residuals = empty
    if driver != "gelsy" and m > n and bool((rank == n).all().item()):
        # [..., k]; a vector B keeps its k = 1 here (torch squeezes only the solution)
        residuals = ((A @ X - Bm) ** 2).sum(-2)
    return _lstsq_t(X.squeeze(-1) if vector else X, residuals,
                    rank if driver != "gels" else _C.empty(0, dtype=_C.int64, device=A.device),
                    S if driver in ("gelsd", "gelss") else empty)


def matrix_norm_from_spectrum(A, ord, dims, keepdim):
    """ord 2 / -2 / 'nuc' of matrix_norm: from the singular values of the dims' matrices."""
    d0, d1 = (d % A.dim() for d in dims)
    M = A.permute(*[d for d in range(A.dim()) if d not in (d0, d1)], d0, d1)
    S = _f.svdvals(M)
    r = S.amax(-1) if ord == 2 else (S.amin(-1) if ord == -2 else S.sum(-1))
    if keepdim:
        for d in sorted((d0, d1)):
            r = r.unsqueeze(d)
    return r


def cond(A, p=None, *, out=None):
    if p in (None, 2, -2):
        S = _f.svdvals(A)
        big, small = S.amax(-1), S.amin(-1)
        return _f._out(big / small if p != -2 else small / big, out)
    from .linalg import matrix_norm
    inverse, info = _f._L.inv_ex(A)
    r = matrix_norm(A, p) * matrix_norm(inverse, p)
    return _f._out(_C.where(info != 0, _C.full_like(r, _math.inf), r), out)


def matrix_power(A, n, *, out=None):
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {tuple(A.shape[-2:])} matrices")
    if n == 0:
        return _f._out(_eye_like(A, A.shape[-1]).clone(), out)
    if n < 0:
        A, n = _f.inv(A), -n
    result, base = None, A
    while n:  # binary powers: log2(n) squarings
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return _f._out(result, out)


# Pade [13/13] coefficients of exp (Higham, "The scaling and squaring method for the matrix
# exponential revisited", 2005), with the 1-norm bound theta_13 for scaling.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def matrix_exp(A):
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_exp: A must be batches of square matrices, but they "
                           f"are {tuple(A.shape[-2:])} matrices")
    if not (A.dtype.is_floating_point or A.dtype.is_complex):  # no integer matrix exponential
        raise RuntimeError(f"linalg.matrix_exp: Expected a floating point or complex tensor as "
                           f"input. Got {A.dtype}")
    n = A.shape[-1]
    if n == 0 or A.numel() == 0:
        return A.clone()
    norm1 = float(A.detach().abs().sum(-2).amax().item())
    squarings = _b.max(0, _math.ceil(_math.log2(norm1 / _THETA13))) if norm1 > 0 else 0
    X = A / (2.0 ** squarings)
    I = _eye_like(X, n)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    b = _PADE13
    U = X @ (X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2) + b[7] * X6 + b[5] * X4 + b[3] * X2
             + b[1] * I)
    V = X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 \
        + b[0] * I
    R = _f.solve(V - U, V + U)
    for _ in range(squarings):
        R = R @ R
    return R


def tensorinv(A, ind=2, *, out=None):
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    r, c = _math.prod(rows), _math.prod(cols)
    if r != c:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {c} != {r}")
    return _f._out(_f.inv(A.reshape(r, c)).reshape(*cols, *rows), out)


def tensorsolve(A, B, dims=None, *, out=None):
    if dims is not None:
        dims = [d % A.dim() for d in dims]
        A = A.permute(*[d for d in range(A.dim()) if d not in dims], *dims)
    rest = tuple(A.shape[B.dim():])
    k = _math.prod(rest)
    X = _f.solve(A.reshape(B.numel(), k), B.reshape(B.numel()))
    return _f._out(X.reshape(rest), out)


def vander(x, *, N=None):
    if x.dim() < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension.")
    N = x.shape[-1] if N is None else N
    if N <= 1:  # torch refuses N = 1 too
        raise RuntimeError(f"N must be greater than 1., got N = {N}")
    powers = [_C.ones_like(x)]
    for _ in range(1, N):
        powers.append(powers[-1] * x)
    return _C.stack(powers, -1)


def householder_product(A, tau, *, out=None):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T (v_i: column i of A below
    the diagonal, 1 on it), as LAPACK's orgqr; a product of reflections, so differentiable."""
    m, n, k = A.shape[-2], A.shape[-1], tau.shape[-1]
    if not (m >= n >= k):
        raise RuntimeError(f"torch.linalg.householder_product: input.shape[-2] must be greater "
                           f"than or equal to input.shape[-1] >= tau.shape[-1], got {m}, {n}, "
                           f"{k}")
    V = A[..., :, :k].tril(-1) + _C.eye(m, k, dtype=A.dtype, device=A.device)
    Q = _C.eye(m, n, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], m, n)
    for i in reversed(range(k)):  # Q = H_i Q, from the last reflection back
        v = V[..., :, i:i + 1]
        Q = Q - (tau[..., i:i + 1].unsqueeze(-1) * v) @ (v.mT @ Q)
    return _f._out(Q, out)
