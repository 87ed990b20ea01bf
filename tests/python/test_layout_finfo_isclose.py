"""Small torch-compatibility points checked against torch 2.13: layouts, finfo of complex
dtypes, isclose on complex tensors, factories without a size."""
import pickle

import numpy as np
import pytest
import torch

import kiln


def test_strided_is_the_only_layout():
    assert repr(kiln.strided) == "kiln.strided"
    assert kiln.ones(2).layout is kiln.strided
    assert kiln.zeros(2, 3).t().layout is kiln.strided
    assert pickle.loads(pickle.dumps(kiln.strided)) is kiln.strided
    assert kiln.zeros(2, layout=kiln.strided).shape == (2,)
    assert kiln.ones(2).new_zeros(3, layout=kiln.strided).shape == (3,)
    with pytest.raises(NotImplementedError, match="kiln tensors are dense"):
        kiln.zeros(2, layout="sparse_coo")
    with pytest.raises(NotImplementedError, match="kiln tensors are dense"):
        kiln.ones(2).new_ones(2, layout=torch.sparse_coo)


@pytest.mark.parametrize("name", ["complex64", "complex128"])
def test_finfo_of_complex_dtypes_is_that_of_their_parts(name):
    k, t = kiln.finfo(getattr(kiln, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "resolution"):
        assert getattr(k, attr) == pytest.approx(getattr(t, attr), rel=1e-6), attr
    assert k.dtype == t.dtype


def test_isclose_on_complex_compares_both_parts():
    nan, inf = float("nan"), float("inf")
    a = [3 - 1j, 1 + 1j, complex(inf, 0), complex(nan, 1), 1 + 1j, 2 + 1e-9j]
    b = [3 - 1.5j, 1 + 1.000001j, complex(inf, 0), complex(nan, 1), complex(inf, 1), 2 + 0j]
    for dtype in ("complex64", "complex128"):
        for equal_nan in (False, True):
            k = kiln.isclose(kiln.tensor(a, dtype=getattr(kiln, dtype)),
                             kiln.tensor(b, dtype=getattr(kiln, dtype)), equal_nan=equal_nan)
            t = torch.isclose(torch.tensor(a, dtype=getattr(torch, dtype)),
                              torch.tensor(b, dtype=getattr(torch, dtype)), equal_nan=equal_nan)
            np.testing.assert_array_equal(k.numpy(), t.numpy())


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_factories_need_a_size(name):
    with pytest.raises(TypeError, match=name + r"\(\) missing 1 required positional arguments"):
        getattr(kiln, name)()
    assert getattr(kiln, name)(()).shape == getattr(torch, name)(()).shape


@pytest.mark.parametrize("name", ["median", "nanmedian"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_of_a_0d_tensor_along_a_dim(name, keepdim):
    # (the size of dim 0 of a 0-d tensor used to be read out of bounds: a crash)
    for value in (3.0, float("nan")):
        k = getattr(kiln, name)(kiln.tensor(value), 0, keepdim=keepdim)
        t = getattr(torch, name)(torch.tensor(value), 0, keepdim=keepdim)
        assert k.values.shape == t.values.shape and k.indices.shape == t.indices.shape
        np.testing.assert_array_equal(k.values.numpy(), t.values.numpy())
        assert k.indices.item() == t.indices.item()
    with pytest.raises(IndexError, match=r"expected to be in range of \[-1, 0\], but got 1"):
        getattr(kiln, name)(kiln.tensor(1.0), 1)


def test_quantile_of_a_0d_tensor_along_a_dim():
    for q in (0.5, [0.2, 0.9]):
        for keepdim in (False, True):
            kq = kiln.tensor(q) if isinstance(q, list) else q
            tq = torch.tensor(q) if isinstance(q, list) else q
            k = kiln.quantile(kiln.tensor(3.0), kq, -1, keepdim=keepdim)
            t = torch.quantile(torch.tensor(3.0), tq, -1, keepdim=keepdim)
            assert k.shape == t.shape
            np.testing.assert_array_equal(k.numpy(), t.numpy())


def test_size_and_stride_of_a_0d_tensor_are_index_errors():
    for d in (0, -1, 1):
        for method in ("size", "stride"):
            with pytest.raises(IndexError, match="but tensor has no dimensions"):
                getattr(kiln.tensor(3.0), method)(d)
