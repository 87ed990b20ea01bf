"""torch functions composed of kiln's ops, continued (decision 0074): order statistics
(median, nanmedian, kthvalue, quantile, nanquantile, msort), running extremes (cummax,
cummin), counting (bincount, histc), in-place forms of out-of-place ops (index_add_, tril_,
fill_diagonal_, masked_scatter_, ...) and the random fills torch has beyond uniform / normal
(exponential_, geometric_, log_normal_, cauchy_). Helper tensors (indices, counts) are made
on the input's device: the ops take no mixed cpu / xpu operands."""
import builtins as _b
import math as _math

from . import _C
from ._composite import _export, _NAMES, _METHODS  # noqa: F401  (the shared registry)


def _values_indices(name, values, indices):
    from . import return_types
    return getattr(return_types, name)(values, indices)


def _pick(sorted_values, order, dim, k, keepdim):
    """sorted_values / order at position k (an int64 tensor with dim of size 1) along dim."""
    v, i = sorted_values.gather(dim, k), order.gather(dim, k)
    return (v, i) if keepdim else (v.squeeze(dim), i.squeeze(dim))


# --- order statistics ---------------------------------------------------------------------

def _median(input, dim, keepdim, ignore_nan, name):
    if dim is None:
        x = input.reshape(-1)
        if x.numel() == 0:
            return _C.full((), _math.nan, dtype=input.dtype, device=input.device)
        r = _median(x, 0, False, ignore_nan, name)
        return r[0]
    if input.dim() == 0:  # a 0-d tensor is its own median, at index 0 (dim 0 or -1, as torch)
        if dim not in (0, -1):
            raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but "
                             f"got {dim})")
        v, i = _median(input.reshape(1), 0, False, ignore_nan, name)
        return _values_indices(name, v.reshape(()), i.reshape(()))
    s, order = input.sort(dim)  # NaN sorts last
    n = input.size(dim)
    nans = _C.isnan(input).to(_C.int64).sum(dim, True) if input.is_floating_point() else \
        _C.zeros_like(s.narrow(dim, 0, 1), dtype=_C.int64)
    if ignore_nan:  # the lower median of the values that are not NaN (NaN if none)
        k = ((n - nans - 1) // 2).clamp(0, _b.max(n - 1, 0))
    else:  # NaN if the line has one: the first NaN's position
        k = _C.where(nans > 0, n - nans, _C.full_like(nans, (n - 1) // 2))
    v, i = _pick(s, order, dim, k, keepdim)
    return _values_indices(name, v, i)


@_export()
def median(input, dim=None, keepdim=False):
    return _median(input, dim, keepdim, False, "median")


@_export()
def nanmedian(input, dim=None, keepdim=False):
    return _median(input, dim, keepdim, True, "nanmedian")


@_export()
def kthvalue(input, k, dim=-1, keepdim=False):
    n = input.size(dim) if input.dim() else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    x = input if input.dim() else input.reshape(1)
    s, order = x.sort(dim)
    shape = list(x.shape)
    shape[dim] = 1
    v, i = _pick(s, order, dim, _C.full(shape, k - 1, dtype=_C.int64, device=x.device),
                 keepdim or not input.dim())
    if not input.dim():
        v, i = v.reshape(()), i.reshape(())
    return _values_indices("kthvalue", v, i)


@_export()
def msort(input):
    return input.sort(0)[0]


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, name):
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                         f"midpoint or nearest. Got {interpolation}")
    if not input.is_floating_point():
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    scalar_q = not isinstance(q, _C.Tensor)
    qs = _C.tensor([float(q)], dtype=input.dtype, device=input.device) if scalar_q else \
        q.to(input.dtype).reshape(-1)
    if bool(((qs < 0) | (qs > 1)).any()):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    if input.dim() == 0 and dim is not None:  # dim 0 / -1 of a 0-d tensor: the whole tensor
        if dim not in (0, -1):
            raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but "
                             f"got {dim})")
        return _quantile(input, q, None, False, interpolation, ignore_nan, name)
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else dim % _b.max(x.dim(), 1)
    s = x.sort(d)[0].movedim(d, -1).unsqueeze(-2)  # [..., 1, n]
    n = s.size(-1)
    nans = _C.isnan(s).to(input.dtype).sum(-1, True)  # [..., 1, 1]
    valid = (n - nans) if ignore_nan else _C.full_like(nans, n)
    pos = qs.reshape((1,) * (s.dim() - 2) + (-1, 1)) * (valid - 1).clamp(min=0)  # [..., Q, 1]
    if interpolation == "lower":
        pos = _C.floor(pos)
    elif interpolation == "higher":
        pos = _C.ceil(pos)
    elif interpolation == "nearest":
        pos = _C.round(pos)
    lo = _C.floor(pos).to(_C.int64).clamp(0, _b.max(n - 1, 0))
    hi = _C.ceil(pos).to(_C.int64).clamp(0, _b.max(n - 1, 0))
    expand = tuple(pos.shape[:-1]) + (n,)
    a, b = s.expand(expand).gather(-1, lo), s.expand(expand).gather(-1, hi)
    if interpolation == "midpoint":
        r = _C.where(lo == hi, a, (a + b) * 0.5)
    else:
        r = _C.lerp(a, b, pos - lo.to(pos.dtype))
    r = r.squeeze(-1)  # [..., Q]
    bad = (valid == 0).squeeze(-1) if ignore_nan else (nans > 0).squeeze(-1)
    r = _C.where(bad, _C.full_like(r, _math.nan), r)
    r = r.movedim(-1, 0)  # [Q, ...]
    if keepdim:
        if dim is None:
            r = r.reshape((r.size(0),) + (1,) * input.dim())
        else:
            r = r.unsqueeze(d + 1)
    return r[0] if scalar_q else r


