"""Randomised low-rank factorisations and LOBPCG, composed of kiln's linear algebra:
svd_lowrank / pca_lowrank (Halko, Martinsson and Tropp 2009: a Gaussian range finder with
subspace iterations, then the SVD of the small projected matrix) and lobpcg (Knyazev's
locally optimal block preconditioned conjugate gradient for the extreme eigenpairs of a
symmetric (generalized) problem, with B-orthonormal search bases built by SVQB and soft
locking of converged pairs). Results agree with torch's up to the random start: singular
vectors and eigenvectors match only up to sign / rotation within the computed subspace.
Installed as kiln.<name> by install()."""
import builtins as _b

from . import _C

_NAMES = ("svd_lowrank", "pca_lowrank", "lobpcg")


def _floating(A):
    return A.dtype if (A.is_floating_point() or A.is_complex()) else _C.float32


def _range_basis(A, q, niter, M):
    """An orthonormal Q (..., m, q) whose span approximates the range of A - M: the product
    with a Gaussian block, refined by niter power (subspace) iterations, each re-orthonormalised
    to keep the small singular directions from being lost to rounding."""
    from . import linalg
    G = _C.randn(A.shape[-1], q, dtype=_floating(A), device=A.device)

    def apply(T, Y):  # (A - M) @ Y or (A - M)^H @ Y without forming A - M
        Z = T[0] @ Y
        return Z if T[1] is None else Z - T[1] @ Y

    fwd = (A, M)
    adj = (A.mH, None if M is None else M.mH)
    Q = linalg.qr(apply(fwd, G)).Q
    for _ in range(niter):
        Q = linalg.qr(apply(adj, Q)).Q
        Q = linalg.qr(apply(fwd, Q)).Q
    return Q


