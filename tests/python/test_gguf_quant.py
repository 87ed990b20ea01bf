"""GGUF reading (kiln.gguf) and ggml block formats (kiln.quant) against independent
references: files written by llama.cpp's own Python package (gguf-py, PyPI `gguf`), its numpy
(de)quantisers, and float64 products computed here from the integer blocks."""
import os
import random
import struct

import numpy as np
import pytest

import kiln
from kiln.gguf import GGUFReader
from kiln.quant import GGMLWeight

# gguf-py (PyPI `gguf`, llama.cpp's own package; scripts/test.sh installs it) is the reference:
# without it this file fails rather than skips.
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf import quants  # noqa: E402

RNG = np.random.default_rng(0)


def block_info(qt):
    return gguf.GGML_QUANT_SIZES[qt]  # (values per block, bytes per block)


def random_blocks(qt, rows, cols, rng):
    """Random bytes for `rows` rows of `cols` values of type qt, with every float16 scale
    replaced by a finite value (random bytes may spell NaN / Inf)."""
    elems, nbytes = block_info(qt)
    raw = rng.integers(0, 256, size=(rows, cols // elems, nbytes), dtype=np.uint8)
    # Offsets of the float16 fields inside one block (ggml's structs).
    f16_fields = {QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q5_0: [0], QT.Q5_1: [0, 2], QT.Q8_0: [0],
                  QT.Q2_K: [80, 82], QT.Q3_K: [108], QT.Q4_K: [0, 2], QT.Q5_K: [0, 2],
                  QT.Q6_K: [208]}[qt]
    for off in f16_fields:
        vals = rng.uniform(-0.1, 0.1, size=(rows, cols // elems)).astype(np.float16)
        raw[:, :, off:off + 2] = vals.view(np.uint8).reshape(rows, cols // elems, 2)
    return raw.reshape(rows, cols // elems * nbytes)


def to_np(t):
    return t.numpy()


# --- dequantisation of every block type against gguf-py's numpy reference -------------------

@pytest.mark.parametrize("qt", [QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0, QT.Q2_K, QT.Q3_K,
                                QT.Q4_K, QT.Q5_K, QT.Q6_K])
def test_dequantize_matches_gguf_py(qt):
    rng = np.random.default_rng(int(qt))
    cols = 512
    raw = random_blocks(qt, 3, cols, rng)
    want = quants.dequantize(raw, qt)
    got = to_np(kiln.quant.GGMLWeight(kiln.from_numpy(raw.copy()), qt.name, (3, cols)).dequantize())
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_dequantize_q8_k_against_float64():
    rng = np.random.default_rng(5)
    d = rng.uniform(-1, 1, size=2).astype(np.float32)
    qs = rng.integers(-128, 128, size=(2, 256), dtype=np.int8)
    bsums = np.zeros((2, 16), dtype=np.int16)
    raw = np.concatenate([d.view(np.uint8).reshape(2, 4), qs.view(np.uint8),
                          bsums.view(np.uint8).reshape(2, 32)], axis=1)
    got = to_np(kiln._C._gguf.dequantize(kiln.from_numpy(raw.reshape(1, -1).copy()),
                                          kiln.quant.GGML_TYPES["Q8_K"][0], 512))
    want = (d.astype(np.float64)[:, None] * qs.astype(np.float64)).reshape(1, 512)
    np.testing.assert_allclose(got, want, rtol=1e-7)


@pytest.mark.parametrize("qt", [QT.Q8_0, QT.Q4_0])
def test_quantize_bytes_equal_gguf_py(qt):
    x = RNG.standard_normal((7, 256)).astype(np.float32)
    x[0, :32] = 0.0                 # an all-zero block (scale 0)
    x[1, 5] = 40.0                  # an outlier
    want = quants.quantize(x, qt)
    got = to_np(kiln.quant.quantize(kiln.from_numpy(x), qt.name).raw)
    np.testing.assert_array_equal(got, want)


# --- ggml_linear against float64 products of the exact blocks --------------------------------

def quantize_activations(x):
    """Activations as the kernels quantise them: Q8_0 blocks (gguf-py's reference)."""
    blocks = quants.quantize(x.astype(np.float32), QT.Q8_0).reshape(x.shape[0], -1, 34)
    d = blocks[:, :, :2].copy().view(np.float16)[..., 0].astype(np.float64)
    q = blocks[:, :, 2:].copy().view(np.int8).astype(np.float64)
    return d, q  # [M, nb], [M, nb, 32]


def weight_blocks(raw, qt, cols):
    elems, nbytes = block_info(qt)
    b = raw.reshape(raw.shape[0], cols // elems, nbytes)
    d = b[:, :, :2].copy().view(np.float16)[..., 0].astype(np.float64)
    if qt == QT.Q8_0:
        q = b[:, :, 2:].copy().view(np.int8).astype(np.float64)
    else:
        nib = b[:, :, 2:]
        q = np.concatenate([nib & 0xF, nib >> 4], axis=-1).astype(np.float64) - 8
    return d, q  # [N, nb], [N, nb, 32]


def reference_quantised_product(x, raw, qt, cols):
    dx, qx = quantize_activations(x)
    dw, qw = weight_blocks(raw, qt, cols)
    ints = np.einsum("mbj,nbj->mnb", qx, qw)
    return np.einsum("mnb,mb,nb->mn", ints, dx, dw)


@pytest.mark.parametrize("qt", [QT.Q8_0, QT.Q4_0])
@pytest.mark.parametrize("M", [1, 2, 3, 4, 5, 7, 15])
@pytest.mark.parametrize("N,K", [(1, 32), (17, 64), (33, 96), (40, 1024)])
def test_ggml_linear_few_rows_is_llama_cpp_product(qt, M, N, K):
    rng = np.random.default_rng(M * 1000 + N + K)
    w = rng.standard_normal((N, K)).astype(np.float32)
    raw = quants.quantize(w, qt)
    x = rng.standard_normal((M, K)).astype(np.float32) * 3
    want = reference_quantised_product(x, raw, qt, K)
    weight = GGMLWeight(kiln.from_numpy(raw), qt.name, (N, K))
    got = to_np(weight.linear(kiln.from_numpy(x)))
    # Exact integer block sums; only the float32 scaling and summation round.
    bound = np.einsum("mbj,nbj->mn", *[np.abs(a) for a in (quantize_activations(x)[1],
                                                           weight_blocks(raw, qt, K)[1])])
    scale = np.abs(want).max() + 1
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6 * scale * np.sqrt(K / 32))
    assert bound.shape == want.shape


def bf16_round(a):
    import torch
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(torch.bfloat16).double().numpy()


@pytest.mark.parametrize("qt", [QT.Q4_K, QT.Q5_K, QT.Q6_K])
@pytest.mark.parametrize("M", [1, 2, 4, 5, 15])
def test_ggml_linear_k_quants_few_rows(qt, M):
    """Q4_K / Q5_K / Q6_K dot kernels: dequantised weights (gguf-py) times the activations as
    quantised to Q8_0 blocks (gguf-py), in float64."""
    rng = np.random.default_rng(int(qt) * 10 + M)
    N, K = 11, 768
    raw = random_blocks(qt, N, K, rng)
    x = rng.standard_normal((M, K)).astype(np.float32)
    dx, qx = quantize_activations(x)
    xq = (qx * dx[:, :, None]).reshape(M, K)
    wf = quants.dequantize(raw, qt).astype(np.float64)
    want = xq @ wf.T
    mag = np.abs(xq) @ np.abs(wf).T
    got = to_np(GGMLWeight(kiln.from_numpy(raw), qt.name, (N, K)).linear(kiln.from_numpy(x)))
    assert np.all(np.abs(got - want) <= 2e-5 * mag + 1e-7), np.abs(got - want).max()
    assert GGMLWeight(kiln.from_numpy(raw), qt.name, (N, K)).has_kernel


@pytest.mark.parametrize("qt", [QT.Q8_0, QT.Q4_0, QT.Q4_K, QT.Q5_K, QT.Q6_K, QT.Q5_1])
def test_ggml_linear_many_rows_is_bfloat16_product(qt):
    """From 16 activation rows on, the weight is dequantised to bfloat16 and multiplied with
    the activations rounded to bfloat16, float32 sums, the result rounded to bfloat16
    (decision 0083)."""
    rng = np.random.default_rng(int(qt) + 99)
    N, K, M = 24, 512, 33
    raw = quants.quantize(rng.standard_normal((N, K)).astype(np.float32), qt) \
        if qt in (QT.Q8_0, QT.Q4_0) else random_blocks(qt, N, K, rng)
    x = rng.standard_normal((M, K)).astype(np.float32)
    wf = bf16_round(quants.dequantize(raw, qt))
    xb = bf16_round(x)
    want = xb @ wf.T
    mag = np.abs(xb) @ np.abs(wf).T
    got = to_np(GGMLWeight(kiln.from_numpy(raw), qt.name, (N, K)).linear(kiln.from_numpy(x)))
    assert np.all(np.abs(got - want) <= 1e-5 * mag + np.abs(want) / 256 + 1e-6)


def test_ggml_linear_batched_input_bias_and_bf16():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((10, 64)).astype(np.float32)
    weight = kiln.quant.quantize(kiln.from_numpy(w), "Q8_0")
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    got = to_np(weight.linear(kiln.from_numpy(x), kiln.from_numpy(b)))
    want = reference_quantised_product(x.reshape(6, 64), to_np(weight.raw), QT.Q8_0, 64) + b
    np.testing.assert_allclose(got.reshape(6, 10), want, rtol=2e-5, atol=1e-4)
    xb = kiln.from_numpy(x).to(kiln.bfloat16)
    got_b = to_np(weight.linear(xb))
    want_b = reference_quantised_product(to_np(xb.float()).reshape(6, 64), to_np(weight.raw), QT.Q8_0, 64)
    np.testing.assert_allclose(got_b.reshape(6, 10), want_b, rtol=2e-5, atol=1e-4)


def test_dequantize_rows_is_an_embedding_lookup():
    w = kiln.randn(50, 64)
    q = kiln.quant.quantize(w, "Q4_0")
    ids = kiln.tensor([[3, 0, 49], [7, 7, 1]])
    full = to_np(q.dequantize())
    np.testing.assert_array_equal(to_np(q.dequantize_rows(ids)), full[to_np(ids)])


def test_ggml_linear_error_messages():
    w = kiln.quant.quantize(kiln.randn(8, 64), "Q8_0")
    with pytest.raises(RuntimeError, match=r"expected input \[\.\.\., 64\]"):
        w.linear(kiln.randn(2, 32))
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        w.linear(kiln.ones(2, 64, dtype=kiln.int32))
    with pytest.raises(RuntimeError, match="takes 68 bytes"):
        kiln._C._gguf.ggml_linear(kiln.randn(1, 64), kiln.zeros(8, 60, dtype=kiln.uint8), 8, 64)
    with pytest.raises(ValueError, match="expected raw uint8 blocks"):
        GGMLWeight(kiln.zeros(8, 60, dtype=kiln.uint8), "Q8_0", (8, 64))
    with pytest.raises(TypeError, match="unknown ggml type"):
        GGMLWeight(kiln.zeros(8, 68, dtype=kiln.uint8), "Q9_9", (8, 64))
    with pytest.raises(NotImplementedError, match="Q8_0 and Q4_0"):
        kiln.quant.quantize(kiln.randn(2, 256), "Q4_K")


# --- GGUF files written by gguf-py ---------------------------------------------------------

def write_reference_file(path, alignment=None):
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float32("t.f32", 0.1)
    w.add_float64("t.f64", 1e300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo ▁wörld 🙂")
    w.add_array("t.strs", ["<s>", "</s>", "▁a", ""])
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.floats", [0.5, -1.25])
    tensors = {
        "f32": RNG.standard_normal((3, 5)).astype(np.float32),
        "f16": RNG.standard_normal((4, 6)).astype(np.float16),
        "vec": RNG.standard_normal(7).astype(np.float32),
        "cube": RNG.standard_normal((2, 3, 4)).astype(np.float32),
        "i32": np.arange(12, dtype=np.int32).reshape(3, 4),
        "i8": np.arange(-5, 5, dtype=np.int8),
    }
    for name, a in tensors.items():
        w.add_tensor(name, a)
    x = RNG.standard_normal((6, 64)).astype(np.float32)
    q = {}
    for qt in (QT.Q8_0, QT.Q4_0, QT.Q5_1, QT.BF16):
        q[qt] = quants.quantize(x, qt)
        w.add_tensor(f"w_{qt.name}", q[qt], raw_dtype=qt)
    k = random_blocks(QT.Q6_K, 2, 512, np.random.default_rng(1))
    w.add_tensor("w_Q6_K", k, raw_dtype=QT.Q6_K)
    q[QT.Q6_K] = k
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors, q


@pytest.fixture(scope="module")
def reference_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "ref.gguf"
    tensors, q = write_reference_file(path)
    return path, tensors, q


def test_metadata_values_and_types(reference_file):
    path, _, _ = reference_file
    f = GGUFReader(path)
    md = f.metadata
    assert f.version == 3 and f.alignment == 32
    expect = {"general.architecture": "llama", "t.u8": 200, "t.i8": -100, "t.u16": 60000,
              "t.i16": -30000, "t.u32": 4_000_000_000, "t.i32": -2_000_000_000,
              "t.u64": 2**63 + 5, "t.i64": -(2**62), "t.f64": 1e300, "t.bool": True,
              "t.str": "héllo ▁wörld 🙂", "t.strs": ["<s>", "</s>", "▁a", ""],
              "t.ints": [1, -2, 3], "t.floats": [0.5, -1.25]}
    for k, v in expect.items():
        assert md[k] == v, k
    assert md["t.f32"] == float(np.float32(0.1))
    types = f.metadata_types()
    assert types["t.u8"] == "u8" and types["t.strs"] == "array[string]" and types["t.f64"] == "f64"
    # Every key gguf-py's own reader finds, in the same order.
    ref = gguf.GGUFReader(str(path))
    assert list(md) == [k for k in ref.fields if not k.startswith("GGUF.")]


def test_tensors_round_trip(reference_file):
    path, tensors, q = reference_file
    f = GGUFReader(path)
    ref = gguf.GGUFReader(str(path))
    assert f.tensor_names == [t.name for t in ref.tensors]
    for t in ref.tensors:
        info = f.tensor_info(t.name)
        assert info.type == t.tensor_type.name and info.offset == t.data_offset - ref.data_offset
        assert info.nbytes == t.n_bytes
    for name, a in tensors.items():
        got = f.tensor(name)
        assert tuple(got.shape) == a.shape, name
        np.testing.assert_array_equal(to_np(got), a)
    x_shape = (6, 64)
    for qt, raw in q.items():
        name = f"w_{qt.name}"
        got = f.tensor(name)
        want = quants.dequantize(raw, qt)
        if qt == QT.BF16:
            assert got.dtype == kiln.bfloat16 and tuple(got.shape) == x_shape
            np.testing.assert_array_equal(to_np(got.float()), want)
            continue
        assert isinstance(got, GGMLWeight) and got.type == qt.name
        np.testing.assert_array_equal(to_np(got.raw), raw)
        np.testing.assert_allclose(to_np(got.dequantize()), want, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(to_np(f.dequantize(name)), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(to_np(f.dequantize("f16")), tensors["f16"].astype(np.float32))
    with pytest.raises(TypeError, match="integer type I32"):
        f.dequantize("i32")
    with pytest.raises(KeyError, match="no tensor 'nope'"):
        f.tensor_info("nope")
    with pytest.raises(ValueError, match="has no tensor"):
        f._file.tensor("nope")


def test_tensors_are_copy_on_write_views_of_the_file(tmp_path):
    path = tmp_path / "cow.gguf"
    tensors, _ = write_reference_file(path)
    before = path.read_bytes()
    f = GGUFReader(path)
    a, b, c = f.tensor("f32"), f.tensor("f32"), f.tensor("f32", copy=True)
    a[0, 0] = 1234.5
    assert b[0, 0].item() == 1234.5          # one mapping: views share memory
    assert c[0, 0].item() == float(tensors["f32"][0, 0])
    assert path.read_bytes() == before       # the file is never written
    del f                                    # tensors keep the mapping alive
    np.testing.assert_array_equal(to_np(b)[1:], tensors["f32"][1:])
    assert GGUFReader(path).tensor("f32")[0, 0].item() == float(tensors["f32"][0, 0])


def test_custom_alignment(tmp_path):
    path = tmp_path / "a.gguf"
    tensors, _ = write_reference_file(path, alignment=64)
    f = GGUFReader(path)
    assert f.alignment == 64 and f.metadata["general.alignment"] == 64
    np.testing.assert_array_equal(to_np(f.tensor("cube")), tensors["cube"])


# --- malformed and hostile files -------------------------------------------------------------

def header(n_tensors, n_kv, version=3):
    return struct.pack("<IIQQ", 0x46554747, version, n_tensors, n_kv)


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


@pytest.mark.parametrize("data,match", [
    (b"", "truncated while reading the magic"),
    (b"GGML" + b"\0" * 20, "not a GGUF file"),
    (struct.pack("<II", 0x46554747, 1) + b"\0" * 16, "unsupported GGUF version 1"),
    (header(0, 1) + struct.pack("<Q", 2**40), "claims 1099511627776 bytes"),
    (header(0, 1) + gstr("k") + struct.pack("<I", 99), "unknown value type 99"),
    (header(0, 1) + gstr("k") + struct.pack("<IIQ", 9, 4, 2**60), "cannot fit"),
    (header(0, 1) + gstr("k") + struct.pack("<IB", 7, 3), "bool must be stored as 0 or 1"),
    (header(0, 2) + (gstr("k") + struct.pack("<IB", 0, 1)) * 2, "appears twice"),
    (header(0, 1) + gstr("general.alignment") + struct.pack("<II", 4, 48), "power of two"),
    (header(2**40, 0), "tensors \\(limit"),
    (header(1, 0) + gstr("t") + struct.pack("<I", 5), "5 dimensions"),
    (header(1, 0) + gstr("t") + struct.pack("<IQI", 1, 33, 8) + struct.pack("<Q", 0),
     "not a multiple of its block size 32"),
    (header(1, 0) + gstr("t") + struct.pack("<IQQI", 2, 2**20, 2**20, 0) + struct.pack("<Q", 0),
     "needs bytes"),
    (header(1, 0) + gstr("t") + struct.pack("<IQI", 1, 4, 0) + struct.pack("<Q", 3),
     "not a multiple of the alignment"),
    (header(1, 0) + gstr("t") + struct.pack("<IQI", 1, 4, 0) + struct.pack("<Q", 0), "file truncated"),
    (header(1, 0) + gstr("t") + struct.pack("<IQQI", 2, 2**40, 2**40, 0) + struct.pack("<Q", 0),
     "overflows 64 bits"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_malformed_files_raise_value_errors(data, match):
    """Each structural check, with the message it gives."""
    with pytest.raises(ValueError, match=match):
        GGUFReader(data)


def test_unknown_tensor_type_is_a_type_error():
    data = header(1, 0) + gstr("t") + struct.pack("<IQI", 1, 256, 16) + struct.pack("<Q", 0)
    with pytest.raises(TypeError, match="ggml type 16, which kiln does not read"):
        GGUFReader(data)


def test_fuzzed_files_never_crash(reference_file):
    """Byte flips, truncations and inserted garbage in a valid file: each read either works
    (then the tensors read fully) or raises ValueError / TypeError."""
    path, _, _ = reference_file
    good = path.read_bytes()
    rnd = random.Random(7)
    outcomes = {"ok": 0, "error": 0}
    for i in range(400):
        data = bytearray(good)
        kind = i % 4
        if kind == 0:
            for _ in range(rnd.randint(1, 8)):
                data[rnd.randrange(min(len(data), 700))] = rnd.randrange(256)
        elif kind == 1:
            data = data[:rnd.randrange(len(data))]
        elif kind == 2:
            pos = rnd.randrange(min(len(data), 700))
            data[pos:pos + 8] = struct.pack("<Q", rnd.choice([0, 1, 2**31, 2**63 - 1, 2**64 - 1]))
        else:
            pos = rnd.randrange(len(data))
            data[pos:pos] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 16)))
        try:
            f = GGUFReader(bytes(data))
            f.metadata
            for name in f.tensor_names:
                try:
                    f.dequantize(name)
                except TypeError:
                    f.tensor(name)
            outcomes["ok"] += 1
        except (ValueError, TypeError):
            outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 0, outcomes


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(RuntimeError, match="nope.gguf"):
        GGUFReader(tmp_path / "nope.gguf")
