"""weight_norm / remove_weight_norm, the forward-pre-hook form of torch.nn.utils (deprecated
in torch for parametrizations.weight_norm, still in use): the weight is recomputed as
g * v / ||v|| before every forward, from the parameters weight_g and weight_v."""
import warnings

from ... import linalg
from ...autograd import no_grad
from ..parameter import Parameter

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


def _wrap_dim(dim, ndim):
    if not -ndim <= dim < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {dim})")
    return dim % max(ndim, 1)


def norm_except_dim(v, pow=2, dim=0):
    """torch.norm_except_dim: the norm over every dimension but dim, kept as size-1 dims
    (dim == -1 is not the last dimension here but "no dimension": the whole tensor's norm,
    0-d, which is what weight_norm(dim=None) stands for)."""
    if dim == -1:
        return linalg.vector_norm(v, float(pow))
    dim = _wrap_dim(dim, v.dim())
    others = tuple(d for d in range(v.dim()) if d != dim)
    if not others:
        return v.abs() if pow != 0 else (v != 0).to(v.dtype)
    return linalg.vector_norm(v, float(pow), dim=others, keepdim=True)


def weight_norm_compose(v, g, dim):
    """torch._weight_norm: v scaled to the norm g, per slice along dim (-1: as a whole)."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that recomputes module.<name> from <name>_g and <name>_v."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return weight_norm_compose(v, g, self.dim)

    @staticmethod
    def apply(module, name, dim):
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning,
                      stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if _is_lazy(weight):
            raise ValueError("The module passed to `WeightNorm` can't have uninitialized "
                             "parameters. Make sure to run the dummy forward before applying "
                             "weight normalization")
        with no_grad():
            g = norm_except_dim(weight, 2, fn.dim)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(g.detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        # a plain attribute (not a parameter) until remove_weight_norm, as in torch
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def _is_lazy(t):
    return type(t).__name__ in ("UninitializedParameter", "UninitializedBuffer")


def weight_norm(module, name="weight", dim=0):
    """Replaces module.<name> by g * v / ||v|| (norm per slice along dim; dim=None: over the
    whole tensor), with parameters <name>_g and <name>_v, recomputed before each forward."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Folds g and v back into one parameter <name>."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
