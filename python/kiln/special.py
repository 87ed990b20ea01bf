"""kiln.special: torch.special's functions over kiln's ops (the special-function kernels of
decision 0075 and compositions, decision 0074), with torch's names and conventions."""
import math as _math

from . import _C
from . import _composite

__all__ = ["erf", "erfc", "erfcx", "erfinv", "expit", "logit", "xlogy", "xlog1py", "gammaln",
           "digamma", "psi", "polygamma", "multigammaln", "log1p", "expm1", "exp2", "sinc",
           "round", "log_softmax", "softmax", "logsumexp", "ndtr", "ndtri", "log_ndtr", "entr",
           "i0", "i0e", "i1", "i1e", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
           "scaled_modified_bessel_k1", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
           "spherical_bessel_j0", "zeta", "gammainc", "gammaincc", "chebyshev_polynomial_t",
           "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
           "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
           "legendre_polynomial_p"]

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


# --- Bessel functions, zeta, incomplete gamma, orthogonal polynomials -----------------------
# Method notes: every range split evaluates each branch on inputs clamped into its range
# (where), so no branch's NaN / inf reaches the result or its gradient.

_EULER = 0.5772156649015329


def _harmonic(n):
    return sum(1.0 / j for j in range(1, n + 1))


def _i_series(x, nu, terms, sign=1.0):
    """I_nu(x), nu = 0 or 1, x >= 0: (x / 2)^nu sum_k (x^2 / 4)^k / (k! (k + nu)!); with
    sign -1 the same series in -x^2 / 4, J_nu(x)."""
    q = x * x * (0.25 * sign)
    term = _C.ones_like(x)
    total = _C.ones_like(x)
    for k in range(1, terms):
        term = term * q * (1.0 / (k * (k + nu)))
        total = total + term
    return total * (x * 0.5) if nu else total


def _asym_coeffs(nu, terms, alternate):
    """prod_{j <= k} (4 nu^2 - (2j - 1)^2) / (k! 8^k), times (-1)^k if alternate."""
    c, out = 1.0, [1.0]
    for k in range(1, terms):
        c = c * (4 * nu * nu - (2 * k - 1) ** 2) / (k * 8)
        out.append(-c if (alternate and k % 2) else c)
    return out


def _poly_inv(coeffs, inv):
    r = _C.zeros_like(inv)
    for c in reversed(coeffs):
        r = r * inv + c
    return r


_I_SPLIT = 30.0


def _i_parts(input, nu):
    """(|x|, e^-|x| I_nu(|x|) as series * exp below |x| = 30, the asymptotic e^x / sqrt(2 pi x)
    sum_k (-1)^k a_k(nu) / x^k to k = 30 above)."""
    x = _C.abs(_composite._float(input))
    small = x < _I_SPLIT
    xs = _C.where(small, x, _C.zeros_like(x))
    series = _i_series(xs, nu, 90) * _C.exp(-xs)
    xb = _C.where(small, _C.full_like(x, _I_SPLIT), x)
    inv = 1.0 / xb
    big = _poly_inv(_asym_coeffs(nu, 30, True), inv) * _C.sqrt(inv * (0.5 / _math.pi))
    return x, small, series, big


def i0e(input):
    """e^-|x| I0(x): the power series times e^-|x| below |x| = 30, above the asymptotic
    series 1 / sqrt(2 pi |x|) sum_k ((2k - 1)!!)^2 / (k! 8^k |x|^k) to k = 30."""
    x, small, series, big = _i_parts(input, 0)
    return _C.where(small, series, big)


def i1e(input):
    """e^-|x| I1(x) (odd): power series times e^-|x| below |x| = 30, the asymptotic
    expansion e^x / sqrt(2 pi x) sum_k (-1)^k a_k(1) / x^k (30 terms) above."""
    xf = _composite._float(input)
    x, small, series, big = _i_parts(xf, 1)
    r = _C.where(small, series, big)
    return _C.where(xf < 0, -r, r)


