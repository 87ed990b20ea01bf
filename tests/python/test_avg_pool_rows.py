"""Planar avg_pool (the kernel's window_mean path, pooling_kernels.cpp: the outputs whose
windows lie inside a row go through the ISA's vector sums, at column strides above 1 from a
copy of the plane with each row split into its phases; the ends of the row through the
general loop) against PyTorch in float64 rounded once to the dtype: both sum each window in
double in the same order and divide once, so the results are equal bit for bit. Column
strides 1, 2 and 3, rows narrower than the window plus its padding (no inner outputs),
padding wider than half the window, ceil_mode, count_include_pad=False, divisor_override,
row strides other than the column stride, and avg_pool1d."""
import numpy as np
import pytest
import torch

import kiln
from test_avg_pool_2x2 import TDT, pair  # the same inputs and dtypes


CASES = [
    {"kernel_size": 3, "stride": 1, "padding": 1},
    {"kernel_size": 3, "stride": 1, "padding": 1, "count_include_pad": False},
    {"kernel_size": 2, "stride": 1},
    {"kernel_size": (3, 5), "stride": 1, "padding": (0, 2)},
    {"kernel_size": (1, 3), "stride": 1, "padding": (0, 1), "divisor_override": 7},
    {"kernel_size": 3, "stride": (2, 1), "padding": 1, "ceil_mode": True},
    {"kernel_size": 5, "stride": 1, "padding": 2, "count_include_pad": False},
    {"kernel_size": 4, "stride": 1, "padding": 2, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    {"kernel_size": (2, 5), "stride": (1, 3), "padding": (1, 2)},
    {"kernel_size": 4, "stride": (2, 3), "ceil_mode": True},
    {"kernel_size": (3, 2), "stride": (3, 2), "padding": (1, 1), "divisor_override": 5},
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("shape", [(1, 3, 14, 14), (2, 5, 9, 37), (1, 2, 6, 5), (1, 1, 5, 70)])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_avg_pool2d_equals_float64_rounded_once(dtype, shape, case):
    args = CASES[case]
    kx, tx = pair(shape, dtype, sum(shape) + case)
    got = kiln.nn.functional.avg_pool2d(kx, **args)
    want = torch.nn.functional.avg_pool2d(tx.double(), **args).to(TDT[dtype])
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.double().numpy(), want.double().numpy())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kw", [{"kernel_size": 3, "stride": 1, "padding": 1},
                                {"kernel_size": 4, "stride": 1, "count_include_pad": False,
                                 "padding": 2},
                                {"kernel_size": 5, "stride": 2, "padding": 2, "ceil_mode": True}])
def test_avg_pool1d_equals_float64_rounded_once(dtype, kw):
    kx, tx = pair((3, 4, 41), dtype, 11)
    got = kiln.nn.functional.avg_pool1d(kx, **kw)
    want = torch.nn.functional.avg_pool1d(tx.double(), **kw).to(TDT[dtype])
    np.testing.assert_array_equal(got.double().numpy(), want.double().numpy())
