"""avg_pool backward (pooling_kernels.cpp: the planar kernel adds each output row's shares
tap column by tap column; the channels-last kernel keeps that layout, its channels in
vectors) against PyTorch's float64 gradient rounded once to the dtype: both add each output's
gradient over its divisor to its window's inputs in output order, in double, so the results
are equal bit for bit. 1-D, 2-D and 3-D windows, strides below, at and above the window,
padding, ceil_mode, count_include_pad=False, divisor_override; channels-last batches of one
(split into blocks of channels) and of three, channel counts off the 16-channel blocks."""
import numpy as np
import pytest
import torch

import kiln

KDT = {"float32": kiln.float32, "bfloat16": kiln.bfloat16, "float64": kiln.float64}
TDT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}
F = torch.nn.functional
KF = kiln.nn.functional


def values(shape, dtype, seed):
    t = torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    return t.to(TDT[dtype])


def to_kiln(t, channels_last=False):
    k = kiln.from_numpy(t.detach().double().numpy().copy()).to(KDT[str(t.dtype).split(".")[1]])
    return k.contiguous(memory_format=kiln.channels_last) if channels_last else k


def check(dim, shape, dtype, args, channels_last=False, seed=0):
    pool_t = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[dim]
    pool_k = {1: KF.avg_pool1d, 2: KF.avg_pool2d, 3: KF.avg_pool3d}[dim]
    x = values(shape, dtype, seed)
    xd = x.double().clone().requires_grad_()
    yd = pool_t(xd, **args)
    gy = values(tuple(yd.shape), dtype, seed + 1)
    yd.backward(gy.double())
    # double -> float -> dtype, as kiln rounds (float64: unrounded)
    want = xd.grad if dtype == "float64" else xd.grad.float().to(TDT[dtype])

    kx = to_kiln(x, channels_last).requires_grad_()
    ky = pool_k(kx, **args)
    assert tuple(ky.shape) == tuple(yd.shape)
    ky.backward(to_kiln(gy, channels_last))
    got = kx.grad
    if channels_last:
        assert got.is_contiguous(memory_format=kiln.channels_last)
    np.testing.assert_array_equal(got.double().numpy(), want.double().numpy())


CASES_2D = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 1, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": (2, 4), "stride": (1, 3), "padding": (1, 2), "divisor_override": 3},
    {"kernel_size": 2, "stride": 3},
    {"kernel_size": 5, "stride": 1, "padding": 2, "count_include_pad": False},
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("shape", [(2, 3, 9, 11), (1, 2, 5, 16)])
@pytest.mark.parametrize("case", range(len(CASES_2D)))
def test_avg_pool2d_backward_planar(dtype, shape, case):
    check(2, shape, dtype, CASES_2D[case], seed=case)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(1, 40, 9, 11), (3, 24, 8, 7), (2, 64, 12, 12)])
@pytest.mark.parametrize("case", range(len(CASES_2D)))
def test_avg_pool2d_backward_channels_last(dtype, shape, case):
    check(2, shape, dtype, CASES_2D[case], channels_last=True, seed=case)


@pytest.mark.parametrize("args", [{"kernel_size": 3, "stride": 1, "padding": 1},
                                  {"kernel_size": 4, "stride": 2, "ceil_mode": True,
                                   "count_include_pad": False, "padding": 1}])
def test_avg_pool1d_backward(args):
    check(1, (2, 3, 23), "float32", args)


@pytest.mark.parametrize("args", [{"kernel_size": 2},
                                  {"kernel_size": 3, "stride": (1, 2, 1), "padding": 1},
                                  {"kernel_size": (2, 3, 2), "stride": 2, "ceil_mode": True,
                                   "divisor_override": 5}])
def test_avg_pool3d_backward(args):
    check(3, (1, 2, 5, 6, 7), "float32", args)
