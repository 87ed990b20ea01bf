"""kiln.nn.functional (continued): ctc_loss as torch.nn.functional's, composed of kiln's ops
in Python (decision 0079): the forward (alpha) recursion of Graves et al. in log space, one
step of tensor ops per time frame over all sequences and all positions of the blank-extended
targets at once, so autograd differentiates it. Sequences that have run out of frames keep
their last alphas."""
from .. import _C
from ._autocast_float32 import float32_under_autocast

__all__ = ["ctc_loss"]


def _as_list(lengths):
    if isinstance(lengths, _C.Tensor):
        return [int(v) for v in lengths.reshape(-1).tolist()]
    if isinstance(lengths, int):
        return [lengths]
    return [int(v) for v in lengths]


def _log_add(*terms):
    """log(sum(exp(terms))) elementwise, -inf where every term is -inf, and no NaN in its
    gradient there (the shift by the largest term is a constant of the gradient)."""
    top = terms[0]
    for t in terms[1:]:
        top = _C.maximum(top, t)
    top = top.detach()
    top = _C.where(_C.isinf(top), _C.zeros_like(top), top)
    total = None
    for t in terms:
        e = _C.exp(t - top)
        total = e if total is None else total + e
    positive = total > 0
    safe = _C.where(positive, total, _C.ones_like(total))
    return _C.where(positive, _C.log(safe) + top, _C.full_like(total, float("-inf")))


def _shift_right(x, by, fill):
    """x[:, s - by] at position s; fill where s < by."""
    pad = _C.full((x.shape[0], by), fill, dtype=x.dtype, device=x.device)
    return _C.cat([pad, x[:, :x.shape[1] - by]], 1)


def _padded_targets(targets, target_lengths, blank):
    """[N, L] int64 targets, L the longest target, blank past each one's end."""
    n, longest = len(target_lengths), max(target_lengths + [0])
    if targets.dim() == 2:
        if targets.shape[1] < longest:
            raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension "
                               f"1, but got size {targets.shape[1]} for argument #2 'targets'")
        rows = targets[:, :longest].to(_C.int64).tolist()
    else:
        flat = targets.reshape(-1).to(_C.int64).tolist()
        if len(flat) < sum(target_lengths):
            raise RuntimeError(f"Expected the concatenated targets to hold "
                               f"{sum(target_lengths)} labels (the sum of target_lengths), got "
                               f"{len(flat)}")
        rows, start = [], 0
        for length in target_lengths:
            rows.append(flat[start:start + length] + [blank] * (longest - length))
            start += length
    rows = [row[:length] + [blank] * (longest - length)
            for row, length in zip(rows, target_lengths)]
    return _C.tensor(rows, dtype=_C.int64).reshape(n, longest)


def _check(log_probs, input_lengths, target_lengths, blank):
    t, n, c = log_probs.shape
    if not 0 <= blank < c:
        raise RuntimeError(f"blank must be in label range [0, {c}), got {blank}")
    if len(input_lengths) != n:
        raise RuntimeError(f"input_lengths must be of size batch_size ({n}), got "
                           f"{len(input_lengths)}")
    if len(target_lengths) != n:
        raise RuntimeError(f"target_lengths must be of size batch_size ({n}), got "
                           f"{len(target_lengths)}")
    for length in input_lengths:
        if not 0 <= length <= t:
            raise RuntimeError(f"Expected input_lengths to have value at most {t} (and not "
                               f"negative), but got value {length}")
    if any(length < 0 for length in target_lengths):
        raise RuntimeError(f"Expected non-negative target_lengths, got {target_lengths}")


@float32_under_autocast
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_probs.dim() not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs of 2 (unbatched) or 3 dimensions "
                           f"[T, N, C], got {log_probs.dim()}")
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.reshape(1, -1)
    input_lengths = _as_list(input_lengths)
    target_lengths = _as_list(target_lengths)
    _check(log_probs, input_lengths, target_lengths, blank)
    frames, n, classes = log_probs.shape
    labels = _padded_targets(targets, target_lengths, blank).to(device=log_probs.device)
    if labels.numel() and (bool((labels < 0).any()) or bool((labels >= classes).any())):
        raise RuntimeError(f"ctc_loss: target labels must lie in [0, {classes})")
    longest = labels.shape[1]
    # the extended label sequence: blank, l1, blank, l2, ..., blank (2L + 1 positions)
    blanks = _C.full((n, longest), blank, dtype=_C.int64, device=log_probs.device)
    extended = _C.cat([_C.stack([blanks, labels], 2).reshape(n, 2 * longest),
                       blanks[:, :1] if longest else
                       _C.full((n, 1), blank, dtype=_C.int64, device=log_probs.device)], 1)
    width = extended.shape[1]
    # a label may be reached from two places back unless it is a blank or repeats that one
    may_skip = (extended != blank) & (extended != _shift_right(extended, 2, -1))
    emissions = log_probs.gather(2, extended.unsqueeze(0).expand(frames, n, width))
    neg_inf = _C.full((n, width), float("-inf"), dtype=log_probs.dtype, device=log_probs.device)
    starts = _C.arange(width, device=log_probs.device).reshape(1, -1) < 2
    alpha = _C.where(starts, emissions[0], neg_inf)
    lengths = _C.tensor(input_lengths, dtype=_C.int64, device=log_probs.device).reshape(n, 1)
    for t in range(1, max(input_lengths + [1])):
        from_two_back = _C.where(may_skip, _shift_right(alpha, 2, float("-inf")), neg_inf)
        step = _log_add(alpha, _shift_right(alpha, 1, float("-inf")), from_two_back) \
            + emissions[t]
        alpha = _C.where(lengths > t, step, alpha)
    # the path ends on the last label or on the blank after it
    ends = _C.tensor([2 * length for length in target_lengths], dtype=_C.int64,
                     device=log_probs.device).reshape(n, 1)
    last_blank = alpha.gather(1, ends).reshape(n)
    last_label = alpha.gather(1, (ends - 1).clamp(min=0)).reshape(n)
    has_label = ends.reshape(n) > 0
    last_label = _C.where(has_label, last_label, neg_inf[:, 0])
    nll = -_log_add(last_blank, last_label)
    nll = nll + _torch_gradient_offset(log_probs, lengths)
    if zero_infinity:
        nll = _C.where(_C.isinf(nll), _C.zeros_like(nll), nll)
    if reduction == "none":
        return nll.reshape(()) if unbatched else nll
    if reduction == "sum":
        return nll.sum()
    divisor = _C.tensor(target_lengths, dtype=log_probs.dtype, device=log_probs.device)
    return (nll / divisor.clamp(min=1)).mean()


def _torch_gradient_offset(log_probs, lengths):
    """Zero in value; its gradient adds exp(log_probs) on the frames each sequence uses.
    torch's ctc_loss returns exp(log_probs) - posterior as the gradient of log_probs (the
    gradient of the logits when log_probs is their log_softmax; the exact gradient is
    -posterior), and through a log_softmax both give the same logits gradient."""
    frames, n = log_probs.shape[0], log_probs.shape[1]
    probs = _C.exp(log_probs)
    used = _C.arange(frames, device=log_probs.device).reshape(frames, 1, 1) < \
        lengths.reshape(1, n, 1)
    offset = _C.where(used, probs - probs.detach(), _C.zeros_like(probs))
    return offset.sum((0, 2))