@_export()
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@_export()
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


# --- running extremes ---------------------------------------------------------------------

def _cumulative_extreme(input, dim, greater, name):
    """A log-step (Hillis-Steele) scan of (value, index) pairs: each step combines every
    position with the one `shift` before it; the later one wins ties (torch's indices) and
    NaN wins over numbers."""
    x = input
    n = x.size(dim) if x.dim() else 1
    if x.dim() == 0:
        return _values_indices(name, x.clone(), _C.zeros((), dtype=_C.int64, device=x.device))
    shape = [1] * x.dim()
    shape[dim] = n
    idx = _C.arange(n, device=x.device).reshape(shape).expand(tuple(x.shape)).contiguous()
    v = x.detach()
    shift = 1
    while shift < n:
        prev_v = v.narrow(dim, 0, n - shift)
        prev_i = idx.narrow(dim, 0, n - shift)
        cur_v = v.narrow(dim, shift, n - shift)
        cur_i = idx.narrow(dim, shift, n - shift)
        better = (cur_v >= prev_v) if greater else (cur_v <= prev_v)
        if v.is_floating_point():
            better = _C.isnan(cur_v) | (~_C.isnan(prev_v) & better)
        new_v = _C.where(better, cur_v, prev_v)
        new_i = _C.where(better, cur_i, prev_i)
        v = _C.cat([v.narrow(dim, 0, shift), new_v], dim)
        idx = _C.cat([idx.narrow(dim, 0, shift), new_i], dim)
        shift *= 2
    return _values_indices(name, x.gather(dim, idx), idx)  # values through x: differentiable


@_export()
def cummax(input, dim):
    return _cumulative_extreme(input, dim, True, "cummax")


@_export()
def cummin(input, dim):
    return _cumulative_extreme(input, dim, False, "cummin")


# --- counting -----------------------------------------------------------------------------

@_export()
def bincount(input, weights=None, minlength=0):
    if input.dim() != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if input.is_floating_point() or input.dtype == _C.bool:
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs.")
    if input.numel() and _b.bool((input < 0).any()):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    size = _b.max(int(input.max().item()) + 1 if input.numel() else 0, minlength)
    idx = input.to(_C.int64)
    if weights is None:
        return _C.zeros(size, dtype=_C.int64, device=idx.device).scatter_add(
            0, idx, _C.ones_like(idx))
    w = weights.to(_C.float64) if not weights.is_floating_point() else weights
    dtype = _C.float64 if weights.dtype != _C.float32 else _C.float32
    return _C.zeros(size, dtype=dtype, device=idx.device).scatter_add(0, idx, w.to(dtype))


