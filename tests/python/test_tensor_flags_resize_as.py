"""Tensor.is_xpu and torch's flags for devices kiln has no backend for (is_mps, is_xla, ...),
Tensor.resize_as_ / kiln.resize_as_ and Tensor.conj_physical_, against PyTorch 2.13."""
import numpy as np
import pytest
import torch

import kiln

FLAGS = ["is_cpu", "is_cuda", "is_xpu", "is_mps", "is_xla", "is_ipu", "is_mtia", "is_maia",
         "is_vulkan", "is_meta"]


@pytest.mark.parametrize("flag", FLAGS)
def test_device_flags_match_torch_on_cpu(flag):
    assert getattr(kiln.ones(2), flag) == getattr(torch.ones(2), flag)


def test_meta_tensor_flags():
    k, t = kiln.empty(2, device="meta"), torch.empty(2, device="meta")
    assert [getattr(k, f) for f in FLAGS] == [getattr(t, f) for f in FLAGS]


@pytest.mark.parametrize("src_shape,other_shape", [((0,), (2, 3)), ((6,), (2, 3)),
                                                   ((2, 3), (3, 2)), ((4, 4), (2,))])
def test_resize_as_matches_torch(src_shape, other_shape):
    vals = np.arange(int(np.prod(src_shape)), dtype=np.float32).reshape(src_shape)
    # clone(): storage of the library's own (memory shared with NumPy is not resizable in either)
    k, t = kiln.from_numpy(vals.copy()).clone(), torch.from_numpy(vals.copy()).clone()
    assert k.resize_as_(kiln.empty(other_shape)) is k
    t.resize_as_(torch.empty(other_shape))
    assert tuple(k.shape) == tuple(t.shape) == other_shape
    # The elements that existed before keep their values (torch's storage rule).
    n = min(k.numel(), vals.size)
    np.testing.assert_array_equal(k.reshape(-1)[:n].numpy(), t.reshape(-1)[:n].numpy())
    g = kiln.from_numpy(vals.copy()).clone()
    assert kiln.resize_as_(g, kiln.empty(other_shape)) is g and tuple(g.shape) == other_shape


def test_conj_physical_in_place_matches_torch():
    re, im = np.array([1.0, -2.0, 0.5], np.float32), np.array([3.0, 0.0, -4.0], np.float32)
    k = kiln.complex(kiln.from_numpy(re), kiln.from_numpy(im))
    t = torch.complex(torch.from_numpy(re), torch.from_numpy(im))
    assert k.conj_physical_() is k
    t.conj_physical_()
    np.testing.assert_array_equal(k.numpy(), t.numpy())
    r = kiln.from_numpy(re.copy())
    assert r.conj_physical_() is r
    np.testing.assert_array_equal(r.numpy(), re)
