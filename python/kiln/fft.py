"""kiln.fft: torch.fft's functions over kiln's three FFT ops (_fft_c2c / _fft_r2c / _fft_c2r,
whose transforms are kiln's own FFT engine, decision 0092). This module does what torch's
Python-facing layer does: dtype promotion, resizing the signal to n / s (trim or zero-pad at
the end), the norm modes, and the Hermitian (hfft / ihfft) forms as conjugated real
transforms."""
import builtins as _b

from . import _C

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
           "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")


class _NormError(ValueError, RuntimeError):
    """An invalid norm: a ValueError, and a RuntimeError as torch raises."""


def _check_norm(norm):
    if norm is not None and norm not in _NORMS:
        raise _NormError(f'Invalid normalization mode: "{norm}"')


def _norm_code(norm, forward):
    """The ops' normalization code (0 none, 1 1/sqrt(n), 2 1/n) of a norm mode."""
    _check_norm(norm)
    if norm is None:
        norm = "backward"
    if norm == "ortho":
        return 1
    return 2 if (norm == "forward") == forward else 0


def _swap(norm):
    _check_norm(norm)
    return {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]


def _float_input(x, name, complex_ok=True):
    """x as float32 / float64 (or complex64 / complex128): integers and bool promote to the
    default dtype; float16 / bfloat16 are refused, as torch's CPU FFTs do."""
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.is_complex():
        if not complex_ok:
            raise RuntimeError(f"{name} expects a real input tensor, but got {x.dtype}")
        return x
    if x.dtype in (_C.float16, _C.bfloat16):
        raise RuntimeError(f"Unsupported dtype {str(x.dtype).split('.')[-1].capitalize()}")
    if not x.is_floating_point():
        return x.to(_C.get_default_dtype())
    return x


def _to_complex(x):
    if x.is_complex():
        return x
    return x.to(_C.complex128 if x.dtype == _C.float64 else _C.complex64)


def _resize(x, dim, n):
    """x along dim trimmed or zero-padded at the end to n elements."""
    size = x.shape[dim]
    if n == size:
        return x
    if n < size:
        return x.narrow(dim, 0, n)
    shape = list(x.shape)
    shape[dim] = n - size
    return _C.cat([x, _C.zeros(shape, dtype=x.dtype, device=x.device)], dim)


def _check_n(n, name):
    if n is not None and n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")


def _dims_and_sizes(x, s, dim, name):
    """torch's fftn argument rules: dims default to all (or the last len(s)); s entries of -1
    keep the size."""
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    ndim = x.dim()
    if dim is not None:
        dims = [dim] if isinstance(dim, _b.int) else list(dim)
        dims = [d + ndim if d < 0 else d for d in dims]
        for d in dims:
            if not 0 <= d < _b.max(ndim, 1):
                raise IndexError(f"Dimension out of range (expected to be in range of "
                                 f"[{-ndim}, {ndim - 1}], but got {d})")
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{name} dims must be unique")
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                               f"{ndim} dimensions.")
        dims = list(range(ndim - len(s), ndim))
    else:
        dims = list(range(ndim))
    sizes = [x.shape[d] for d in dims] if s is None else \
        [x.shape[d] if n == -1 else n for d, n in zip(dims, s)]
    for n in sizes:
        _check_n(n, name)
    return dims, sizes


def _finish(result, out):
    if out is None:
        return result
    if out.numel() == 0 and out.dtype == result.dtype:  # an empty out= is resized, as torch's
        out.resize_(result.shape)
    if tuple(out.shape) != tuple(result.shape) or out.dtype != result.dtype:
        raise RuntimeError(f"out= expects a tensor of shape {tuple(result.shape)} and dtype "
                           f"{result.dtype}, got {tuple(out.shape)} and {out.dtype}")
    return out.copy_(result)


def _c2c(x, dims, sizes, norm, forward, out, name):
    x = _to_complex(_float_input(x, name))
    for d, n in zip(dims, sizes):
        x = _resize(x, d, n)
    if not dims:
        return _finish(x.clone(), out)
    return _finish(_C._fft_c2c(x, dims, _norm_code(norm, forward), forward), out)


def _r2c(x, dims, sizes, code, conj_output, out, name):
    """Real -> one-sided spectrum; ihfft's conjugates it (the inverse transform of a real
    signal is the conjugate of its forward one)."""
    x = _float_input(x, name, complex_ok=False)
    for d, n in zip(dims, sizes):
        x = _resize(x, d, n)
    r = _C._fft_r2c(x, dims, code, True)
    return _finish(r.conj() if conj_output else r, out)


