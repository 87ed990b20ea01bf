"""Elementwise and number functions composed of kiln's ops (decision 0080): gcd / lcm,
frexp / ldexp / nextafter (floating-point structure without reading bits), sinc, i0,
mvlgamma, logcumsumexp, renorm, dist, the real-tensor forms of the complex helpers (conj,
real, angle, ...) and predicates on tensors and dtypes."""
import builtins as _b
import collections as _collections
import math as _math

from . import _C
from ._composite_more import export, PROPERTIES

_FLOATS = (_C.float16, _C.bfloat16, _C.float32, _C.float64)


def _tensor(x, like=None, device=None):
    """x as a tensor: a Python number becomes a 0-d one of like's dtype, on like's device (or
    on `device`): ops take no cpu operand next to an xpu one."""
    if isinstance(x, _C.Tensor):
        return x
    return _C.tensor(x, device=device) if like is None else \
        _C.full((), x, dtype=like.dtype, device=like.device)


# --- integers -----------------------------------------------------------------------------

def _require_integers(name, *tensors):
    for t in tensors:
        if t.is_floating_point():
            raise NotImplementedError(f'"{name}_cpu" not implemented for '
                                      f"'{str(t.dtype).split('.')[-1].capitalize()}'")


@export()
def gcd(input, other):
    """Euclid's algorithm on every pair at once: log(max) rounds of a remainder."""
    other = _tensor(other, input)
    _require_integers("gcd", input, other)
    shape = _C.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    a, b = _C.abs(input).expand(shape), _C.abs(other).expand(shape)
    dtype = _C.promote_types(a.dtype, b.dtype)
    a, b = a.to(dtype), b.to(dtype)
    while b.numel() and _b.bool((b != 0).any()):
        nonzero = b != 0
        safe_b = _C.where(nonzero, b, _C.ones_like(b))
        a, b = _C.where(nonzero, b, a), _C.where(nonzero, _C.remainder(a, safe_b), b)
    return a


@export()
def lcm(input, other):
    other = _tensor(other, input)
    _require_integers("lcm", input, other)
    g = gcd(input, other)
    safe_g = _C.where(g == 0, _C.ones_like(g), g)
    return _C.abs(_C.floor_divide(input, safe_g) * other).to(g.dtype)


# --- floating-point structure -------------------------------------------------------------

def _pow2(exponent):
    """2^exponent in float64 for integer-valued exponents down to -1074 (two factors, so
    that neither overflows where the product does not)."""
    half = _C.floor(exponent * 0.5)
    return _C.pow(2.0, half) * _C.pow(2.0, exponent - half)


_Frexp = _collections.namedtuple("frexp", ["mantissa", "exponent"])  # torch.return_types


