"""Tensor.resize_ / resize_as_ against torch 2.13: shrinking and growing (values kept in the
old bytes, reinterpreted contiguously), views with a storage offset, tuple and Size arguments,
the errors (requires_grad, negative sizes, NumPy memory that would have to grow), and the
version counter that autograd checks."""
import numpy as np
import pytest
import torch

import kiln


def K(t):
    return kiln.from_numpy(np.array(t.numpy(), order="C", copy=True)).clone()


def kept(k, t, n):
    """The first n elements of both, flattened (the rest is uninitialised memory)."""
    assert tuple(k.shape) == tuple(t.shape)
    assert k.is_contiguous()
    assert k.flatten()[:n].tolist() == t.flatten()[:n].tolist()


@pytest.mark.parametrize("dtype", ["float32", "int64", "complex64", "bool"])
def test_resize_shrinks_and_grows_like_torch(dtype):
    base = (torch.arange(12) % 5).to(getattr(torch, dtype)).reshape(3, 4)
    t, k = base.clone(), K(base)
    for shape in ((4, 3), (2, 2), (12,), (2, 3, 2), (0,)):
        kept(k.resize_(*shape), t.resize_(*shape), t.numel())
    t2, k2 = base.clone().resize_(2, 3), K(base).resize_(2, 3)
    kept(k2.resize_((5, 5)), t2.resize_((5, 5)), 6)  # grows: the first 6 values stay
    kept(k2.resize_(kiln.Size([1, 6])), t2.resize_(torch.Size([1, 6])), 6)


def test_resize_of_a_transposed_tensor():
    t = torch.arange(6.0).reshape(2, 3).t()
    k = kiln.arange(6.0).reshape(2, 3).t()
    # the same sizes: nothing changes, strides included
    assert k.resize_(3, 2).stride() == t.resize_(3, 2).stride() == (1, 3)
    assert k.tolist() == t.tolist()
    # other sizes: the storage reinterpreted contiguously from the offset
    kept(k.resize_(2, 3), t.resize_(2, 3), 6)


def test_resize_of_a_view_keeps_its_offset():
    t = torch.arange(10.0)[3:7]
    k = kiln.arange(10.0)[3:7]
    kept(k.resize_(2), t.resize_(2), 2)
    assert k.storage_offset() == t.storage_offset() == 3
    kept(k.resize_(20), t.resize_(20), 7)  # grows past the storage: the values from offset 3


def test_resize_as_and_empty_out():
    k = kiln.empty(0)
    k.resize_as_(kiln.ones(2, 5))
    assert tuple(k.shape) == (2, 5)


def test_resize_errors_like_torch():
    for L in (torch, kiln):
        with pytest.raises(RuntimeError, match="require grad"):
            L.ones(2, requires_grad=True).resize_(3)
        with pytest.raises(RuntimeError):  # torch: "numel: integer multiplication overflow"
            L.ones(2).resize_(-1, 2)
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        kiln.ones(2).resize_(-1, 2)
    a = kiln.from_numpy(np.zeros(3, dtype=np.float32))
    with pytest.raises(RuntimeError, match="not resizable"):
        a.resize_(10)
    assert tuple(a.resize_(2).shape) == (2,)  # shrinking NumPy memory is fine


def test_resize_bumps_the_version_counter():
    x = kiln.ones(3, requires_grad=True)
    y = kiln.ones(3)
    z = x * y  # saves y
    y.resize_(3, 1)
    with pytest.raises(RuntimeError):
        z.sum().backward()