def i1(input):
    """I1(x) (odd): power series (x/2) sum_k (x^2/4)^k / (k! (k+1)!) below |x| = 30, the
    asymptotic expansion times e^|x| above; torch's NaN at +-inf."""
    xf = _composite._float(input)
    x, small, _, big = _i_parts(xf, 1)
    xs = _C.where(small, x, _C.zeros_like(x))
    xb = _C.where(small, _C.full_like(x, _I_SPLIT), x)
    r = _C.where(small, _i_series(xs, 1, 90), big * _C.exp(xb))
    r = _C.where(xf < 0, -r, r)
    return _C.where(_C.isinf(xf), _C.full_like(r, _math.nan), r)


def modified_bessel_i0(input):
    """I0(x) as i0 (series / asymptotic expansion), with torch's NaN at +-inf."""
    xf = _composite._float(input)
    x, small, series, big = _i_parts(xf, 0)
    xs = _C.where(small, x, _C.zeros_like(x))
    xb = _C.where(small, _C.full_like(x, _I_SPLIT), x)
    r = _C.where(small, _i_series(xs, 0, 90), big * _C.exp(xb))
    return _C.where(_C.isinf(xf), _C.full_like(r, _math.nan), r)


modified_bessel_i1 = i1

# Trapezoidal rule, step 1/7 to s = 4.8, for e^x K_nu(x) = int_0^inf e^(-2 s^2)
# cosh(nu t) 2 / sqrt(x + s^2) ds (x cosh t = x + 2 s^2, s = sqrt(x) sinh(t / 2)); the
# integrand is analytic within |Im s| < sqrt(x), so for x >= 1 the error is below e^-40.
_K_H = 1.0 / 7.0
_K_NODES = [(k * _K_H, (0.5 if k == 0 else 1.0) * _K_H * _math.exp(-2.0 * (k * _K_H) ** 2))
            for k in range(0, 35)]
_K_SPLIT = 1.0


def _k_scaled(x, nu):
    """e^x K_nu(x) for x >= 1 (nu = 0 or 1) by the trapezoidal rule above."""
    total = _C.zeros_like(x)
    inv = 1.0 / x
    for s, w in _K_NODES:
        f = _C.rsqrt(x + s * s)
        if nu:
            f = f * (1.0 + 2.0 * s * s * inv)
        total = total + f * (2.0 * w)
    return total


def _log_series_sum(x, nu, terms, sign):
    """The power series beside the logarithm in K_nu (sign 1) and Y_nu (sign -1), q =
    sign x^2 / 4: nu = 0: sum_{k>=1} H_k q^k / k!^2; nu = 1: sum_{k>=0} (H_k + H_{k+1} -
    2 gamma) q^k / (k! (k+1)!) (psi(k+1) + psi(k+2))."""
    q = x * x * (0.25 * sign)
    total = _C.zeros_like(x)
    term = _C.ones_like(x)
    if nu == 0:
        for k in range(1, terms):
            term = term * q * (1.0 / (k * k))
            total = total + term * _harmonic(k)
        return total
    for k in range(0, terms):
        if k:
            term = term * q * (1.0 / (k * (k + 1)))
        total = total + term * (_harmonic(k) + _harmonic(k + 1) - 2 * _EULER)
    return total


def _k_small(x, nu):
    """K_nu(x), 0 < x <= 1: K0 = -(ln(x/2) + gamma) I0 + sum_k H_k q^k / k!^2,
    K1 = 1/x + ln(x/2) I1 - (x/4) sum_k (psi(k+1) + psi(k+2)) q^k / (k! (k+1)!), q = x^2/4."""
    lg = _C.log(x * 0.5)
    total = _log_series_sum(x, nu, 14, 1.0)
    if nu == 0:
        return total - (lg + _EULER) * _i_series(x, 0, 14)
    return 1.0 / x + lg * _i_series(x, 1, 14) - x * 0.25 * total


