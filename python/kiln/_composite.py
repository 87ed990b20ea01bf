"""torch functions that are compositions of kiln's ops: elementwise math (inverse trig and
hyperbolic functions in cancellation-free forms, xlogy, hypot, logaddexp, ...), stacking and
splitting helpers, small linear algebra (diag, trace, kron, cross, mv, ...), comparisons of
whole tensors (allclose, isclose, equal, isin) and NaN-aware reductions. Each is written as
PyTorch defines it (its NaN, broadcasting and dtype rules); autograd differentiates them
through the ops. Installed as kiln.<name> and, where torch has one, as the Tensor method
(decision 0074)."""
import builtins as _b
import math as _math

from . import _C

_NAMES = []   # kiln.<name>
_METHODS = []  # Tensor.<name>


def _export(method=True):
    def register(fn):
        _NAMES.append(fn.__name__)
        if method:
            _METHODS.append(fn.__name__)
        return fn
    return register


def _float(x):
    return x if x.is_floating_point() else x.to(_C.get_default_dtype())


def _like(x, value):
    return _C.full_like(x, value)


# --- elementwise math ---------------------------------------------------------------------

@_export()
def square(input):
    return input * input


@_export()
def log10(input):
    return _C.log(_float(input)) * (1.0 / _math.log(10.0))


@_export()
def frac(input):
    return input - _C.trunc(input)


@_export()
def sgn(input):
    """input / |input| (0 at 0) for complex tensors, sign() for real ones, as torch.sgn."""
    return _C._sgn(input) if input.is_complex() else _C.sign(input)


@_export()
def positive(input):
    return input


@_export()
def deg2rad(input):
    return _float(input) * (_math.pi / 180.0)


@_export()
def rad2deg(input):
    return _float(input) * (180.0 / _math.pi)


@_export()
def asin(input):
    x = _float(input)
    return _C.atan2(x, _C.sqrt((1.0 - x) * (1.0 + x)))


@_export()
def acos(input):
    x = _float(input)
    return _C.atan2(_C.sqrt((1.0 - x) * (1.0 + x)), x)


@_export()
def atan(input):
    x = _float(input)
    return _C.atan2(x, _C.ones_like(x))


@_export()
def sinh(input):
    x = _float(input)
    return (_C.expm1(x) - _C.expm1(-x)) * 0.5  # no cancellation near 0


@_export()
def cosh(input):
    x = _float(input)
    return (_C.exp(x) + _C.exp(-x)) * 0.5


@_export()
def asinh(input):
    x = _float(input)
    a = _C.abs(x)
    # log1p(a + a^2 / (1 + sqrt(1 + a^2))): accurate near 0; large a: log(2a) (a^2 overflows)
    small = _C.log1p(a + a * a / (1.0 + _C.sqrt(1.0 + a * a)))
    big = _C.log(a) + _math.log(2.0)
    return _C.sign(x) * _C.where(a > 1e18, big, small)


@_export()
def acosh(input):
    x = _float(input)
    t = x - 1.0
    small = _C.log1p(t + _C.sqrt(t * (x + 1.0)))
    return _C.where(x > 1e18, _C.log(x) + _math.log(2.0), small)


@_export()
def atanh(input):
    x = _float(input)
    return 0.5 * _C.log1p(2.0 * x / (1.0 - x))


arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh
_NAMES += ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]
_METHODS += ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]


@_export()
def xlogy(input, other):
    # a Python number input becomes a tensor on other's device (as torch's wrapped scalars)
    x = input if isinstance(input, _C.Tensor) else _C.tensor(
        input, device=other.device if isinstance(other, _C.Tensor) else None)
    y = other if isinstance(other, _C.Tensor) else _like(_float(x), other)
    x, y = _float(x), _float(y)
    # 0 where x == 0 (even for y == 0), NaN where y is NaN, as torch
    r = _C.where(x == 0, _C.zeros_like(x), x * _C.log(y))
    return _C.where(_C.isnan(y), y, r)


