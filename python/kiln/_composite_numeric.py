"""Products, statistics, integration and histograms composed of kiln's ops (decision 0080):
tensordot, chain_matmul, addbmm, cov / corrcoef, trapezoid / cumulative_trapezoid, vander,
mode, histogram."""
import builtins as _b
import collections as _collections
import math as _math

from . import _C, _out_forms
from ._composite_more import export

_Mode = _collections.namedtuple("mode", ["values", "indices"])  # as torch.return_types
_Histogram = _collections.namedtuple("histogram", ["hist", "bin_edges"])


def _float(x):
    return x if x.is_floating_point() else x.to(_C.get_default_dtype())


# --- products -----------------------------------------------------------------------------

@export(method=False)
def tensordot(a, b, dims=2, out=None):
    """Sums a x b over dims (an int: a's last and b's first dims; or two lists) as one matrix
    product of the permuted, flattened operands."""
    if isinstance(dims, _C.Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.dim() or dims > b.dim():
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a, dims_b = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    dims_a = [d % a.dim() for d in dims_a]
    dims_b = [d % b.dim() for d in dims_b]
    for da, db in zip(dims_a, dims_b):
        if a.size(da) != b.size(db):
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.size(da)} in dim {da} and second has size {b.size(db)} in "
                               f"dim {db}")
    free_a = [d for d in range(a.dim()) if d not in dims_a]
    free_b = [d for d in range(b.dim()) if d not in dims_b]
    k = _math.prod(a.size(d) for d in dims_a)
    left = a.permute(free_a + dims_a).reshape(-1, k)
    right = b.permute(dims_b + free_b).reshape(k, -1)
    shape = tuple(a.size(d) for d in free_a) + tuple(b.size(d) for d in free_b)
    r = _C.matmul(left, right).reshape(shape)
    return _out_forms.store("tensordot", out, r, (a, b))


@export(method=False)
def chain_matmul(*matrices, out=None):
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f"chain_matmul(): Expected all tensors to be 2D, got {m.dim()}D")
    r = matrices[0].clone() if len(matrices) == 1 else matrices[0]
    for m in matrices[1:]:
        r = _C.matmul(r, m)
    return _out_forms.store("chain_matmul", out, r, matrices)


@export()
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum_b batch1[b] @ batch2[b], as one product: the batch folded
    into the inner dimension."""
    if batch1.dim() != 3 or batch2.dim() != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor, got {batch1.dim()}D and "
                           f"{batch2.dim()}D")
    if batch1.size(0) != batch2.size(0) or batch1.size(2) != batch2.size(1):
        raise RuntimeError(f"addbmm: incompatible batches {list(batch1.shape)} and "
                           f"{list(batch2.shape)}")
    b, n, m = batch1.shape
    left = batch1.permute(1, 0, 2).reshape(n, b * m)
    r = _C.matmul(left, batch2.reshape(b * m, batch2.size(2)))
    r = r * alpha if alpha != 1 else r
    if beta == 0:  # input ignored, NaN included, as torch
        return r + _C.zeros_like(input) if tuple(input.shape) != tuple(r.shape) else r
    return (input * beta if beta != 1 else input) + r


# --- statistics ---------------------------------------------------------------------------

@export()
def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the rows (variables) over the columns (observations), with integer
    frequency and float importance weights, torch's formula."""
    if input.dim() > 2:
        raise RuntimeError("cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.dim()} dimensions")
    x = _float(input).reshape(1, -1) if input.dim() < 2 else _float(input)
    n = x.size(1)
    w = None
    if fweights is not None:
        if fweights.dim() > 1 or fweights.is_floating_point():
            raise RuntimeError("cov(): expected fweights to have one or fewer dimensions and "
                               f"an integral dtype but got {fweights.dim()} dimensions and "
                               f"{fweights.dtype}")
        if fweights.numel() != n:
            raise RuntimeError(f"cov(): expected fweights to have the same numel as there are "
                               f"observations in the input but got {fweights.numel()} != {n}")
        if fweights.numel() and _b.bool((fweights < 0).any()):
            raise RuntimeError("cov(): fweights cannot be negative")
        w = fweights
    if aweights is not None:
        if aweights.dim() > 1 or not aweights.is_floating_point():
            raise RuntimeError("cov(): expected aweights to have one or fewer dimensions and "
                               f"a floating point dtype but got {aweights.dim()} dimensions "
                               f"and {aweights.dtype}")
        if aweights.numel() != n:
            raise RuntimeError(f"cov(): expected aweights to have the same numel as there are "
                               f"observations in the input but got {aweights.numel()} != {n}")
        if aweights.numel() and _b.bool((aweights < 0).any()):
            raise RuntimeError("cov(): aweights cannot be negative")
        w = aweights if w is None else w * aweights
    if w is None:
        avg = x.mean(1)
        w_sum = _C.full((), float(n), dtype=x.dtype, device=x.device)
        norm = w_sum - correction
    else:
        w = w.to(x.dtype) if not w.is_floating_point() else w
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if aweights is not None and correction != 0:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
        else:
            norm = w_sum - correction
    norm = norm.clamp(min=0.0)  # torch: a warning and inf / NaN results, not an error
    centred = x - avg.unsqueeze(1)
    weighted = centred if w is None else centred * w
    c = _C.matmul(centred, weighted.t()) / norm
    return c.squeeze()


