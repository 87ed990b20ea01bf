"""softmax / log_softmax of non-contiguous inputs (transposed and channels-last views, slices,
row steps, expanded views) along every dim, float32 / bfloat16 / float16, and into a
non-contiguous out=, against PyTorch 2.13 in float64 from the same values."""
import numpy as np
import pytest
import torch

import kiln

DTYPES = {"float32": (kiln.float32, torch.float32, 2e-6),
          "bfloat16": (kiln.bfloat16, torch.bfloat16, 1e-2),
          "float16": (kiln.float16, torch.float16, 2e-3)}

VIEWS = {
    "transposed": ((300, 260), lambda x: x.t()),
    "column_slice": ((200, 300), lambda x: x[:, 7:250]),
    "row_step": ((300, 160), lambda x: x[::3]),
    "permuted3": ((20, 30, 40), lambda x: x.permute(2, 0, 1)),
    "channels_last": ((2, 24, 6, 10), lambda x: x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)),
    "channels_last_slice": ((2, 24, 6, 10), lambda x: x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)[:, 3:20]),
    "expanded": ((1, 500), lambda x: x.expand(6, 500)),
    "long_rows_sliced": ((8, 5000), lambda x: x[:, 100:4900]),
    "sliced_3d": ((4, 50, 64), lambda x: x[:, ::2, 3:60]),
    "wide_column_slice": ((64, 1100), lambda x: x[:, 30:1090]),  # several column tiles
}


def pair(shape, dtype, seed):
    kd, td, _ = DTYPES[dtype]
    t = (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 3).to(td)
    return kiln.from_numpy(t.float().numpy().copy()).to(kd), t


CASES = [(v, d) for v, (shape, _) in VIEWS.items() for d in range(-len(shape), len(shape))]


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("view,dim", CASES, ids=[f"{v}-{d}" for v, d in CASES])
def test_strided_softmax_matches_float64(view, dim, dtype, log):
    shape, fn = VIEWS[view]
    k, t = pair(shape, dtype, seed=len(view) + dim)
    kv, tv = fn(k), fn(t)
    name = "log_softmax" if log else "softmax"
    got = getattr(kv, name)(dim)
    want = getattr(tv.double(), name)(dim).numpy()
    assert tuple(got.shape) == tuple(tv.shape)
    tol = DTYPES[dtype][2]
    np.testing.assert_allclose(got.float().numpy(), want, rtol=tol, atol=tol * (4 if log else 1))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_softmax_into_a_strided_out(dtype):
    k, t = pair((64, 300), dtype, seed=3)
    kd = DTYPES[dtype][0]
    out_base = kiln.zeros(300, 64, dtype=kd)
    out = out_base.t()  # [64, 300], not contiguous
    kiln.softmax(k, 1, out=out)
    want = torch.softmax(t.double(), 1).numpy()
    tol = DTYPES[dtype][2]
    np.testing.assert_allclose(out.float().numpy(), want, rtol=tol, atol=tol)
    # A sliced input into the strided out as well.
    kiln.softmax(k[:, :150], 1, out=out[:, :150])
    np.testing.assert_allclose(out[:, :150].float().numpy(), torch.softmax(t[:, :150].double(), 1).numpy(),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_dim0_of_slices_into_a_sliced_out(dtype, log):
    """Lines along dim 0 read and written in place through row strides (column slices of both
    input and out), equal bit for bit to the op on contiguous copies."""
    k, t = pair((96, 700), dtype, seed=5)
    kd = DTYPES[dtype][0]
    out = kiln.zeros(96, 800, dtype=kd)[:, 50:650]
    fn = kiln.log_softmax if log else kiln.softmax
    fn(k[:, 40:640], 0, out=out)
    same = fn(k[:, 40:640].contiguous(), 0)
    np.testing.assert_array_equal(out.float().numpy(), same.float().numpy())
    want = (torch.log_softmax if log else torch.softmax)(t[:, 40:640].double(), 0).numpy()
    tol = DTYPES[dtype][2]
    np.testing.assert_allclose(out.float().numpy(), want, rtol=tol, atol=tol * (4 if log else 1))
