"""float16 reductions (decision 0067): contiguous float16 tensors are reduced by the fast
path reading float16 itself, no float32 copy; the result is the float32 reduction of the
widened input rounded once (bit for bit against kiln's float32 op) and close to PyTorch 2.13,
whose float16 sums also accumulate in float32."""
import numpy as np
import pytest
import torch

import kiln


def _pair(shape, seed, low=-2.0, high=2.0):
    a = np.random.default_rng(seed).uniform(low, high, shape).astype(np.float16)
    return kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())


CASES = [((2048, 2048), (1,)), ((2048, 2048), (0,)), ((16, 64, 56, 56), (2, 3)),
         ((16, 64, 56, 56), (0, 2, 3)), ((300007,), ()), ((4096, 8), (0,)), ((3, 5, 7), (1,))]


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "var", "std"])
@pytest.mark.parametrize("shape,dims", CASES)
def test_reductions_are_float32_rounded_once_and_match_torch(op, shape, dims):
    kx, tx = _pair(shape, seed=len(shape) + sum(dims))
    kdims, tdims = list(dims), (list(dims) if dims else list(range(len(shape))))
    got = getattr(kiln, op)(kx, kdims) if dims else getattr(kiln, op)(kx)
    wide = kx.to(kiln.float32)
    ref = (getattr(kiln, op)(wide, kdims) if dims else getattr(kiln, op)(wide)).to(kiln.float16)
    assert got.dtype == kiln.float16
    np.testing.assert_array_equal(got.numpy().view(np.int16), ref.numpy().view(np.int16))
    want = getattr(torch, op)(tx.float(), tdims).half()
    np.testing.assert_allclose(got.to(kiln.float32).numpy(), want.float().numpy(),
                               rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("op", ["sum", "amax", "mean"])
def test_contiguous_float16_reductions_make_no_float32_copy(op):
    kx, _ = _pair((512, 1000), seed=3)
    cpu = kiln.device("cpu")
    base = kiln.memory_allocated(cpu)
    kiln.reset_peak_memory_stats(cpu)
    getattr(kiln, op)(kx, [1])
    extra = kiln.max_memory_allocated(cpu) - base
    nbytes = kx.numel() * 2
    if kiln.backends.cpu.get_cpu_capability() == "baseline":  # no F16C: a float32 copy
        assert extra >= 2 * nbytes, extra
    else:
        assert extra < nbytes, extra


def test_nan_and_overflow():
    a = np.random.default_rng(4).uniform(-1, 1, (6, 999)).astype(np.float16)
    a[2, 500] = np.nan
    a[4, 10] = np.inf
    k = kiln.from_numpy(a.copy())
    s, m = kiln.sum(k, [1]).to(kiln.float32).numpy(), kiln.amax(k, [1]).to(kiln.float32).numpy()
    assert np.isnan(s[2]) and np.isnan(m[2])
    assert s[4] == np.inf and m[4] == np.inf
    big = kiln.from_numpy(np.full(100, 1000, np.float16))
    assert kiln.sum(big).item() == float("inf")