def _k(input, nu, scaled):
    x = _composite._float(input)
    small = x <= _K_SPLIT
    xs = _C.where(small, x, _C.ones_like(x))
    xs = _C.where(xs > 0, xs, _C.ones_like(x))
    xb = _C.where(small, _C.full_like(x, 2.0), x)
    ks = _k_small(xs, nu)
    kb = _k_scaled(xb, nu)
    r = _C.where(small, ks * _C.exp(xs) if scaled else ks,
                 kb if scaled else kb * _C.exp(-xb))
    r = _C.where(x == 0, _C.full_like(r, _math.inf), r)
    return _C.where(x < 0, _C.full_like(r, _math.nan), r)


def modified_bessel_k0(input):
    """K0(x): its series through I0 and ln(x/2) to x = 1, above the trapezoidal rule on
    e^x K0(x) = int_0^inf e^(-2s^2) 2 / sqrt(x + s^2) ds (step 1/7); NaN below 0."""
    return _k(input, 0, False)


def modified_bessel_k1(input):
    """K1(x): its series through I1 and ln(x/2) to x = 1, above the trapezoidal rule on
    e^x K1(x) = int_0^inf e^(-2s^2) (1 + 2s^2/x) 2 / sqrt(x + s^2) ds; NaN below 0."""
    return _k(input, 1, False)


def scaled_modified_bessel_k0(input):
    """e^x K0(x), by modified_bessel_k0's methods (the integral is e^x K0 itself)."""
    return _k(input, 0, True)


def scaled_modified_bessel_k1(input):
    """e^x K1(x), by modified_bessel_k1's methods."""
    return _k(input, 1, True)

# Hankel's integral H_nu(x) = sqrt(2 / (pi x)) e^(i (x - nu pi/2 - pi/4)) / Gamma(nu + 1/2)
# int_0^inf e^-u u^(nu - 1/2) (1 + i u / (2x))^(nu - 1/2) du with u = s^2, by the trapezoidal
# rule (step 1/5 to s = 6.6): the integrand's branch points lie at |Im s| = sqrt(x), so for
# x >= 2 the rule's error is below e^-40.  J_nu = Re H_nu, Y_nu = Im H_nu.
_H_H = 0.2
_H_NODES = [(k * _H_H, (0.5 if k == 0 else 1.0) * _H_H * _math.exp(-(k * _H_H) ** 2))
            for k in range(0, 34)]
_J_SPLIT = 2.0


def _hankel(x, nu):
    """(J_nu(x), Y_nu(x)) for x >= 2, nu = 0 or 1."""
    re = _C.zeros_like(x)
    im = _C.zeros_like(x)
    inv2x = 0.5 / x
    for s, w in _H_NODES:
        a = inv2x * (s * s)
        r = _C.sqrt(a * a + 1.0)
        ch = _C.sqrt(0.5 + 0.5 / r)  # (1 + i a) = r e^(i phi): cos(phi / 2), sin(phi / 2)
        sh = a / (2.0 * r * ch)
        if nu == 0:  # (1 + i a)^(-1/2) = r^(-1/2) (ch - i sh)
            m = _C.rsqrt(r) * w
            re = re + m * ch
            im = im - m * sh
        else:  # 2 s^2 (1 + i a)^(1/2)
            m = _C.sqrt(r) * (w * 2.0 * s * s)
            re = re + m * ch
            im = im + m * sh
    c = _C.sqrt(inv2x) * (4.0 / _math.pi)  # sqrt(2 / (pi x)) / Gamma(nu + 1/2) ...
    sx, cx = _C.sin(x), _C.cos(x)
    r2 = 1.0 / _math.sqrt(2.0)
    if nu == 0:  # e^(i (x - pi/4))
        cc, ss = (cx + sx) * r2, (sx - cx) * r2
    else:  # e^(i (x - 3 pi/4))
        cc, ss = (sx - cx) * r2, -(sx + cx) * r2
    return c * (cc * re - ss * im), c * (ss * re + cc * im)


