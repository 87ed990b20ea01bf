"""kiln.special: torch.special's functions over kiln's ops (the special-function kernels of
decision 0075 and compositions, decision 0074), with torch's names and conventions."""
import math as _math

from . import _C
from . import _composite

__all__ = ["erf", "erfc", "erfcx", "erfinv", "expit", "logit", "xlogy", "xlog1py", "gammaln",
           "digamma", "psi", "polygamma", "multigammaln", "log1p", "expm1", "exp2", "sinc",
           "round", "log_softmax", "softmax", "logsumexp", "ndtr", "ndtri", "log_ndtr", "entr",
           "i0"]

erf, erfc, erfinv = _C.erf, _C.erfc, _C.erfinv
expit = _C.sigmoid
logit = _composite.logit
xlogy = _composite.xlogy
gammaln = _C.lgamma
digamma = psi = _C.digamma
polygamma = _C.polygamma
log1p, expm1, exp2, round = _C.log1p, _C.expm1, _C.exp2, _C.round
logsumexp = _C.logsumexp


def log_softmax(input, dim, *, dtype=None):
    return _C.log_softmax(input if dtype is None else input.to(dtype), dim)


def softmax(input, dim, *, dtype=None):
    return _C.softmax(input if dtype is None else input.to(dtype), dim)


def erfcx(input):
    """exp(x^2) erfc(x); from x = 26, where exp(x^2) overflows, its asymptotic series
    1 / (x sqrt(pi)) (1 - 1 / (2 x^2) + 3 / (4 x^4) - 15 / (8 x^6) + 105 / (16 x^8))."""
    x = _composite._float(input)
    big_x = _C.where(x > 26.0, x, _C.full_like(x, 26.0))
    f = 1.0 / (big_x * big_x)
    big = (1.0 - f * (0.5 - f * (0.75 - f * (1.875 - f * 6.5625)))) / (
        big_x * _math.sqrt(_math.pi))
    small_x = _C.where(x > 26.0, _C.zeros_like(x), x)
    small = _C.exp(small_x * small_x) * _C.erfc(small_x)
    return _C.where(x > 26.0, big, small)


def xlog1py(input, other):
    x = input if isinstance(input, _C.Tensor) else _C.tensor(  # on other's device
        input, device=other.device if isinstance(other, _C.Tensor) else None)
    y = other if isinstance(other, _C.Tensor) else _C.full_like(_composite._float(x), other)
    x, y = _composite._float(x), _composite._float(y)
    r = _C.where(x == 0, _C.zeros_like(x), x * _C.log1p(y))
    return _C.where(_C.isnan(y), y, r)


def multigammaln(input, p):
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = input
    r = 0.25 * p * (p - 1) * _math.log(_math.pi)
    for j in range(p):
        r = r + _C.lgamma(x - 0.5 * j)
    return r


def sinc(input):
    x = _composite._float(input)
    px = x * _math.pi
    return _C.where(x == 0, _C.ones_like(x), _C.sin(px) / _C.where(x == 0, _C.ones_like(x), px))


def ndtr(input):
    x = _composite._float(input)
    return 0.5 * _C.erfc(x * (-1.0 / _math.sqrt(2.0)))


def ndtri(input):
    p = _composite._float(input)
    return _math.sqrt(2.0) * _C.erfinv(2.0 * p - 1.0)


def log_ndtr(input):
    """log of the standard normal CDF: log1p(-ndtr(-x)) above 0 (ndtr(x) rounds to 1 there),
    log(ndtr(x)) down to -5, and below, where ndtr underflows, through erfcx:
    log(erfcx(-x / sqrt 2) / 2) - x^2 / 2."""
    x = _composite._float(input)
    upper = _C.log1p(-ndtr(-_C.where(x > 0, x, _C.zeros_like(x))))
    middle = _C.log(ndtr(_C.where(x < -5.0, _C.zeros_like(x), x)))
    t = -x / _math.sqrt(2.0)
    tail = _C.log(erfcx(_C.where(x < -5.0, t, _C.ones_like(t))) * 0.5) - x * x * 0.5
    return _C.where(x > 0, upper, _C.where(x < -5.0, tail, middle))


def entr(input):
    x = _composite._float(input)
    # log of the negative values too: their gradient is NaN, as torch's
    r = -x * _C.log(_C.where(x == 0, _C.ones_like(x), x))
    r = _C.where(x < 0, _C.full_like(r, -_math.inf), r)
    return _C.where(_C.isnan(x), x, r)


def i0(input):
    """The modified Bessel function of order 0: its power series sum_k ((x / 2)^k / k!)^2
    below |x| = 50 (150 terms), above it the asymptotic e^|x| / sqrt(2 pi |x|) times
    sum_k ((2k - 1)!!)^2 / (k! 8^k |x|^k) to k = 6."""
    x = _C.abs(_composite._float(input))
    small_x = _C.where(x < 50.0, x, _C.zeros_like(x))
    q = (small_x * 0.5) ** 2
    term = _C.ones_like(x)
    total = _C.ones_like(x)
    for k in range(1, 150):
        term = term * q / (k * k)
        total = total + term
    big_x = _C.where(x < 50.0, _C.full_like(x, 50.0), x)
    inv = 1.0 / big_x
    coeffs = [1.0]
    for k in range(1, 7):
        coeffs.append(coeffs[-1] * (2 * k - 1) ** 2 / (k * 8))
    series = _C.zeros_like(x)
    for c in reversed(coeffs):
        series = series * inv + c
    big = _C.exp(big_x) * series * _C.sqrt(inv / (2 * _math.pi))
    return _C.where(x < 50.0, total, big)