@export()
def corrcoef(input):
    c = cov(input)
    if c.dim() == 0:
        return c / c  # 1, or NaN for a constant or NaN input, as torch
    std = _C.sqrt(c.diagonal())
    c = c / std.unsqueeze(1) / std.unsqueeze(0)
    return c.clamp(-1.0, 1.0)


# --- integration --------------------------------------------------------------------------

def _spacing(y, x, dim):
    """x's differences shaped to broadcast against y's pieces along dim (a 1-d x lies along
    dim)."""
    if x.dim() == 1:
        d = x.diff()
        if d.numel() != y.size(dim) - 1:
            raise RuntimeError(f"trapezoid: There must be one `x` value for each sample "
                               f"point, got {x.numel()} and {y.size(dim)}")
        shape = [1] * y.dim()
        shape[dim] = d.numel()
        return d.reshape(shape)
    return x.diff(dim=dim)


@export(method=False)
def trapezoid(y, x=None, *, dx=None, dim=-1):
    d = dim % _b.max(y.dim(), 1)
    n = y.size(d)
    if x is not None:
        if dx is not None:
            raise RuntimeError("trapezoid: received both x and dx")
        if n == 0:
            return _C.zeros_like(y.sum(d)).to(_C.promote_types(y.dtype, x.dtype))
        left, right = y.narrow(d, 0, n - 1), y.narrow(d, 1, n - 1)
        return (_spacing(y, x, d) * (left + right)).sum(d) * 0.5
    step = 1 if dx is None else dx
    if n == 0:  # torch: zeros of y's dtype
        return _C.zeros_like(y.sum(d), dtype=y.dtype)
    ends = y.select(d, 0) + y.select(d, n - 1)
    return (y.sum(d) - ends * 0.5) * step


@export(method=False)
def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


@export(method=False)
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    d = dim % _b.max(y.dim(), 1)
    n = y.size(d)
    left, right = y.narrow(d, 0, _b.max(n - 1, 0)), y.narrow(d, 1 if n else 0, _b.max(n - 1, 0))
    if x is not None:
        if dx is not None:
            raise RuntimeError("cumulative_trapezoid: received both x and dx")
        pieces = _spacing(y, x, d) * (left + right) * 0.5 if n else _float(left)
    else:
        step = 1 if dx is None else dx
        pieces = (step / 2.0) * (left + right)
    return pieces.cumsum(d)


@export(method=False)
def vander(x, N=None, increasing=False):
    """Columns x^(N-1) ... x^0 (increasing: x^0 ... x^(N-1)) by a running product; integer
    input gives int64, as torch."""
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.numel() if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = _C.promote_types(x.dtype, _C.int64)
    if n == 0:
        return _C.empty((x.numel(), 0), dtype=dtype, device=x.device)
    ones = _C.ones((x.numel(), 1), dtype=dtype, device=x.device)
    columns = x.to(dtype).unsqueeze(1).expand(x.numel(), n - 1)
    r = _C.cat([ones, columns], 1).cumprod(1)
    return r if increasing else r.flip(1)


# --- mode and histograms ------------------------------------------------------------------

@export()
def mode(input, dim=-1, keepdim=False):
    """The most frequent value along dim (the smallest among equally frequent ones) and the
    index of its last occurrence, as torch: runs of a stable sort."""
    if input.dim() == 0:
        return _Mode(input.clone(), _C.zeros((), dtype=_C.int64, device=input.device))
    d = dim % input.dim()
    x = input.movedim(d, -1)
    n = x.size(-1)
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {dim} to have non-zero size.")
    s, order = x.detach().sort(-1, stable=True)
    starts = _C.cat([_C.ones(tuple(s.shape[:-1]) + (1,), dtype=_C.bool, device=s.device),
                     s.narrow(-1, 1, n - 1) != s.narrow(-1, 0, n - 1)], -1)
    run = _C.cumsum(starts.to(_C.int64), -1) - 1
    counts = _C.zeros_like(run).scatter_add(-1, run, _C.ones_like(run))
    length = counts.gather(-1, run)  # at each position, the length of its run
    first = length.argmax(-1, True)  # first maximum: the smallest value's run start
    last = first + length.gather(-1, first) - 1
    index = order.gather(-1, last)
    values = x.gather(-1, index)  # through input: differentiable
    values, index = values.squeeze(-1), index.squeeze(-1)
    if keepdim:
        values, index = values.unsqueeze(d), index.unsqueeze(d)
    return _Mode(values, index)


