"""kiln.nn.functional.interpolate and nn.Upsample against torch 2.13: every mode, 1-3 spatial
dims, size and scale_factor (integer and fractional, with and without recompute_scale_factor),
align_corners, float32 / float64 / bfloat16, gradients, and torch's errors."""
import zlib

import numpy as np
import pytest
import torch

import kiln

F = kiln.nn.functional


def to_kiln(t):
    if t.dtype == torch.bfloat16:
        return kiln.from_numpy(t.float().numpy().copy()).to(kiln.bfloat16)
    return kiln.from_numpy(t.detach().numpy().copy())


def to_np(k):
    return (k.float() if k.dtype == kiln.bfloat16 else k).numpy()


CASES = [
    # mode, input shape, kwargs
    ("nearest", (2, 3, 7), dict(size=11)),
    ("nearest", (2, 3, 7, 5), dict(scale_factor=2)),
    ("nearest", (1, 2, 9, 6), dict(scale_factor=0.5)),
    ("nearest", (1, 2, 5, 7), dict(scale_factor=(1.7, 2.3))),
    ("nearest", (1, 2, 4, 5, 3), dict(size=(7, 3, 8))),
    ("nearest", (1, 2, 130, 140), dict(scale_factor=1.1)),  # a plane past the one-pick limit
    ("nearest", (1, 2, 260, 270), dict(scale_factor=2)),  # past the channels-last limit too
    ("nearest-exact", (2, 3, 7, 5), dict(size=(10, 13))),
    ("nearest-exact", (1, 2, 9), dict(scale_factor=0.37)),
    ("linear", (2, 3, 7), dict(size=15)),
    ("linear", (2, 3, 7), dict(scale_factor=1.5, align_corners=True)),
    ("bilinear", (2, 3, 7, 5), dict(scale_factor=2)),
    ("bilinear", (2, 3, 7, 5), dict(size=(4, 9), align_corners=True)),
    ("bilinear", (1, 4, 10, 12), dict(scale_factor=(0.6, 1.3))),
    ("bilinear", (1, 4, 10, 12), dict(scale_factor=(0.6, 1.3), recompute_scale_factor=True)),
    ("bilinear", (1, 1, 1, 1), dict(size=(3, 2))),
    ("bicubic", (2, 3, 6, 5), dict(scale_factor=2)),
    ("bicubic", (1, 2, 9, 8), dict(size=(5, 12), align_corners=True)),
    ("trilinear", (1, 2, 4, 5, 3), dict(scale_factor=2)),
    ("trilinear", (1, 2, 4, 5, 3), dict(size=(3, 7, 6), align_corners=True)),
    ("area", (2, 3, 9, 7), dict(size=(4, 3))),
    ("area", (2, 3, 8), dict(scale_factor=0.5)),
]