def _j_series(x, nu, terms):
    return _i_series(x, nu, terms, sign=-1.0)


def _y_series(x, nu, j):
    """Y_nu(x), 0 < x <= 2, from J_nu = j: Y0 = (2/pi)((ln(x/2) + gamma) J0 - sum_k H_k
    (-q)^k / k!^2), Y1 = -2/(pi x) + (2/pi) ln(x/2) J1 - (x / 2pi) sum_k (psi(k+1) +
    psi(k+2)) (-q)^k / (k! (k+1)!), q = x^2/4."""
    lg = _C.log(x * 0.5)
    total = _log_series_sum(x, nu, 20, -1.0)
    if nu == 0:
        return (2.0 / _math.pi) * ((lg + _EULER) * j - total)
    return (-2.0 / _math.pi) / x + (2.0 / _math.pi) * lg * j - x * (0.5 / _math.pi) * total


def _jy(input, nu, want_y):
    xf = _composite._float(input)
    x = xf if want_y else _C.abs(xf)
    small = x <= _J_SPLIT
    xs = _C.where(small, x, _C.ones_like(x))
    xb = _C.where(small, _C.full_like(x, 4.0), x)
    xb = _C.where(_C.isinf(xb), _C.full_like(x, 4.0), xb)
    jb, yb = _hankel(xb, nu)
    js = _j_series(xs, nu, 20)
    if not want_y:
        r = _C.where(small, js, jb)
        if nu:
            r = _C.where(xf < 0, -r, r)
        return _C.where(_C.isinf(xf), _C.full_like(r, _math.nan), r)
    xs = _C.where(xs > 0, xs, _C.ones_like(x))
    r = _C.where(small, _y_series(xs, nu, js), yb)
    r = _C.where(x == 0, _C.full_like(r, -_math.inf), r)
    return _C.where((x < 0) | _C.isinf(x), _C.full_like(r, _math.nan), r)


def bessel_j0(input):
    """J0(x) (even): power series to |x| = 2, above Re of Hankel's integral for H0(x) by the
    trapezoidal rule (e^-s^2 (1 + i s^2 / 2x)^(-1/2), step 1/5); NaN at +-inf as torch."""
    return _jy(input, 0, False)


def bessel_j1(input):
    """J1(x) (odd): power series to |x| = 2, above Re of Hankel's integral for H1(x) by the
    trapezoidal rule (2 s^2 e^-s^2 (1 + i s^2 / 2x)^(1/2), step 1/5); NaN at +-inf."""
    return _jy(input, 1, False)


def bessel_y0(input):
    """Y0(x): series through J0 and ln(x/2) to x = 2, above Im of Hankel's integral (as
    bessel_j0); -inf at 0, NaN below 0 and at inf as torch."""
    return _jy(input, 0, True)


def bessel_y1(input):
    """Y1(x): series through J1 and ln(x/2) to x = 2, above Im of Hankel's integral (as
    bessel_j1); -inf at 0, NaN below 0 and at inf as torch."""
    return _jy(input, 1, True)


def spherical_bessel_j0(input):
    """sin(x) / x; below |x| = 0.5 its Taylor series sum_k (-x^2)^k / (2k+1)! to k = 9."""
    x = _composite._float(input)
    small = _C.abs(x) < 0.5
    xs = _C.where(small, x, _C.zeros_like(x))
    xb = _C.where(small, _C.ones_like(x), x)
    q = -xs * xs
    coeffs = [1.0 / _math.factorial(2 * k + 1) for k in range(10)]
    series = _C.zeros_like(x)
    for c in reversed(coeffs):
        series = series * q + c
    big = _C.sin(xb) / xb
    big = _C.where(_C.isinf(xb), _C.zeros_like(x), big)
    return _C.where(small, series, big)


