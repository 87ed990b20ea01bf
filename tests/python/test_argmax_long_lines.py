"""argmax / argmin / max(dim) / min(dim) along long contiguous float32 and bfloat16 lines
(a vocabulary of logits: the two-pass vector path) against PyTorch 2.13: the first extremum
wins, the first NaN beats everything, and max(dim) returns the value at that position."""
import numpy as np
import pytest
import torch

import kiln

DTYPES = {"float32": (kiln.float32, torch.float32), "bfloat16": (kiln.bfloat16, torch.bfloat16)}
LENGTHS = [255, 256, 257, 1000, 4099, 50257]


def pair(t, dtype):
    kd, td = DTYPES[dtype]
    t = t.to(td)
    return kiln.from_numpy(t.float().numpy().copy()).to(kd), t


def check(k, t, dim=-1):
    for name in ("argmax", "argmin"):
        got = getattr(k, name)(dim).numpy()
        want = getattr(t, name)(dim).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
    for name in ("max", "min"):
        kv, ki = getattr(k, name)(dim)
        tv, ti = getattr(t, name)(dim)
        np.testing.assert_array_equal(ki.numpy(), ti.numpy(), err_msg=name)
        np.testing.assert_array_equal(kv.float().numpy(), tv.float().numpy(), err_msg=name)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("L", LENGTHS)
def test_random_lines(dtype, L):
    g = torch.Generator().manual_seed(L)
    k, t = pair(torch.randn(3, L, generator=g), dtype)
    check(k, t)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("L", [256, 1000, 50257])
def test_ties_take_the_first(dtype, L):
    # Small integers: many equal maxima and minima; the first of each must be reported.
    g = torch.Generator().manual_seed(7)
    k, t = pair(torch.randint(-3, 4, (4, L), generator=g).float(), dtype)
    check(k, t)
    # The extremum only at the very end, and only at the very start.
    z = torch.zeros(2, L)
    z[0, -1] = 5.0
    z[1, 0] = -5.0
    check(*pair(z, dtype))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_nan_inf_and_signed_zero(dtype):
    L = 3000
    x = torch.randn(5, L, generator=torch.Generator().manual_seed(1))
    x[0, 1234] = float("nan")
    x[0, 2000] = float("nan")
    x[1, 17] = float("inf")
    x[1, 2999] = float("-inf")
    x[2] = 0.0
    x[2, ::3] = -0.0
    x[3] = float("-inf")
    x[4, -1] = float("nan")
    check(*pair(x, dtype))


def test_strided_and_batched_lines():
    x = torch.randn(6, 4, 700, generator=torch.Generator().manual_seed(4))
    k = kiln.from_numpy(x.numpy().copy())
    check(k, x)
    check(k[:, 1], x[:, 1])  # rows of a slice: each line still contiguous
    np.testing.assert_array_equal(k.argmax().numpy(), x.argmax().numpy())


def check_dim(kv, tv, dim, keepdim):
    """argmax / argmin / max / min along dim, kiln against torch, indices and values exactly."""
    for name in ("argmax", "argmin"):
        np.testing.assert_array_equal(getattr(kv, name)(dim, keepdim).numpy(),
                                      getattr(tv, name)(dim, keepdim=keepdim).numpy(), err_msg=name)
    for name in ("max", "min"):
        kvals, kidx = getattr(kv, name)(dim, keepdim)
        tvals, tidx = getattr(tv, name)(dim, keepdim=keepdim)
        np.testing.assert_array_equal(kidx.numpy(), tidx.numpy(), err_msg=name)
        np.testing.assert_array_equal(kvals.float().numpy(), tvals.float().numpy(), err_msg=name)


def base_256x40(dtype, seed, extreme):
    """A [256, 40] pair: int64 values in [-50, 50) (ties everywhere), or normal floats with a
    NaN at [7, 3] and `extreme` at [100, 20]."""
    g = torch.Generator().manual_seed(seed)
    if dtype == "int64":
        t = torch.randint(-50, 50, (256, 40), generator=g)
        return kiln.from_numpy(t.numpy().copy()), t
    t = torch.randn(256, 40, generator=g)
    t[7, 3] = float("nan")
    t[100, 20] = extreme
    return pair(t, dtype)


# Lines of stride 1 inside strided layouts (the lines' offsets walked once): row steps,
# column slices, transposed and permuted views reduced along their memory-contiguous dim.
STRIDED = {
    "row_step": (lambda x: x[::2], -1),
    "column_slice": (lambda x: x[:, 5:300], -1),
    "transposed": (lambda x: x.t(), 0),
    "permuted": (lambda x: x.reshape(8, 32, 40).permute(2, 0, 1), 0),
    "permuted_keep_middle": (lambda x: x.reshape(8, 32, 40).permute(1, 2, 0)[:, 3:], 1),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("view", list(STRIDED))
def test_strided_lines(view, keepdim, dtype):
    fn, dim = STRIDED[view]
    k, t = base_256x40(dtype, seed=len(view), extreme=float("inf"))
    kv, tv = fn(k), fn(t)
    assert not kv.is_contiguous()
    check_dim(kv, tv, dim, keepdim)


# Along a strided dim of a strided input: read through the line strides where the dims after
# it are one contiguous run (line_strides.h), else the contiguous kernel on a copy.
STRIDED_DIMS = {
    "row_step_dim0": (lambda x: x[::2], 0),
    "column_slice_dim0": (lambda x: x[:, 5:300], 0),
    "transposed_dim1": (lambda x: x.t(), 1),
    "permuted_dim2": (lambda x: x.reshape(8, 32, 40).permute(2, 0, 1), 2),
    "sliced_3d_dim1": (lambda x: x.reshape(8, 32, 40)[:, ::2, 3:], 1),  # read in place
    "sliced_3d_dim0": (lambda x: x.reshape(8, 32, 40)[:, ::2, 3:], 0),  # through a copy
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("view", list(STRIDED_DIMS))
def test_strided_dims(view, keepdim, dtype):
    fn, dim = STRIDED_DIMS[view]
    k, t = base_256x40(dtype, seed=len(view) + 1, extreme=float("-inf"))
    kv, tv = fn(k), fn(t)
    check_dim(kv, tv, dim, keepdim)
