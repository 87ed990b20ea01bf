"""float32 <-> float16 / bfloat16 conversions (.to) against NumPy and PyTorch 2.13, bit for bit:
dense tensors take the ISA's vector converters, strided ones the element loop; both must agree
with the references at every ISA level (scripts/test.sh reruns this file capped at each)."""
import numpy as np
import pytest
import torch

import kiln


def _random_float32_bits(n, seed):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    # A third rescaled into float16's range, where rounding decides the result.
    bits[1::3] = (bits[1::3] & np.uint32(0x81FFFFFF)) | np.uint32(0x36000000)
    return bits


@pytest.mark.parametrize("n", [45, 4096 + 7, 300_007])
@pytest.mark.parametrize("strided", [False, True])
def test_float32_to_float16_matches_numpy_and_torch(n, strided):
    f = _random_float32_bits(2 * n if strided else n, n).view(np.float32)
    k = kiln.from_numpy(f.copy())
    if strided:
        k, f = k[::2], f[::2]
    got = k.to(kiln.float16).numpy().view(np.uint16)
    with np.errstate(over="ignore", invalid="ignore"):
        want = f.astype(np.float16).view(np.uint16)
    nan = np.isnan(f)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    # NaN: PyTorch's vector conversion keeps sign and payload with the quiet bit set.
    t = torch.from_numpy(np.ascontiguousarray(f)).to(torch.float16)
    np.testing.assert_array_equal(got, t.view(torch.int16).numpy().view(np.uint16))


@pytest.mark.parametrize("strided", [False, True])
def test_every_float16_pattern_widens_as_numpy(strided):
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    src = np.repeat(h, 2) if strided else h
    k = kiln.from_numpy(src.view(np.float16).copy())
    if strided:
        k = k[::2]
    got = k.to(kiln.float32).numpy().view(np.uint32)
    # NumPy keeps a signalling NaN's quiet bit clear, as kiln::Half does.
    np.testing.assert_array_equal(got, h.view(np.float16).astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("n", [45, 300_007])
def test_float32_to_bfloat16_matches_torch(n):
    f = _random_float32_bits(n, 99).view(np.float32)
    bf = torch.from_dlpack(kiln.from_numpy(f.copy()).to(kiln.bfloat16))  # the same memory
    got = bf.view(torch.int16).numpy().view(np.uint16)
    want = torch.from_numpy(f.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(f)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    # kiln keeps a NaN's sign and high payload bits (quiet); PyTorch gives its canonical NaN.
    u = f.view(np.uint32)[nan]
    np.testing.assert_array_equal(got[nan], ((u >> 16) | 0x40).astype(np.uint16))


def _bits16(x):
    """The 16-bit patterns of a kiln or torch float16 / bfloat16 tensor, flat (via DLPack)."""
    t = torch.from_dlpack(x.contiguous()) if isinstance(x, kiln.Tensor) else x.contiguous()
    return t.reshape(-1).view(torch.int16).numpy().view(np.uint16)


@pytest.mark.parametrize("layout", ["dense", "channels_last", "strided"])
def test_every_float16_pattern_to_bfloat16_and_back(layout):
    # float16 <-> bfloat16: dense tensors take widen-then-narrow blocks, strided ones the element
    # loop; both round once from the exact value, as PyTorch (NaN: any NaN).
    patterns = torch.arange(65536, dtype=torch.int32).to(torch.int16)
    th, tb = patterns.view(torch.float16), patterns.view(torch.bfloat16)

    def kiln_in(t):
        if layout == "strided":
            return kiln.from_dlpack(t.repeat_interleave(2).clone())[::2]
        k = kiln.from_dlpack(t.clone())
        if layout == "channels_last":
            k = k.reshape(4, 16, 32, 32).contiguous(memory_format=kiln.channels_last)
        return k

    for src, to_k, to_t in [(th, kiln.bfloat16, torch.bfloat16), (tb, kiln.float16, torch.float16)]:
        out = kiln_in(src).to(to_k)
        assert out.dtype == to_k
        got, want = _bits16(out), _bits16(src.to(to_t))
        nan = torch.isnan(src.float()).numpy()
        np.testing.assert_array_equal(got[~nan], want[~nan])
        exp_mask, man_mask = (0x7F80, 0x7F) if to_t == torch.bfloat16 else (0x7C00, 0x3FF)
        assert ((got[nan] & exp_mask) == exp_mask).all() and ((got[nan] & man_mask) != 0).all()
