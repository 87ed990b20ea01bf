"""kiln.nn.functional (continued): the remaining activations of torch.nn.functional and the
small layers built from them, over kiln::nn::functional (functional_activation.h). Keywords
and defaults are torch's; ``inplace=True`` writes the result into the input."""
from .._C import _nn
from .. import _out_forms

__all__ = ["hardtanh", "hardtanh_", "relu6", "hardsigmoid", "hardswish", "elu", "elu_", "selu",
           "selu_", "celu", "celu_", "mish", "logsigmoid", "softsign", "tanhshrink", "softshrink",
           "hardshrink", "threshold", "threshold_", "glu", "prelu", "rrelu", "rrelu_", "softmin",
           "normalize", "cosine_similarity", "pairwise_distance", "pixel_shuffle",
           "pixel_unshuffle", "instance_norm", "dropout1d", "dropout2d", "dropout3d"]


def _result(input, r, inplace):
    return input.copy_(r) if inplace else r


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _result(input, _nn.hardtanh(input, float(min_val), float(max_val)), inplace)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    return _result(input, _nn.relu6(input), inplace)


def hardsigmoid(input, inplace=False):
    return _result(input, _nn.hardsigmoid(input), inplace)


def hardswish(input, inplace=False):
    return _result(input, _nn.hardswish(input), inplace)


def elu(input, alpha=1.0, inplace=False):
    return _result(input, _nn.elu(input, float(alpha)), inplace)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def selu(input, inplace=False):
    return _result(input, _nn.selu(input), inplace)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    return _result(input, _nn.celu(input, float(alpha)), inplace)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def mish(input, inplace=False):
    return _result(input, _nn.mish(input), inplace)


def logsigmoid(input):
    return _nn.logsigmoid(input)


def softsign(input):
    return _nn.softsign(input)


def tanhshrink(input):
    return _nn.tanhshrink(input)


def softshrink(input, lambd=0.5):
    return _nn.softshrink(input, float(lambd))


def hardshrink(input, lambd=0.5):
    return _nn.hardshrink(input, float(lambd))


def threshold(input, threshold, value, inplace=False):
    return _result(input, _nn.threshold(input, float(threshold), float(value)), inplace)


def threshold_(input, threshold, value):
    return _result(input, _nn.threshold(input, float(threshold), float(value)), True)


def glu(input, dim=-1):
    return _nn.glu(input, int(dim))


def prelu(input, weight):
    return _nn.prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    return _result(input, _nn.rrelu(input, float(lower), float(upper), bool(training)), inplace)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = 0 if input.dim() in (0, 1, 3) else 1
    if dtype is not None:
        input = input.to(dtype)
    return _nn.softmin(input, int(dim))


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    r = _nn.normalize(input, float(p), int(dim), float(eps))
    return _out_forms.store("normalize", out, r, (input,))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    return _nn.cosine_similarity(x1, x2, int(dim), float(eps))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return _nn.pairwise_distance(x1, x2, float(p), float(eps), bool(keepdim))


def pixel_shuffle(input, upscale_factor):
    return _nn.pixel_shuffle(input, int(upscale_factor))


def pixel_unshuffle(input, downscale_factor):
    return _nn.pixel_unshuffle(input, int(downscale_factor))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    return _nn.instance_norm(input, running_mean, running_var, weight, bias,
                             bool(use_input_stats), float(momentum), float(eps))


def _feature_dropout(name, dims, input, p, training, inplace):
    r = _nn.feature_dropout(input, float(p), bool(training), dims, name)  # checks p and rank
    return _result(input, r, inplace and training and p > 0)


def dropout1d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout("dropout1d", 1, input, p, training, inplace)


def dropout2d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout("dropout2d", 2, input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout("dropout3d", 3, input, p, training, inplace)
