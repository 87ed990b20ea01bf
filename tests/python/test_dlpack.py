"""DLPack (Tensor.__dlpack__/__dlpack_device__, kiln.from_dlpack) and the buffer protocol:
zero-copy exchange with torch and numpy in both directions (checked by writing through one
side and reading the other), strides and storage offsets, every dtype (bool and bfloat16
included), capsule naming and ownership ("dltensor" -> "used_dltensor", the producer's deleter
called exactly once), and the errors for what cannot be exchanged."""
import ctypes
import gc
import sys
import warnings

import numpy as np
import pytest
import torch

import kiln
import oracle

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]
NUMPY_DTYPES = [d for d in DTYPES if d != "bfloat16"]

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]


def capsule_name(cap):
    return _get_name(cap).decode()


def _values(dtype, shape):
    rng = np.random.default_rng(oracle._seed("dlpack", dtype, shape))
    return oracle.gen_array(rng, shape, dtype, "real")


def _kiln(dtype, shape):
    return kiln.tensor(_values(dtype, shape), dtype=getattr(kiln, dtype))


def _one(dtype):
    return True if dtype == "bool" else 7


# Views with non-trivial strides and offsets, applied the same way to kiln and torch.
VIEWS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.transpose(0, 1),
    "stepped": lambda x: x[:, ::2],
    "offset": lambda x: x[1:, 1:],
    "expanded": lambda x: x[:1].expand(3, 4),
    "scalar": lambda x: x[1, 2],
}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_kiln_to_torch_shares_memory(dtype, view):
    base = _kiln(dtype, (3, 4))
    k = VIEWS[view](base)
    t = torch.from_dlpack(k)
    ref = VIEWS[view](torch.tensor(oracle.to_numpy(base) if dtype != "bfloat16" else
                                   base.float().numpy()).to(getattr(torch, dtype)))
    assert t.dtype == getattr(torch, dtype)
    assert tuple(t.shape) == tuple(k.shape) and t.stride() == k.stride()
    oracle.assert_same(k, t, where=f"{dtype} {view}")
    assert torch.equal(t, ref)
    if view != "expanded":  # writes through torch are seen by kiln, and back
        t.fill_(_one(dtype))
        assert (oracle.to_numpy(k) == oracle.to_numpy(t)).all() and t.any()
        k.fill_(0)
        assert not t.any()
    oracle.record("dlpack.kiln_to_torch")


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_to_kiln_shares_memory(dtype, view):
    base = torch.tensor(_values(dtype, (3, 4))).to(getattr(torch, dtype))
    t = VIEWS[view](base)
    k = kiln.from_dlpack(t)
    assert k.dtype == getattr(kiln, dtype)
    assert tuple(k.shape) == tuple(t.shape) and k.stride() == t.stride()
    oracle.assert_same(k, t, where=f"{dtype} {view}")
    if view != "expanded":
        k.fill_(_one(dtype))
        assert oracle.to_numpy(t).reshape(-1)[0] == oracle.to_numpy(k).reshape(-1)[0]
        t.zero_()
        assert not oracle.to_numpy(k).any()
    oracle.record("dlpack.torch_to_kiln")


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_both_ways(dtype):
    a = _values(dtype, (4, 6))[::2, 1::2]  # strided with an offset
    k = kiln.from_dlpack(a)
    assert k.dtype == getattr(kiln, dtype) and tuple(k.shape) == a.shape
    assert k.stride() == tuple(s // a.itemsize for s in a.strides)
    np.testing.assert_array_equal(k.numpy(), a)
    k.fill_(_one(dtype))
    assert (a == np.asarray(_one(dtype), dtype=a.dtype)).all()
    kt = _kiln(dtype, (3, 5)).transpose(0, 1)
    b = np.from_dlpack(kt)
    assert b.dtype == np.dtype(dtype) and b.shape == (5, 3)
    assert b.strides == tuple(s * b.itemsize for s in kt.stride())
    np.testing.assert_array_equal(b, kt.numpy())
    b[...] = _one(dtype)
    assert (kt.numpy() == b).all()
    oracle.record("dlpack.numpy", 2)


def test_kiln_to_kiln_and_keywords():
    k = kiln.arange(6.0).view(2, 3)
    k2 = kiln.from_dlpack(k)
    k2[0, 0] = 42.0
    assert k[0, 0].item() == 42.0
    k3 = kiln.from_dlpack(k, copy=True)
    k3[0, 0] = 1.0
    assert k[0, 0].item() == 42.0
    assert k.__dlpack_device__() == (1, 0)
    # torch.from_dlpack passes max_version / dl_device / copy; all are accepted.
    cap = k.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=False)
    assert capsule_name(cap) == "dltensor_versioned"
    t = torch.from_dlpack(k, copy=True)
    t[0, 0] = -1.0
    assert k[0, 0].item() == 42.0
    oracle.record("dlpack.keywords", 3)


