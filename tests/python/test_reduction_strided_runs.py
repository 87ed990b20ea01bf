"""Reductions of transposed, permuted, sliced and expanded float inputs, whose reduced elements
are contiguous runs only in memory order (the fast path takes the reduced dims in that order
and reads each run whole): sum / mean / amax / amin / var / std against PyTorch 2.13 computed
in float64 from the same values."""
import numpy as np
import pytest
import torch

import kiln

DTYPES = {"float32": (kiln.float32, torch.float32, 1e-5),
          "bfloat16": (kiln.bfloat16, torch.bfloat16, 1e-2),
          "float16": (kiln.float16, torch.float16, 2e-3)}


def pair(shape, dtype, seed):
    kd, td, _ = DTYPES[dtype]
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g).to(td)
    k = kiln.from_numpy(t.float().numpy().copy()).to(kd)
    return k, t


# (name, base shape, view applied to both libraries) - each view leaves the reduced elements
# strided in logical order.
VIEWS = [
    ("transposed", (300, 260), lambda x: x.t()),
    ("transposed_long", (1024, 96), lambda x: x.t()),
    ("permuted3", (6, 40, 50), lambda x: x.permute(2, 0, 1)),
    ("kv_slice", (1, 12, 256, 64), lambda x: x[:, :, :140]),
    ("kv_slice_long", (2, 3, 512, 64), lambda x: x[:, :, :300]),
    ("column_block", (64, 96), lambda x: x[:, 16:80]),
    ("short_runs", (50, 40), lambda x: x[:, :17]),
    ("expanded", (1, 700), lambda x: x.expand(5, 700)),
]

DIMS_2D = [None, (0, 1), (1, 0), -1, 0]
DIMS_3D = DIMS_2D + [(0, 2), (1, 2)]
CASES = [(v, d) for v in VIEWS for d in (DIMS_2D if len(v[1]) == 2 else DIMS_3D)]


def reduce(lib, name, x, dim, keepdim):
    return getattr(x, name)() if dim is None else getattr(x, name)(dim=dim, keepdim=keepdim)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "var", "std"])
@pytest.mark.parametrize("view,dim", CASES, ids=[f"{v[0]}-{d}" for v, d in CASES])
def test_strided_reduction_matches_float64(view, name, dtype, dim):
    vname, shape, fn = view
    k, t = pair(shape, dtype, seed=len(vname) * 7 + len(name))
    kv, tv = fn(k), fn(t)
    keepdim = dim == -1
    got = reduce(kiln, name, kv, dim, keepdim).float()
    want = reduce(torch, name, tv.double(), dim, keepdim)
    assert tuple(got.shape) == tuple(want.shape)
    _, _, tol = DTYPES[dtype]
    g = np.asarray(got.numpy(), dtype=np.float64)
    w = want.numpy()
    # bfloat16 / float16 results are rounded once to their type: tolerance relative to the
    # magnitude of the values summed (sums of n standard normals reach sqrt(n)).
    scale = max(1.0, float(tv.double().abs().amax()))
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale * (8 if name == "sum" else 1))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_strided_sum_same_bits_on_one_and_two_threads(dtype):
    # The runs are summed on their own and combined in memory order whatever the thread count.
    k, _ = pair((2, 12, 1024, 64), dtype, seed=5)
    views = [k[:, :, :700], k.permute(3, 1, 2, 0), k[:, :, :, :40]]
    prev = kiln.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            kiln.set_num_threads(n)
            results.append([(v.sum().float().item(), v.amax().float().item(),
                             v.mean(dim=(0, 2)).float().numpy().tobytes()) for v in views])
        assert results[0] == results[1]
    finally:
        kiln.set_num_threads(prev)


def test_strided_reduction_nan_and_inf():
    k, t = pair((4, 64, 32), "float32", seed=3)
    t[2, 10, 5] = float("nan")
    t[1, 3, 7] = float("inf")
    k = kiln.from_numpy(t.numpy().copy())
    for fn in (lambda x: x[:, :40], lambda x: x.permute(1, 0, 2)):
        for name in ("sum", "amax", "amin", "mean"):
            got = getattr(fn(k), name)().item()
            want = getattr(fn(t), name)().item()
            assert (np.isnan(got) and np.isnan(want)) or got == pytest.approx(want, rel=1e-5), name
        got = fn(k)[:, :, :16].amax(dim=(0, 2))
        want = fn(t)[:, :, :16].amax(dim=(0, 2))
        np.testing.assert_array_equal(got.numpy(), want.numpy())


# logsumexp, prod and the 2-norm over the same strided views and dims.
def staged_op(lib, name, x, dim, keepdim):
    kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    if name == "logsumexp":
        return lib.logsumexp(x, dim=tuple(range(x.dim())) if dim is None else dim, keepdim=keepdim)
    if name == "prod":
        y = x
        if dim is None:
            return y.prod()
        if isinstance(dim, tuple):
            for d in sorted((d % x.dim() for d in dim), reverse=True):
                y = y.prod(d, keepdim=keepdim)
            return y
        return y.prod(dim, keepdim=keepdim)
    return lib.linalg.vector_norm(x, **kw)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", ["logsumexp", "prod", "norm"])
@pytest.mark.parametrize("view,dim", CASES, ids=[f"{v[0]}-{d}" for v, d in CASES])
def test_staged_reduction_matches_float64(view, name, dtype, dim):
    vname, shape, fn = view
    k, t = pair(shape, dtype, seed=len(vname) * 5 + len(name))
    if name == "prod":  # products of values near 1 stay finite; the same rounding on both sides
        k, t = k * 0.01 + 1, t * 0.01 + 1
    kv, tv = fn(k), fn(t)
    keepdim = dim == 0
    got = staged_op(kiln, name, kv, dim, keepdim).float()
    want = staged_op(torch, name, tv.double(), dim, keepdim)
    assert tuple(got.shape) == tuple(want.shape)
    tol = DTYPES[dtype][2]
    np.testing.assert_allclose(np.asarray(got.numpy(), dtype=np.float64), want.numpy(),
                               rtol=tol * 4, atol=tol * 4)
