"""sort / argsort / topk / median / kthvalue along lines of every dtype whose keys fit 32 bits
(the radix sort from 65 elements, (key, index) pairs sorted as 64-bit integers by a sorting
network below):
values and indices equal to PyTorch 2.13's stable sort, ascending and descending, with ties,
-0 / +0, infinities and NaN, contiguous and strided."""
import numpy as np
import pytest
import torch

import kiln

DTYPES = ["float32", "bfloat16", "float16", "int32", "int16", "int8", "uint8", "bool", "int64"]


def make(dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype in ("float32", "bfloat16", "float16"):
        t = torch.randint(-20, 20, shape, generator=g).float() / 4  # many ties
        flat = t.view(-1)
        flat[::17] = float("nan")
        flat[3::29] = float("inf")
        flat[5::31] = float("-inf")
        flat[7::13] = -0.0
        flat[8::13] = 0.0
        flat[9::37] = 1e-40 if dtype == "float32" else 0.0  # a subnormal
        t = t.to(getattr(torch, dtype))
        k = kiln.from_numpy(t.float().numpy().copy()).to(getattr(kiln, dtype))
        return k, t
    if dtype == "bool":
        t = torch.rand(shape, generator=g) > 0.5
    elif dtype == "uint8":
        t = torch.randint(0, 256, shape, generator=g).to(torch.uint8)
    else:
        info = torch.iinfo(getattr(torch, dtype))
        lo, hi = max(info.min, -(2 ** 31)), min(info.max, 2 ** 31 - 1)
        t = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(getattr(torch, dtype))
        t.view(-1)[::5] = 3  # ties
    return kiln.from_numpy(t.numpy().copy()), t


def values(x):
    return x.float().numpy() if x.dtype in (kiln.bfloat16, kiln.float16) else x.numpy()


def tvalues(x):
    return x.float().numpy() if x.dtype in (torch.bfloat16, torch.float16) else x.numpy()


def same(kv, tv, signed_zeros=True):
    a, b = values(kv), tvalues(tv)
    assert a.shape == b.shape
    if a.dtype.kind == "f" and signed_zeros:
        np.testing.assert_array_equal(np.signbit(a) & ~np.isnan(a), np.signbit(b) & ~np.isnan(b))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape,dim", [((3, 64), -1), ((5, 1000), -1), ((700, 4), 0),
                                       ((2, 130, 3), 1), ((9, 17), -1), ((4, 47), -1),
                                       ((3, 48), -1)])
def test_sort_matches_torch_stable(dtype, descending, shape, dim):
    k, t = make(dtype, shape, seed=shape[0] * 7 + len(dtype))
    kv, ki = k.sort(dim, descending=descending)
    tv, ti = t.sort(dim=dim, descending=descending, stable=True)
    same(kv, tv)
    np.testing.assert_array_equal(ki.numpy(), ti.numpy())
    np.testing.assert_array_equal(k.argsort(dim, descending=descending).numpy(), ti.numpy())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "bool"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_every_network_length(dtype, descending):
    # Every line length the sorting network takes (padded to 2, 4, ..., 64) and the first two
    # the radix sort takes, contiguous and with a stride of 5 between a line's elements.
    for n in range(1, 67):
        k, t = make(dtype, (5, n), seed=n)
        ks, ts = make(dtype, (n, 5), seed=n + 100)
        for kk, tt, dim in ((k, t, -1), (ks.t(), ts.t(), -1), (ks, ts, 0)):
            kv, ki = kk.sort(dim, descending=descending)
            tv, ti = tt.sort(dim=dim, descending=descending, stable=True)
            same(kv, tv)
            np.testing.assert_array_equal(ki.numpy(), ti.numpy(), err_msg=f"n={n} dim={dim}")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "uint8"])
def test_sort_strided_and_flat(dtype):
    k, t = make(dtype, (300, 200), seed=9)
    for fk, ft in ((k.t(), t.t()), (k[:, 10:150], t[:, 10:150]), (k.reshape(-1), t.reshape(-1))):
        kv, ki = fk.sort(-1)
        tv, ti = ft.sort(dim=-1, stable=True)
        same(kv, tv)
        np.testing.assert_array_equal(ki.numpy(), ti.numpy())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int16"])
@pytest.mark.parametrize("k_", [100, 300, 999])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_large_k(dtype, k_, largest):
    k, t = make(dtype, (4, 1000), seed=k_)
    kv, ki = k.topk(k_, -1, largest=largest)
    tv, _ = t.topk(k_, -1, largest=largest)
    same(kv, tv, signed_zeros=False)  # torch's topk orders -0 / +0 ties arbitrarily
    # Indices: the stable order's (torch's topk breaks ties arbitrarily, its stable sort not).
    sv, si = t.sort(dim=-1, descending=largest, stable=True)
    np.testing.assert_array_equal(ki.numpy(), si[:, :k_].numpy())
    same(kv, sv[:, :k_])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("k_", [6, 13, 41])
def test_topk_short_lines(dtype, k_):
    # Lines of at most 64 whose k is too large for topk's scan (k * 8 >= n): the network.
    k, t = make(dtype, (33, 41), seed=k_ + 5)
    for largest in (True, False):
        kv, ki = k.topk(k_, -1, largest=largest)
        sv, si = t.sort(dim=-1, descending=largest, stable=True)
        np.testing.assert_array_equal(ki.numpy(), si[:, :k_].numpy())
        same(kv, sv[:, :k_])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_median_and_kthvalue_long_lines(dtype):
    k, t = make(dtype, (6, 501), seed=2)
    finite_k, finite_t = k.nan_to_num(0.0), t.nan_to_num(0.0)
    for name in ("median", "nanmedian"):
        kv, ki = getattr(k, name)(-1)
        tv, _ = getattr(t, name)(-1)
        same(kv, tv)
    kv, ki = finite_k.median(-1)
    tv, _ = finite_t.median(-1)
    same(kv, tv)
    # The index points at a value equal to the median.
    np.testing.assert_array_equal(values(finite_k.gather(-1, ki.unsqueeze(-1)).squeeze(-1)), values(kv))
    kv, _ = finite_k.kthvalue(100, -1)
    tv, _ = finite_t.kthvalue(100, -1)
    same(kv, tv)