@_export()
def hypot(input, other):
    a, b = _C.abs(input), _C.abs(other)
    hi, lo = _C.maximum(a, b), _C.minimum(a, b)
    ratio = _C.where(hi == 0, _C.zeros_like(lo), lo / hi)
    r = hi * _C.sqrt(1.0 + ratio * ratio)
    return _C.where(_C.isinf(a) | _C.isinf(b), _like(r, _math.inf), r)


@_export()
def logaddexp(input, other):
    m = _C.maximum(input, other)
    d = -_C.abs(input - other)
    r = m + _C.log1p(_C.exp(d))
    return _C.where(_C.isinf(m) & (input == other), m, r)  # inf + inf, -inf + -inf


@_export()
def logaddexp2(input, other):
    m = _C.maximum(input, other)
    d = -_C.abs(input - other)
    r = m + _C.log1p(_C.exp2(d)) * (1.0 / _math.log(2.0))
    return _C.where(_C.isinf(m) & (input == other), m, r)


@_export()
def copysign(input, other):
    x = _float(input)
    y = other if isinstance(other, _C.Tensor) else _like(x, other)
    neg = signbit(y)
    return _C.where(neg, -_C.abs(x), _C.abs(x))


@_export()
def signbit(input):
    if not input.is_floating_point():
        return input < 0
    # -0.0 counts (1 / -0.0 is -inf), and so does a NaN with its sign bit set, which only
    # its bits tell (read through numpy, and only when there is a NaN).
    x = input.detach()
    r = (x < 0) | ((x == 0) & ((1.0 / x) < 0))
    nan = _C.isnan(x)
    if _b.bool(nan.any()):
        import numpy as np
        bits = _C.tensor(np.signbit(x.float().numpy(force=True) if x.dtype in (
            _C.bfloat16, _C.float16) else x.numpy(force=True)), device=x.device)
        r = r | (nan & bits)
    return r


@_export()
def heaviside(input, values):
    return _C.where(input == 0, values.expand_as(input) if values.dim() else
                    _like(input, values.item()), (input > 0).to(input.dtype))


@_export()
def fmax(input, other):
    return _C.where(_C.isnan(other), input, _C.where(_C.isnan(input), other,
                                                     _C.maximum(input, other)))


@_export()
def fmin(input, other):
    return _C.where(_C.isnan(other), input, _C.where(_C.isnan(input), other,
                                                     _C.minimum(input, other)))


@_export()
def float_power(input, exponent):
    x = input.to(_C.float64) if isinstance(input, _C.Tensor) else input
    e = exponent.to(_C.float64) if isinstance(exponent, _C.Tensor) else float(exponent)
    return _C.pow(x, e)


@_export()
def logit(input, eps=None):
    x = _float(input)
    if eps is not None:
        x = _C.clamp(x, eps, 1.0 - eps)
    return _C.log(x / (1.0 - x))


@_export()
def isneginf(input):
    return _C.isinf(input) & (input < 0)


@_export()
def isposinf(input):
    return _C.isinf(input) & (input > 0)


@_export()
def isreal(input):
    return _C.ones_like(input, dtype=_C.bool)


# --- comparisons of whole tensors ---------------------------------------------------------

@_export()
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    if input.dtype != other.dtype:
        raise RuntimeError(f"{input.dtype} did not match {other.dtype}")
    if not input.is_floating_point() and not input.is_complex():
        a, b = input.to(_C.float64), other.to(_C.float64)
    else:
        a, b = input, other
    close = (a == b) | (_C.abs(a - b) <= atol + rtol * _C.abs(b))
    close = close & _C.isfinite(a - b) | (a == b)
    if equal_nan:
        close = close | (_C.isnan(a) & _C.isnan(b))
    return close


@_export()
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _b.bool(isclose(input, other, rtol, atol, equal_nan).all())


@_export()
def equal(input, other):
    if input.shape != other.shape:
        return False
    return _b.bool((input == other).all())


