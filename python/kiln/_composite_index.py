"""Indexing and shape functions composed of kiln's ops (decision 0080): scatters into a view
(select_scatter, slice_scatter, diagonal_scatter, as_strided_scatter), put, index_reduce,
split_with_sizes, sum_to_size, unravel_index, unique_consecutive, combinations, the *_copy
forms of view ops and Tensor.new."""
import builtins as _b
import itertools as _itertools

from . import _C
from ._composite_more import export, METHODS, FUNCTIONS


# --- scatters into a view -----------------------------------------------------------------

def _scatter_into_view(input, src, view_of, name):
    """input with the elements that view_of(input) would show replaced by src: the view is
    taken of the flat positions (arange), so any view op works, and one scatter writes src
    (differentiable in both input and src)."""
    positions = view_of(_C.arange(input.numel(), device=input.device).reshape(tuple(input.shape)))
    if tuple(src.shape) != tuple(positions.shape):
        raise RuntimeError(f"{name}: expected src to have a size equal to the slice of self. "
                           f"src size = {list(src.shape)}, slice size = "
                           f"{list(positions.shape)}")
    if src.dtype != input.dtype:
        raise RuntimeError(f"{name}: expected src to have the dtype of self ({input.dtype}), "
                           f"got {src.dtype}")
    flat = input.reshape(-1)
    if positions.numel() == 0:
        return flat.clone().reshape(tuple(input.shape))
    out = flat.scatter(0, positions.reshape(-1), src.reshape(-1))
    return out.reshape(tuple(input.shape))


@export()
def select_scatter(input, src, dim, index):
    return _scatter_into_view(input, src, lambda t: t.select(dim, index), "select_scatter")


@export()
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    def view(t):
        return t.narrow(dim, 0, t.size(dim))[(slice(None),) * (dim % t.dim()) +
                                              (slice(start, end, step),)]
    return _scatter_into_view(input, src, view, "slice_scatter")


@export()
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    return _scatter_into_view(input, src, lambda t: t.diagonal(offset, dim1, dim2),
                              "diagonal_scatter")


@export()
def as_strided_scatter(input, src, size, stride, storage_offset=None):
    # input is taken as contiguous, as torch does
    offset = 0 if storage_offset is None else storage_offset
    return _scatter_into_view(input, src, lambda t: t.as_strided(size, stride, offset),
                              "as_strided_scatter")


@export()
def put(input, index, source, accumulate=False):
    """input with input.reshape(-1)[index] = source (summed with accumulate=True)."""
    if index.dtype != _C.int64:
        raise RuntimeError(f"put(): Expected a long tensor for index, but got {index.dtype}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"put(): self ({input.dtype}) and source ({source.dtype}) must "
                           "have the same scalar type")
    if index.numel() != source.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source.numel()}, "
                           f"index.numel() = {index.numel()}")
    n = input.numel()
    flat_index = index.reshape(-1)
    if flat_index.numel() and _b.bool(((flat_index >= n) | (flat_index < -n)).any()):
        bad = flat_index[(flat_index >= n) | (flat_index < -n)][0].item()
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} "
                         "elements.")
    flat_index = _C.where(flat_index < 0, flat_index + n, flat_index)
    flat = input.reshape(-1)
    src = source.reshape(-1)
    if accumulate:
        out = flat.scatter_add(0, flat_index, src)
    else:
        out = flat.scatter(0, flat_index, src)
    return out.reshape(tuple(input.shape))


_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


@export()
def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """scatter_reduce along dim with index repeated over source's other dimensions."""
    if reduce not in _INDEX_REDUCE:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    if index.dim() > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if source.dtype != input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({input.dtype}) and source "
                           f"({source.dtype}) must have the same scalar type")
    d = dim % _b.max(input.dim(), 1)
    if source.dim() and source.size(d) != index.numel():
        raise RuntimeError(f"index_reduce_(): Number of indices ({index.numel()}) should be "
                           f"equal to source.size(dim) ({source.size(d)})")
    shape = [1] * source.dim()
    if source.dim():
        shape[d] = index.numel()
    idx = index.reshape(shape).expand(tuple(source.shape))
    return input.scatter_reduce(d, idx, source, reduce, include_self=include_self)


# --- splitting and shapes -----------------------------------------------------------------

@export()
def split_with_sizes(input, split_sizes, dim=0):
    sizes = list(split_sizes)
    if sum(sizes) != input.size(dim) or any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to "
                           f"{input.size(dim)} (input tensor's size at dimension {dim}), but "
                           f"got split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(input.narrow(dim, start, s))
        start += s
    return tuple(out)


@export()
def unsafe_split(input, split_size, dim=0):
    return tuple(input.split(split_size, dim))


@export()
def unsafe_chunk(input, chunks, dim=0):
    return tuple(input.chunk(chunks, dim))


@export()
def unsafe_split_with_sizes(input, split_sizes, dim=0):
    return split_with_sizes(input, split_sizes, dim)


