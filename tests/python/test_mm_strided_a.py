"""mm / matmul with a strided A (a slice of wider rows, a transpose, every other column) of few
rows: oneDNN gets a contiguous copy of a row-sliced A (decision 0144) and reads the other
layouts as they are, kiln's kernels read every layout in place; checked against float64 on the
same values, B plain and transposed, with the copy's buffer reused by products of other sizes
in between."""
import numpy as np
import pytest
import torch

import kiln


def pair(rng, shape):
    a = rng.uniform(-1, 1, shape).astype(np.float32)
    return kiln.from_numpy(a.copy()), torch.from_numpy(a).double()


def strided(rng, m, k, view):
    if view == "row_slice":
        ka, ta = pair(rng, (m, k + 24))
        return ka[:, 8:8 + k], ta[:, 8:8 + k]
    if view == "transposed":
        ka, ta = pair(rng, (k, m))
        return ka.t(), ta.t()
    ka, ta = pair(rng, (m, 2 * k))  # every other column
    return ka[:, ::2], ta[:, ::2]


def check(got, want, k):
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy(),
                               rtol=2e-6, atol=1e-6 * (4 + 2 * np.sqrt(k)))


@pytest.mark.parametrize("m", [16, 40, 127, 128, 200])
@pytest.mark.parametrize("view", ["row_slice", "transposed", "every_other_column"])
@pytest.mark.parametrize("b_transposed", [False, True])
def test_mm_of_a_strided_a(m, view, b_transposed):
    rng = np.random.default_rng(m)
    k, n = 520, 384
    ka, ta = strided(rng, m, k, view)
    assert not ka.is_contiguous()
    kb, tb = pair(rng, (n, k) if b_transposed else (k, n))
    if b_transposed:
        kb, tb = kb.t(), tb.t()
    for _ in range(3):  # B's first use, then its packed copy
        check(kiln.mm(ka, kb), ta @ tb, k)
        # A product of another size reuses (and may grow) the copy's buffer in between.
        kc, tc = strided(rng, 24, 600, view)
        kd, td = pair(rng, (600, 48))
        check(kiln.mm(kc, kd), tc @ td, 600)
    check(kiln.matmul(ka, kb), ta @ tb, k)
