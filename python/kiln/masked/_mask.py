"""The machinery every masked operation shares: which dims a `dim` argument names, the mask
broadcast to the input, and the input with its masked-out elements replaced by the identity
of the operation (0 for sum, 1 for prod, -inf for amax, ...), so that an ordinary reduction
over the result ignores them. Names and messages follow torch.masked's private helpers of
the same names, which torch exports too."""
import builtins

import kiln


def _canonical_dim(dim, ndim):
    """dim (None, an int, or a sequence; () means every dim, as torch's reductions still
    read it) as a sorted tuple of non-negative dims. A 0-d input has one dim to name, 0."""
    if dim == ():
        dim = None
    if dim is None:
        return tuple(range(ndim))
    ndim = builtins.max(ndim, 1)
    dims = []
    for d in (dim,) if isinstance(dim, builtins.int) else dim:
        if d in dims:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        if d >= ndim or d < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                             f"{ndim - 1}], but got {d})")
        dims.append(d % ndim)
    return tuple(sorted(dims))


def _input_mask(input, *args, **kwargs):
    """The `mask` keyword as a boolean tensor of input's shape: broadcast (never to fewer
    dims than it has) and converted with .to(bool), so nonzero numbers count as True."""
    mask = kwargs.get("mask")
    if mask is None:
        raise ValueError("_input_mask requires explicit mask")
    if mask.shape != input.shape:
        if mask.dim() > input.dim():
            raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality "
                             "higher than of the input)")
        mask = kiln.broadcast_to(mask.clone(), input.shape)
    return mask.to(dtype=kiln.bool)


def _reduction_identity(op_name, input, *args):
    """The value x with op(x, v) == op(v) for every v, as a 0-d tensor of input's dtype, or
    None where there is none (mean, var, std: their fully masked-out results are nan)."""
    dtype = input.dtype
    op_name = op_name.rsplit(".", 1)[-1]
    floating = kiln.is_floating_point(input)
    # integer types with a representable extreme: signed ones, and uint8 (bool has none)
    has_int_limits = dtype == kiln.uint8 or (not floating and dtype != kiln.bool
                                              and kiln.is_signed(input))

    def const(value, dt=dtype):
        return kiln.tensor(value, dtype=dt, device=input.device)

    if op_name in ("sum", "cumsum"):
        return const(0)
    if op_name in ("prod", "cumprod"):
        return const(1)
    if op_name in ("amax", "argmax", "logaddexp", "logsumexp"):
        if floating:
            return const(-float("inf"))
        if has_int_limits:
            return const(kiln.iinfo(dtype).min)
    elif op_name in ("amin", "argmin"):
        if floating:
            return const(float("inf"))
        if has_int_limits:
            return const(kiln.iinfo(dtype).max)
    elif op_name in ("mean", "var", "std"):
        return None
    elif op_name == "norm":
        ord = args[0] if args else 2
        if ord == float("-inf"):
            if not floating:
                raise AssertionError(f"input must be floating point, got {dtype}")
            return const(float("inf"))
        return const(0)
    elif op_name == "median":
        # nanmedian does the reduction, and NaN is what it skips
        return const(float("nan"), dtype if floating else kiln.float32)
    raise NotImplementedError(f"identity of {op_name} on {dtype} input")


def _where(mask, input, fill_value):
    """kiln.where (torch's helper also handles sparse layouts, which kiln does not have)."""
    return kiln.where(mask, input, fill_value)


def _combine_input_and_mask(op, input, mask, *args):
    """input with the elements outside mask replaced by op's identity (input itself when
    there is no mask). A MaskedTensor brings its own mask, which wins over `mask`."""
    from .maskedtensor.core import is_masked_tensor
    if is_masked_tensor(input):
        input, mask = input.get_data(), input.get_mask()
    if mask is None:
        return input
    if not callable(op):
        raise ValueError(f"_combine_input_and_mask expected masked operation (got "
                         f"{type(op).__name__} object)")
    canonical = _input_mask(input, mask=mask)
    return _where(canonical, input, _reduction_identity(op.__name__, input, *args))


_REDUCTIONS = {"sum", "prod", "amax", "amin", "argmax", "argmin", "mean", "median", "norm",
               "var", "std", "logsumexp"}
_NORMALIZATIONS = {"softmax", "log_softmax", "softmin", "normalize", "cumsum", "cumprod"}


def _output_mask(op, input, *args, **kwargs):
    """Which output elements of op(input, *args, **kwargs) have at least one masked-in
    input element: the mask itself for normalizations, any() over the reduced dims for
    reductions."""
    if not callable(op):
        raise ValueError(f"_output_mask expected masked operation (got {type(op).__name__} "
                         f"object)")
    if op.__name__ in _REDUCTIONS:
        if op.__name__ == "norm" and args:
            args = args[1:]  # the ord argument comes before dim
        dim = args[0] if args else kwargs.get("dim")
        outmask = _input_mask(input, *args, **kwargs)
        keepdim = builtins.bool(kwargs.get("keepdim", False))
        for d in reversed(_canonical_dim(dim, input.dim())):
            outmask = outmask.any(dim=d, keepdim=keepdim)
        return outmask
    if op.__name__ in _NORMALIZATIONS:
        return _input_mask(input, *args, **kwargs)
    raise ValueError(f"_output_mask expected masked operation (got callable {op.__module__}."
                     f"{op.__name__})")


def _unwrap(input, mask):
    """(data, mask) of a MaskedTensor input (its own mask wins), else (input, mask)."""
    from .maskedtensor.core import is_masked_tensor
    if is_masked_tensor(input):
        return input.get_data(), input.get_mask()
    return input, mask


# dtypes that sum and prod accumulate in int64 (as torch.sum does without a dtype)
_PROMOTED_TO_INT64 = ("uint8", "bool", "int8", "int16", "int32")


def _accumulation_dtype(input, dtype):
    if dtype is not None:
        return dtype
    if str(input.dtype).rsplit(".", 1)[-1] in _PROMOTED_TO_INT64:
        return kiln.int64
    return input.dtype
