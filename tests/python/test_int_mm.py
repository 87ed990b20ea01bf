"""kiln._int_mm (8-bit integer matrix product, int32 results) against torch._int_mm, exact."""
import numpy as np
import pytest
import torch

import kiln
import oracle


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 17, 5), (8, 33, 301), (97, 70, 1030)])
def test_int_mm_matches_torch(m, n, k):
    rng = np.random.default_rng(m * 1000 + k)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    a[0, 0], b[0, 0] = -128, -128
    want = torch._int_mm(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    got = kiln._int_mm(kiln.from_numpy(a), kiln.from_numpy(b))
    assert got.dtype == kiln.int32
    np.testing.assert_array_equal(got.numpy(), want)
    oracle.record("_int_mm")


def test_int_mm_errors_match_torch():
    for a, b in [((2, 3), (4, 2))]:
        with pytest.raises(RuntimeError):
            torch._int_mm(torch.zeros(a, dtype=torch.int8), torch.zeros(b, dtype=torch.int8))
        with pytest.raises(RuntimeError):
            kiln._int_mm(kiln.zeros(a, dtype=kiln.int8), kiln.zeros(b, dtype=kiln.int8))
    oracle.record("_int_mm")
