"""amax / amin / max / min along short last dims (the four-rows-at-a-time kernels: rows of 2 to
5 lane vectors, and the rows left over after groups of four) against PyTorch 2.13: values
exactly, NaN anywhere in a row wins, infinities, one and two threads' sizes."""
import numpy as np
import pytest
import torch

import kiln

DTYPES = {"float32": (kiln.float32, torch.float32), "bfloat16": (kiln.bfloat16, torch.bfloat16),
          "float16": (kiln.float16, torch.float16)}


def pair(t, dtype):
    kd, td = DTYPES[dtype]
    t = t.to(td)
    return kiln.from_numpy(t.float().numpy().copy()).to(kd), t


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n", [31, 32, 47, 48, 63, 64, 65, 79, 80, 81])
@pytest.mark.parametrize("rows", [4, 7, 9, 2048])
def test_short_rows(dtype, n, rows):
    g = torch.Generator().manual_seed(n * 31 + rows)
    t = torch.randn(rows, n, generator=g)
    # NaN at the first, a middle, the last-vector and the tail position of some rows;
    # infinities elsewhere.
    for r, c in ((1, 0), (2, n // 2), (3, min(n - 1, 3 * 16 + 1)), (rows - 1, n - 1)):
        t[r % rows, c] = float("nan")
    t[0, n - 1] = float("inf")
    t[min(5, rows - 1), 0] = -float("inf")
    k, t = pair(t, dtype)
    for name in ("amax", "amin"):
        got = getattr(k, name)(-1).float().numpy()
        want = getattr(t, name)(-1).float().numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
    for name in ("max", "min"):
        got = getattr(k, name)(-1)[0].float().numpy()
        want = getattr(t, name)(-1)[0].float().numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
    # The same rows as a strided view (every other row of a taller tensor).
    k2, t2 = pair(torch.cat([t.float(), t.float()], 1).reshape(rows * 2, n), dtype)
    np.testing.assert_array_equal(k2[::2].amax(-1).float().numpy(), t2[::2].amax(-1).float().numpy())