@_export()
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    # a Python scalar / list side is made on the other side's device
    e = elements if isinstance(elements, _C.Tensor) else _C.tensor(
        elements, device=test_elements.device if isinstance(test_elements, _C.Tensor) else None)
    t = test_elements if isinstance(test_elements, _C.Tensor) else _C.tensor(test_elements,
                                                                             device=e.device)
    t = t.reshape(-1)
    if t.numel() == 0:
        found = _C.zeros_like(e, dtype=_C.bool)
    else:  # sorted test values, a binary search per element (NaN matches nothing)
        s = t.sort()[0]
        i = searchsorted(s, e.to(s.dtype)).clamp(0, s.numel() - 1)
        found = s.gather(0, i.reshape(-1)).reshape(e.shape) == e
    return ~found if invert else found


# --- reductions ---------------------------------------------------------------------------

@_export()
def count_nonzero(input, dim=None):
    nz = input != 0  # the sum op counts bools into int64 without a widened copy
    return nz.sum() if dim is None else nz.sum(dim)


@_export()
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    x = _C.where(_C.isnan(input), _C.zeros_like(input), input) if input.is_floating_point() \
        else input
    if dtype is not None:
        x = x.to(dtype)
    return x.sum() if dim is None else x.sum(dim, keepdim)


@_export()
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    if not input.is_floating_point():
        raise RuntimeError("nanmean(): expected input to have floating point dtype but got "
                           f"{input.dtype}")
    valid = (~_C.isnan(input)).to(input.dtype)
    total = nansum(input, dim, keepdim, dtype=dtype)
    n = valid.sum() if dim is None else valid.sum(dim, keepdim)
    return total / n


@_export()
def aminmax(input, *, dim=None, keepdim=False):
    from .return_types import aminmax as _R
    if dim is None:
        return _R(input.amin(), input.amax()) if not keepdim else _R(
            input.amin(tuple(range(input.dim())), True), input.amax(tuple(range(input.dim())),
                                                                     True))
    return _R(input.amin(dim, keepdim), input.amax(dim, keepdim))


@_export()
def var_mean(input, dim=None, *, correction=1, keepdim=False):
    v = input.var(dim, correction=correction, keepdim=keepdim) if dim is not None else \
        input.var(correction=correction)
    m = input.mean(dim, keepdim) if dim is not None else input.mean()
    return v, m


@_export()
def std_mean(input, dim=None, *, correction=1, keepdim=False):
    s = input.std(dim, correction=correction, keepdim=keepdim) if dim is not None else \
        input.std(correction=correction)
    m = input.mean(dim, keepdim) if dim is not None else input.mean()
    return s, m


@_export()
def diff(input, n=1, dim=-1, prepend=None, append=None):
    x = input
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = _C.cat(parts, dim)
    for _ in range(n):
        length = x.size(dim)
        if length == 0:
            break
        a, b = x.narrow(dim, 1, length - 1), x.narrow(dim, 0, length - 1)
        x = (a != b) if x.dtype == _C.bool else a - b
    return x


# --- indexing -----------------------------------------------------------------------------

@_export()
def take(input, index):
    return input.reshape(-1)[index]


@_export()
def take_along_dim(input, indices, dim=None):
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    shape = list(_C.broadcast_shapes(tuple(input.shape), tuple(indices.shape)))
    shape_i, shape_x = list(shape), list(shape)
    shape_i[dim], shape_x[dim] = indices.size(dim), input.size(dim)
    return input.expand(shape_x).gather(dim, indices.expand(shape_i))


@_export()
def index_add(input, dim, index, source, *, alpha=1):
    # scatter_add along dim with the index broadcast to source's shape
    shape = [1] * source.dim()
    shape[dim] = index.numel()
    idx = index.reshape(shape).expand(source.shape)
    return input.scatter_add(dim, idx, source * alpha if alpha != 1 else source)


@_export()
def index_copy(input, dim, index, source):
    shape = [1] * source.dim()
    shape[dim] = index.numel()
    return input.scatter(dim, index.reshape(shape).expand(source.shape), source)