@export(function=False)
def sum_to_size(self, *size):
    """Sums self down to `size`, which self's shape must be expandable from."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)) or (
            len(size) == 1 and not isinstance(size[0], int)):
        size = tuple(size[0])
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    ok = lead >= 0 and all(s == t or s == 1 for s, t in zip(size, shape[lead:]))
    if not ok:
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")
    r = self.sum(tuple(range(lead))) if lead else self
    dims = tuple(i for i, (s, t) in enumerate(zip(size, shape[lead:])) if s == 1 and t != 1)
    return r.sum(dims, True) if dims else r


METHODS["broadcast_to"] = lambda self, size: _C.broadcast_to(self, size)
METHODS["argwhere"] = lambda self: _C.argwhere(self)


# --- indices ------------------------------------------------------------------------------

@export(method=False)
def unravel_index(indices, shape):
    """The coordinates of flat indices in a tensor of `shape` (row-major), as a tuple."""
    t = indices if isinstance(indices, _C.Tensor) else _C.tensor(indices)
    if t.is_floating_point() or t.dtype == _C.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {t.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    # no range check, as torch: remainder and floor division wrap negative indices
    flat = t.to(_C.int64)
    coords = []
    for s in reversed(shape):
        coords.append(_C.remainder(flat, s))
        flat = _C.floor_divide(flat, s)
    return tuple(reversed(coords))


@export()
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """The first element of each run of equal elements (of equal slices along dim)."""
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else dim % _b.max(input.dim(), 1)
    n = x.size(d)
    if n == 0:
        empty = _C.zeros(0, dtype=_C.int64, device=x.device)
        out = [x.clone()] + ([empty.reshape(tuple(input.shape)) if dim is None else empty]
                             if return_inverse else []) + ([empty] if return_counts else [])
        return out[0] if len(out) == 1 else tuple(out)
    differs = x.narrow(d, 1, n - 1) != x.narrow(d, 0, n - 1)
    others = tuple(i for i in range(x.dim()) if i != d)
    if others:  # a slice starts a run when any of its elements differs
        differs = differs.any(others)
    starts = _C.cat([_C.ones(_b.min(n, 1), dtype=_C.bool, device=x.device), differs.reshape(-1)])
    run_of = _C.cumsum(starts.to(_C.int64), 0) - 1
    start_at = _C.nonzero(starts).reshape(-1)
    values = x.index_select(d, start_at)
    out = [values]
    if return_inverse:
        out.append(run_of.reshape(tuple(input.shape)) if dim is None else run_of)
    if return_counts:
        ends = _C.cat([start_at.narrow(0, 1, _b.max(start_at.numel() - 1, 0)),
                       _C.full((_b.min(start_at.numel(), 1),), n, dtype=_C.int64,
                               device=x.device)])
        out.append(ends - start_at)
    return values if len(out) == 1 else tuple(out)


@export(method=False)
def combinations(input, r=2, with_replacement=False):
    """The r-element combinations of a 1-d tensor's elements, one per row, in
    itertools.combinations order."""
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    where = {"dtype": _C.int64, "device": input.device}  # the row indices, by input's side
    if r == 0:  # indexing keeps the result in input's graph, as torch
        return input[_C.zeros(0, **where)]
    pick = _itertools.combinations_with_replacement if with_replacement else \
        _itertools.combinations
    rows = list(pick(range(input.numel()), r))
    if not rows:
        return input[_C.zeros((0, r), **where)]
    return input[_C.tensor(rows, **where)]


# --- copies of views ----------------------------------------------------------------------

def _copy_of(view_name, name=None):
    def copy(input, *args, **kwargs):
        r = getattr(input, view_name)(*args, **kwargs)
        return tuple(t.clone() for t in r) if isinstance(r, (tuple, list)) else r.clone()
    copy.__name__ = name or view_name + "_copy"
    FUNCTIONS[copy.__name__] = copy
    return copy


for _view in ("as_strided", "detach", "diagonal", "expand", "narrow", "permute", "select",
              "split", "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unfold",
              "unsqueeze", "view"):
    _copy_of(_view)
FUNCTIONS["alias_copy"] = lambda input: input.clone()
METHODS["narrow_copy"] = FUNCTIONS["narrow_copy"]


def slice_copy(input, dim=0, start=None, end=None, step=1):
    return input[(slice(None),) * (dim % input.dim()) + (slice(start, end, step),)].clone()


FUNCTIONS["slice_copy"] = slice_copy


# --- Tensor.new ---------------------------------------------------------------------------

def new(self, *args, **kwargs):
    """torch's legacy constructor: x.new() is empty, x.new(2, 3) / x.new(kiln.Size) an
    uninitialised tensor of that shape, x.new(sequence) / x.new(tensor) a tensor of that
    data, always of x's dtype and device."""
    kwargs.setdefault("dtype", self.dtype)
    kwargs.setdefault("device", self.device)
    if not args:
        return _C.empty(0, **kwargs)
    if all(isinstance(a, int) for a in args):
        return _C.empty(tuple(args), **kwargs)
    if len(args) == 1:
        data = args[0]
        from ._size import Size
        if isinstance(data, Size):
            return _C.empty(tuple(data), **kwargs)
        if isinstance(data, _C.Tensor):
            return data.detach().to(dtype=kwargs["dtype"], device=kwargs["device"])
        return _C.tensor(data, **kwargs)
    raise TypeError(f"new() received an invalid combination of arguments: {args}")


METHODS["new"] = new
