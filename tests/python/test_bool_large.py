"""Boolean masks and reductions at sizes that take the vectorised and threaded paths, against
PyTorch on identical inputs: any / all over contiguous runs longer than their 1024-element
blocks (the deciding element first, inside, last, or absent; NaN and -0.0; whole tensors cut
over the threads and rows as outputs), int64 sums that wrap around, bool outputs of
comparisons and logical_not, float -> bool conversion, masked_fill and where with broadcast
masks (the loops read bools as bytes: strided_loop.h)."""
import numpy as np
import pytest
import torch

import kiln


def to_kiln(t):
    if t.dtype == torch.bfloat16:
        return kiln.from_numpy(t.float().numpy().copy()).to(kiln.bfloat16)
    return kiln.from_numpy(t.numpy().copy())


def same(k, t):
    got = k.float().numpy() if k.dtype == kiln.bfloat16 else k.numpy()
    want = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
    np.testing.assert_array_equal(got, want)


N = 300_000  # > kParallelElements: the run is cut into pieces over the threads


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.bfloat16, torch.int64,
                                   torch.uint8])
@pytest.mark.parametrize("where", [None, 0, 1023, 1024, 150_000, N - 1])
def test_any_all_whole_tensor(dtype, where):
    base = torch.zeros(N, dtype=dtype)
    if where is not None:
        base[where] = 1
    ones = torch.ones(N, dtype=dtype)
    if where is not None:
        ones[where] = 0
    for t in (base, ones):
        same(to_kiln(t).any(), t.any())
        same(to_kiln(t).all(), t.all())


def test_any_all_nan_and_negative_zero():
    t = torch.zeros(5000)
    t[3000] = -0.0
    same(to_kiln(t).any(), t.any())
    t[4999] = float("nan")
    same(to_kiln(t).any(), t.any())
    same(to_kiln(t).all(), t.all())
    u = torch.full((5000,), float("nan"))
    u[2500] = -0.0
    same(to_kiln(u).all(), u.all())


@pytest.mark.parametrize("shape,dim", [((64, 5000), -1), ((3, 200_000), 1), ((5000, 64), 0),
                                       ((2, 3, 4000), (1, 2))])
def test_any_all_rows(shape, dim):
    g = torch.Generator().manual_seed(0)
    t = torch.rand(shape, generator=g) > 0.9999
    for x in (t, ~t, t.float(), (~t).to(torch.int64)):
        same(to_kiln(x).any(dim), x.any(dim))
        same(to_kiln(x).all(dim), x.all(dim))
        same(to_kiln(x).any(dim, keepdim=True), x.any(dim, keepdim=True))


def test_int64_sums_wrap_like_torch():
    g = torch.Generator().manual_seed(1)
    t = torch.randint(2**61, 2**62, (N,), generator=g, dtype=torch.int64)
    same(to_kiln(t).sum(), t.sum())
    r = t.view(100, N // 100)
    same(to_kiln(r).sum(-1), r.sum(-1))
    same(to_kiln(r).sum(0), r.sum(0))
    m = torch.rand(N, generator=g) > 0.3
    same(to_kiln(m).sum(), m.sum())
    same(to_kiln(m.view(3, -1)).sum(1), m.view(3, -1).sum(1))


def test_bool_outputs_and_conversions():
    g = torch.Generator().manual_seed(2)
    a = torch.randn(N, generator=g)
    a[::97] = 0.0
    a[5::101] = -0.0
    a[7::103] = float("nan")
    b = torch.randn(N, generator=g)
    ka, kb = to_kiln(a), to_kiln(b)
    same(ka > 0, a > 0)
    same(ka < kb, a < b)
    same(ka == kb, a == b)
    same(~(ka > 0), ~(a > 0))
    same(kiln.logical_not(ka), torch.logical_not(a))
    same(ka.bool(), a.bool())
    same((ka > 0).float(), (a > 0).float())
    same((ka > 0) & (kb > 0), (a > 0) & (b > 0))
    tri_t = torch.ones(1024, 1024, dtype=torch.bool).tril()
    tri_k = kiln.ones(1024, 1024, dtype=kiln.bool).tril()
    same(~tri_k[3:131, 5:133], ~tri_t[3:131, 5:133])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_masked_fill_and_where_with_broadcast_masks(dtype):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(2, 12, 128, 130, generator=g) * 4).to(dtype)
    y = (torch.randn(2, 12, 128, 130, generator=g) * 4).to(dtype)
    mask = torch.rand(128, 130, generator=g) > 0.5
    fill = True if dtype == torch.bool else -3
    kx, ky, km = to_kiln(x), to_kiln(y), to_kiln(mask)
    same(kx.masked_fill(km, fill), x.masked_fill(mask, fill))
    same(kiln.where(km, kx, ky), torch.where(mask, x, y))
    full = torch.rand(x.shape, generator=g) > 0.5
    same(kx.masked_fill(to_kiln(full), fill), x.masked_fill(full, fill))
    if dtype.is_floating_point:
        same(kx.masked_fill(km, float("-inf")), x.masked_fill(mask, float("-inf")))