@_export()
def index_fill(input, dim, index, value):
    shape = [1] * input.dim()
    shape[dim] = index.numel()
    target = list(input.shape)
    target[dim] = index.numel()
    if isinstance(value, _C.Tensor):
        value = value.item()
    return input.scatter(dim, index.reshape(shape).expand(target), value)


@_export()
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """A binary search of every value, all values a step at a time (log2(n) gathers): memory
    of the values' size, not values x boundaries. The answer, the count of boundaries before
    each value, is built from the powers of two down (add, compare, where: no integer
    division, which the xpu backend has no int64 kernel for)."""
    if side is not None:
        right = side == "right"
    seq = sorted_sequence if sorter is None else sorted_sequence.gather(-1, sorter)
    scalar = not isinstance(input, _C.Tensor)
    v = _C.tensor([input], dtype=seq.dtype, device=seq.device) if scalar else input
    n = seq.size(-1)
    if seq.dim() == 1:
        flat = v.reshape(-1)
        pick = lambda i: seq.gather(0, i)  # noqa: E731
    else:
        if tuple(seq.shape[:-1]) != tuple(v.shape[:-1]):
            raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension "
                               "or the first N-1 dimensions of boundaries tensor and input "
                               "value tensor must match")
        flat = v
        pick = lambda i: seq.gather(-1, i)  # noqa: E731
    count = _C.zeros(flat.shape, dtype=_C.int64, device=seq.device)  # gathers from seq
    step = 1 << (n.bit_length() - 1) if n else 0
    while step:
        nxt = count + step  # take `step` more boundaries if the last of them is before v
        s = pick((nxt - 1).clamp(0, n - 1))
        # "not after v" as torch writes it: a NaN value counts every boundary (lands at n)
        go = ~((s > flat) if right else (s >= flat)) & (nxt <= n)
        count = _C.where(go, nxt, count)
        step >>= 1
    r = count.reshape(v.shape) if seq.dim() == 1 else count
    if scalar:
        r = r.reshape(())
    return r.to(_C.int32) if out_int32 else r


@_export(method=False)
def bucketize(input, boundaries, *, out_int32=False, right=False):
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# --- stacking, splitting, shapes ----------------------------------------------------------

@_export(method=False)
def atleast_1d(*tensors):
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    r = [t.reshape(1) if t.dim() == 0 else t for t in ts]
    return r[0] if len(tensors) == 1 and isinstance(tensors[0], _C.Tensor) else tuple(r)


@_export(method=False)
def atleast_2d(*tensors):
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    r = [t.reshape(1, 1) if t.dim() == 0 else t.unsqueeze(0) if t.dim() == 1 else t
         for t in ts]
    return r[0] if len(tensors) == 1 and isinstance(tensors[0], _C.Tensor) else tuple(r)


@_export(method=False)
def atleast_3d(*tensors):
    def one(t):
        if t.dim() == 0:
            return t.reshape(1, 1, 1)
        if t.dim() == 1:
            return t.reshape(1, -1, 1)
        if t.dim() == 2:
            return t.unsqueeze(-1)
        return t
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    r = [one(t) for t in ts]
    return r[0] if len(tensors) == 1 and isinstance(tensors[0], _C.Tensor) else tuple(r)


@_export(method=False)
def hstack(tensors):
    ts = atleast_1d(tuple(tensors))
    return _C.cat(list(ts), 0 if ts[0].dim() == 1 else 1)


@_export(method=False)
def vstack(tensors):
    return _C.cat(list(atleast_2d(tuple(tensors))), 0)


row_stack = vstack
_NAMES.append("row_stack")


@_export(method=False)
def dstack(tensors):
    return _C.cat(list(atleast_3d(tuple(tensors))), 2)


@_export(method=False)
def column_stack(tensors):
    ts = [t.reshape(-1, 1) if t.dim() <= 1 else t for t in tensors]
    return _C.cat(ts, 1)


@_export()
def tile(input, dims):
    dims = tuple(dims)
    if len(dims) < input.dim():
        dims = (1,) * (input.dim() - len(dims)) + dims
    return input.repeat(*dims)


