"""float16 softmax / log_softmax (decision 0068): groups of contiguous rows (or tiles of
columns for a leading dim) widened into L1, the float32 path's functions, one rounding: bit
for bit kiln's float32 op on the widened input (short rows in transposed blocks, long rows,
outputs large enough for the float32 path's streaming stores, leading dims), close to PyTorch
2.13, no float32 copy of the input."""
import numpy as np
import pytest
import torch

import kiln

CASES = [((4096, 8), -1), ((100, 31), 1), ((64, 768), -1), ((3, 5000), 1), ((2, 70000), -1),
         ((6000, 1024), -1), ((2048, 300), 0), ((7, 40, 33), 1), ((5, 1), -1), ((8,), 0)]


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,dim", CASES)
def test_softmax_is_float32_rounded_once(shape, dim, log):
    a = np.random.default_rng(len(shape) + shape[0]).uniform(-8, 8, shape).astype(np.float16)
    a.reshape(-1)[3] = -np.inf  # a zero probability
    k, t = kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())
    f, g = (kiln.log_softmax, torch.log_softmax) if log else (kiln.softmax, torch.softmax)
    got = f(k, dim)
    ref = f(k.to(kiln.float32), dim).to(kiln.float16)
    assert got.dtype == kiln.float16
    np.testing.assert_array_equal(got.numpy().view(np.int16), ref.numpy().view(np.int16))
    want = g(t.float(), dim).half().float().numpy()
    got32 = got.to(kiln.float32).numpy()
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got32), finite)
    np.testing.assert_allclose(got32[finite], want[finite], rtol=2e-3, atol=1e-4)


def test_nan_rows_and_no_float32_copy():
    a = np.random.default_rng(1).uniform(-4, 4, (512, 1000)).astype(np.float16)
    a[7, 500] = np.nan
    k = kiln.from_numpy(a.copy())
    cpu = kiln.device("cpu")
    base = kiln.memory_allocated(cpu)
    kiln.reset_peak_memory_stats(cpu)
    out = kiln.softmax(k, -1)
    extra = kiln.max_memory_allocated(cpu) - base
    got = out.to(kiln.float32).numpy()
    assert np.isnan(got[7]).all() and np.isfinite(np.delete(got, 7, 0)).all()
    if kiln.backends.cpu.get_cpu_capability() == "baseline":  # no F16C: float32 copies
        assert extra >= 4 * a.nbytes, extra
    else:  # the float16 output
        assert extra < 2 * a.nbytes, extra
