"""kiln.nn.functional (continued): alpha dropout, channel shuffle, Gumbel-softmax, pdist,
leaky_relu_ and the multi-label margin loss, composed of kiln's ops in Python (decision 0079)
with torch.nn.functional's signatures, defaults and exception classes."""
import math

from .. import _C
from ._autocast_float32 import float32_under_autocast
from . import functional as F

__all__ = ["alpha_dropout", "feature_alpha_dropout", "channel_shuffle", "native_channel_shuffle",
           "gumbel_softmax", "pdist", "leaky_relu_", "multilabel_margin_loss"]

# SELU's alpha * scale: the value SELU saturates to, which alpha dropout drops units to
_SELU_SATURATION = 1.7580993408473766


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _alpha_dropout(input, p, training, inplace, noise_shape):
    _check_p(p)
    if p == 0.0 or not training or input.numel() == 0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        keep = (_C.rand(*noise_shape, dtype=input.dtype, device=input.device) < 1.0 - p) \
            .to(input.dtype)
        # a and b keep a zero-mean unit-variance input so (the affine map of torch's docs)
        a = 1.0 / math.sqrt((_SELU_SATURATION ** 2 * p + 1.0) * (1.0 - p))
        b = (keep - 1.0) * (_SELU_SATURATION * a) + _SELU_SATURATION * a * p
        out = input * (keep * a) + b
    return input.copy_(out) if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, tuple(input.shape))


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels: one draw per (sample, channel)."""
    _check_p(p)
    if training and input.dim() < 2:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, got "
                           f"{input.dim()}-D")
    noise = tuple(input.shape[:2]) + (1,) * max(input.dim() - 2, 0)
    return _alpha_dropout(input, p, training, inplace, noise)


def channel_shuffle(input, groups):
    """[N, g * k, *] -> [N, k * g, *]: channel j of group i moves to place j * g + i."""
    if input.dim() < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    c = input.shape[1]
    if c % groups != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    lead, rest = input.shape[0], list(input.shape[2:])
    grouped = input.reshape([lead, groups, c // groups] + rest)
    return grouped.transpose(1, 2).reshape(list(input.shape))


native_channel_shuffle = channel_shuffle


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel noise) / tau); hard=True returns the one-hot argmax with the
    soft sample's gradient (straight-through)."""
    noise = -_C.empty_like(logits).exponential_().log()
    soft = F.softmax((logits + noise) / tau, dim)
    if not hard:
        return soft
    index = soft.argmax(dim, keepdim=True)
    one_hot = _C.zeros_like(logits).scatter(dim, index, 1.0)
    return one_hot - soft.detach() + soft


def pdist(input, p=2):
    """The p-norm distances between the rows of an [N, M] input, pairs i < j in row order."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    first = [i for i in range(n) for _ in range(i + 1, n)]
    second = [j for i in range(n) for j in range(i + 1, n)]
    if not first:  # no pairs: an empty result that still belongs to the input's graph
        return input.reshape(-1)[:0]
    index = lambda v: _C.tensor(v, dtype=_C.int64, device=input.device)  # noqa: E731
    diff = input.index_select(0, index(first)) - input.index_select(0, index(second))
    return diff.norm(p, dim=1)


def leaky_relu_(input, negative_slope=0.01):
    return F.leaky_relu(input, negative_slope, inplace=True)


@float32_under_autocast
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over targets j and non-targets i of max(0, 1 - (x[y_j] - x[i])) / C; each row's
    targets are the entries of its target row before the first -1."""
    from ._functional_loss_more import _reduce
    reduction = F._legacy_reduction(size_average, reduce, reduction)
    if input.dim() > 2 or input.numel() == 0 and input.dim() != 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(input.shape)}")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    y = target.reshape(1, -1) if input.dim() < 2 else target
    c = x.shape[1]
    if y.numel() and (bool((y >= c).any()) or bool((y < -1).any())):
        raise RuntimeError(f"multilabel_margin_loss: target entries must lie in [-1, {c}), "
                           f"got {int(y.max())} / {int(y.min())}")
    listed = (y < 0).to(_C.int64).cumsum(1) == 0  # the slots before the first -1
    safe_y = _C.where(listed, y, _C.zeros_like(y))
    is_target = _C.zeros(x.shape, dtype=x.dtype, device=x.device) \
        .scatter_add(1, safe_y, listed.to(x.dtype)) > 0
    target_scores = x.gather(1, safe_y)  # [N, slots]
    # [N, slots, C]: the hinge of every listed target against every class
    hinge = F.relu(1.0 - target_scores.unsqueeze(2) + x.unsqueeze(1))
    counted = listed.unsqueeze(2) & _C.logical_not(is_target).unsqueeze(1)
    hinge = _C.where(counted, hinge, _C.zeros_like(hinge))
    loss = hinge.sum((1, 2)) / c
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)
