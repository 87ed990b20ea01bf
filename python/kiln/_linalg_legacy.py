"""The torch.* and Tensor forms of the factorisations (torch.det, torch.svd, Tensor.inverse,
torch.triangular_solve, ...), over kiln.linalg (decision 0076)."""
from . import _C
from . import _linalg_derived as _d
from . import _linalg_factor as _f
from . import linalg as _linalg

_svd_t = _f._return_type("svd", ["U", "S", "V"])
_qr_t = _f._return_type("qr", ["Q", "R"])
_slogdet_t = _f._return_type("slogdet", ["sign", "logabsdet"])
_triangular_solve_t = _f._return_type("triangular_solve", ["solution", "cloned_coefficient"])


def det(input):
    return _f.det(input)


def logdet(input):
    """log det: NaN for a negative determinant, -inf for a singular matrix."""
    sign, logabsdet = _f._L.slogdet(input)
    return _C.where(sign < 0, _C.full_like(logabsdet, float("nan")), logabsdet)


def slogdet(input):
    return _slogdet_t(*_f._L.slogdet(input))


def inverse(input, *, out=None):
    return _f.inv(input, out=out)


def cholesky(input, upper=False, *, out=None):
    return _f.cholesky(input, upper=upper, out=out)


def cholesky_solve(input, input2, upper=False, *, out=None):
    """X with A X = input for A = L L^T (input2 = L, or U = L^T when upper)."""
    L = input2.mT if upper else input2
    Y = _f.solve_triangular(L, input, upper=False)
    return _f._out(_f.solve_triangular(L.mT, Y, upper=True), out)


def cholesky_inverse(input, upper=False, *, out=None):
    n = input.shape[-1]
    eye = _C.eye(n, dtype=input.dtype, device=input.device).expand(*input.shape[:-2], n, n)
    return _f._out(cholesky_solve(eye, input, upper), out)


def qr(input, some=True, *, out=None):
    return _f._out(_qr_t(*_f._L.qr(input, "reduced" if some else "complete")), out)


def svd(input, some=True, compute_uv=True, *, out=None):
    """torch.svd: V rather than Vh; without compute_uv, zero-filled U and V of full size."""
    if not compute_uv:
        S = _f.svdvals(input)
        m, n = input.shape[-2], input.shape[-1]
        batch = tuple(input.shape[:-2])
        zeros_u = _C.zeros(*batch, m, m, dtype=input.dtype, device=input.device)
        zeros_v = _C.zeros(*batch, n, n, dtype=input.dtype, device=input.device)
        return _f._out(_svd_t(zeros_u, S, zeros_v), out)
    U, S, Vh = _f._L.svd(input, not some)
    return _f._out(_svd_t(U, S, Vh.mT), out)


def lu(A, pivot=True, get_infos=False, out=None):
    _f._require_pivot("torch.lu", pivot)
    LU, piv, info = _f._L.lu_factor_ex(A) if get_infos else (*_f._L.lu_factor(A), None)
    result = (LU, piv, info) if get_infos else (LU, piv)
    return _f._out(result, out)


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    return _f.lu_solve(LU_data, LU_pivots, b, out=out)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    M = A.mT if transpose else A
    X = _f.solve_triangular(M, b, upper=upper != transpose, unitriangular=unitriangular)
    # the coefficient comes back broadcast to the solution's batch, as torch's
    A_b = A.expand(*X.shape[:-2], *A.shape[-2:]).clone()
    return _f._out(_triangular_solve_t(X, A_b), out)


def pinverse(input, rcond=1e-15):
    return _d.pinv(input, rtol=rcond)


def matrix_power(input, n):
    return _d.matrix_power(input, n)


def matrix_exp(input):
    return _d.matrix_exp(input)


def orgqr(input, tau):
    return _d.householder_product(input, tau)


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm: p='fro' over at most two dims, and a number p (None: 2), is the vector
    norm over dim (None: every dim); any other string p ('nuc', 'fro' over more dims) is
    linalg.matrix_norm over dim (None: every dim), so a wrong one gets its error."""
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            return _vector_norm(input, 2, dim, keepdim, out, dtype)
        dims = range(input.dim()) if dim is None else ([dim] if isinstance(dim, int) else dim)
        return _f._out(_linalg.matrix_norm(input, p, tuple(dims), keepdim, dtype=dtype), out)
    return _vector_norm(input, 2 if p is None else p, dim, keepdim, out, dtype)


def _vector_norm(input, p, dim, keepdim, out, dtype):
    """kiln's fused C++ norm (its out= form included) for real inputs, with linalg's checks
    of the input and dtype= ahead of it; linalg.vector_norm for complex ones, which the
    C++ kernel does not take."""
    _linalg._vector_norm_checks(input, p, dim, dtype)
    if input.is_complex():
        return _f._out(_linalg.vector_norm(input, p, dim, keepdim, dtype=dtype), out)
    if out is not None:
        return _C.norm(input, float(p), dim, keepdim, dtype=dtype, out=out)
    return _C.norm(input, float(p), dim, keepdim, dtype=dtype)


def _tensor_norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    return norm(self, p, dim, keepdim, dtype=dtype)


_FUNCTIONS = {
    "det": det, "logdet": logdet, "slogdet": slogdet, "inverse": inverse,
    "cholesky": cholesky, "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse, "qr": qr, "svd": svd, "lu": lu,
    "lu_solve": lu_solve, "lu_unpack": _d.lu_unpack, "triangular_solve": triangular_solve,
    "pinverse": pinverse, "matrix_power": matrix_power, "matrix_exp": matrix_exp,
    "orgqr": orgqr,
}
_METHODS = ("det", "logdet", "slogdet", "inverse", "cholesky", "cholesky_solve",
            "cholesky_inverse", "qr", "svd", "lu", "lu_solve", "triangular_solve", "pinverse",
            "matrix_power", "matrix_exp", "orgqr")


def install(namespace, tensor_type):
    """Adds the torch.* functions to namespace and their Tensor methods, leaving names that
    kiln already defines alone."""
    for name, fn in _FUNCTIONS.items():
        namespace.setdefault(name, fn)
    for name in _METHODS:
        if not hasattr(tensor_type, name):
            setattr(tensor_type, name, _FUNCTIONS[name])
    # torch.norm and Tensor.norm replace the C++ binding, which has no p='nuc' and takes
    # 'fro' over any number of dims; the numbers still reach its kernel (_vector_norm)
    namespace["norm"] = norm
    tensor_type.norm = _tensor_norm
