"""kiln.backends.cpu (the ISA level, as torch.backends.cpu.get_cpu_capability) and
kiln.backends.onednn (the oneDNN switch, as torch.backends.mkldnn): the level names, the
KILN_CPU_ISA cap seen from Python, and products that agree with float64 with oneDNN switched
on and off at run time."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.backends


def test_cpu_capability_is_a_level_no_higher_than_detected():
    cpu = kiln.backends.cpu
    level, detected = cpu.get_cpu_capability(), cpu.detected_isa_level()
    assert level in cpu.LEVELS and detected in cpu.LEVELS
    assert cpu.LEVELS.index(level) <= cpu.LEVELS.index(detected)
    feats = cpu.features()
    assert isinstance(feats, list) and all(isinstance(f, str) for f in feats)
    if cpu.LEVELS.index(detected) >= cpu.LEVELS.index("avx2"):
        assert "avx2" in feats and "fma" in feats
    if cpu.LEVELS.index(detected) >= cpu.LEVELS.index("avx512"):
        assert "avx512f" in feats


@pytest.mark.parametrize("cap", ["baseline", "avx2"])
def test_kiln_cpu_isa_caps_the_level_seen_from_python(cap):
    env = dict(os.environ, KILN_CPU_ISA=cap)
    out = subprocess.run([sys.executable, "-c",
                          "import kiln; print(kiln.backends.cpu.get_cpu_capability())"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    detected = kiln.backends.cpu.detected_isa_level()
    levels = kiln.backends.cpu.LEVELS
    assert out == levels[min(levels.index(cap), levels.index(detected))]


def test_unknown_isa_name_is_a_clear_error():
    env = dict(os.environ, KILN_CPU_ISA="avx9000")
    code = ("import kiln\n"
            "try:\n"
            "    kiln.backends.cpu.get_cpu_capability()\n"
            "except ValueError as e:\n"
            "    print('ValueError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("ValueError:") and "'avx9000'" in out and "avx512_vnni" in out


@pytest.mark.parametrize("value", ["0", "9", "four"])
def test_bad_reduce_streams_value_is_a_clear_error(value):
    # A long sum reaches the setting (decision 0049); the message names the range and the value.
    env = dict(os.environ, KILN_REDUCE_STREAMS=value)
    code = ("import kiln\n"
            "try:\n"
            "    kiln.ones([1 << 20]).sum()\n"
            "except ValueError as e:\n"
            "    print('ValueError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("ValueError:") and f"'{value}'" in out and "1 to 4" in out


@pytest.mark.parametrize("streams", ["1", "4"])
def test_long_sum_is_the_same_with_one_or_four_read_streams(streams):
    # Both read orders give every chunk the same sum, so the result matches float64 either way
    # and is the same bit for bit.
    env = dict(os.environ, KILN_REDUCE_STREAMS=streams)
    code = ("import kiln, numpy as np\n"
            "x = np.random.default_rng(5).uniform(-1, 1, 3 << 20).astype(np.float32)\n"
            "print(repr(float(kiln.from_numpy(x).sum().item())), "
            "repr(float(x.astype(np.float64).sum())))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    got, want = float(out[0]), float(out[1])
    assert abs(got - want) <= 1e-6 * 3 * (1 << 20) ** 0.5
    if streams == "4":
        env1 = dict(os.environ, KILN_REDUCE_STREAMS="1")
        one = subprocess.run([sys.executable, "-c", code], env=env1, capture_output=True,
                             text=True, check=True).stdout.split()[0]
        assert out[0] == one


def test_onednn_switch_and_products_either_way():
    onednn = kiln.backends.onednn
    before = onednn.enabled
    assert before == (onednn.is_available() and os.environ.get("KILN_ONEDNN") != "0")
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (64, 300)).astype(np.float32)
    b = rng.uniform(-1, 1, (300, 80)).astype(np.float32)
    w = rng.uniform(-1, 1, (48, 300)).astype(np.float32)
    want_mm = a.astype(np.float64) @ b.astype(np.float64)
    want_lin = a.astype(np.float64) @ w.astype(np.float64).T
    ka, kb, kw = kiln.from_numpy(a), kiln.from_numpy(b), kiln.from_numpy(w)
    for on in (False, True):
        with onednn.flags(enabled=on):
            assert onednn.enabled == (on and onednn.is_available())
            np.testing.assert_allclose(kiln.mm(ka, kb).numpy(), want_mm, rtol=1e-4, atol=1e-4)
            y = kiln.nn.functional.linear(ka, kw).numpy()
            np.testing.assert_allclose(y, want_lin, rtol=1e-4, atol=1e-4)
        assert onednn.enabled == before
    onednn.enabled = False
    try:
        assert onednn.enabled is False
    finally:
        onednn.enabled = before
    assert onednn.enabled == before


def test_winograd_switch_against_torch():
    """A ResNet-50 3x3 layer (64 channels at 28 x 28, NCHW and channels-last) with Winograd
    allowed and not: both within float32 tolerance of torch's direct convolution, and, where
    oneDNN runs Winograd (AVX-512), different bits, so the switch is seen to act. The weight is
    kiln memory: a weight in NumPy's memory keeps the direct kernel (decision 0050: its
    Winograd transform could not be cached, so each call would transform it again)."""
    import torch
    onednn = kiln.backends.onednn
    before = onednn.allow_winograd
    assert before == (os.environ.get("KILN_WINOGRAD") != "0")
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 64, 28, 28, generator=g)
    w = torch.randn(96, 64, 3, 3, generator=g) * 0.05
    b = torch.randn(96, generator=g)
    want = torch.nn.functional.conv2d(x.double(), w.double(), b.double(), padding=1)
    level = kiln.backends.cpu.get_cpu_capability()
    runs_winograd = onednn.enabled and level in ("avx512", "avx512_vnni", "amx")
    for channels_last in (False, True):
        kx, kw = kiln.from_numpy(x.numpy()), kiln.from_numpy(w.numpy()).clone()
        kb = kiln.from_numpy(b.numpy())
        foreign_w = kiln.from_numpy(w.numpy())
        if channels_last:
            kx = kx.contiguous(memory_format=kiln.channels_last)
            kw = kw.contiguous(memory_format=kiln.channels_last)
        got = {}
        for allow in (True, False):
            with onednn.flags(enabled=onednn.enabled, allow_winograd=allow):
                assert onednn.allow_winograd is allow
                got[allow] = kiln.nn.functional.conv2d(kx, kw, kb, padding=1).contiguous().numpy()
            assert onednn.allow_winograd == before
            np.testing.assert_allclose(got[allow], want.numpy(), rtol=1e-5, atol=1e-4)
        assert (not np.array_equal(got[True], got[False])) == runs_winograd
        if not channels_last:
            with onednn.flags(enabled=onednn.enabled, allow_winograd=True):
                direct = kiln.nn.functional.conv2d(kx, foreign_w, kb, padding=1).numpy()
            assert np.array_equal(direct, got[False])
    onednn.allow_winograd = False
    try:
        assert onednn.allow_winograd is False
    finally:
        onednn.allow_winograd = before