def test_capsule_names_and_single_use():
    k = kiln.arange(4.0)
    legacy = k.__dlpack__()
    assert capsule_name(legacy) == "dltensor"
    t = torch.from_dlpack(legacy)
    assert capsule_name(legacy) == "used_dltensor"
    versioned = k.__dlpack__(max_version=(1, 1))
    assert capsule_name(versioned) == "dltensor_versioned"
    k2 = kiln.from_dlpack(versioned)
    assert capsule_name(versioned) == "used_dltensor_versioned"
    with pytest.raises(RuntimeError):
        kiln.from_dlpack(versioned)  # a capsule is consumed once
    # torch's legacy capsule (torch.utils.dlpack.to_dlpack) imports the same way.
    tc = torch.utils.dlpack.to_dlpack(torch.arange(3))
    k3 = kiln.from_dlpack(tc)
    assert capsule_name(tc) == "used_dltensor"
    assert k3.tolist() == [0, 1, 2]
    t[0] = 5.0
    assert k2[0].item() == 5.0
    oracle.record("dlpack.capsules", 4)


def test_deleters_run_exactly_once():
    # numpy arrays keep a count of the references their DLPack capsules and kiln hold.
    a = np.arange(8.0)
    base = sys.getrefcount(a)
    # import: the producer's deleter runs when the last kiln tensor over the memory goes
    k = kiln.from_dlpack(a)
    view = k[2:]
    assert sys.getrefcount(a) == base + 1
    del k
    gc.collect()
    assert sys.getrefcount(a) == base + 1
    del view
    gc.collect()
    assert sys.getrefcount(a) == base
    # export: an unconsumed capsule frees the tensor with it, a consumed one leaves it to
    # the consumer (once each; a second call would drop the count below base).
    k = kiln.from_numpy(a)
    cap = k.__dlpack__()
    del k
    assert sys.getrefcount(a) == base + 1
    del cap
    gc.collect()
    assert sys.getrefcount(a) == base
    k = kiln.from_numpy(a)
    cap = k.__dlpack__(max_version=(1, 0))
    del k
    t = torch.from_dlpack(cap)
    del cap
    gc.collect()
    assert sys.getrefcount(a) == base + 1
    del t
    gc.collect()
    assert sys.getrefcount(a) == base
    # a failed import leaves the capsule to its own destructor
    c = np.zeros(3, dtype=np.complex64)
    cbase = sys.getrefcount(c)
    with pytest.raises(BufferError):
        kiln.from_dlpack(c)
    gc.collect()
    assert sys.getrefcount(c) == cbase
    oracle.record("dlpack.ownership", 4)