@pytest.mark.parametrize("mode,shape,kw", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_interpolate_matches_torch(mode, shape, kw, dtype):
    g = torch.Generator().manual_seed(zlib.crc32(repr((mode, shape, kw)).encode()))
    t = torch.randn(*shape, generator=g).to(dtype)
    want = torch.nn.functional.interpolate(t, mode=mode, **kw)
    got = F.interpolate(to_kiln(t), mode=mode, **kw)
    assert tuple(got.shape) == tuple(want.shape)
    # float32: the taps' products are summed in another order than torch's (several ulps of
    # the inputs' magnitude, about 1, where a result is near 0).
    tol = dict(rtol=1.6e-2, atol=1.6e-2) if dtype == torch.bfloat16 else \
        dict(rtol=1e-5, atol=1e-5 if dtype == torch.float32 else 1e-12)
    np.testing.assert_allclose(to_np(got), want.float().numpy(), **tol)


CL_CASES = [c for c in CASES if len(c[1]) == 4]


@pytest.mark.parametrize("mode,shape,kw", CL_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_interpolate_channels_last_matches_torch(mode, shape, kw, dtype):
    """Channels-last inputs are resized as their NHWC view: torch's values, and its
    channels-last result (area mode pools, whose result is one layout or both; a 1x1 input is
    both layouts at once and is resized as a contiguous one)."""
    g = torch.Generator().manual_seed(zlib.crc32(repr(("cl", mode, shape, kw)).encode()))
    t = torch.randn(shape[0], shape[1] + 13, *shape[2:], generator=g).to(dtype)
    t = t.to(memory_format=torch.channels_last)
    k = to_kiln(t.contiguous()).to(memory_format=kiln.channels_last)
    want = torch.nn.functional.interpolate(t, mode=mode, **kw)
    got = F.interpolate(k, mode=mode, **kw)
    assert tuple(got.shape) == tuple(want.shape)
    if mode != "area" and shape[2] * shape[3] > 1:
        assert got.is_contiguous(memory_format=kiln.channels_last)
        assert want.is_contiguous(memory_format=torch.channels_last)
    tol = dict(rtol=1.6e-2, atol=1.6e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(got.contiguous()), want.float().contiguous().numpy(), **tol)
    # the same values as the contiguous input's resize (same taps, same order)
    plain = F.interpolate(to_kiln(t.contiguous()), mode=mode, **kw)
    np.testing.assert_array_equal(to_np(got.contiguous()), to_np(plain))


@pytest.mark.parametrize("mode,shape,kw", [c for c in CASES if c[0] != "area"])
def test_interpolate_gradients_match_torch(mode, shape, kw):
    t = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    want = torch.nn.functional.interpolate(t, mode=mode, **kw)
    gw = torch.randn(*want.shape, dtype=torch.float64)
    want.backward(gw)
    k = to_kiln(t.detach()).requires_grad_()
    got = F.interpolate(k, mode=mode, **kw)
    got.backward(to_kiln(gw))
    np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_nearest_of_strided_and_permuted_inputs(mode, channels_last):
    """All spatial dims are picked at once (one flat index) for contiguous inputs; a strided
    view takes the dim-by-dim path: both give torch's values."""
    t = torch.randn(2, 5, 12, 9)
    k = to_kiln(t)
    if channels_last:
        t, k = t.to(memory_format=torch.channels_last), k.contiguous(memory_format=kiln.channels_last)
    for tv, kv in [(t, k), (t[:, 1:4, ::2, 1:], k[:, 1:4, ::2, 1:])]:
        want = torch.nn.functional.interpolate(tv, size=(7, 17), mode=mode)
        got = F.interpolate(kv, size=(7, 17), mode=mode)
        np.testing.assert_array_equal(to_np(got.contiguous()), want.contiguous().numpy())


def test_upsample_modules():
    t = torch.randn(2, 3, 5, 4)
    for kmod, tmod in [(kiln.nn.Upsample(scale_factor=2, mode="bilinear"),
                        torch.nn.Upsample(scale_factor=2, mode="bilinear")),
                       (kiln.nn.UpsamplingNearest2d(size=(7, 9)),
                        torch.nn.UpsamplingNearest2d(size=(7, 9))),
                       (kiln.nn.UpsamplingBilinear2d(scale_factor=3),
                        torch.nn.UpsamplingBilinear2d(scale_factor=3))]:
        np.testing.assert_allclose(kmod(to_kiln(t)).numpy(), tmod(t).numpy(), rtol=1e-5,
                                   atol=1e-6)
    assert repr(kiln.nn.Upsample(scale_factor=2.0, mode="nearest")) == \
        repr(torch.nn.Upsample(scale_factor=2.0, mode="nearest"))


def test_interpolate_errors():
    x = kiln.randn(1, 2, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, scale_factor=2, mode="nearest", align_corners=True)
    with pytest.raises(ValueError, match="same number of spatial"):
        F.interpolate(x, size=(3, 4, 5))
    with pytest.raises(kiln.ShapeError if hasattr(kiln, "ShapeError") else Exception,
                       match="mode needs 5-d input"):
        F.interpolate(x, scale_factor=2, mode="trilinear")
    with pytest.raises(Exception, match="greater than 0"):
        F.interpolate(x, scale_factor=0.1)
    with pytest.raises(NotImplementedError):
        F.interpolate(x, scale_factor=2, mode="bilinear", antialias=True)
