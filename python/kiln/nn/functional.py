"""kiln.nn.functional: stateless layers, activations and losses with torch.nn.functional's
signatures, over kiln::nn::functional (kiln._C._nn)."""
from .. import _C
from .._C import _nn

__all__ = ["linear", "bilinear", "embedding", "layer_norm", "rms_norm", "group_norm",
           "batch_norm", "dropout", "relu", "relu_", "leaky_relu", "gelu", "silu", "sigmoid",
           "tanh", "softmax", "log_softmax", "softplus", "pad", "one_hot", "cross_entropy",
           "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"]


def _legacy_reduction(size_average, reduce, reduction):
    """The reduction string from the deprecated size_average/reduce arguments (as torch)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


# --- layers ------------------------------------------------------------------------------

def linear(input, weight, bias=None):
    return _nn.linear(input, weight, bias)


def bilinear(input1, input2, weight, bias=None):
    return _nn.bilinear(input1, input2, weight, bias)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not "
                                  "supported by kiln")
    if padding_idx is not None:
        n = weight.size(0)
        if padding_idx > 0:
            if padding_idx >= n:
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = n + padding_idx
    return _nn.embedding(input, weight, padding_idx)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return _nn.layer_norm(input, tuple(normalized_shape), weight, bias, float(eps))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return _nn.rms_norm(input, tuple(normalized_shape), weight,
                        None if eps is None else float(eps))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    return _nn.group_norm(input, num_groups, weight, bias, float(eps))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    return _nn.batch_norm(input, running_mean, running_var, weight, bias, bool(training),
                          float(momentum), float(eps))


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    r = _nn.dropout(input, float(p), bool(training))
    if inplace:
        return input.copy_(r)
    return r


# --- activations -------------------------------------------------------------------------

def relu(input, inplace=False):
    return _C.relu_(input) if inplace else _nn.relu(input)


def relu_(input):
    return _C.relu_(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    r = _nn.leaky_relu(input, float(negative_slope))
    return input.copy_(r) if inplace else r


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh.")
    return _nn.gelu(input, approximate)


def silu(input, inplace=False):
    return _C.silu_(input) if inplace else _nn.silu(input)


def sigmoid(input):
    return _nn.sigmoid(input)


def tanh(input):
    return _nn.tanh(input)


def _get_softmax_dim(ndim):
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _get_softmax_dim(input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _nn.softmax(input, dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _get_softmax_dim(input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _nn.log_softmax(input, dim)


softplus = _C.softplus
pad = _C.pad
one_hot = _C.one_hot


# --- losses ------------------------------------------------------------------------------

def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    return _nn.nll_loss(input, target, weight, ignore_index,
                        _legacy_reduction(size_average, reduce, reduction))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    return _nn.cross_entropy(input, target, weight, ignore_index,
                             _legacy_reduction(size_average, reduce, reduction),
                             float(label_smoothing))


def _weighted(loss, weight, reduction):
    """torch's `weight` argument of mse/l1/huber: elementwise weights, then the reduction."""
    loss = loss * weight
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if weight is not None:
        return _weighted(_nn.mse_loss(input, target, "none"), weight, reduction)
    return _nn.mse_loss(input, target, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if weight is not None:
        return _weighted(_nn.l1_loss(input, target, "none"), weight, reduction)
    return _nn.l1_loss(input, target, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    return _nn.smooth_l1_loss(input, target, _legacy_reduction(size_average, reduce, reduction),
                              float(beta))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    if weight is not None:
        return _weighted(_nn.huber_loss(input, target, "none", float(delta)), weight, reduction)
    return _nn.huber_loss(input, target, reduction, float(delta))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    return _nn.binary_cross_entropy(input, target, weight,
                                    _legacy_reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    return _nn.binary_cross_entropy_with_logits(
        input, target, weight, pos_weight, _legacy_reduction(size_average, reduce, reduction))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    return _nn.kl_div(input, target, _legacy_reduction(size_average, reduce, reduction),
                      bool(log_target))
