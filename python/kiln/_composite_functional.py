"""torch.* names of torch.nn.functional ops (torch.conv2d, torch.layer_norm, ...), delegating
to kiln.nn.functional with torch's top-level signatures (decision 0080): those differ from
the functional ones in argument order (batch_norm, instance_norm, embedding), in integer
reductions (0 none, 1 mean, 2 sum) for the losses, and in always returning indices
(adaptive_max_pool1d)."""
from ._composite_more import FUNCTIONS, METHODS, export

_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


def _F():
    from .nn import functional
    return functional


def _reduction(value):
    return _REDUCTION[value] if isinstance(value, int) else value


# Same signature as the functional op: the functional op itself, looked up when called (the
# nn package loads after the composites are installed in some import orders).
def _alias(name):
    def call(*args, **kwargs):
        return getattr(_F(), name)(*args, **kwargs)
    call.__name__ = name
    FUNCTIONS[name] = call


for _name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d",
              "avg_pool1d", "adaptive_avg_pool1d", "max_pool1d", "max_pool2d", "max_pool3d",
              "max_pool1d_with_indices", "selu", "celu", "prelu", "threshold", "hardshrink",
              "pixel_shuffle", "pixel_unshuffle", "cosine_similarity", "pairwise_distance",
              "bilinear", "rms_norm", "celu_", "selu_", "threshold_", "channel_shuffle",
              "pdist"):
    _alias(_name)


@export(method=False)
def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _F().rrelu(input, lower, upper, training)


@export(method=False)
def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _F().rrelu_(input, lower, upper, training)


@export(method=False)
def dropout_(input, p=0.5, train=True):
    return _F().dropout(input, p, train, inplace=True)


@export(method=False)
def adaptive_max_pool1d(input, output_size):
    return tuple(_F().adaptive_max_pool1d(input, output_size, return_indices=True))


@export(method=False)
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled=True):
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                           eps)


@export(method=False)
def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled=True):
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                              momentum, eps)


@export(method=False)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


@export(method=False)
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return _F().group_norm(input, num_groups, weight, bias, eps)


@export(method=False)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # aten's padding_idx -1 means none (the functional form takes None)
    return _F().embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                          scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


@export(method=False)
def constant_pad_nd(input, pad, value=0):
    return _F().pad(input, list(pad), "constant", value)


METHODS["hardshrink"] = FUNCTIONS["hardshrink"]
METHODS["prelu"] = FUNCTIONS["prelu"]
FUNCTIONS["native_channel_shuffle"] = FUNCTIONS["channel_shuffle"]


@export(method=False)
def alpha_dropout(input, p, train):
    return _F().alpha_dropout(input, p, train)


@export(method=False)
def alpha_dropout_(input, p, train):
    return _F().alpha_dropout(input, p, train, inplace=True)


@export(method=False)
def feature_alpha_dropout(input, p, train):
    return _F().feature_alpha_dropout(input, p, train)


@export(method=False)
def feature_alpha_dropout_(input, p, train):
    return _F().feature_alpha_dropout(input, p, train, inplace=True)


# --- losses with aten's integer reductions ------------------------------------------------

@export(method=False)
def kl_div(input, target, reduction=1, *, log_target=False):
    return _F().kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


@export(method=False)
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=1):
    return _F().binary_cross_entropy_with_logits(input, target, weight,
                                                 reduction=_reduction(reduction),
                                                 pos_weight=pos_weight)


@export(method=False)
def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction(reduction))


@export(method=False)
def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction(reduction))


@export(method=False)
def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _F().hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


@export(method=False)
def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction(reduction))


@export(method=False)
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                        reduction=1):
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction(reduction))
