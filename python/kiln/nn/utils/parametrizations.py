"""kiln.nn.utils.parametrizations: weight_norm and spectral_norm as parametrizations
(torch.nn.utils.parametrizations). orthogonal is not here yet: it needs QR and matrix_exp
from kiln.linalg."""
from ... import _C
from ..._C import Tensor
from ...autograd import no_grad
from .. import functional as F
from ..modules.module import Module
from . import parametrize
from .spectral_norm import default_dim, weight_as_matrix
from .weight_norm import norm_except_dim, weight_norm_compose

__all__ = ["weight_norm", "spectral_norm"]


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
