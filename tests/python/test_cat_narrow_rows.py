"""cat along the last dim of contiguous inputs whose rows are narrow (1 to 64 bytes, the
inlined fixed-size block copies, and odd sizes through the general copy), every dtype width,
inputs of different widths, threaded and single-threaded sizes, against PyTorch 2.13."""
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
