"""cat along the last dim of contiguous inputs whose rows are narrow (1 to 64 bytes, the
inlined fixed-size block copies, and odd sizes through the general copy), and of strided inputs
with contiguous rows (chunks, slices), every dtype width, threaded and single-threaded sizes,
against PyTorch 2.13."""
import numpy as np
import pytest
import torch

import kiln

DTYPES = [("float32", torch.float32), ("bfloat16", torch.bfloat16), ("int8", torch.int8),
          ("int64", torch.int64), ("bool", torch.bool), ("complex64", torch.complex64),
          ("float64", torch.float64)]


def make(shape, td, seed):
    g = torch.Generator().manual_seed(seed)
    if td == torch.bool:
        return torch.rand(*shape, generator=g) > 0.5
    if td.is_complex:
        return torch.complex(torch.randn(*shape, generator=g), torch.randn(*shape, generator=g))
    if td.is_floating_point:
        return torch.randn(*shape, generator=g).to(td)
    return torch.randint(-100, 100, shape, generator=g).to(td)


def to_kiln(t):
    if t.dtype == torch.bfloat16:
        return kiln.from_numpy(t.float().numpy().copy()).to(kiln.bfloat16)
    return kiln.from_numpy(t.numpy().copy())


def to_numpy(k):
    return k.float().numpy() if k.dtype == kiln.bfloat16 else k.numpy()


@pytest.mark.parametrize("name,td", DTYPES, ids=[d[0] for d in DTYPES])
@pytest.mark.parametrize("rows", [3, 4096])
@pytest.mark.parametrize("widths", [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (3, 5), (8, 1, 4), (7, 9, 2)])
def test_cat_last_dim_narrow_rows(name, td, rows, widths):
    ts = [make((rows, w), td, seed=i + w) for i, w in enumerate(widths)]
    got = kiln.cat([to_kiln(t) for t in ts], -1)
    want = torch.cat(ts, -1)
    assert tuple(got.shape) == tuple(want.shape)
    w = want.float().numpy() if td == torch.bfloat16 else want.numpy()
    np.testing.assert_array_equal(to_numpy(got), w)


def test_cat_middle_dim_narrow_blocks():
    ts = [make((64, c, 2), torch.float32, seed=c) for c in (1, 2, 4)]
    got = kiln.cat([to_kiln(t) for t in ts], 1)
    np.testing.assert_array_equal(got.numpy(), torch.cat(ts, 1).numpy())


VIEWS = {
    # name: (base shape, view of the base, cat dim)
    "chunks_dim0": ((4096, 8), lambda x: x.chunk(4, -1), 0),
    "chunks_wide_rows": ((8, 4096), lambda x: x.chunk(4, -1), 0),
    "chunks_odd": ((37, 21), lambda x: x.chunk(3, -1), 0),
    "column_slices_dim1": ((300, 64), lambda x: (x[:, :10], x[:, 20:23], x[:, 40:]), 1),
    "row_steps_3d": ((6, 50, 32), lambda x: (x[:, ::2], x[:, 1::5], x[:, :3]), 1),
    "mixed_contiguous": ((512, 512), lambda x: (x[:, :100], x[:7].contiguous()[:, :100],
                                                x[100:200, 3:103]), 0),
    "single_element_rows": ((2048, 4), lambda x: x.chunk(4, -1), 0),
    "with_empty": ((64, 16), lambda x: (x[:, :4], x[:0, :4], x[:, 8:12]), 0),
    "batched_chunks": ((16, 128, 96), lambda x: x.chunk(3, -1), 1),
}


@pytest.mark.parametrize("name,td", DTYPES, ids=[d[0] for d in DTYPES])
@pytest.mark.parametrize("view", list(VIEWS))
def test_cat_strided_inputs_with_contiguous_rows(name, td, view):
    """Inputs whose last dim is contiguous but whose rows are strided (chunks, column slices,
    row steps), mixed with contiguous ones, into a contiguous output: row by row, threaded
    from 4096 rows."""
    shape, split, dim = VIEWS[view]
    base = make(shape, td, seed=len(view))
    got = kiln.cat(list(split(to_kiln(base))), dim)
    want = torch.cat(list(split(base)), dim)
    assert tuple(got.shape) == tuple(want.shape)
    assert got.is_contiguous()
    w = want.float().numpy() if td == torch.bfloat16 else want.numpy()
    np.testing.assert_array_equal(to_numpy(got), w)