def _pair(a, b):
    """Two float operands (tensor or number) on a common device and promoted dtype."""
    ta, tb = isinstance(a, _C.Tensor), isinstance(b, _C.Tensor)
    if ta and tb:
        a, b = _composite._float(a), _composite._float(b)
        if a.dtype != b.dtype:
            dt = _C.promote_types(a.dtype, b.dtype)
            a, b = a.to(dt), b.to(dt)
    elif ta:
        a = _composite._float(a)
        b = _C.full_like(a, float(b))
    else:
        b = _composite._float(b)
        a = _C.full_like(b, float(a))
    zero = _C.zeros_like(a) + _C.zeros_like(b)  # broadcast both
    return a + zero, b + zero


# B_2j / (2j)! for the Euler-Maclaurin tail of zeta
_BERN = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
         43867 / 798, -174611 / 330, 854513 / 138, -236364091 / 2730]
_BERN = [b / _math.factorial(2 * j + 2) for j, b in enumerate(_BERN)]


_ZETA_MAX_SHIFT = 4096


def zeta(input, other):
    """Hurwitz zeta(x, q) by Euler-Maclaurin: sum_{k < N} (q + k)^-x + (q + N)^(1-x) / (x - 1)
    + (q + N)^-x / 2 + sum_{j <= 12} B_2j / (2j)! x (x+1) ... (x+2j-2) (q + N)^(-x-2j+1),
    N = 9 (9 - min q, at most 4105, where q < 0: from the host); torch's inf at x = 1 and integer q <= 0, NaN for
    x < 1 and for q < 0 with non-integer x."""
    x, q = _pair(input, other)
    q_int = q == _C.floor(q)
    x_int = x == _C.floor(x)
    ok = (x > 1) & _C.isfinite(q) & _C.isfinite(x) & ~((q <= 0) & (q_int | ~x_int))
    n = 9
    qf = _C.where(ok & (q < 0), q, _C.zeros_like(q))
    if qf.numel():
        n += min(int(_math.ceil(-float(qf.min().item()))), _ZETA_MAX_SHIFT)
    xc = _C.where(ok, x, _C.full_like(x, 2.0))
    qc = _C.where(ok, q, _C.ones_like(q))
    total = _C.zeros_like(x)
    for k in range(n):
        total = total + _C.pow(qc + float(k), -xc)
    a = qc + float(n)
    t = _C.pow(a, -xc)
    total = total + t * a / (xc - 1.0) + t * 0.5
    inv2 = 1.0 / (a * a)
    fac = xc * t / a
    for j, b in enumerate(_BERN):
        total = total + fac * b
        fac = fac * (xc + (2 * j + 1)) * (xc + (2 * j + 2)) * inv2
    nan = _C.full_like(x, _math.nan)
    inf = _C.full_like(x, _math.inf)
    r = _C.where(ok, total, nan)
    r = _C.where(_C.isinf(x) & (x > 0), _C.where(q == 1, _C.ones_like(x),
                                                 _C.where(q < 1, inf, nan)), r)
    r = _C.where((x == 1) | ((q <= 0) & q_int & (x > 1)), inf, r)
    return _C.where(_C.isnan(x) | _C.isnan(q), nan, r)


_GAMMA_SERIES_TERMS = 300
_GAMMA_CF_DEPTH = 200


def _log_gamma_prefix(a, x):
    """log(x^a e^-x / Gamma(a + 1)); from a = 10 as a (log(x / a) - u) - log(2 pi a) / 2 -
    (Stirling's series of lgamma(a + 1) past its leading terms), u = x / a - 1, which keeps
    the cancellation of a log x against x out of large a."""
    direct = a * _C.log(x) - x - _C.lgamma(a + 1.0)
    big = a >= 10.0
    ab = _C.where(big, a, _C.full_like(a, 10.0))
    ratio = x / ab
    u = ratio - 1.0
    near = _C.abs(u) < 0.5
    lg = _C.where(near, _C.log1p(_C.where(near, u, _C.zeros_like(u))),
                  _C.log(_C.where(near, _C.ones_like(u), ratio)))
    inv = 1.0 / ab
    inv2 = inv * inv
    corr = inv * (1 / 12 + inv2 * (-1 / 360 + inv2 * (1 / 1260 + inv2 * (
        -1 / 1680 + inv2 * (1 / 1188 + inv2 * (-691 / 360360))))))
    stirling = ab * (lg - u) - 0.5 * _C.log(ab * (2 * _math.pi)) - corr
    return _C.where(big, stirling, direct)


