"""Bilinear interpolation without a gradient runs both dims in one index_lerp2 call
(functional_resize.cpp, index_lerp_kernel.cpp); with a gradient it takes the two index_lerp
calls. The two paths must give the same values bit for bit (16-bit inputs: blended in float32,
rounded once), and both PyTorch's within rounding. Channels-last and NCHW, up and down,
align_corners, explicit sizes, float32 / bfloat16 / float16 / float64."""
import numpy as np
import pytest
import torch

import kiln

KDT = {"float32": kiln.float32, "bfloat16": kiln.bfloat16, "float16": kiln.float16,
       "float64": kiln.float64}
TDT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
       "float64": torch.float64}
KF = kiln.nn.functional

SIZES = [
    ((1, 32, 14, 14), {"scale_factor": 2}),
    ((2, 3, 9, 13), {"scale_factor": 2, "align_corners": True}),
    ((2, 5, 17, 11), {"size": (7, 23)}),
    ((1, 4, 20, 20), {"scale_factor": 0.45}),
    ((3, 1, 1, 6), {"size": (4, 3), "align_corners": True}),
    # Resizing down by 2 or more: both blends per output position (channels-last rows of 16+
    # channels, vector loops with a tail; weights on both sides of 1/2).
    ((2, 32, 28, 30), {"scale_factor": 0.5}),
    ((1, 19, 21, 17), {"size": (8, 7)}),
    ((1, 24, 13, 40), {"size": (5, 9), "align_corners": True}),
]


def inputs(shape, dtype, channels_last, seed):
    t = torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    t = t.to(TDT[dtype])
    k = kiln.from_numpy(t.double().numpy().copy()).to(KDT[dtype])
    if channels_last:
        t = t.contiguous(memory_format=torch.channels_last)
        k = k.contiguous(memory_format=kiln.channels_last)
    return k, t


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", range(len(SIZES)))
def test_fused_bilinear_equals_the_two_pass_path(dtype, channels_last, case):
    shape, kw = SIZES[case]
    k, t = inputs(shape, dtype, channels_last, case)
    with kiln.no_grad():
        fused = KF.interpolate(k, mode="bilinear", **kw)
    two_pass = KF.interpolate(k.clone().requires_grad_(), mode="bilinear", **kw).detach()
    assert fused.dtype == k.dtype and tuple(fused.shape) == tuple(two_pass.shape)
    if channels_last and min(fused.shape[1], fused.shape[2] * fused.shape[3]) > 1:
        assert fused.is_contiguous(memory_format=kiln.channels_last)
    np.testing.assert_array_equal(fused.double().numpy(), two_pass.double().numpy())
    want = torch.nn.functional.interpolate(t.double(), mode="bilinear", **kw)
    tol = {"float32": 2e-6, "float64": 1e-12, "bfloat16": 2e-2, "float16": 2e-3}[dtype]
    np.testing.assert_allclose(fused.double().numpy(), want.numpy(), rtol=tol, atol=tol)