@export()
def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2^exponent, 0.5 <= |mantissa| < 1;
    0, inf and NaN keep their value with exponent 0, as torch."""
    if input.dtype not in _FLOATS:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    x = input.detach().to(_C.float64)
    finite = _C.isfinite(x) & (x != 0)
    a = _C.where(finite, _C.abs(x), _C.ones_like(x))
    e = _C.floor(_C.log2(a)) + 1.0
    m = a * _pow2(-e)
    # log2 may round across a power of two: one step either way puts m in [0.5, 1)
    up, down = m >= 1.0, m < 0.5
    e = e + up.to(e.dtype) - down.to(e.dtype)
    m = _C.where(up, m * 0.5, _C.where(down, m * 2.0, m))
    mantissa = _C.where(finite, _C.where(x < 0, -m, m), x).to(input.dtype)
    exponent = _C.where(finite, e, _C.zeros_like(e)).to(_C.int32)
    return _Frexp(mantissa, exponent)


@export()
def ldexp(input, other):
    """input * 2^other; a float input keeps its dtype against integer exponents, as torch."""
    other = _tensor(other, device=input.device)
    if input.is_floating_point():
        dtype = _C.promote_types(input.dtype, other.dtype) if other.is_floating_point() \
            else input.dtype
    else:
        dtype = other.dtype if other.is_floating_point() else _C.get_default_dtype()
    return input.to(dtype) * _C.pow(2.0, other.to(dtype))


_FORMAT = {  # (mantissa bits with the hidden one, frexp exponent of the smallest normal)
    "float16": (11, -13), "bfloat16": (8, -125), "float32": (24, -125), "float64": (53, -1021)}


@export()
def nextafter(input, other):
    """The next representable value after input towards other, from the format's mantissa
    width: one unit in the last place is 2^(e - p) for a mantissa exponent e (the smallest
    normal's below it), half that when stepping down from a power of two."""
    other = _tensor(other, input)
    dtype = _C.promote_types(input.dtype, other.dtype)
    if dtype not in _FLOATS:
        raise RuntimeError(f'"nextafter_cpu" not implemented for '
                           f"'{str(dtype).split('.')[-1].capitalize()}'")
    p, emin = _FORMAT[str(dtype).split(".")[-1]]
    x, y = input.detach().to(_C.float64), other.detach().to(_C.float64)
    shape = _C.broadcast_shapes(tuple(x.shape), tuple(y.shape))
    x, y = x.expand(shape), y.expand(shape)
    m, e = frexp(_C.where(_C.isfinite(x), x, _C.zeros_like(x)))
    e = _C.maximum(e.to(_C.float64), _C.full_like(x, float(emin)))
    ulp = _pow2(e - p)
    away = (y > x) == (x > 0)  # the step grows |x|
    power_of_two = _C.abs(m) == 0.5
    step = _C.where(~away & power_of_two & (e > emin), ulp * 0.5, ulp)
    tiny = _pow2(_C.full_like(x, float(emin - p)))
    r = _C.where(y > x, x + step, x - step)
    r = _C.where(x == 0, _C.where(y > 0, tiny, -tiny), r)
    largest = _C.full_like(x, _largest(dtype))
    r = _C.where(_C.isinf(x), _C.where(x > 0, largest, -largest), r)
    r = _C.where(x == y, y, r)
    r = _C.where(_C.isnan(x) | _C.isnan(y), x + y, r)
    return r.to(dtype)


def _largest(dtype):
    p, emin = _FORMAT[str(dtype).split(".")[-1]]
    emax = {"float16": 16, "bfloat16": 128, "float32": 128, "float64": 1024}[
        str(dtype).split(".")[-1]]
    return (2.0 - 2.0 ** (1 - p)) * 2.0 ** (emax - 1)


# --- special functions through kiln.special -----------------------------------------------

@export()
def sinc(input):
    from . import special
    return special.sinc(input)


@export()
def i0(input):
    from . import special
    return special.i0(input)


@export()
def mvlgamma(input, p):
    from . import special
    return special.multigammaln(input, p)


@export()
def logcumsumexp(input, dim):
    """A log-step (Hillis-Steele) scan with logaddexp: no common shift, so a small early
    value is not lost under a later large one."""
    from ._composite import logaddexp
    x = input if input.is_floating_point() else input.to(_C.get_default_dtype())
    if x.dim() == 0:
        return x.clone()
    n = x.size(dim)
    shift = 1
    while shift < n:
        head = x.narrow(dim, 0, shift)
        tail = logaddexp(x.narrow(dim, shift, n - shift), x.narrow(dim, 0, n - shift))
        x = _C.cat([head, tail], dim)
        shift *= 2
    return x if x is not input else x.clone()


# --- norms of pieces ----------------------------------------------------------------------

@export()
def renorm(input, p, dim, maxnorm):
    """Each slice input.select(dim, i) whose p-norm exceeds maxnorm scaled down to it (torch
    divides by norm + 1e-7)."""
    if input.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} "
                           "dimensions")
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p={p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = dim % input.dim()
    others = tuple(i for i in range(input.dim()) if i != d)
    norms = input.norm(p, others, True)
    scale = _C.where(norms > maxnorm, maxnorm / (norms + 1e-7), _C.ones_like(norms))
    return input * scale


@export()
def dist(input, other, p=2):
    return (input - other).norm(p)


# --- complex helpers ----------------------------------------------------------------------
# kiln has no lazy conjugate bit: conj() of a complex tensor is a physical copy (torch returns
# a view with the bit set; values agree, but writes to it do not reach the input).

@export()
def conj(input):
    if input.is_complex():
        return _C._conj_physical(input)
    return input  # a real tensor is its own conjugate (torch returns input itself)


@export()
def conj_physical(input):
    return _C._conj_physical(input)


@export()
def resolve_conj(input):
    return input


@export()
def resolve_neg(input):
    return input


@export()
def is_conj(input):
    return False


@export()
def is_neg(input):
    return False


@export(method=False)
def real(input):
    return _C._real(input)


@export(method=False)
def imag(input):
    return _C._imag(input)


@export()
def adjoint(input):
    return conj(input.transpose(-2, -1))


@export()
def angle(input):
    """arg(input) of a complex tensor; of a real one pi where input < 0, else 0 (NaN stays
    NaN); a float result, as torch."""
    if input.is_complex():
        return _C._angle(input)
    x = input if input.is_floating_point() else input.to(_C.get_default_dtype())
    r = _C.where(x < 0, _C.full_like(x, _math.pi), _C.zeros_like(x))
    return _C.where(_C.isnan(x), x, r)


@export(method=False)
def polar(abs, angle):
    """abs * (cos(angle) + i sin(angle)), as torch.polar."""
    return _C.complex(abs * angle.cos(), abs * angle.sin())


# --- predicates ---------------------------------------------------------------------------

@export()
def is_complex(input):
    return input.is_complex()


@export()
def is_signed(input):
    return input.dtype not in (_C.bool, _C.uint8)


@export()
def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


@export()
def is_nonzero(input):
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return _b.bool(input.reshape(()).item() != 0)


@export(method=False)
def result_type(tensor1, tensor2):
    """The dtype a binary op gives, by kiln's own promotion (wrapped numbers and 0-d tensors
    count less than dimensioned tensors): an addition of empty stand-ins."""
    def stand_in(x):
        if isinstance(x, _C.Tensor):
            return _C.empty(() if x.dim() == 0 else (0,), dtype=x.dtype)
        return x
    a, b = stand_in(tensor1), stand_in(tensor2)
    if not isinstance(a, _C.Tensor):
        if not isinstance(b, _C.Tensor):
            a = _C.tensor(a)
        else:
            a, b = b, a
    return (a + b).dtype


for _name in ("is_sparse", "is_quantized", "is_meta", "is_nested", "is_mkldnn"):
    PROPERTIES[_name] = lambda self: False  # kiln tensors are dense and strided
