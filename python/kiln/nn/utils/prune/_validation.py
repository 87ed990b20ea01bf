"""Checks and conversions shared by the pruning methods: how much to prune (a fraction or a
count), whether a tensor has channels, and the per-channel norm that LnStructured ranks by.
The exception types and messages are torch.nn.utils.prune's, so callers can match on them."""
import numbers

import kiln


def validate_amount_init(amount):
    """At construction (the tensor is not known yet): a count must be >= 0, a fraction must
    lie in [0, 1]. bool counts as an integer, as it does for numbers.Integral."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if isinstance(amount, numbers.Integral):
        bad = amount < 0
    else:  # written as two comparisons so that NaN passes here, as in torch
        bad = float(amount) > 1.0 or float(amount) < 0.0
    if bad:
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         f"non-negative integer")


def validate_amount(amount, tensor_size):
    """At pruning time: a count cannot exceed the number of units there are."""
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to "
                         f"prune={tensor_size}")


def nparams_toprune(amount, tensor_size):
    """A count is taken as is; a fraction is rounded half-to-even (Python's round), which is
    what decides e.g. that 0.5 of 5 units prunes 2."""
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def validate_structured(t):
    """Channels only exist along a dimension of a tensor with at least two."""
    if t.dim() <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. "
                         f"Found tensor of shape {t.shape} with {t.dim()} dims")


def validate_dim(t, dim):
    # Only the upper bound is checked here, as in torch; a too-negative dim fails later when
    # the shape is indexed (IndexError from the tuple).
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _matrix_norm_dims_error(dims):
    return RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got "
                        + " ".join(str(d) for d in dims))


def channel_norm(t, n, dim):
    """The L_n norm of every slice of t along dim (one value per channel), with torch.norm's
    meaning of n: a number is a vector norm over all the other dims; 'fro' is the 2-norm over
    at most two dims; 'nuc' is the nuclear norm over exactly two (batched along dim)."""
    dims = [d for d in range(t.dim()) if d != dim % t.dim()]
    if isinstance(n, str):
        if n == "fro":
            if len(dims) > 2:
                raise _matrix_norm_dims_error(dims)
            return kiln.linalg.vector_norm(t, 2.0, dims)
        if n == "nuc":
            # kiln.norm has no 'nuc'; matrix_norm batches over the remaining dim.
            if len(dims) != 2:
                raise _matrix_norm_dims_error(dims)
            return kiln.linalg.matrix_norm(t, "nuc", dim=tuple(dims))
        raise RuntimeError(f"linalg.matrix_norm: Order {n} not supported.")
    return kiln.linalg.vector_norm(t, float(n), dims)