def _gammainc_pq(input, other):
    """(P, Q): series P = x^a e^-x / Gamma(a+1) sum_n x^n / ((a+1)...(a+n)) (300 terms) for
    x < a + 1, else Legendre's continued fraction Q = x^a e^-x / Gamma(a) / (x + 1 - a -
    1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)) evaluated backwards from depth 200."""
    a, x = _pair(input, other)
    use_series = x < a + 1.0
    valid = (a >= 0) & (x >= 0) & ~((a == 0) & (x == 0)) & _C.isfinite(a) & _C.isfinite(x)
    valid = valid & (a > 0) & (x > 0)
    one = _C.ones_like(a)
    sa = _C.where(valid & use_series, a, one)
    sx = _C.where(valid & use_series, x, one)
    term = _C.ones_like(a)
    total = _C.ones_like(a)
    for n in range(1, _GAMMA_SERIES_TERMS):
        term = term * sx / (sa + float(n))
        total = total + term
    p_series = _C.exp(_log_gamma_prefix(sa, sx)) * total
    ca = _C.where(valid & ~use_series, a, one)
    cx = _C.where(valid & ~use_series, x, _C.full_like(x, 2.0))
    t = cx + (2 * _GAMMA_CF_DEPTH + 1) - ca
    for n in range(_GAMMA_CF_DEPTH, 0, -1):
        t = (cx + (2 * n - 1)) - ca - (float(n) * (float(n) - ca)) / t
    q_cf = _C.exp(_log_gamma_prefix(ca, cx)) * ca / t  # x^a e^-x / Gamma(a)
    p = _C.where(use_series, p_series, 1.0 - q_cf)
    q = _C.where(use_series, 1.0 - p_series, q_cf)
    nan = _C.full_like(a, _math.nan)
    zero, one = _C.zeros_like(a), _C.ones_like(a)
    # the edges: a = 0 < x -> P = 1; x = 0 < a -> P = 0; x = inf -> 1; a = inf -> 0
    p = _C.where(valid, p, nan)
    q = _C.where(valid, q, nan)
    bad = (a < 0) | (x < 0) | _C.isnan(a) | _C.isnan(x) | ((a == 0) & (x == 0)) | (
        _C.isinf(a) & _C.isinf(x))
    p_edge = _C.where((a == 0) | _C.isinf(x), one, zero)
    edge = ~valid & ~bad
    p = _C.where(edge, p_edge, p)
    q = _C.where(edge, 1.0 - p_edge, q)
    return p, q


def gammainc(input, other):
    """The regularized lower incomplete gamma P(a, x): the series for x < a + 1, 1 - Q by
    Legendre's continued fraction otherwise (fixed 300 terms / depth 200: accurate for
    a up to about 1000); torch's edge values at a = 0, x = 0, inf, NaN below 0."""
    return _gammainc_pq(input, other)[0]


def gammaincc(input, other):
    """The regularized upper incomplete gamma Q(a, x) = 1 - P: 1 - the series for x < a + 1,
    the continued fraction otherwise (see gammainc)."""
    return _gammainc_pq(input, other)[1]


def _poly_n(x, n):
    """x float, n number or tensor -> (x, n as a float tensor truncated to integers, n_max)."""
    if isinstance(n, _C.Tensor):
        x, nf = _pair(x if isinstance(x, _C.Tensor) else _C.tensor(x, device=n.device), n)
        nf = _C.trunc(nf)
        finite = _C.where(_C.isfinite(nf), nf, _C.zeros_like(nf))
        n_max = int(float(finite.max().item())) if nf.numel() else 0
    else:
        x = _composite._float(x)
        n_max = int(n)
        nf = _C.full_like(x, float(n_max))
    return x, nf, n_max


