"""kiln.nn.init: in-place parameter initialisation with torch.nn.init's names and defaults,
drawing from kiln's generators (kiln::nn::init)."""
import math

from .. import _C
from .._C import _nn

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_"]


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
