"""kiln.nn.functional (continued): embedding_bag as torch.nn.functional's, composed of kiln's
ops in Python (decision 0079): every index's row is looked up once, each row is given the
number of its bag (from the offsets), and the rows are summed (scatter_add) or maxed
(scatter_reduce "amax") into their bags, so weight and per_sample_weights differentiate."""
from .. import _C

__all__ = ["embedding_bag"]


def _check_arguments(input, weight, offsets, mode, per_sample_weights, max_norm,
                     scale_grad_by_freq, sparse):
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({tuple(per_sample_weights.shape)})"
                         f" is not None, then it must have the same shape as the input "
                         f"({tuple(input.shape)})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    if input.dim() == 2 and offsets is not None:
        raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated is "
                         f"a mini-batch of fixed length sequences. However, found offsets of "
                         f"type {type(offsets)}")
    if input.dim() == 1 and (offsets is None or offsets.dim() != 1):
        raise ValueError(f"offsets has to be a 1D Tensor but got "
                         f"{None if offsets is None else f'{offsets.dim()}-D'}")
    if input.dim() not in (1, 2):
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' "
                                  f"(got mode='{mode}').")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: max_norm, scale_grad_by_freq and sparse are "
                                  "not supported by kiln")


def _bag_of_each_index(offsets, n_indices, n_bags, include_last_offset):
    """[n_indices] int64: the bag each position of the flat input belongs to."""
    if offsets.numel() and int(offsets[0]) != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the "
                           f"mini-batch has to start from position 0. However, got "
                           f"{int(offsets[0])}")
    if offsets.numel() > 1 and bool((offsets[1:] < offsets[:-1]).any()):
        raise RuntimeError("offsets has to be a non-decreasing sequence")
    if offsets.numel() and int(offsets[-1]) > n_indices:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length "
                           f"({n_indices}), but got offsets[-1] of {int(offsets[-1])}")
    # a bag's start marks one step; a position's bag is the number of starts at or before it
    starts = offsets[:n_bags].to(_C.int64)
    starts = starts[starts < n_indices]
    steps = _C.zeros(n_indices, dtype=_C.int64, device=offsets.device) \
        .scatter_add(0, starts, _C.ones_like(starts))
    bag = steps.cumsum(0) - 1
    if include_last_offset:
        # positions past the last offset belong to no bag
        past = _C.arange(n_indices, device=offsets.device) >= int(offsets[-1])
        bag = _C.where(past, _C.full_like(bag, n_bags), bag)
    return bag


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    _check_arguments(input, weight, offsets, mode, per_sample_weights, max_norm,
                     scale_grad_by_freq, sparse)
    n_rows, dim = weight.shape
    if padding_idx is not None:
        if not -n_rows <= padding_idx < n_rows:
            raise AssertionError(f"padding_idx must be within the number of embeddings "
                                 f"[-{n_rows}, {n_rows}), got {padding_idx}")
        padding_idx = padding_idx % n_rows
    if input.dim() == 2:
        n_bags, per_bag = input.shape
        offsets = _C.arange(0, input.numel(), max(per_bag, 1), device=input.device)[:n_bags]
        include_last_offset = False
    else:
        n_bags = offsets.numel() - 1 if include_last_offset else offsets.numel()
    indices = input.reshape(-1).to(_C.int64)
    if indices.numel() and (bool((indices < 0).any()) or bool((indices >= n_rows).any())):
        raise IndexError(f"embedding_bag: index out of range: the indices must lie in [0, "
                         f"{n_rows}), got {int(indices.min())} .. {int(indices.max())}")
    bag = _bag_of_each_index(offsets, indices.numel(), n_bags, include_last_offset)
    if padding_idx is not None:  # padding entries count for nothing, not even the mean
        bag = _C.where(indices == padding_idx, _C.full_like(bag, n_bags), bag)
    rows = weight.index_select(0, indices)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    # one extra bag (number n_bags) collects the entries that belong to none
    target = bag.reshape(-1, 1).expand(indices.numel(), dim)
    zeros = _C.zeros(n_bags + 1, dim, dtype=weight.dtype, device=weight.device)
    if mode == "max":
        out = zeros.scatter_reduce(0, target, rows, "amax", include_self=False)
        return out[:n_bags]
    out = zeros.scatter_add(0, target, rows)[:n_bags]
    if mode == "mean":
        counts = _C.zeros(n_bags + 1, dtype=weight.dtype, device=weight.device) \
            .scatter_add(0, bag, _C.ones(indices.numel(), dtype=weight.dtype,
                                         device=weight.device))[:n_bags]
        out = out / counts.clamp(min=1).reshape(-1, 1)
    return out
