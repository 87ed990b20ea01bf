"""cumsum / cumprod of strided inputs (transposed, sliced, row-stepped, permuted) along every
dim, and into a strided out=, against PyTorch 2.13: integers exactly, floats within the
rounding of float32 / bfloat16 sums (kiln accumulates in double)."""
import numpy as np
import pytest
import torch

import kiln

VIEWS = {
    "transposed": ((300, 200), lambda x: x.t()),
    "column_slice": ((200, 300), lambda x: x[:, 7:250]),
    "row_step": ((400, 120), lambda x: x[::3]),
    "permuted3": ((20, 30, 40), lambda x: x.permute(2, 0, 1)),
}
CASES = [(v, d) for v, (shape, _) in VIEWS.items() for d in range(len(shape))]


def pair(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == "int64":
        t = torch.randint(-9, 10, shape, generator=g)
        return kiln.from_numpy(t.numpy().copy()), t
    t = torch.rand(shape, generator=g) * 0.02 + 0.99  # products stay finite
    if dtype == "bfloat16":
        t = t.to(torch.bfloat16)
        return kiln.from_numpy(t.float().numpy().copy()).to(kiln.bfloat16), t
    return kiln.from_numpy(t.numpy().copy()), t


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
@pytest.mark.parametrize("view,dim", CASES, ids=[f"{v}-{d}" for v, d in CASES])
def test_strided_scan(view, dim, dtype, op):
    shape, fn = VIEWS[view]
    k, t = pair(shape, dtype, seed=dim + len(view))
    got = getattr(fn(k), op)(dim)
    want = getattr(fn(t).double() if dtype != "int64" else fn(t), op)(dim)
    assert tuple(got.shape) == tuple(want.shape)
    if dtype == "int64":
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    else:
        tol = 1e-5 if dtype == "float32" else 8e-3
        np.testing.assert_allclose(got.float().numpy(), want.numpy(), rtol=tol, atol=tol)


def test_scan_into_a_strided_out():
    k, t = pair((128, 96), "float32", seed=1)
    out = kiln.zeros(96, 128).t()
    kiln.cumsum(k, 1, out=out)
    np.testing.assert_allclose(out.numpy(), torch.cumsum(t.double(), 1).numpy(), rtol=1e-5, atol=1e-5)
