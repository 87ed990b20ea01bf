"""out= on the torch functions kiln writes in Python (python/kiln/_out_forms.py) and on the
C++ functions that gained it through add_generic_out (clamp_min, clamp_max, softmax,
log_softmax, floor_divide): the value written into out and returned matches PyTorch 2.13's
out= call, an empty out takes the result, a wrong-shaped out and a float result into an
integer out are refused."""
import numpy as np
import pytest
import torch

import kiln
from kiln import _out_forms

R = np.random.default_rng(7)
A = (R.random((4, 5)) * 2 + 0.25).astype(np.float32)     # positive
B = (R.random((4, 5)) * 2 - 1.0).astype(np.float32)      # signed
V = (R.random(5) + 0.5).astype(np.float32)
SQ = (R.random((5, 5)) + 0.5).astype(np.float32)
I = R.integers(1, 9, size=(4, 5)).astype(np.int64)
SORTED = np.sort(R.random(6).astype(np.float32))
U = (R.random((4, 5)) * 1.6 - 0.8).astype(np.float32)   # in (-1, 1)
UP = (R.random((4, 5)) + 1.5).astype(np.float32)        # > 1


def _t(lib, a):
    return torch.from_numpy(a.copy()) if lib is torch else kiln.from_numpy(a.copy())


# name -> (arrays, extra positional args, kwargs)
CASES = {
    "acos": ([U], (), {}), "asin": ([U], (), {}), "atan": ([B], (), {}), "atanh": ([U], (), {}),
    "acosh": ([UP], (), {}), "asinh": ([B], (), {}), "cosh": ([B], (), {}), "sinh": ([B], (), {}),
    "angle": ([B], (), {}), "conj_physical": ([B], (), {}), "deg2rad": ([B], (), {}),
    "rad2deg": ([B], (), {}), "isneginf": ([B], (), {}), "isposinf": ([B], (), {}),
    "log10": ([A], (), {}), "msort": ([B], (), {}), "sgn": ([B], (), {}),
    "signbit": ([B], (), {}), "square": ([B], (), {}), "round": ([B * 7], (), {}),
    "copysign": ([A, B], (), {}), "float_power": ([A, B], (), {}), "fmax": ([A, B], (), {}),
    "fmin": ([A, B], (), {}), "heaviside": ([B, A], (), {}), "hypot": ([A, B], (), {}),
    "ldexp": ([A, B], (), {}), "logaddexp": ([A, B], (), {}), "logaddexp2": ([A, B], (), {}),
    "nextafter": ([A, B], (), {}), "gcd": ([I, I * 3], (), {}), "lcm": ([I, I + 1], (), {}),
    "bitwise_left_shift": ([I, I % 3], (), {}), "bitwise_right_shift": ([I * 8, I % 3], (), {}),
    "inner": ([V, V], (), {}), "vdot": ([V, V], (), {}), "mv": ([SQ, V], (), {}),
    "kron": ([SQ[:2, :3], SQ[:3, :2]], (), {}), "cross": ([SQ[:2, :3], SQ[2:4, :3]], (), {"dim": 1}),
    "diag": ([SQ], (), {}), "diff": ([B], (), {}), "logcumsumexp": ([B], (1,), {}),
    "nanmean": ([B], (), {"dim": 1}), "quantile": ([B], (0.3,), {"dim": 1}),
    "nanquantile": ([B], (0.3,), {"dim": 1}), "renorm": ([B], (2, 0, 1.0), {}),
    "take_along_dim": ([B, np.argsort(B, axis=1)], (), {"dim": 1}),
    "addmv": ([V, SQ, V], (), {}), "addr": ([SQ, V, V], (), {}),
    "addbmm": ([SQ[:, :4], np.stack([SQ[:, :3]] * 2), np.stack([SQ[:3, :4]] * 2)], (), {}),
    "bucketize": ([B, SORTED], (), {}), "searchsorted": ([SORTED, B], (), {}),
    "histc": ([B], (), {"bins": 4, "min": -1, "max": 1}),
    "column_stack": ([[V, V]], (), {}), "hstack": ([[A, B]], (), {}), "vstack": ([[A, B]], (), {}),
    "dstack": ([[A, B]], (), {}), "clamp_min": ([B], (0.1,), {}), "clamp_max": ([B], (0.1,), {}),
    "softmax": ([B], (1,), {}), "log_softmax": ([B], (1,), {}), "floor_divide": ([I * 7, I], (), {}),
    "xlogy": ([A, B], (), {}), "isin": ([I, I[:2]], (), {}), "polar": ([A, B], (), {}),
    "mvlgamma": ([A + 2], (2,), {}), "sinc": ([B], (), {}), "frac": ([B * 7], (), {}),
    "logit": ([U * 0.5 + 0.5], (), {}), "i0": ([B], (), {}),
    "index_add": ([A, 0, np.array([0, 2]), B[:2]], (), {}), "nansum": ([B], (1,), {}),
    "narrow_copy": ([A], (1, 1, 3), {}), "erfinv": ([U], (), {}), "erfc": ([B], (), {}),
    "digamma": ([A], (), {}), "complex": ([A, B], (), {}), "negative": ([B], (), {}),
    "scatter": ([A, 1, np.argsort(B, axis=1)[:, :2], B[:, :2]], (), {}),
    "max": ([A, B], (), {}), "min": ([A, B], (), {}),
}
# kiln.linalg / kiln.special: "module.name"
CASES.update({
    "linalg.cross": ([SQ[:2, :3], SQ[2:4, :3]], (), {}), "linalg.matrix_norm": ([SQ], (), {}),
    "linalg.multi_dot": ([[SQ, SQ, SQ]], (), {}), "linalg.norm": ([B], (), {}),
    "linalg.vecdot": ([A, B], (), {}), "linalg.vector_norm": ([B], (), {}),
    "linalg.inv": ([SQ + 3 * np.eye(5, dtype=np.float32)], (), {}),
})
_SPECIAL_BINARY = {"gammainc": UP, "gammaincc": UP, "xlog1py": A, "xlogy": A, "zeta": UP}
for _n in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "entr", "erfcx", "i0", "i0e",
           "i1", "i1e", "log_ndtr", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "ndtr", "round",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "sinc",
           "spherical_bessel_j0"):
    CASES["special." + _n] = ([A], (), {})
