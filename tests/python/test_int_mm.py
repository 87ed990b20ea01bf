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


@pytest.mark.parametrize("m", [2, 3, 4, 5, 8, 15, 16])
@pytest.mark.parametrize("signed", [True, False])
def test_int_mm_with_a_linear_weight_matches_exact_products(m, signed):
    """x @ W.t() with W [N, K] (a Linear weight): kiln's few-row kernel, the AMX tiles with the
    weight packed once (from 2 rows, decision 0142) or oneDNN's packed weight (decision 0045),
    against exact int64 products (torch._int_mm takes int8 only)."""
    rng = np.random.default_rng(m * 10 + signed)
    n, k = 70, 333
    a = rng.integers(-128, 128, (m, k)) if signed else rng.integers(0, 256, (m, k))
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    a = a.astype(np.int8 if signed else np.uint8)
    want = a.astype(np.int64) @ w.astype(np.int64).T
    kw = kiln.from_numpy(w)
    for _ in range(2):  # the second call finds the packed copy
        got = kiln._int_mm(kiln.from_numpy(a), kw.t())
        np.testing.assert_array_equal(got.numpy(), want)
    oracle.record("_int_mm")


def test_int_mm_errors_match_torch():
    for a, b in [((2, 3), (4, 2))]:
        with pytest.raises(RuntimeError):
            torch._int_mm(torch.zeros(a, dtype=torch.int8), torch.zeros(b, dtype=torch.int8))
        with pytest.raises(RuntimeError):
            kiln._int_mm(kiln.zeros(a, dtype=kiln.int8), kiln.zeros(b, dtype=kiln.int8))
    oracle.record("_int_mm")
