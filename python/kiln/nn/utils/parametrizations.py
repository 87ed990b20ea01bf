"""kiln.nn.utils.parametrizations: weight_norm, spectral_norm and orthogonal as
parametrizations (torch.nn.utils.parametrizations)."""
from ... import _C
from ..._C import Tensor
from ...autograd import no_grad
from .. import functional as F
from ..modules.module import Module
from . import parametrize
from .spectral_norm import default_dim, weight_as_matrix
from .weight_norm import norm_except_dim, weight_norm_compose

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


class _WeightNorm(Module):
    """weight = g * v / ||v||; right_inverse splits a weight into (g, v)."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_norm_compose(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """module.<name> parametrized as g * v / ||v||, with parametrizations.<name>.original0
    (g) and original1 (v). Loading a state_dict of the hook form (<name>_g, <name>_v) works:
    the keys are renamed."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def rename_hook_form_keys(state_dict, prefix, *_):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    parametrize.add_load_state_dict_pre_hook(module, rename_hook_form_keys)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma estimated by power iteration with buffers _u and _v (updated in
    training mode only); a 1-d weight is simply normalised."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        self.dim = dim if dim >= 0 else dim + ndim
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = weight_as_matrix(weight, self.dim)
            h, w = weight_mat.shape
            with no_grad():
                u = F.normalize(weight_mat.new_empty(h).normal_(0, 1), dim=0, eps=eps)
                v = F.normalize(weight_mat.new_empty(w).normal_(0, 1), dim=0, eps=eps)
            self.register_buffer("_u", u)
            self.register_buffer("_v", v)
            # 15 steps at registration: the first forward starts from a good estimate
            self._power_method(weight_mat, 15)

    def _power_method(self, weight_mat, n_iterations):
        # u first here (torch's order in this form; the hook form starts with v)
        with no_grad():
            for _ in range(n_iterations):
                self._u.copy_(F.normalize(_C.matmul(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(_C.matmul(weight_mat.t(), self._u), dim=0,
                                          eps=self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = weight_as_matrix(weight, self.dim)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        sigma = _C.dot(self._u.clone(), _C.matmul(weight_mat, self._v.clone()))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.<name> parametrized as weight / sigma(weight) (see _SpectralNorm); dim defaults
    to 0, 1 for transposed convolutions."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    dim = default_dim(module, dim)
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# --- orthogonal (decision 0082) --------------------------------------------------------------

_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _linalg():
    # imported on use: kiln.linalg is set up after kiln.nn (kiln/__init__.py)
    from ... import linalg
    return linalg


def _is_orthogonal(Q):
    from ... import allclose, finfo  # composed in Python, installed after kiln.nn
    n, k = Q.size(-2), Q.size(-1)
    eye = _C.eye(k, dtype=Q.dtype, device=Q.device)
    return allclose(Q.mT @ Q, eye, atol=10.0 * n * finfo(Q.dtype).eps)


def _make_orthogonal(A):
    """The Q of A's QR with R's diagonal made positive (the unique such Q for full rank A)."""
    Q, R = _linalg().qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _householder_qr(A):
    """(reflectors, tau) of A (..., n, k), n >= k, with LAPACK geqrf's conventions (kiln has no
    geqrf): column j's reflector I - tau v v^T, v = (1, A[j+1:, j]), sends it to (beta, 0..),
    beta = -sign(alpha) |column|; tau = 0 (no reflection, beta = alpha) for a column already
    zero below the diagonal. R sits on and above the diagonal."""
    A = A.clone()
    taus = []
    for j in range(A.size(-1)):
        alpha, below = A[..., j, j], A[..., j + 1:, j]
        below_norm = _C.sqrt((below * below).sum(-1))
        reflect = below_norm != 0
        length = _C.sqrt(alpha * alpha + below_norm * below_norm)
        beta = _C.where(reflect, _C.where(alpha >= 0, -length, length), alpha)
        safe_beta = _C.where(reflect, beta, _C.ones_like(beta))
        tau = _C.where(reflect, (beta - alpha) / safe_beta, _C.zeros_like(beta))
        scale = _C.where(reflect, alpha - beta, _C.ones_like(beta))
        v = _C.cat([_C.ones_like(alpha).unsqueeze(-1), below / scale.unsqueeze(-1)], -1)
        rest = A[..., j:, j + 1:]
        # H applied to the columns on the right: rest - tau v (v^T rest)
        rest.sub_(tau[..., None, None] * v.unsqueeze(-1) * (v.unsqueeze(-1) * rest).sum(-2,
                                                                                 keepdim=True))
        A[..., j + 1:, j] = v[..., 1:]
        A[..., j, j] = beta
        taus.append(tau)
    return A, _C.stack(taus, -1)


class _Orthogonal(Module):
    """An orthogonal (n, k) matrix, or one with orthonormal columns / rows, from an
    unconstrained one: the matrix exponential or Cayley transform of the skew-symmetric
    matrix built from its lower triangle, or the product of the Householder reflections
    stored below its diagonal. With use_trivialization the result is base @ that, base
    (a buffer) being set by right_inverse, so any orthogonal matrix can be assigned."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:  # tall form: orthonormal columns
            X = X.mT
            n, k = k, n
        if self.orthogonal_map == "householder":
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = _linalg().householder_product(A, tau)
            # the diagonal's signs pick each reflection's orientation, as torch
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        else:
            Q = self._from_skew(X.tril(), n, k)
        if hasattr(self, "base"):
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def _from_skew(self, X, n, k):
        linalg = _linalg()
        if n != k:  # square it with zero columns; the first k columns of Q are kept
            X = _C.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], n, n - k)], -1)
        A = X - X.mT
        if self.orthogonal_map == "matrix_exp":
            Q = linalg.matrix_exp(A)
        else:
            eye = _C.eye(n, dtype=A.dtype, device=A.device)
            Q = linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
        return Q[..., :k] if n != k else Q

    def right_inverse(self, Q):
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q):
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        given = Q
        n, k = Q.size(-2), Q.size(-1)
        transposed = n < k
        if transposed:
            Q = Q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map != "householder":
                raise NotImplementedError("It is not possible to assign to the matrix "
                                          "exponential or the Cayley parametrizations when "
                                          "use_trivialization=False.")
            A, tau = _householder_qr(Q)
            # forward reads the signs off the diagonal; a column not reflected (tau 0) is
            # reflected there (tau 2) and its sign flipped back
            diag = A.diagonal(dim1=-2, dim2=-1)
            diag.copy_(_C.where(tau == 0, -diag.sign(), diag.sign()))
            return A.mT if transposed else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:  # completed to a square orthogonal matrix by random columns, as torch
            extra = _C.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(_C.cat([Q, extra], -1))
        self.base = Q
        # forward(-I) is the identity for all three maps, so the weight is base's columns
        minus_eye = _C.zeros_like(given)
        minus_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return minus_eye


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """module.<name> (a matrix or batch of matrices) parametrized as an orthogonal matrix (or
    one with orthonormal columns / rows when not square). orthogonal_map: "matrix_exp"
    (default for square), "cayley" or "householder" (default otherwise)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError("Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.dim()} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.size(-2) == weight.size(-1) else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    parametrize.register_parametrization(
        module, name, _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization),
        unsafe=True)
    return module