CASES["special.logit"] = ([U * 0.5 + 0.5], (), {})
CASES["special.ndtri"] = ([U * 0.5 + 0.5], (), {})
CASES["special.multigammaln"] = ([A + 2], (2,), {})
for _n, _other in _SPECIAL_BINARY.items():
    CASES["special." + _n] = ([UP, _other], (), {})
for _n in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w"):
    CASES["special." + _n] = ([U * 0.5 + 0.5], (3,), {})
FACTORIES = {"logspace": ((0.0, 2.0, 5), {}), "range": ((0.0, 4.0, 0.5), {})}


def _np(t):
    a = t.numpy()
    return a if np.iscomplexobj(a) else a.astype(np.float64)


def _args(lib, arrays):
    out = []
    for a in arrays:
        if isinstance(a, int):  # a dim between the tensors
            out.append(a)
            continue
        out.append([_t(lib, e) for e in a] if isinstance(a, list) else _t(lib, a))
    return out


def _fn(lib, name):
    for part in name.split("."):
        lib = getattr(lib, part)
    return lib


def _call(lib, name, arrays, extra, kwargs, **out):
    return _fn(lib, name)(*_args(lib, arrays), *extra, **kwargs, **out)


def test_every_listed_name_is_covered():
    listed = (set(_out_forms.NAMES) | {"linalg." + n for n in _out_forms.LINALG_NAMES} |
              {"special." + n for n in _out_forms.SPECIAL_NAMES})
    assert listed <= set(CASES) | set(FACTORIES)


@pytest.mark.parametrize("name", ["bernoulli", "multinomial"])
def test_random_functions_write_out(name):
    p = kiln.from_numpy((U * 0.5 + 0.5).copy())
    out = kiln.empty(0, dtype=kiln.float32 if name == "bernoulli" else kiln.int64)
    r = kiln.bernoulli(p, out=out) if name == "bernoulli" else kiln.multinomial(p, 2, out=out)
    assert r is out and tuple(out.shape) == ((4, 5) if name == "bernoulli" else (4, 2))


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_matches_torch(name):
    arrays, extra, kwargs = CASES[name]
    want = _call(torch, name, arrays, extra, kwargs)
    dtype = getattr(kiln, str(want.dtype).split(".")[1])
    out = kiln.empty(tuple(want.shape), dtype=dtype)
    got = _call(kiln, name, arrays, extra, kwargs, out=out)
    assert got is out
    t_out = torch.empty_like(want)
    torch_got = _call(torch, name, arrays, extra, kwargs, out=t_out)
    assert torch_got is t_out
    np.testing.assert_allclose(_np(out), _np(torch_got), rtol=2e-5, atol=2e-6)
    # An empty out takes the result (torch.empty(0) idiom).
    empty = kiln.empty(0, dtype=dtype)
    _call(kiln, name, arrays, extra, kwargs, out=empty)
    assert tuple(empty.shape) == tuple(want.shape)
    np.testing.assert_allclose(_np(empty), _np(want), rtol=2e-5, atol=2e-6)


@pytest.mark.filterwarnings("ignore:.*range is deprecated:UserWarning")
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factory_out_matches_torch(name):
    args, kwargs = FACTORIES[name]
    want = getattr(torch, name)(*args, **kwargs)
    out = kiln.empty(0)
    assert getattr(kiln, name)(*args, **kwargs, out=out) is out
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["square", "hypot", "clamp_min", "softmax"])
def test_wrong_shape_and_float_into_integer_are_refused(name):
    arrays, extra, kwargs = CASES[name]
    with pytest.raises(RuntimeError, match="shape"):
        _call(kiln, name, arrays, extra, kwargs, out=kiln.empty(3, 3))
    with pytest.raises(RuntimeError, match="can't be cast"):
        _call(kiln, name, arrays, extra, kwargs, out=kiln.empty(4, 5, dtype=kiln.int64))


def test_out_refused_when_an_argument_requires_grad():
    x = kiln.from_numpy(B.copy()).requires_grad_()
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        kiln.square(x, out=kiln.empty(4, 5))


def test_without_out_the_function_is_unchanged():
    x = kiln.from_numpy(B.copy())
    np.testing.assert_allclose(kiln.square(x).numpy(), B * B, rtol=1e-6)
    assert kiln.hypot.__name__ == "hypot"