@export()
def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """Counts (or summed weights) of the values in bins given by a count over [min, max]
    (range, or the data's) or by their edges; the last bin includes its right edge."""
    if input.dtype not in (_C.float32, _C.float64):  # torch: float32 / float64 only
        raise NotImplementedError(f"histogram: not implemented for {input.dtype} input (only "
                                  "float32 and float64)")
    x = input.detach().reshape(-1)
    if isinstance(bins, _C.Tensor):
        if bins.dim() != 1:
            raise RuntimeError("torch.histogram(): bins tensor should have one dimension, but "
                               f"got {bins.dim()} dimensions")
        edges = bins.to(input.dtype)
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins}")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif x.numel():
            lo, hi = float(x.min().item()), float(x.max().item())
        else:  # torch's bins for no data span [0, 1]
            lo, hi = 0.0, 1.0
        if lo > hi:
            raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min "
                               f"{lo} max {hi}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = _C.linspace(lo, hi, bins + 1, dtype=input.dtype, device=x.device)
    nbins = edges.numel() - 1
    w = _C.ones_like(x) if weight is None else weight.reshape(-1).to(x.dtype)
    inside = (x >= edges[0]) & (x <= edges[-1])
    from ._composite import searchsorted
    b = (searchsorted(edges, x, right=True) - 1).clamp(0, _b.max(nbins - 1, 0))
    hist = _C.zeros(_b.max(nbins, 0), dtype=input.dtype, device=x.device).scatter_add(
        0, b, _C.where(inside, w, _C.zeros_like(w)))
    if density:
        widths = edges.narrow(0, 1, nbins) - edges.narrow(0, 0, nbins)
        hist = hist / (hist.sum() * widths)
    return _Histogram(hist, edges)



# --- finite differences -------------------------------------------------------------------

def _along(t, d, ndim):
    """A 1-d tensor shaped to lie along dim d of an ndim-d tensor."""
    shape = [1] * ndim
    shape[d] = t.numel()
    return t.reshape(shape)


def _gradient_1d(f, d, h, edge_order):
    """df/dx along d: central differences inside (second order, unequal steps included), one-
    or two-sided second-order differences at the ends; h a number or the coordinates."""
    n = f.size(d)
    part = lambda start, length: f.narrow(d, start, length)  # noqa: E731
    if not isinstance(h, _C.Tensor):
        inner = (part(2, n - 2) - part(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first = (part(1, 1) - part(0, 1)) / h
            last = (part(n - 1, 1) - part(n - 2, 1)) / h
        else:
            first = (part(0, 1) * -1.5 + part(1, 1) * 2.0 - part(2, 1) * 0.5) / h
            last = (part(n - 3, 1) * 0.5 - part(n - 2, 1) * 2.0 + part(n - 1, 1) * 1.5) / h
        return _C.cat([first, inner, last], d)
    if h.numel() != n:
        raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and "
                           f"of size {n} along dim {d}, got {h.numel()}")
    step = _along(h.diff().to(f.dtype), d, f.dim())
    left, right = step.narrow(d, 0, n - 2), step.narrow(d, 1, n - 2)
    inner = (left * left * part(2, n - 2) - right * right * part(0, n - 2) +
             (right * right - left * left) * part(1, n - 2)) / (left * right * (left + right))
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) / step.narrow(d, 0, 1)
        last = (part(n - 1, 1) - part(n - 2, 1)) / step.narrow(d, n - 2, 1)
    else:
        h1, h2 = step.narrow(d, 0, 1), step.narrow(d, 1, 1)
        first = (-(2 * h1 + h2) / (h1 * (h1 + h2)) * part(0, 1) + (h1 + h2) / (h1 * h2) *
                 part(1, 1) - h1 / (h2 * (h1 + h2)) * part(2, 1))
        h1, h2 = step.narrow(d, n - 3, 1), step.narrow(d, n - 2, 1)
        last = (h2 / (h1 * (h1 + h2)) * part(n - 3, 1) - (h1 + h2) / (h1 * h2) *
                part(n - 2, 1) + (2 * h2 + h1) / (h2 * (h1 + h2)) * part(n - 1, 1))
    return _C.cat([first, inner, last], d)


@export(method=False)
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """One derivative estimate per dim (all dims by default), as torch.gradient."""
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got "
                           f"{edge_order}")
    dims = list(range(input.dim())) if dim is None else \
        [dim] if isinstance(dim, int) else list(dim)
    dims = [d % input.dim() for d in dims]
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar "
                               f"or a list of length {len(dims)}, got {len(spacing)}")
        steps = list(spacing)
    else:
        steps = [spacing] * len(dims)
    for d in dims:
        if input.size(d) < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
    f = _float(input)
    return tuple(_gradient_1d(f, d, h, edge_order) for d, h in zip(dims, steps))