def test_readonly_numpy_warns():
    a = np.arange(3.0)
    a.setflags(write=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = kiln.from_dlpack(a)
    assert any("read-only" in str(x.message) for x in w)
    assert k.tolist() == [0.0, 1.0, 2.0]
    oracle.record("dlpack.readonly")


def _raises_like_torch(fn_k, fn_t):
    te = ke = None
    try:
        fn_t()
    except Exception as e:  # noqa: BLE001
        te = e
    try:
        fn_k()
    except Exception as e:  # noqa: BLE001
        ke = e
    assert te is not None and ke is not None, (te, ke)
    assert isinstance(ke, type(te)), f"kiln {type(ke).__name__}: {ke}; torch {type(te).__name__}"


def test_errors():
    # requires_grad: BufferError in both
    _raises_like_torch(lambda: kiln.ones(2, requires_grad=True).__dlpack__(),
                       lambda: torch.ones(2, requires_grad=True).__dlpack__())
    # a stream that is not an int
    _raises_like_torch(lambda: kiln.ones(2).__dlpack__(stream="s"),
                       lambda: torch.ones(2).__dlpack__(stream="s"))
    # kiln's testing device has no DLPack device type: reported as kDLExtDev, not exported
    x = kiln.ones(2, device="testing:0")
    assert x.__dlpack_device__() == (12, 0)
    with pytest.raises(BufferError):
        x.__dlpack__()
    with pytest.raises(BufferError):
        memoryview(x)
    np.testing.assert_array_equal(np.asarray(x), [1.0, 1.0])  # __array__ copies instead
    # unsupported dtypes: complex from torch and numpy
    with pytest.raises(BufferError):
        kiln.from_dlpack(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(BufferError):
        kiln.from_dlpack(np.zeros(2, dtype=np.uint16))
    # negative strides (numpy) cannot be represented by a kiln tensor
    with pytest.raises(BufferError):
        kiln.from_dlpack(np.arange(4.0)[::-1])
    # bfloat16 has no numpy dtype: numpy refuses kiln's capsule as it refuses torch's
    _raises_like_torch(lambda: np.from_dlpack(kiln.ones(2, dtype=kiln.bfloat16)),
                       lambda: np.from_dlpack(torch.ones(2, dtype=torch.bfloat16)))
    with pytest.raises(TypeError):
        kiln.from_dlpack([1, 2])
    with pytest.raises(BufferError):
        kiln.from_dlpack(np.arange(2.0), device="testing")
    oracle.record("dlpack.errors", 10)


# --- buffer protocol ----------------------------------------------------------------------

FORMATS = {"bool": "?", "uint8": "B", "int8": "b", "int16": "h", "int32": "i", "int64": "q",
           "float16": "e", "float32": "f", "float64": "d"}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_buffer_protocol(dtype, view):
    k = VIEWS[view](_kiln(dtype, (3, 4)))
    m = memoryview(k)
    assert m.format == FORMATS[dtype] and m.shape == tuple(k.shape) and not m.readonly
    assert m.strides == tuple(s * m.itemsize for s in k.stride())
    a = np.asarray(k)  # through the buffer protocol: no copy
    assert a.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(a, k.numpy())
    if view != "expanded":
        a[...] = _one(dtype)
        assert (k.numpy() == a).all()
    if k.is_contiguous():
        assert m.c_contiguous and m.nbytes == k.numel() * m.itemsize
        assert bytes(m) == k.numpy().tobytes()
    oracle.record("buffer_protocol")


def test_buffer_protocol_edges():
    # bfloat16 has no buffer format: memoryview refuses, numpy falls back to __array__
    b = kiln.ones(2, dtype=kiln.bfloat16)
    with pytest.raises(BufferError):
        memoryview(b)
    np.testing.assert_array_equal(np.asarray(b.float()), [1.0, 1.0])
    # a consumer that cannot take strides gets an error for a non-contiguous tensor
    t = kiln.arange(6.0).view(2, 3).t()
    view = (ctypes.c_char * 256)()  # room for a Py_buffer
    with pytest.raises(BufferError):
        ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(t), view, 0)  # PyBUF_SIMPLE
    c = t.contiguous()
    ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(c), view, 0)
    ctypes.pythonapi.PyBuffer_Release(view)
    # bytearray asks for strides and copies in order
    assert bytearray(t) == np.arange(6.0, dtype=np.float32).reshape(2, 3).T.copy().tobytes()
    # empty tensors and writes through memoryview
    assert memoryview(kiln.zeros(0, 3)).shape == (0, 3)
    x = kiln.zeros(3, dtype=kiln.int32)
    mv = memoryview(x)
    mv[1] = 9
    assert x.tolist() == [0, 9, 0]
    # the memoryview keeps the memory alive after the tensor object is gone
    y = kiln.arange(4.0)
    mv = memoryview(y)
    del y
    gc.collect()
    assert mv.tolist() == [0.0, 1.0, 2.0, 3.0]
    oracle.record("buffer_protocol", 5)
