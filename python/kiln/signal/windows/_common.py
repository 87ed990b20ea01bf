"""What every window shares: the argument checks (with torch.signal.windows' errors), the
empty and one-sample windows, and the sample grid (a linspace)."""
import kiln

_STRIDED_NAMES = ("strided", "torch.strided", "kiln.strided")


def _is_strided(layout):
    # kiln has no layout objects (all its tensors are strided): None means the default,
    # and torch's name for it is accepted so that code written for torch runs unchanged.
    return layout is None or str(layout) in _STRIDED_NAMES


def resolve_dtype(dtype):
    return kiln.get_default_dtype() if dtype is None else dtype


def check(function_name, M, dtype, layout):
    """torch's checks, in its order: the length, the layout, then the dtype."""
    if M < 0:
        raise ValueError(f"{function_name} requires non-negative window length, got M={M}")
    if not _is_strided(layout):
        raise ValueError(f"{function_name} is implemented for strided tensors only, "
                         f"got: {layout}")
    if dtype not in (kiln.float32, kiln.float64):
        raise ValueError(f"{function_name} expects float32 or float64 dtypes, got: {dtype}")


def empty(dtype, device, requires_grad):
    return kiln.empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)


def ones(dtype, device, requires_grad):
    return kiln.ones((1,), dtype=dtype, device=device, requires_grad=requires_grad)


def grid(start, step, M, dtype, device, requires_grad):
    """start, start + step, ..., start + (M - 1) * step as a linspace; it is the leaf that
    requires grad, so the window itself carries a grad_fn, as torch's does."""
    return kiln.linspace(start, start + (M - 1) * step, M, dtype=dtype, device=device,
                         requires_grad=requires_grad)


def denominator(M, sym):
    """The period of the sampled curve: M - 1 for a symmetric window (both ends sampled),
    M for a periodic one (the sample that would repeat the first is left out)."""
    return M - 1 if sym else M
