"""kiln.nn.init: in-place parameter initialisation with torch.nn.init's names and defaults,
drawing from kiln's generators (kiln::nn::init); dirac_ and sparse_ are composed here."""
import math
import warnings

from .. import _C
from .._C import _nn
from ..autograd import no_grad

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "dirac_", "sparse_"]


def calculate_gain(nonlinearity, param=None):
    if nonlinearity == "leaky_relu":
        if param is None:
            param = 0.01
        elif isinstance(param, bool) or not isinstance(param, (int, float)):
            raise ValueError(f"negative_slope {param} not a valid number")
    return _nn.calculate_gain(nonlinearity, 0.01 if param is None else float(param))


def _calculate_fan_in_and_fan_out(tensor):
    return _nn.calculate_fan_in_and_fan_out(tensor)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _nn.uniform_(tensor, float(a), float(b), generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _nn.normal_(tensor, float(mean), float(std), generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    return _nn.trunc_normal_(tensor, float(mean), float(std), float(a), float(b), generator)


def constant_(tensor, val):
    return _nn.constant_(tensor, float(val))


def ones_(tensor):
    return _nn.constant_(tensor, 1.0)


def zeros_(tensor):
    return _nn.constant_(tensor, 0.0)


def eye_(tensor):
    return _nn.eye_(tensor)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    return _nn.xavier_uniform_(tensor, float(gain), generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    return _nn.xavier_normal_(tensor, float(gain), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    return _nn.kaiming_uniform_(tensor, float(a), mode, nonlinearity, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    return _nn.kaiming_normal_(tensor, float(a), mode, nonlinearity, generator)


def orthogonal_(tensor, gain=1, generator=None):
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    return _nn.orthogonal_(tensor, float(gain), generator)


def _no_grad_uniform_bound(tensor, fan):
    bound = 1 / math.sqrt(fan) if fan > 0 else 0
    return uniform_(tensor, -bound, bound)


def dirac_(tensor, groups=1):
    """A convolution weight [out, in, *k] that passes its input through: 1 at the kernel's
    centre where (output channel within its group) == input channel, 0 elsewhere."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.size()
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    centre = tuple(s // 2 for s in sizes[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(out_per_group, sizes[1])):
                tensor[(g * out_per_group + d, d) + centre] = 1
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-d tensor drawn from N(0, std) with ceil(sparsity * rows) zeros in each column, at
    random rows."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        # each column's rows in a random order (the ranks of random keys): the first
        # num_zeros of that order are zeroed, as torch's per-column randperm
        keys = _C.rand((rows, cols), generator=generator, device=tensor.device)
        rank = keys.argsort(0).argsort(0)
        tensor.masked_fill_(rank < num_zeros, 0)
    return tensor


def _deprecated_alias(method):
    new_name = method.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new_name}`.", FutureWarning, stacklevel=2)
        return method(*args, **kwargs)

    deprecated_init.__name__ = old_name
    deprecated_init.__doc__ = f"Deprecated alias of {new_name} (torch's, warns)."
    return deprecated_init


# torch's names without the underscore, kept there for old code
uniform = _deprecated_alias(uniform_)
normal = _deprecated_alias(normal_)
constant = _deprecated_alias(constant_)
eye = _deprecated_alias(eye_)
dirac = _deprecated_alias(dirac_)
xavier_uniform = _deprecated_alias(xavier_uniform_)
xavier_normal = _deprecated_alias(xavier_normal_)
kaiming_uniform = _deprecated_alias(kaiming_uniform_)
kaiming_normal = _deprecated_alias(kaiming_normal_)
orthogonal = _deprecated_alias(orthogonal_)
sparse = _deprecated_alias(sparse_)
