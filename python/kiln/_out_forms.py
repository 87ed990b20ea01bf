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
    "vdot", "vstack")


def _tensors(values):
    found = []
    for v in values:
        if isinstance(v, _C.Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(e for e in v if isinstance(e, _C.Tensor))
    return found


def with_out(name, fn):
    """fn with a keyword-only out= (fn itself when it already takes one)."""
    @functools.wraps(fn)
    def call(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        result = fn(*args, **kwargs)
        return _C._store_out(name, out, result, _tensors(list(args) + list(kwargs.values())))
    return call


def install(namespace):
    for name in NAMES:
        fn = namespace.get(name)
        if fn is not None and not getattr(fn, "_kiln_out_form", False):
            wrapped = with_out(name, fn)
            wrapped._kiln_out_form = True
            namespace[name] = wrapped
