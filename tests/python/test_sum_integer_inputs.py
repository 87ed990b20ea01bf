"""sum of bool and integer tensors: the sum op counts them into int64 itself, without a widened
copy (narrow types in 32-bit blocks). Against PyTorch 2.13: dtypes, dims, keepdim, strided
views, threaded sizes, block boundaries of the narrow accumulators, the dtype argument
(narrowing wraps as torch's), and count_nonzero."""
import numpy as np
import pytest
import torch

import kiln

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64"]


def pair(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == "bool":
        t = torch.rand(*shape, generator=g) > 0.4
    else:
        info = torch.iinfo(getattr(torch, dtype))
        lo, hi = max(info.min, -(2 ** 40)), min(info.max, 2 ** 40)
        t = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(getattr(torch, dtype))
    return kiln.from_numpy(t.numpy().copy()), t


VIEWS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.t(),
    "row_step": lambda x: x[::2],
    "column_slice": lambda x: x[:, 5:400],
}


def check(got, want):
    assert got.dtype == getattr(kiln, str(want.dtype).replace("torch.", ""))
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
def test_sum_into_int64(dtype, view, dim):
    k, t = pair((300, 517), dtype, seed=len(view) + DTYPES.index(dtype))
    kv, tv = VIEWS[view](k), VIEWS[view](t)
    if dim is None:
        check(kv.sum(), tv.sum())
    else:
        check(kv.sum(dim), tv.sum(dim))
        check(kv.sum(dim, keepdim=True), tv.sum(dim, keepdim=True))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 63, 4099, 70000, 300001])
def test_sum_flat_threaded_sizes(dtype, n):
    k, t = pair((n,), dtype, seed=n % 97)
    check(k.sum(), t.sum())
    check(k.reshape(1, n).sum(-1), t.reshape(1, n).sum(-1))


@pytest.mark.parametrize("dtype,value", [("uint8", 255), ("int8", -128), ("int8", 127),
                                         ("int16", 32767), ("int16", -32768), ("bool", True)])
def test_sum_past_the_narrow_block_limits(dtype, value):
    """2^24 + 5 bytes (two 2^23 blocks and a tail), 2^16 + 3 int16 values: the totals exceed
    the 32-bit block accumulators, so every block must reach the int64 sum."""
    n = 2 ** 24 + 5 if dtype in ("uint8", "int8", "bool") else 2 ** 16 + 3
    t = torch.full((n,), value, dtype=getattr(torch, dtype))
    k = kiln.from_numpy(t.numpy())
    check(k.sum(), t.sum())
    assert int(k.sum().item()) == int(value) * n


@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "float32"])
@pytest.mark.parametrize("to", ["int16", "int32", "int64", "float32", "bool"])
def test_sum_dtype_argument(dtype, to):
    if dtype == "float32":
        t = torch.randn(64, 129) * 1000
        k = kiln.from_numpy(t.numpy())
    else:
        k, t = pair((64, 129), dtype, seed=3)
    td, kd = getattr(torch, to), getattr(kiln, to)
    if to == "float32":  # float sums: against float64 sums of the float32 values
        x = t.to(torch.float32).double()
        for got, want, mag in ((k.sum(dtype=kd), x.sum(), x.abs().sum()),
                               (k.sum(1, dtype=kd), x.sum(1), x.abs().sum(1))):
            assert got.dtype == kiln.float32
            err = np.abs(got.numpy().astype(np.float64) - want.numpy())
            assert np.all(err <= 1e-7 * mag.numpy()), err.max()
        return
    check(k.sum(dtype=kd), t.sum(dtype=td))
    check(k.sum(1, dtype=kd), t.sum(1, dtype=td))


def test_sum_of_int32_wraps_when_narrowed():
    t = torch.full((1000,), 2 ** 30, dtype=torch.int32)
    k = kiln.from_numpy(t.numpy())
    check(k.sum(), t.sum())  # int64: 2^40
    check(k.sum(dtype=kiln.int32), t.sum(dtype=torch.int32))  # wrapped


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
def test_count_nonzero(view, dim):
    t = torch.randn(300, 517)
    t[t.abs() < 0.7] = 0
    t[::7, ::3] = float("nan")
    k = kiln.from_numpy(t.numpy())
    kv, tv = VIEWS[view](k), VIEWS[view](t)
    check(kiln.count_nonzero(kv, dim), torch.count_nonzero(tv, dim))


def test_sum_of_empty_and_zero_dim():
    check(kiln.zeros(0, 5, dtype=kiln.bool).sum(0), torch.zeros(0, 5, dtype=torch.bool).sum(0))
    check(kiln.tensor(True).sum(), torch.tensor(True).sum())
    check(kiln.tensor(-7, dtype=kiln.int8).sum(), torch.tensor(-7, dtype=torch.int8).sum())