@_export(method=False)
def meshgrid(*tensors, indexing="ij"):
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    ts = list(ts)
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                         f"received: {indexing}")
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t.numel() for t in ts]
    grids = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = -1
        grids.append(t.reshape(view).expand(shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


@_export(method=False)
def broadcast_tensors(*tensors):
    shape = ()
    for t in tensors:
        shape = _C.broadcast_shapes(shape, tuple(t.shape))
    return tuple(t.expand(shape) for t in tensors)


@_export()
def tensor_split(input, indices_or_sections=None, dim=0, *, sections=None, indices=None):
    if indices_or_sections is None:
        indices_or_sections = sections if sections is not None else indices
    if isinstance(indices_or_sections, _C.Tensor):
        indices_or_sections = indices_or_sections.tolist()
    n = input.size(dim)
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {k}")
        big, rest = divmod(n, k)
        bounds, start = [], 0
        for i in range(k):
            start += big + (1 if i < rest else 0)
            bounds.append(start)
        bounds = bounds[:-1]
    else:
        bounds = list(indices_or_sections)
    out, prev = [], 0
    for b in bounds + [n]:
        b = _b.max(prev, _b.min(b, n))
        out.append(input.narrow(dim, prev, b - prev))
        prev = b
    return tuple(out)


@_export()
def hsplit(input, indices_or_sections):
    return tensor_split(input, indices_or_sections, 0 if input.dim() == 1 else 1)


@_export()
def vsplit(input, indices_or_sections):
    return tensor_split(input, indices_or_sections, 0)


@_export()
def dsplit(input, indices_or_sections):
    return tensor_split(input, indices_or_sections, 2)


@_export()
def fliplr(input):
    return input.flip(1)


@_export()
def flipud(input):
    return input.flip(0)


@_export()
def rot90(input, k=1, dims=(0, 1)):
    d0, d1 = dims
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0).flip(d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


# --- small linear algebra -----------------------------------------------------------------

@_export()
def diag(input, diagonal=0):
    if input.dim() == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.dim() == 2:
        return input.diagonal(diagonal).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")


@_export()
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    n = input.size(-1) + _b.abs(offset)
    batch = tuple(input.shape[:-1])
    idx = _C.arange(input.size(-1), device=input.device)
    rows, cols = (idx, idx + offset) if offset >= 0 else (idx - offset, idx)
    flat = _C.zeros(batch + (n * n,), dtype=input.dtype, device=input.device)
    flat = flat.scatter(-1, (rows * n + cols).expand(batch + (input.size(-1),)), input)
    out = flat.reshape(batch + (n, n))
    nd = out.dim()
    d1, d2 = dim1 % nd, dim2 % nd
    if (d1, d2) != (nd - 2, nd - 1):  # the two new dims where dim1 / dim2 ask
        rest = iter(range(nd - 2))
        order = [nd - 2 if i == d1 else nd - 1 if i == d2 else next(rest) for i in range(nd)]
        out = out.permute(order)
    return out


@_export()
def diagflat(input, offset=0):
    return diag_embed(input.reshape(-1), offset)


@_export()
def trace(input):
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    return input.diagonal().sum()


@_export()
def mv(input, vec):
    if input.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.dim()}, "
                           f"{vec.dim()}")
    return _C.matmul(input, vec)


@_export()
def addmv(input, mat, vec, *, beta=1, alpha=1):
    r = _C.matmul(mat, vec)
    r = r * alpha if alpha != 1 else r
    return r if beta == 0 else (input * beta if beta != 1 else input) + r


@_export()
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    r = _C.outer(vec1, vec2)
    r = r * alpha if alpha != 1 else r
    return r if beta == 0 else (input * beta if beta != 1 else input) + r