def _svd_lowrank(A, q, niter, M):
    from . import linalg
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    m, n = A.shape[-2], A.shape[-1]
    if M is not None:
        M = M.broadcast_to(A.shape)
    wide = m < n
    if wide:  # work on the tall A^H: the basis then has at most min(m, n) useful columns
        A = A.mH
        M = None if M is None else M.mH
    Q = _range_basis(A, q, niter, M)
    Bm = Q.mH @ A
    if M is not None:
        Bm = Bm - Q.mH @ M
    U, S, Vh = linalg.svd(Bm, full_matrices=False)
    U, V = Q @ U, Vh.mH
    if wide:
        U, V = V, U
    return U, S, V


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) with A - M ~= U diag(S) V^H of rank q (q=6 by default), found from a
    randomised basis of A's range after niter subspace iterations, as torch.svd_lowrank."""
    return _svd_lowrank(A, q, niter, M)


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V): the principal components of the rows of A (centred on the column means
    when center) from a rank-q randomised SVD; q defaults to min(6, m, n), as torch."""
    m, n = A.shape[-2], A.shape[-1]
    if q is None:
        q = _b.min(6, m, n)
    elif not (q >= 0 and q <= _b.min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than "
                         f"min(m, n)={_b.min(m, n)}")
    if not (niter >= 0):
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if center:
        A = A - A.mean(dim=(-2,), keepdim=True)
    return _svd_lowrank(A, q, niter, None)


# --- LOBPCG -------------------------------------------------------------------------------

def _fro(T):
    from . import linalg
    return linalg.vector_norm(T)


def _vnorm(T, dim):
    from . import linalg
    return linalg.vector_norm(T, dim=dim)


class _Problem:
    """One (generalized) symmetric eigenproblem A x = lambda B x and its solver settings."""

    def __init__(self, A, B, iK, n, k, largest, tol, ortho_tol, i_max, j_max):
        self.A, self.B, self.iK = A, B, iK
        self.n, self.k, self.largest, self.tol = n, k, largest, tol
        self.ortho_tol, self.i_max, self.j_max = ortho_tol, i_max, j_max

    def bmul(self, U):
        return U if self.B is None else self.B @ U

    def ritz(self, S):
        """Eigenpairs of S^T A S (S B-orthonormal), the wanted end of the spectrum first."""
        from . import linalg
        H = S.mT @ (self.A @ S)
        E, Z = linalg.eigh((H + H.mT) * 0.5)
        if self.largest:
            E, Z = E.flip(0), Z.flip(1)
        return E, Z

    def svqb(self, U):
        """U's columns made B-orthonormal through the eigen-decomposition of their scaled
        Gram matrix; columns that are (numerically) dependent on the others are dropped."""
        from . import linalg
        if U.numel() == 0:
            return U
        G = U.mT @ self.bmul(U)
        d = G.diagonal()
        keep = d > 0
        if not bool(keep.all()):
            idx = keep.nonzero().reshape(-1)
            U, G = U.index_select(1, idx), G.index_select(0, idx).index_select(1, idx)
            d = G.diagonal()
            if U.shape[-1] == 0:
                return U
        s = d.rsqrt()
        Gs = G * s.reshape(-1, 1) * s.reshape(1, -1)
        E, Z = linalg.eigh((Gs + Gs.mT) * 0.5)
        good = E > self.ortho_tol * E.abs().max()
        if not bool(good.all()):
            idx = good.nonzero().reshape(-1)
            E, Z = E.index_select(0, idx), Z.index_select(1, idx)
        return (U * s.reshape(1, -1)) @ (Z * E.rsqrt().reshape(1, -1))

    def ortho(self, U, V):
        """U made B-orthonormal and B-orthogonal to the B-orthonormal V (block Gram-Schmidt
        against V, then SVQB, repeated until both conditions hold to ortho_tol)."""
        BV_norm = float(_fro(self.bmul(V))) if V.numel() else 1.0
        for _ in range(self.i_max):
            if V.numel():
                U = U - V @ (V.mT @ self.bmul(U))
            for _ in range(self.j_max):
                U = self.svqb(U)
                if U.shape[-1] == 0:
                    return U
                BU = self.bmul(U)
                off = U.mT @ BU - _C.eye(U.shape[-1], dtype=U.dtype, device=U.device)
                if float(_fro(off)) < self.ortho_tol * float(
                        _fro(BU) * _fro(U)):
                    break
            if not V.numel():
                return U
            cross = float(_fro(V.mT @ self.bmul(U)))
            if cross < self.ortho_tol * BV_norm * float(_fro(U)):
                return U
        return U

    def solve(self, X, niter):
        n = self.n
        x_norm = float(_fro(X))
        A_norm = float(_fro(self.A @ X)) / x_norm
        B_norm = float(_fro(self.bmul(X))) / x_norm
        X = self.ortho(X, X[:, :0])
        if X.shape[-1] < n:
            raise ValueError("lobpcg: the initial X does not have full column rank")
        E, Z = self.ritz(X)
        X = X @ Z
        P = X[:, :0]
        for _ in range(_b.max(niter, 1)):
            R = self.A @ X - self.bmul(X) * E.reshape(1, -1)
            rerr = _vnorm(R, dim=0) / (
                _vnorm(X, dim=0) * (A_norm + E.abs() * B_norm))
            nc = 0
            for ok in (rerr < self.tol).tolist():
                if not ok:
                    break
                nc += 1
            if nc >= self.k:
                break
            W = R[:, nc:]
            if self.iK is not None:
                W = self.iK @ W
            W = self.ortho(W, _C.cat([X, P], 1))
            S = _C.cat([X, P, W], 1)
            E_all, Z = self.ritz(S)
            X_new = S @ Z[:, :n]
            # the search direction: the new active Ritz vectors' part outside span(X)
            P = S[:, n:] @ Z[n:, nc:n]
            E, X = E_all[:n], X_new
            P = self.ortho(P, X) if P.shape[-1] else P
            niter -= 1
            if niter <= 0:
                break
        return E, X


def lobpcg(A, k=None, B=None, X=None, n=None, iK=None, niter=None, tol=None, largest=None,
           method=None, tracker=None, ortho_iparams=None, ortho_fparams=None,
           ortho_bparams=None):
    """The k largest (largest=True, the default) or smallest eigenpairs (E, X) of the symmetric
    A, or of the generalized problem A x = lambda B x with B symmetric positive definite, by
    LOBPCG; X (..., m, n) is the start (random by default), iK a preconditioner, niter the
    iteration limit (1000) and tol the residual tolerance (sqrt of the dtype's epsilon), as
    torch.lobpcg. Batched inputs are solved one matrix at a time. E is differentiable in A
    and B (the Rayleigh quotients of the computed eigenvectors); X carries no gradient."""
    if A.shape[-2] != A.shape[-1]:
        raise AssertionError(f"A must be square, got shape {A.shape}")
    if B is not None and tuple(A.shape) != tuple(B.shape):
        raise AssertionError(f"A and B must have same shape, got {A.shape} vs {B.shape}")
    if tracker is not None:
        raise NotImplementedError("kiln.lobpcg: tracker is not supported")
    method = "ortho" if method is None else method
    if method not in ("ortho", "basic"):
        raise ValueError(f"kiln.lobpcg: unknown method {method!r} (expected 'ortho' or "
                         "'basic')")
    dtype = _floating(A)
    if tol is None:
        tol = {_C.float32: 1.2e-07, _C.float64: 2.23e-16}[dtype] ** 0.5
    m = A.shape[-1]
    k = (1 if X is None else X.shape[-1]) if k is None else k
    n = (k if n is None else n) if X is None else X.shape[-1]
    if m < 3 * n:
        raise ValueError(f"LOBPCG algorithm is not applicable when the number of A rows (={m})"
                         f" is smaller than 3 x the number of requested eigenpairs (={n})")
    iparams = dict(ortho_iparams or {})
    fparams = dict(ortho_fparams or {})
    niter = 1000 if niter is None else niter
    largest = True if largest is None else largest
    ortho_tol = fparams.get("ortho_tol", tol)
    i_max, j_max = iparams.get("ortho_i_max", 3), iparams.get("ortho_j_max", 3)

    batch = tuple(A.shape[:-2])
    count = 1
    for s in batch:
        count *= s
    Ad = A.detach().to(dtype).reshape((count, m, m))
    Bd = None if B is None else B.detach().to(dtype).reshape((count, m, m))
    Xd = None if X is None else X.detach().to(dtype).reshape((count, m, n))
    iKd = None if iK is None else iK.detach().to(dtype)
    Es, Xs = [], []
    from .autograd import no_grad
    with no_grad():
        for i in range(count):
            X0 = _C.randn((m, n), dtype=dtype, device=A.device) if Xd is None else Xd[i]
            if tuple(X0.shape) != (m, n):
                raise AssertionError(f"X shape mismatch: got {X0.shape}, expected {(m, n)}")
            prob = _Problem(Ad[i], None if Bd is None else Bd[i], iKd, n, k, largest, tol,
                            ortho_tol, i_max, j_max)
            E, V = prob.solve(X0.clone(), niter)
            Es.append(E[:k])
            Xs.append(V[:, :k])
    E = _C.stack(Es).reshape(batch + (k,))
    V = _C.stack(Xs).reshape(batch + (m, k))
    if A.requires_grad or (B is not None and B.requires_grad):
        # first-order perturbation of a simple eigenvalue: d(lambda) = x^T (dA - lambda dB) x
        # for B-normalised x, which the Rayleigh quotient x^T A x / x^T B x reproduces
        num = (V * (A.to(dtype) @ V)).sum(-2)
        den = None if B is None else (V * (B.to(dtype) @ V)).sum(-2)
        E = num if den is None else num / den
    return E, V


def install(namespace, tensor_type):
    g = globals()
    for name in _NAMES:
        namespace.setdefault(name, g[name])
