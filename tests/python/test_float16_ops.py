"""float16 ops on the CPU run the float32 kernels on widened inputs and round once (the ops
listed in src/kiln/dispatch/float16_in_float32.cpp), PyTorch's definition: results against
PyTorch 2.13 on the same float16 values, bit for bit where both round one correctly rounded
float32 result (add, sub, mul, div, sqrt, comparisons, max / min), close elsewhere; in-place,
out= and strided / channels-last forms."""
import numpy as np
import pytest
import torch

import kiln
import kiln.nn.functional as KF
import torch.nn.functional as TF


def _pair(*shape, seed=0, low=-4.0, high=4.0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(low, high, shape).astype(np.float16)
    return kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())


def _bits(x):
    if isinstance(x, torch.Tensor):
        return x.contiguous().view(torch.int16).numpy()
    return x.contiguous().numpy().view(np.int16)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_binary_ops_are_bit_exact(op):
    ka, ta = _pair(257, 129, seed=1)
    kb, tb = _pair(257, 129, seed=2, low=0.5, high=3.0)
    got, want = getattr(kiln, op)(ka, kb), getattr(torch, op)(ta, tb)
    assert got.dtype == kiln.float16
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_unary_and_comparisons_are_bit_exact():
    ka, ta = _pair(1000, seed=3, low=0.0, high=100.0)
    np.testing.assert_array_equal(_bits(kiln.sqrt(ka)), _bits(torch.sqrt(ta)))
    np.testing.assert_array_equal(_bits(KF.relu(ka - 50)), _bits(TF.relu(ta - 50)))
    kb, tb = _pair(1000, seed=4, low=0.0, high=100.0)
    np.testing.assert_array_equal((ka < kb).numpy(), (ta < tb).numpy())
    np.testing.assert_array_equal((ka == ka).numpy(), (ta == ta).numpy())
    vals, idx = ka.reshape(10, 100).max(1)
    tv, ti = ta.reshape(10, 100).max(1)
    np.testing.assert_array_equal(_bits(vals), _bits(tv))
    np.testing.assert_array_equal(idx.numpy(), ti.numpy())


def _close(got, want, rtol=2e-3, atol=1e-3):
    assert got.dtype == kiln.float16
    np.testing.assert_allclose(got.to(kiln.float32).numpy(), want.float().numpy(),
                               rtol=rtol, atol=atol)


def test_math_rows_and_reductions_match_torch():
    ka, ta = _pair(64, 768, seed=5)
    _close(kiln.exp(ka / 4), torch.exp(ta / 4))
    _close(KF.gelu(ka), TF.gelu(ta))
    _close(kiln.softmax(ka, -1), torch.softmax(ta, -1))
    _close(kiln.log_softmax(ka, -1), torch.log_softmax(ta, -1))
    kw, tw = _pair(768, seed=6)
    _close(KF.layer_norm(ka, [768], kw, kw), TF.layer_norm(ta, [768], tw, tw), atol=4e-3)
    # Sums accumulate in float32 (an accumulation in float16 would be off by many units).
    _close(ka.sum(1), ta.sum(1), rtol=2e-3, atol=2e-2)
    _close(ka.mean(), ta.mean())
    _close(ka.var(1), ta.var(1), atol=1e-2)


@pytest.mark.parametrize("transposed", [False, True])
def test_products_match_torch(transposed):
    kx, tx = _pair(5, 300, seed=7, low=-1, high=1)
    kw, tw = _pair(200, 300, seed=8, low=-1, high=1)
    if transposed:
        got, want = KF.linear(kx, kw), TF.linear(tx, tw)  # x @ w.t(): a transposed operand
    else:
        got, want = kx @ kw.t().contiguous(), tx @ tw.t().contiguous()
    _close(got, want, rtol=4e-3, atol=4e-3)
    kb, tb = _pair(4, 17, 33, seed=9)
    kc, tc = _pair(4, 33, 9, seed=10)
    _close(kiln.bmm(kb, kc), torch.bmm(tb, tc), rtol=4e-3, atol=2e-2)


