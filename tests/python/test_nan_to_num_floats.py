"""nan_to_num of float32, bfloat16 and float16 tensors (the bit-pattern loop; strided inputs
copied into the output first) against PyTorch 2.13: NaN (any payload, either sign), +inf and
-inf replaced by the defaults (0 and the dtype's largest finite values) or by given values
(rounded to the dtype), other values unchanged bit for bit, contiguous, strided, in place."""
import numpy as np
import pytest
import torch

import kiln

DTYPES = {"float32": (kiln.float32, torch.float32), "bfloat16": (kiln.bfloat16, torch.bfloat16),
          "float16": (kiln.float16, torch.float16)}


def pair(n, dtype):
    t = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 100
    t[::7] = float("nan")
    t[1::7] = -float("nan")
    t[3::11] = float("inf")
    t[5::13] = float("-inf")
    t[6::17] = -0.0
    kd, td = DTYPES[dtype]
    t = t.to(td)
    return kiln.from_numpy(t.float().numpy().copy()).to(kd), t


def bits(x):
    a = x.float().numpy() if x.dtype in (kiln.bfloat16, kiln.float16) else x.numpy()
    return a


def check(got, want):
    g = bits(got)
    w = want.float().numpy()
    np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n", [5, 1000, 300001])
@pytest.mark.parametrize("kw", [{}, {"nan": 1.5}, {"nan": -2.0, "posinf": 1e3, "neginf": -0.3},
                                {"posinf": 1e39}])
def test_nan_to_num(dtype, n, kw):
    k, t = pair(n, dtype)
    check(k.nan_to_num(**kw), t.nan_to_num(**kw))
    check(k[1::3].nan_to_num(**kw), t[1::3].nan_to_num(**kw))
    m = n - n % 2  # an even count, viewed as two rows and transposed
    k2, t2 = k[:m].reshape(2, -1), t[:m].reshape(2, -1)
    check(k2.t().nan_to_num(**kw), t2.t().nan_to_num(**kw))
    kc, tc = k.clone(), t.clone()
    kc.nan_to_num_(**kw)
    tc.nan_to_num_(**kw)
    check(kc, tc)