@_export()
def inner(input, other):
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    k = input.size(-1)
    a, b = input.reshape(-1, k), other.reshape(-1, k)
    return _C.matmul(a, b.t()).reshape(tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


@_export()
def vdot(input, other):
    """sum(conj(input) * other), as torch.vdot (the conjugate matters for complex inputs)."""
    return (input.conj() * other).sum()


@_export()
def kron(input, other):
    a, b = input, other
    nd = _b.max(a.dim(), b.dim())
    a = a.reshape((1,) * (nd - a.dim()) + tuple(a.shape))
    b = b.reshape((1,) * (nd - b.dim()) + tuple(b.shape))
    # a[i, j] * b[k, l] at [i * K + k, j * L + l]
    ea = a.reshape(sum(((s, 1) for s in a.shape), ()))
    eb = b.reshape(sum(((1, s) for s in b.shape), ()))
    return (ea * eb).reshape(tuple(x * y for x, y in zip(a.shape, b.shape)))


@_export()
def cross(input, other, dim=None):
    if dim is None:
        dim = next(i for i, s in enumerate(_C.broadcast_shapes(tuple(input.shape),
                                                               tuple(other.shape))) if s == 3)
    a, b = broadcast_tensors(input, other)
    if a.size(dim) != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.size(dim)} and {other.size(dim)}")
    a0, a1, a2 = a.unbind(dim)
    b0, b1, b2 = b.unbind(dim)
    return _C.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim)


@_export(method=False)
def block_diag(*tensors):
    ts = [t.reshape(1, 1) if t.dim() == 0 else t.reshape(1, -1) if t.dim() == 1 else t
          for t in tensors]
    if not ts:
        return _C.zeros(1, 0)
    cols = sum(t.size(1) for t in ts)
    dtype = ts[0].dtype
    for t in ts[1:]:
        dtype = _C.promote_types(dtype, t.dtype)
    rows, c = [], 0
    for t in ts:
        left = _C.zeros(t.size(0), c, dtype=dtype, device=t.device)
        right = _C.zeros(t.size(0), cols - c - t.size(1), dtype=dtype, device=t.device)
        rows.append(_C.cat([left, t.to(dtype), right], 1))
        c += t.size(1)
    return _C.cat(rows, 0)


@_export(method=False)
def cartesian_prod(*tensors):
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return _C.stack([g.reshape(-1) for g in grids], 1)


@_export(method=False)
def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    r = _C.arange(row).unsqueeze(1).expand(row, col)
    c = _C.arange(col).unsqueeze(0).expand(row, col)
    mask = (c - r) <= offset
    out = _C.stack([r[mask], c[mask]], 0)  # built on the CPU, then moved where asked
    return out.to(device=device if device is not None else out.device,
                  dtype=dtype if dtype is not None else out.dtype)


@_export(method=False)
def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    r = _C.arange(row).unsqueeze(1).expand(row, col)
    c = _C.arange(col).unsqueeze(0).expand(row, col)
    mask = (c - r) >= offset
    out = _C.stack([r[mask], c[mask]], 0)  # built on the CPU, then moved where asked
    return out.to(device=device if device is not None else out.device,
                  dtype=dtype if dtype is not None else out.dtype)


@_export(method=False)
def cdist(x1, x2, p=2.0, compute_mode=None):
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, -1)


@_export(method=False)
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    r = _C.pow(float(base), _C.linspace(start, end, steps, dtype=_C.float64))
    r = r.to(dtype=dtype if dtype is not None else _C.get_default_dtype(),
             device=device if device is not None else r.device)
    return r.requires_grad_(requires_grad) if requires_grad else r


def install(namespace, tensor_type):
    """Adds the functions to the kiln namespace and the methods to Tensor (never replacing
    one that exists), from this module and _composite_stats."""
    from . import _composite_stats
    g = dict(_composite_stats.__dict__)
    g.update(globals())
    for name in _NAMES:
        namespace.setdefault(name, g[name])
    for name in _METHODS:
        if not hasattr(tensor_type, name):
            setattr(tensor_type, name, g[name])
    from . import _composite_more  # more functions (decision 0080), installed the same way
    _composite_more.install(namespace, tensor_type)
    if not hasattr(tensor_type, "mH"):  # real tensors: the conjugate transpose is the transpose
        tensor_type.mH = property(lambda self: self.transpose(-2, -1))
        tensor_type.H = property(lambda self: self.t())
