"""avg_pool2d with 2 x 2 windows at stride 2 (the planar kernel's own loop, pooling_kernels.cpp)
against PyTorch in float64 rounded once to the dtype: kiln sums each window in double and
divides once, so the results are equal bit for bit. Odd sizes (the last row / column dropped),
ceil_mode (partial windows: the general loop), padding, divisor_override, batch and channel
dims, and the general loop's 3 x 3 windows beside it."""
import numpy as np
import pytest
import torch

import kiln

KDT = {"float32": kiln.float32, "bfloat16": kiln.bfloat16, "float64": kiln.float64}
TDT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}


def pair(shape, dtype, seed):
    t = torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    t = t.to(TDT[dtype])
    return kiln.from_numpy(t.double().numpy().copy()).to(KDT[dtype]), t


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("shape", [(1, 3, 14, 14), (2, 5, 15, 17), (3, 1, 2, 2), (1, 2, 3, 9)])
@pytest.mark.parametrize("kw", [{}, {"ceil_mode": True}, {"divisor_override": 3},
                                {"padding": 1}, {"kernel_size": 3, "stride": 2}])
def test_avg_pool2d_2x2_equals_float64_rounded_once(dtype, shape, kw):
    kx, tx = pair(shape, dtype, sum(shape))
    args = {"kernel_size": 2, **kw}
    if min(shape[2:]) < args["kernel_size"]:  # no window fits: both refuse
        with pytest.raises(RuntimeError):
            torch.nn.functional.avg_pool2d(tx, **args)
        with pytest.raises(RuntimeError, match="too small"):
            kiln.nn.functional.avg_pool2d(kx, **args)
        return
    got = kiln.nn.functional.avg_pool2d(kx, **args)
    want = torch.nn.functional.avg_pool2d(tx.double(), **args).to(TDT[dtype])
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.double().numpy(), want.double().numpy())
