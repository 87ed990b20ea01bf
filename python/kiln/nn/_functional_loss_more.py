"""kiln.nn.functional (continued): the margin, embedding, Poisson and Gaussian losses of
torch.nn.functional, composed of kiln's ops in Python (decision 0074), with torch's formulas,
reductions and legacy size_average / reduce arguments."""
import math

from .. import _C
from ._autocast_float32 import float32_under_autocast

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss", "poisson_nll_loss", "gaussian_nll_loss",
           "multi_margin_loss"]


def _reduction(size_average, reduce, reduction):
    from .functional import _legacy_reduction
    return _legacy_reduction(size_average, reduce, reduction)


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_same_size(a, b, name):
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{name}: expected target of the input's size {tuple(a.shape)}, got "
                         f"{tuple(b.shape)}")


@float32_under_autocast
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError("margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {tuple(input1.shape)}, input2: "
                           f"{tuple(input2.shape)}, target: {tuple(target.shape)} ")
    loss = (-target * (input1 - input2) + margin).clamp(min=0)
    return _reduce(loss, _reduction(size_average, reduce, reduction))


@float32_under_autocast
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    zeros = _C.zeros_like(input)
    margin_clamp = (margin - input).clamp(min=0)
    loss = _C.where(target != 1, margin_clamp, zeros) + _C.where(target != -1, input, zeros)
    return _reduce(loss, _reduction(size_average, reduce, reduction))


@float32_under_autocast
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _check_same_size(input, target, "soft_margin_loss")
    loss = _C.log1p(_C.exp(-target * input))
    return _reduce(loss, _reduction(size_average, reduce, reduction))


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    from .functional import logsigmoid
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.dim() - 1) / input.size(-1)
    return _reduce(loss, _reduction(size_average, reduce, reduction))


@float32_under_autocast
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    if input1.dim() != input2.dim() or input1.dim() not in (1, 2):
        raise RuntimeError(f"cosine_embedding_loss: expected 1-D or 2-D inputs of one rank, got "
                           f"{input1.dim()}-D and {input2.dim()}-D")
    d = input1.dim() - 1
    eps = 1e-12  # torch's EPSILON, added to each squared magnitude
    prod = (input1 * input2).sum(d)
    mag1 = (input1 * input1).sum(d) + eps
    mag2 = (input2 * input2).sum(d) + eps
    cos = prod / _C.sqrt(mag1 * mag2)
    zeros = _C.zeros_like(cos)
    pos = 1 - cos
    neg = (cos - margin).clamp(min=0)
    loss = _C.where(target == 1, pos, zeros) + _C.where(target == -1, neg, zeros)
    return _reduce(loss, _reduction(size_average, reduce, reduction))


@float32_under_autocast
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    from .functional import pairwise_distance
    if not (anchor.dim() == positive.dim() == negative.dim()):
        raise RuntimeError("The anchor, positive, and negative tensors are expected to have the "
                           "same number of dimensions")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _C.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    loss = (margin + d_pos - d_neg).clamp(min=0)
    return _reduce(loss, _reduction(size_average, reduce, reduction))


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    from .functional import pairwise_distance
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = _C.minimum(d_neg, dist(positive, negative))
    loss = (margin + d_pos - d_neg).clamp(min=0)
    return _reduce(loss, reduction)


@float32_under_autocast
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    if log_input:
        loss = _C.exp(input) - target * input
    else:
        loss = input - target * _C.log(input + eps)
    if full:  # Stirling's term for target > 1
        stirling = (target * _C.log(target) - target +
                    0.5 * _C.log(2 * math.pi * target))
        loss = loss + _C.where(target > 1, stirling, _C.zeros_like(stirling))
    return _reduce(loss, _reduction(size_average, reduce, reduction))


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    if not isinstance(var, _C.Tensor):
        var = _C.full_like(input, float(var))
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.size(-1) == 1:
            pass  # heteroscedastic: one variance per sample
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    # var clamped at eps in value only, as torch's in-place clamp under no_grad
    var = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (_C.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@float32_under_autocast
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    y = target.reshape(-1, 1)
    picked = x.gather(1, y)
    z = (margin - picked + x).clamp(min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.gather(0, y.reshape(-1)).reshape(-1, 1)
    cols = _C.arange(x.size(1), device=x.device).reshape(1, -1)
    z = _C.where(cols == y, _C.zeros_like(z), z)  # j == y is not a margin
    loss = z.sum(1) / x.size(1)
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce(loss, _reduction(size_average, reduce, reduction))