@_export()
def histc(input, bins=100, min=0, max=0):
    if not input.is_floating_point():
        raise RuntimeError(f'"histogram_cpu" not implemented for \'{str(input.dtype)[5:]}\'')
    if bins <= 0:
        raise RuntimeError("bins must be > 0")
    x = input.reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and x.numel():
        lo, hi = float(x.min().item()), float(x.max().item())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError("max must be larger than min")
    inside = (x >= lo) & (x <= hi)
    b = ((x - lo) * (bins / (hi - lo))).floor().to(_C.int64).clamp(0, bins - 1)
    counts = _C.zeros(bins, dtype=input.dtype, device=input.device)
    return counts.scatter_add(0, b, inside.to(input.dtype))


# --- in-place forms -----------------------------------------------------------------------

def _inplace(name, fn):
    def method(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))
    method.__name__ = name
    _METHODS.append(name)
    globals()[name] = method
    return method


def _late(name):  # the out-of-place function, looked up on kiln at call time
    def call(self, *args, **kwargs):
        from . import _composite
        fn = getattr(_composite, name, None) or getattr(_C, name, None)
        return fn(self, *args, **kwargs) if fn is not None else getattr(self, name)(*args,
                                                                                    **kwargs)
    return call


for _name in ("index_add", "index_copy", "index_fill", "scatter_add", "scatter_reduce",
              "tril", "triu", "masked_scatter"):
    _inplace(_name + "_", _late(_name))


@_export()
def masked_scatter(input, mask, source):
    m = mask.expand(tuple(input.shape)) if tuple(mask.shape) != tuple(input.shape) else mask
    out = input.clone()
    count = int(m.to(_C.int64).sum().item())
    if source.numel() < count:
        raise RuntimeError("masked_scatter: expected source to have at least as many elements "
                           f"as ones in mask ({count}), got {source.numel()}")
    out[m] = source.reshape(-1)[:count]
    return out


def fill_diagonal_(self, fill_value, wrap=False):
    """Fills the main diagonal (all indices equal; 2-d tall matrices with wrap: every
    (columns + 1)-th element), in place."""
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.dim() > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    n = _b.min(self.shape)
    step = sum(_math.prod(self.shape[d + 1:]) for d in range(self.dim()))
    flat = _C.arange(self.numel(), device=self.device).reshape(tuple(self.shape))
    limit = self.numel() if (wrap and self.dim() == 2) else n * step - step + 1
    mask = (flat % step == 0) & (flat < limit)
    if wrap and self.dim() == 2:  # after each block of C + 1 rows torch skips one row
        rows = _C.arange(self.size(0), device=self.device).reshape(-1, 1).expand(tuple(self.shape))
        cols = _C.arange(self.size(1), device=self.device).reshape(1, -1).expand(tuple(self.shape))
        mask = (rows % (self.size(1) + 1)) == cols
    return self.masked_fill_(mask, fill_value)


_METHODS.append("fill_diagonal_")


# --- random fills -------------------------------------------------------------------------

def _uniform_open(self, generator):
    u = _C.empty_like(self, dtype=_C.float64) if self.dtype != _C.float64 else \
        _C.empty_like(self)
    u.uniform_(0.0, 1.0, generator=generator) if generator is not None else u.uniform_()
    return u.clamp(min=1e-300)  # never log(0)


def exponential_(self, lambd=1.0, *, generator=None):
    return self.copy_(-_C.log1p(-_uniform_open(self, generator).clamp(max=1 - 1e-16)) / lambd)


def geometric_(self, p, *, generator=None):
    u = _uniform_open(self, generator)
    return self.copy_(_C.ceil(_C.log(u) / _math.log1p(-p)).clamp(min=1))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    z = _C.empty_like(self, dtype=_C.float64)
    z.normal_(mean, std, generator=generator) if generator is not None else z.normal_(mean, std)
    return self.copy_(_C.exp(z))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    u = _uniform_open(self, generator)
    return self.copy_(median + sigma * _C.tan(_math.pi * (u - 0.5)))


_METHODS.extend(["exponential_", "geometric_", "log_normal_", "cauchy_"])
