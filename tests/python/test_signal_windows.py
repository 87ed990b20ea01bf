"""kiln.signal.windows against torch.signal.windows 2.13: values for both sym settings and
both dtypes, the window parameters, dtype / device / requires_grad handling, and the
errors (type and message) for bad arguments."""
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.signal.windows as TW  # noqa: E402

import kiln  # noqa: E402
import kiln.signal.windows as KW  # noqa: E402

TOL = {"float32": 2e-6, "float64": 1e-12}
NAMES = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
         "general_hamming", "hamming", "hann", "kaiser", "nuttall"]
REQUIRED = {"general_cosine": {"a": [0.46, 0.3, 0.14, 0.1]}}


def _np(t):
    return t.detach().numpy()


def _pair(name, M, dtype=None, **kwargs):
    kwargs = {**REQUIRED.get(name, {}), **kwargs}
    k = getattr(KW, name)(M, dtype=None if dtype is None else getattr(kiln, dtype), **kwargs)
    t = getattr(TW, name)(M, dtype=None if dtype is None else getattr(torch, dtype), **kwargs)
    return k, t


def _assert_same(k, t, dtype):
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(k.shape) == tuple(t.shape)
    np.testing.assert_allclose(_np(k), _np(t), rtol=0, atol=TOL[dtype])


def test_exports_match_torch():
    assert sorted(KW.__all__) == sorted(TW.__all__) == NAMES
    import kiln.signal
    assert kiln.signal.__all__ == ["windows"] and kiln.signal.windows is KW


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_values(name, sym, dtype):
    for M in (0, 1, 2, 3, 4, 7, 10, 64, 257):
        _assert_same(*_pair(name, M, dtype, sym=sym), dtype)


PARAMS = [
    ("exponential", dict(tau=0.5)),
    ("exponential", dict(tau=100.0)),
    ("exponential", dict(center=2.0, sym=False)),
    ("exponential", dict(center=-1.5, tau=3.0, sym=False)),
    ("gaussian", dict(std=0.3)),
    ("gaussian", dict(std=7.5, sym=False)),
    ("kaiser", dict(beta=0.0)),
    ("kaiser", dict(beta=2.5)),
    ("kaiser", dict(beta=30.0, sym=False)),
    ("general_hamming", dict(alpha=0.7)),
    ("general_hamming", dict(alpha=0.25, sym=False)),
    ("general_cosine", dict(a=[1.0])),
    ("general_cosine", dict(a=(0.5, 0.5))),
    ("general_cosine", dict(a=[0.21557895, 0.41663158, 0.277263158, 0.083578947,
                               0.006947368], sym=False)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kwargs", PARAMS, ids=[f"{n}-{k}" for n, k in PARAMS])
def test_parameters(name, kwargs, dtype):
    for M in (1, 2, 5, 16, 101):
        if "center" in kwargs and M == 1:
            continue
        _assert_same(*_pair(name, M, dtype, **kwargs), dtype)


@pytest.mark.parametrize("name", NAMES)
def test_default_dtype(name):
    prior_k, prior_t = kiln.get_default_dtype(), torch.get_default_dtype()
    try:
        k, t = _pair(name, 6)
        assert k.dtype == kiln.float32 and t.dtype == torch.float32
        kiln.set_default_dtype(kiln.float64)
        torch.set_default_dtype(torch.float64)
        k, t = _pair(name, 6)
        assert k.dtype == kiln.float64
        _assert_same(k, t, "float64")
    finally:
        kiln.set_default_dtype(prior_k)
        torch.set_default_dtype(prior_t)


@pytest.mark.parametrize("name", NAMES)
def test_requires_grad_like_torch(name):
    for M in (0, 1, 5):
        k, t = _pair(name, M, "float64", requires_grad=True)
        assert (k.requires_grad, k.is_leaf) == (t.requires_grad, t.is_leaf)
        _assert_same(k, t, "float64")
        if not k.is_leaf:
            k.sum().backward()  # differentiable through the sample grid
    k, _ = _pair(name, 5, "float64")
    assert not k.requires_grad


@pytest.mark.parametrize("name", NAMES)
def test_device_and_layout(name):
    kwargs = REQUIRED.get(name, {})
    w = getattr(KW, name)(5, device="testing:0", **kwargs)
    assert w.device == kiln.device("testing:0")
    ref = getattr(KW, name)(5, **kwargs)
    np.testing.assert_allclose(_np(w.cpu()), _np(ref), rtol=0, atol=0)
    # torch's strided layout (the only one) is accepted, by object or by name
    getattr(KW, name)(5, layout=torch.strided, **kwargs)
    getattr(KW, name)(5, layout="strided", **kwargs)
    with pytest.raises(ValueError, match=r"is implemented for strided tensors only, got: "
                                         r"torch.sparse_coo"):
        getattr(KW, name)(5, layout=torch.sparse_coo, **kwargs)


def _error(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001  (the type is compared)
        return type(error), re.sub(r"\btorch\.", "kiln.", str(error))
    return None


ERRORS = [(name, dict(M=-1)) for name in NAMES] + \
    [(name, dict(dtype="float16")) for name in NAMES] + \
    [(name, dict(dtype="int64")) for name in NAMES] + [
    ("exponential", dict(tau=0.0)),
    ("exponential", dict(tau=-1.0, dtype="float16")),  # dtype is checked first
    ("exponential", dict(center=1.0)),
    ("exponential", dict(center=1.0, sym=True, M=0)),
    ("gaussian", dict(std=0.0)),
    ("gaussian", dict(std=-2.0, M=0)),
    ("kaiser", dict(beta=-0.5)),
    ("kaiser", dict(beta=-0.5, M=0)),
    ("general_cosine", dict(a=5)),
    ("general_cosine", dict(a=[])),
    ("general_cosine", dict(a=5, M=1)),  # no check before the length shortcut, as torch
    ("general_cosine", dict(a=[], M=0)),
    ("general_hamming", dict(alpha=0.5, M=-3)),
]


@pytest.mark.parametrize("name,kwargs", ERRORS, ids=[f"{n}-{k}" for n, k in ERRORS])
def test_errors_match_torch(name, kwargs):
    kwargs = {**REQUIRED.get(name, {}), **kwargs}
    M = kwargs.pop("M", 5)
    dtype = kwargs.pop("dtype", None)
    got = _error(getattr(KW, name), M, dtype=dtype and getattr(kiln, dtype), **kwargs)
    want = _error(getattr(TW, name), M, dtype=dtype and getattr(torch, dtype), **kwargs)
    assert got == want
