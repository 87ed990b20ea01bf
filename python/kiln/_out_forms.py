"""out= for the torch functions that kiln writes in Python (the composites): torch.square(x,
out=t), torch.hypot(a, b, out=t), ... The function computes its result as usual, then
_C._store_out stores it into t by the rules of kiln's other out= forms (python/src/out_arg.cpp:
t of the result's shape is written in place, cast where torch allows it; an empty t becomes the
result; another shape is refused; out= is refused when grad mode is on and an argument requires
grad). Functions whose result is a tuple (std_mean, var_mean, histogram) are not listed."""
import functools

from . import _C

# The single-result torch functions with out= that kiln implements in Python (checked against
# PyTorch 2.13 by tests/python/test_out_forms.py).
NAMES = (
    "acos", "acosh", "addbmm", "addmv", "addr", "angle", "asin", "asinh", "atan", "atanh",
    "bitwise_left_shift", "bitwise_right_shift", "bucketize", "column_stack", "conj_physical",
    "copysign", "cosh", "cross", "deg2rad", "diag", "diff", "dstack", "float_power", "fmax",
    "fmin", "gcd", "heaviside", "histc", "hstack", "hypot", "inner", "isneginf", "isposinf",
    "kron", "lcm", "ldexp", "log10", "logaddexp", "logaddexp2", "logcumsumexp", "logspace",
    "msort", "mv", "nanmean", "nanquantile", "nextafter", "quantile", "rad2deg", "range",
    "renorm", "round", "searchsorted", "sgn", "signbit", "sinh", "square", "take_along_dim",
    "vdot", "vstack", "xlogy", "isin", "polar", "mvlgamma", "sinc", "frac", "logit", "i0",
    "index_add", "nansum", "narrow_copy")
# The same in kiln.linalg and kiln.special (every torch.special function takes out=).
LINALG_NAMES = ("cross", "matrix_norm", "multi_dot", "norm", "vecdot", "vector_norm")
SPECIAL_NAMES = (
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "chebyshev_polynomial_t",
    "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w", "entr",
    "erfcx", "gammainc", "gammaincc", "hermite_polynomial_h", "hermite_polynomial_he", "i0",
    "i0e", "i1", "i1e", "laguerre_polynomial_l", "legendre_polynomial_p", "log_ndtr", "logit",
    "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
    "multigammaln", "ndtr", "ndtri", "round", "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "sinc", "spherical_bessel_j0", "xlog1py", "xlogy", "zeta")


def _tensors(values):
    found = []
    for v in values:
        if isinstance(v, _C.Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(e for e in v if isinstance(e, _C.Tensor))
    return found


def store(name, out, result, inputs=()):
    """result stored into out (None: result itself) by those rules; a tuple result into the
    tuple out, element by element, returned as result's (named) tuple type."""
    if out is None:
        return result
    if isinstance(result, tuple):
        for o, r in zip(out, result):
            _C._store_out(name, o, r, list(inputs))
        return type(result)(*out)
    return _C._store_out(name, out, result, list(inputs))


def with_out(name, fn):
    """fn with a keyword-only out=."""
    @functools.wraps(fn)
    def call(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        result = fn(*args, **kwargs)
        return store(name, out, result, _tensors(list(args) + list(kwargs.values())))
    call._kiln_out_form = True
    return call


def _wrap(namespace, names):
    for name in names:
        fn = namespace.get(name)
        if fn is not None and not getattr(fn, "_kiln_out_form", False):
            namespace[name] = with_out(name, fn)


def install(namespace):
    from . import linalg, special
    _wrap(namespace, NAMES)
    _wrap(linalg.__dict__, LINALG_NAMES)
    _wrap(special.__dict__, SPECIAL_NAMES)
