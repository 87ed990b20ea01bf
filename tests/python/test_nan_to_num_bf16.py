"""nan_to_num of bfloat16 tensors against PyTorch 2.13: NaN,
+inf and -inf replaced by the defaults (0 and bfloat16's largest finite values) or by given
values (rounded to bfloat16), other values unchanged, contiguous and strided."""
import numpy as np
import pytest
import torch

import kiln


def pair(n):
    t = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 100
    t[::7] = float("nan")
    t[3::11] = float("inf")
    t[5::13] = float("-inf")
    t = t.to(torch.bfloat16)
    return kiln.from_numpy(t.float().numpy().copy()).to(kiln.bfloat16), t


@pytest.mark.parametrize("n", [5, 1000, 300001])
@pytest.mark.parametrize("kw", [{}, {"nan": 1.5}, {"nan": -2.0, "posinf": 1e3, "neginf": -0.3},
                                {"posinf": 1e39}])
def test_nan_to_num_bfloat16(n, kw):
    k, t = pair(n)
    got = k.nan_to_num(**kw).float().numpy()
    want = t.nan_to_num(**kw).float().numpy()
    np.testing.assert_array_equal(got, want)
    got_s = k[1::3].nan_to_num(**kw).float().numpy()
    np.testing.assert_array_equal(got_s, t[1::3].nan_to_num(**kw).float().numpy())
