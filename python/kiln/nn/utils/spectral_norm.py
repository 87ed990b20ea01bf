"""spectral_norm / remove_spectral_norm, the forward-pre-hook form of torch.nn.utils: before
every forward the weight is divided by its largest singular value sigma, estimated by power
iteration on the weight seen as a matrix (the dim axis first, the others flattened). The
vectors u and v are buffers; in training mode each forward runs n_power_iterations steps and
updates them in place, in eval mode they are used as they are (so eval is deterministic)."""
from ... import _C
from ...autograd import no_grad
from .. import functional as F
from ..modules import conv as _conv
from ..parameter import Parameter
from .weight_norm import _is_lazy

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]

# torch's default dim is 1 for these: transposed convolutions keep their output channels there
_TRANSPOSED_CONVS = tuple(getattr(_conv, n) for n in
                          ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
                          if hasattr(_conv, n))


def weight_as_matrix(weight, dim):
    """The weight with dim moved first and the rest flattened: [size(dim), -1]."""
    if dim != 0:
        weight = weight.permute(dim, *[d for d in range(weight.dim()) if d != dim])
    return weight.reshape(weight.size(0), -1)


def power_iteration_(weight_mat, u, v, n_iterations, eps):
    """n_iterations of v <- normalize(W^T u), u <- normalize(W v), written into u and v
    (their storage, so that the module's buffers see the update)."""
    with no_grad():
        for _ in range(n_iterations):
            v.copy_(F.normalize(_C.matmul(weight_mat.t(), u), dim=0, eps=eps))
            u.copy_(F.normalize(_C.matmul(weight_mat, v), dim=0, eps=eps))


def default_dim(module, dim):
    if dim is not None:
        return dim
    return 1 if isinstance(module, _TRANSPOSED_CONVS) else 0


class SpectralNorm:
    """The forward pre-hook that sets module.<name> = <name>_orig / sigma."""
    _version = 1

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight):
        return weight_as_matrix(weight, self.dim)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            power_iteration_(weight_mat, u, v, self.n_power_iterations, self.eps)
            # copies: the buffers change in place at the next forward, and sigma's graph
            # must keep the values of this one
            u, v = u.clone(), v.clone()
        sigma = _C.dot(u, _C.matmul(weight_mat, v))
        return weight / sigma

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name,
                self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]  # KeyError for an unknown name, as torch
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        if _is_lazy(weight):
            raise ValueError("The module passed to `SpectralNorm` can't have uninitialized "
                             "parameters. Make sure to run the dummy forward before applying "
                             "spectral normalization")
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        # until the first forward the weight is the unnormalised one, a plain attribute
        setattr(module, fn.name, weight.detach())
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divides module.<name> by its spectral norm before every forward (see the module
    docstring); dim defaults to 0, 1 for transposed convolutions."""
    SpectralNorm.apply(module, name, n_power_iterations, default_dim(module, dim), eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Leaves <name> as a parameter holding the last normalised weight (no power step)."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