def _recurrence(x, n, p0, p1, step):
    """p_n by p_{k+1} = step(k, p_k, p_{k-1}) for every element's n (to the largest n);
    0 for n < 0 as torch."""
    x, nf, n_max = _poly_n(x, n)
    a, b = p0(x), p1(x)
    r = _C.where(nf == 0, a, _C.zeros_like(x))
    r = _C.where(nf == 1, b, r)
    for k in range(1, n_max):
        a, b = b, step(k, x, b, a)
        r = _C.where(nf == k + 1, b, r)
    return r


def _two_x_step(y):
    return lambda k, x, b, a: 2.0 * y(x) * b - a


def _ident(x):
    return x


def _shift(x):
    return x + x - 1.0


def _cheb(kind, y):
    first = {"t": lambda x: y(x), "u": lambda x: 2.0 * y(x),
             "v": lambda x: 2.0 * y(x) - 1.0, "w": lambda x: 2.0 * y(x) + 1.0}[kind]
    return lambda input, n: _recurrence(input, n, _C.ones_like, first, _two_x_step(y))


chebyshev_polynomial_t = _cheb("t", _ident)
chebyshev_polynomial_u = _cheb("u", _ident)
chebyshev_polynomial_v = _cheb("v", _ident)
chebyshev_polynomial_w = _cheb("w", _ident)
shifted_chebyshev_polynomial_t = _cheb("t", _shift)
shifted_chebyshev_polynomial_u = _cheb("u", _shift)
shifted_chebyshev_polynomial_v = _cheb("v", _shift)
shifted_chebyshev_polynomial_w = _cheb("w", _shift)
for _f, _d in [(chebyshev_polynomial_t, "T_n(x)"), (chebyshev_polynomial_u, "U_n(x)"),
               (chebyshev_polynomial_v, "V_n(x)"), (chebyshev_polynomial_w, "W_n(x)"),
               (shifted_chebyshev_polynomial_t, "T_n(2x - 1)"),
               (shifted_chebyshev_polynomial_u, "U_n(2x - 1)"),
               (shifted_chebyshev_polynomial_v, "V_n(2x - 1)"),
               (shifted_chebyshev_polynomial_w, "W_n(2x - 1)")]:
    _f.__doc__ = (f"Chebyshev {_d} by p_(k+1) = 2 y p_k - p_(k-1) (y the argument) up to the "
                  "largest n (host); n truncated to an integer, 0 for n < 0 as torch.")


def hermite_polynomial_h(input, n):
    """Physicists' Hermite H_n(x): H_(k+1) = 2x H_k - 2k H_(k-1); 0 for n < 0."""
    return _recurrence(input, n, _C.ones_like, lambda x: 2.0 * x,
                       lambda k, x, b, a: 2.0 * x * b - (2.0 * k) * a)


def hermite_polynomial_he(input, n):
    """Probabilists' Hermite He_n(x): He_(k+1) = x He_k - k He_(k-1); 0 for n < 0."""
    return _recurrence(input, n, _C.ones_like, _ident, lambda k, x, b, a: x * b - k * a)


def laguerre_polynomial_l(input, n):
    """Laguerre L_n(x): (k+1) L_(k+1) = (2k + 1 - x) L_k - k L_(k-1); 0 for n < 0."""
    return _recurrence(input, n, _C.ones_like, lambda x: 1.0 - x,
                       lambda k, x, b, a: ((2.0 * k + 1.0 - x) * b - k * a) * (1.0 / (k + 1)))


def legendre_polynomial_p(input, n):
    """Legendre P_n(x): (k+1) P_(k+1) = (2k + 1) x P_k - k P_(k-1); 0 for n < 0."""
    return _recurrence(input, n, _C.ones_like, _ident,
                       lambda k, x, b, a: ((2.0 * k + 1.0) * x * b - k * a) * (1.0 / (k + 1)))