def _c2r(x, dims, sizes, last_n, code, conj_input, out, name):
    """Hermitian half spectrum along dims[-1] -> real (the inverse transform); sizes of the
    other dims given. hfft's is the forward transform: that of the conjugated input, whose
    inverse transform is real."""
    x = _to_complex(_float_input(x, name))
    for d, n in zip(dims[:-1], sizes):
        x = _resize(x, d, n)
    if last_n is None:
        last_n = 2 * (x.shape[dims[-1]] - 1)
    if last_n < 1:
        raise RuntimeError(f"Invalid number of data points ({last_n}) specified")
    x = _resize(x, dims[-1], last_n // 2 + 1)
    if conj_input:
        x = x.conj()
    return _finish(_C._fft_c2r(x, dims, code, last_n), out)


# --- one-dimensional ---------------------------------------------------------------------

def _one(x, n, dim):
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"fft(): argument 'input' must be Tensor, not {type(x).__name__}")
    _check_n(n, "fft")
    d = dim + x.dim() if dim < 0 else dim
    if not 0 <= d < _b.max(x.dim(), 1) or x.dim() == 0:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-x.dim()}, "
                         f"{x.dim() - 1}], but got {dim})")
    return d, (x.shape[d] if n is None else n)


def fft(input, n=None, dim=-1, norm=None, *, out=None):
    d, n = _one(input, n, dim)
    return _c2c(input, [d], [n], norm, True, out, "fft_fft")


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    d, n = _one(input, n, dim)
    return _c2c(input, [d], [n], norm, False, out, "fft_ifft")


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    d, n = _one(input, n, dim)
    return _r2c(input, [d], [n], _norm_code(norm, True), False, out, "rfft")


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    d, _ = _one(input, n, dim)
    return _c2r(input, [d], [], n, _norm_code(norm, False), False, out, "irfft")


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    d, _ = _one(input, n, dim)
    return _c2r(input, [d], [], n, _norm_code(_swap(norm), False), True, out, "hfft")


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    d, n = _one(input, n, dim)
    return _r2c(input, [d], [n], _norm_code(_swap(norm), True), True, out, "ihfft")


# --- n-dimensional -----------------------------------------------------------------------

def fftn(input, s=None, dim=None, norm=None, *, out=None):
    dims, sizes = _dims_and_sizes(input, s, dim, "fftn")
    return _c2c(input, dims, sizes, norm, True, out, "fftn")


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    dims, sizes = _dims_and_sizes(input, s, dim, "ifftn")
    return _c2c(input, dims, sizes, norm, False, out, "ifftn")


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    dims, sizes = _dims_and_sizes(input, s, dim, "rfftn")
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    return _r2c(input, dims, sizes, _norm_code(norm, True), False, out, "rfftn")


def _c2r_nd(input, s, dim, code, conj_input, out, name):
    dims, sizes = _dims_and_sizes(input, s, dim, name)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    last_n = None if s is None or s[-1] == -1 else sizes[-1]
    return _c2r(input, dims, sizes[:-1], last_n, code, conj_input, out, name)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _c2r_nd(input, s, dim, _norm_code(norm, False), False, out, "irfftn")


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _c2r_nd(input, s, dim, _norm_code(_swap(norm), False), True, out, "hfftn")


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    dims, sizes = _dims_and_sizes(input, s, dim, "ihfftn")
    if not dims:
        raise RuntimeError("ihfftn must transform at least one axis")
    return _r2c(input, dims, sizes, _norm_code(_swap(norm), True), True, out, "ihfftn")


def _two(fn):
    def f(input, s=None, dim=(-2, -1), norm=None, *, out=None):
        return fn(input, s, dim, norm, out=out)
    f.__name__ = fn.__name__[:-1] + "2"
    f.__doc__ = f"{fn.__name__} over dims (-2, -1) by default, as torch.fft's 2-D form."
    return f


fft2, ifft2, rfft2, irfft2, hfft2, ihfft2 = (_two(f) for f in (fftn, ifftn, rfftn, irfftn, hfftn,
                                                               ihfftn))


# --- frequencies and shifts --------------------------------------------------------------

def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False, out=None):
    """[0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d * n)."""
    k = _C.arange(n, dtype=_C.float64, device=device)
    k = _C.where(k >= (n + 1) // 2, k - n, k)
    r = (k / (d * n)).to(dtype or (out.dtype if out is not None else _C.get_default_dtype()))
    return _finish(r.requires_grad_(requires_grad) if requires_grad else r, out)


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False, out=None):
    """[0, 1, ..., n//2] / (d * n)."""
    r = (_C.arange(n // 2 + 1, dtype=_C.float64, device=device) / (d * n)).to(
        dtype or (out.dtype if out is not None else _C.get_default_dtype()))
    return _finish(r.requires_grad_(requires_grad) if requires_grad else r, out)


def _shift(input, dim, inverse):
    dims = list(range(input.dim())) if dim is None else \
        ([dim] if isinstance(dim, _b.int) else list(dim))
    shifts = [(input.shape[d] + 1) // 2 if inverse else input.shape[d] // 2 for d in dims]
    return input.roll(shifts, dims) if dims else input.clone()


def fftshift(input, dim=None):
    """The zero frequency moved to the centre: roll by n // 2 along each dim."""
    return _shift(input, dim, False)


def ifftshift(input, dim=None):
    """fftshift's inverse: roll by (n + 1) // 2."""
    return _shift(input, dim, True)