def test_in_place_and_out_forms_write_the_callers_tensor():
    ka, ta = _pair(300, seed=11)
    kb, tb = _pair(300, seed=12)
    alias = ka[::1]
    ka.add_(kb)
    ta.add_(tb)
    np.testing.assert_array_equal(_bits(ka), _bits(ta))
    np.testing.assert_array_equal(_bits(alias), _bits(ta))  # the same storage
    out = kiln.empty(300, dtype=kiln.float16)
    kiln.mul(ka, kb, out=out)
    np.testing.assert_array_equal(_bits(out), _bits(ta * tb))
    strided_out = kiln.zeros(600, dtype=kiln.float16)[::2]
    kiln.sub(ka, kb, out=strided_out)
    np.testing.assert_array_equal(_bits(strided_out), _bits(ta - tb))


def test_layouts_are_kept():
    ka, ta = _pair(2, 8, 5, 6, seed=13)
    kcl = ka.contiguous(memory_format=kiln.channels_last)
    tcl = ta.contiguous(memory_format=torch.channels_last)
    got = KF.relu(kcl) * 2
    assert got.is_contiguous(memory_format=kiln.channels_last)
    np.testing.assert_array_equal(_bits(got), _bits(TF.relu(tcl) * 2))
    kt, tt = _pair(40, 30, seed=14)
    got = kiln.exp(kt.t() / 8)  # a transposed input: values in logical order
    _close(got, torch.exp(tt.t() / 8))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("m,n,k", [(1, 203, 333), (3, 64, 1024), (7, 9, 40), (1, 4, 8)])
def test_linear_with_a_float16_weight_reads_it_as_float16(m, n, k, bias):
    # A few rows times a transposed float16 weight (mm; addmm with a bias): the CPU's float16
    # product (F16C), no widened copy of the weight, float32 sums rounded once.
    kx, tx = _pair(m, k, seed=20, low=-1, high=1)
    kw, tw = _pair(n, k, seed=21, low=-1, high=1)
    kb, tb = _pair(n, seed=24, low=-1, high=1) if bias else (None, None)
    cpu = kiln.device("cpu")
    base = kiln.memory_allocated(cpu)
    kiln.reset_peak_memory_stats(cpu)
    got = KF.linear(kx, kw, kb)
    extra = kiln.max_memory_allocated(cpu) - base  # a float32 weight copy: 4 n k bytes
    want = tx.double() @ tw.double().t() + (tb.double() if bias else 0)
    assert got.dtype == kiln.float16 and tuple(got.shape) == (m, n)
    # float32 sums in any order, one rounding to float16: within a unit of float16 (2^-11
    # relative) plus the float32 sum's error.
    np.testing.assert_allclose(got.to(kiln.float32).numpy(), want.numpy(),
                               rtol=1e-3, atol=1e-3 * float(want.abs().max()))
    if kiln.backends.cpu.get_cpu_capability() == "baseline":  # no F16C: float32 copies
        assert extra >= 4 * n * k, extra
    elif 4 * n * k >= 4096:  # beyond the allocator's rounding of the small output
        assert extra < 4 * n * k, extra
    np.testing.assert_allclose(got.to(kiln.float32).numpy(),
                               TF.linear(tx, tw, tb).float().numpy(), rtol=2e-3, atol=2e-3)


def test_float16_weight_product_propagates_nan_and_inf():
    kx, tx = _pair(2, 64, seed=22)
    w = np.random.default_rng(23).uniform(-1, 1, (10, 64)).astype(np.float16)
    w[3, 5], w[7, 63] = np.nan, np.inf
    got = KF.linear(kx, kiln.from_numpy(w.copy())).to(kiln.float32).numpy()
    want = TF.linear(tx, torch.from_numpy(w.copy())).float().numpy()
    assert np.isnan(got[:, 3]).all()
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-3, atol=2e-2)
