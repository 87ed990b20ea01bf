"""Tensor.view(dtype) (the same bytes read as another dtype) against PyTorch 2.13: values,
shapes, strides and offsets of the views, writes through them, and the errors."""
import numpy as np
import pytest
import torch

import kiln

PAIRS = [("float32", "int32"), ("int32", "float32"), ("float32", "uint8"), ("uint8", "float32"),
         ("float32", "int16"), ("bfloat16", "int16"), ("float16", "bfloat16"), ("float64", "int64"),
         ("int64", "float32"), ("int8", "bool"), ("float32", "float32"), ("int16", "uint8")]


def make(dtype, shape):
    rng = np.random.default_rng(0)
    t = torch.from_numpy(rng.integers(0, 2, size=shape).astype(np.uint8) if dtype == "bool" else
                         rng.integers(0, 100, size=shape).astype(np.int64)).to(getattr(torch, dtype))
    if dtype.startswith("float") or dtype == "bfloat16":
        t = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(getattr(torch, dtype))
    return t, kiln.from_dlpack(t.contiguous()).clone()


@pytest.mark.parametrize("src,dst", PAIRS)
@pytest.mark.parametrize("shape", [(4, 8), (3, 2, 4)])
def test_view_dtype_matches_torch(src, dst, shape):
    t, k = make(src, shape)
    want = t.view(getattr(torch, dst))
    got = k.view(getattr(kiln, dst))
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    assert got.dtype == getattr(kiln, dst)
    np.testing.assert_array_equal(got.view(getattr(kiln, "uint8")).numpy() if dst in ("bfloat16",) else
                                  got.numpy(), want.view(torch.uint8).numpy() if dst in ("bfloat16",)
                                  else want.numpy())


def test_view_dtype_of_a_slice_and_writes_through():
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    k = kiln.arange(24, dtype=kiln.float32).reshape(4, 6)
    want, got = t[1:, 2:].view(torch.int16), k[1:, 2:].view(kiln.int16)
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    k.view(kiln.int32)[0, 0] = 1065353216  # the bits of 1.0
    assert k[0, 0].item() == 1.0


@pytest.mark.parametrize("build,dst", [
    (lambda L: L.zeros(4, 6, dtype=L.float32).t(), "int16"),      # last stride not 1
    (lambda L: L.zeros(4, 3, dtype=L.int16), "float32"),          # size(-1) not divisible
    (lambda L: L.zeros(4, 4, dtype=L.int16)[:, 1:3], "float32"),  # offset not divisible
    (lambda L: L.zeros((), dtype=L.float32), "int16"),            # 0-d, sizes differ
])
def test_view_dtype_errors_like_torch(build, dst):
    with pytest.raises(RuntimeError) as want:
        build(torch).view(getattr(torch, dst))
    with pytest.raises(RuntimeError) as got:
        build(kiln).view(getattr(kiln, dst))
    key = str(want.value).split(" to view")[0]
    assert key in str(got.value), (str(got.value), str(want.value))
