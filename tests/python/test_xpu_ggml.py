"""ggml block-quantised weights on the xpu backend (decision 0087): kiln.quant.GGMLWeight's
product on the device for Q8_0, Q4_0, Q4_K, Q5_K and Q6_K against torch float64 on weights
dequantised by gguf-py (an independent reader of the block formats) and against the CPU
kernel; and a quantised Llama GGUF file run on xpu against the CPU, with its weights kept as
blocks on the device. Runs on PoCL where there is no GPU (conftest sets
KILN_XPU_DEVICE_TYPES=all)."""
import numpy as np
import pytest
import torch

import kiln
from kiln.gguf import GGUFReader
from kiln.llm.generate import generate
from kiln.llm.llama import LlamaModel
from kiln.quant import GGML_TYPES, GGMLWeight

gguf = pytest.importorskip("gguf")

XPU = "xpu"
TYPES = ["Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"]
# Byte offsets of each block's float16 scales, and their range: random bytes then give
# weights of root mean square about 0.1 for every type.
SCALES = {"Q8_0": ([0], 0.0023), "Q4_0": ([0], 0.0375), "Q4_K": ([0, 2], 0.00058),
          "Q5_K": ([0, 2], 0.00028), "Q6_K": ([208], 0.000135)}


def random_blocks(qtype, rows, cols, rng, scale=1.0):
    """Random bytes in every position (values, packed sub-block scales, high bits) with finite
    float16 block scales: uint8 [rows, row_bytes]."""
    _, elems, nbytes, _ = GGML_TYPES[qtype]
    blocks = rng.integers(0, 256, (rows, cols // elems, nbytes), dtype=np.uint8)
    offsets, limit = SCALES[qtype]
    for off in offsets:
        d = (rng.uniform(-limit, limit, blocks.shape[:2]) * scale).astype(np.float16)
        blocks[:, :, off:off + 2] = d[..., None].view(np.uint8)
    return blocks.reshape(rows, -1)


def to_kiln(a):
    return kiln.from_dlpack(torch.from_numpy(np.ascontiguousarray(a))).clone()


def dequantized(qtype, raw):
    """float64 [rows, cols] by gguf-py's numpy dequantiser."""
    return torch.from_numpy(gguf.quants.dequantize(raw, getattr(gguf.GGMLQuantizationType, qtype))).double()


def k2t(t):
    return torch.from_dlpack(t.cpu())


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("rows", [1, 3, 8, 9, 33])
def test_linear_on_the_device(qtype, rows):
    rng = np.random.default_rng([TYPES.index(qtype), rows])
    K = 512 if qtype.endswith("_K") else 1056
    N = 43
    raw = random_blocks(qtype, N, K, rng)
    x = rng.standard_normal((rows, K)).astype(np.float32)
    weight = GGMLWeight(to_kiln(raw), qtype, (N, K))
    on_device = weight.to(XPU)
    assert on_device.raw.device.type == "xpu" and on_device.type == qtype and on_device.has_kernel
    got = on_device.linear(to_kiln(x).to(XPU))
    assert got.device.type == "xpu" and got.dtype == kiln.float32 and tuple(got.shape) == (rows, N)
    w = dequantized(qtype, raw)
    want = torch.from_numpy(x).double() @ w.T
    mag = torch.from_numpy(x).double().abs() @ w.abs().T   # sum |x_k w_k|: the sums' scale
    err = (k2t(got).double() - want).abs()
    assert (err <= 1e-5 * mag + 1e-6).all(), float((err / mag).max())
    # The CPU kernel rounds the activations to 8 bits per block (bfloat16 from 16 rows).
    cpu = k2t(weight.linear(to_kiln(x))).double()
    assert ((k2t(got).double() - cpu).abs() <= 0.02 * mag + 1e-6).all()


def test_bfloat16_input_bias_and_batch_dims():
    rng = np.random.default_rng(3)
    raw = random_blocks("Q6_K", 17, 256, rng)
    x = rng.standard_normal((2, 5, 256)).astype(np.float32)
    b = rng.standard_normal(17).astype(np.float32)
    w = GGMLWeight(to_kiln(raw), "Q6_K", (17, 256)).to(XPU)
    xb = to_kiln(x).to(XPU).to(kiln.bfloat16)
    got = k2t(w.linear(xb, to_kiln(b).to(XPU))).double()
    xd = torch.from_numpy(x).bfloat16().double()
    want = xd @ dequantized("Q6_K", raw).T + torch.from_numpy(b).double()
    assert got.shape == (2, 5, 17)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_dequantize_and_rows_on_the_device():
    rng = np.random.default_rng(4)
    raw = random_blocks("Q4_K", 6, 512, rng)
    w = GGMLWeight(to_kiln(raw), "Q4_K", (6, 512)).to(XPU)
    dense = w.dequantize()
    assert dense.device.type == "xpu"
    ref = dequantized("Q4_K", raw)
    torch.testing.assert_close(k2t(dense).double(), ref, rtol=1e-6, atol=1e-7)
    ids = to_kiln(np.array([[5, 0], [2, 5]], dtype=np.int64)).to(XPU)
    rows = w.dequantize_rows(ids)
    assert rows.device.type == "xpu" and tuple(rows.shape) == (2, 2, 512)
    torch.testing.assert_close(k2t(rows).double(), ref[torch.tensor([[5, 0], [2, 5]])], rtol=1e-6, atol=1e-7)


def test_a_type_without_a_device_kernel_is_a_clear_error():
    raw = np.zeros((3, 64 // 32 * 20), dtype=np.uint8)   # Q4_1: 20 bytes per 32 values
    w = GGMLWeight(to_kiln(raw), "Q4_1", (3, 64)).to(XPU)
    with pytest.raises(NotImplementedError, match="Q4_1"):
        w.linear(kiln.zeros(2, 64).to(XPU))


# --- a quantised Llama file on the device ------------------------------------------------

DIM, FFN, HEADS, KV_HEADS, LAYERS, VOCAB = 256, 512, 4, 2, 2, 320
# One type per matrix, as the llama.cpp mixes do (Q6_K output, K-quants and legacy types).
MATRIX_TYPES = {"token_embd": "Q8_0", "output": "Q6_K", "attn_q": "Q4_K", "attn_k": "Q5_K",
                "attn_v": "Q6_K", "attn_output": "Q4_0", "ffn_gate": "Q4_K", "ffn_up": "Q5_K",
                "ffn_down": "Q8_0"}


def write_quantised_llama(path, seed=0):
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(64)
    w.add_embedding_length(DIM)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(DIM // HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_token_list([f"t{i}" for i in range(VOCAB)])
    kv = KV_HEADS * DIM // HEADS

    def matrix(name, kind, rows, cols):
        qtype = MATRIX_TYPES[kind]
        # Weights of root mean square 0.5 / sqrt(cols): activations stay O(1) through the layers.
        raw = random_blocks(qtype, rows, cols, rng, scale=5.0 / np.sqrt(cols))
        w.add_tensor(name, raw, raw_dtype=getattr(gguf.GGMLQuantizationType, qtype))

    matrix("token_embd.weight", "token_embd", VOCAB, DIM)
    for i in range(LAYERS):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", (1 + 0.2 * rng.standard_normal(DIM)).astype(np.float32))
        matrix(p + "attn_q.weight", "attn_q", DIM, DIM)
        matrix(p + "attn_k.weight", "attn_k", kv, DIM)
        matrix(p + "attn_v.weight", "attn_v", kv, DIM)
        matrix(p + "attn_output.weight", "attn_output", DIM, DIM)
        w.add_tensor(p + "ffn_norm.weight", (1 + 0.2 * rng.standard_normal(DIM)).astype(np.float32))
        matrix(p + "ffn_gate.weight", "ffn_gate", FFN, DIM)
        matrix(p + "ffn_up.weight", "ffn_up", FFN, DIM)
        matrix(p + "ffn_down.weight", "ffn_down", DIM, FFN)
    w.add_tensor("output_norm.weight", np.ones(DIM, dtype=np.float32))
    matrix("output.weight", "output", VOCAB, DIM)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_quantised_llama_file_on_the_device(tmp_path):
    path = tmp_path / "mix.gguf"
    write_quantised_llama(path)
    cpu = LlamaModel.from_gguf(path)
    dense = LlamaModel(cpu.config, GGUFReader(path).tensors(dequantize=True))
    kiln.xpu.synchronize()
    before = kiln.xpu.memory_allocated()
    xpu = LlamaModel.from_gguf(path, device=XPU)
    kiln.xpu.synchronize()
    quantised_bytes = kiln.xpu.memory_allocated() - before
    xpu_dense = LlamaModel(cpu.config, GGUFReader(path).tensors(dequantize=True), device=XPU)
    kiln.xpu.synchronize()
    dense_bytes = kiln.xpu.memory_allocated() - before - quantised_bytes

    # The matrices are blocks on the device, not dense tensors: the mix takes about 0.7 bytes
    # per value against 4 for float32.
    layer = xpu._layers[0]
    for name, kind in (("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v"), ("gate", "ffn_gate"),
                       ("up", "ffn_up"), ("down", "ffn_down"), ("attn_output", "attn_output")):
        weight = getattr(layer, name)
        assert isinstance(weight, GGMLWeight), name
        assert weight.type == MATRIX_TYPES[kind] and weight.raw.device.type == "xpu", name
    assert isinstance(xpu._output, GGMLWeight) and xpu._output.raw.device.type == "xpu"
    assert quantised_bytes < 0.3 * dense_bytes, (quantised_bytes, dense_bytes)

    ids = kiln.tensor([[1, 17, 250, 3, 99, 42, 7, 300, 12]], dtype=kiln.int64)
    before_fallbacks = kiln._C._total_fallback_calls()
    got = xpu(ids)
    assert got.device.type == "xpu" and kiln._C._total_fallback_calls() == before_fallbacks
    got = k2t(got).double()
    # Against the dense float32 model (what the device kernels compute, up to float32 sums).
    torch.testing.assert_close(got, k2t(dense(ids)).double(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got, k2t(xpu_dense(ids)).double(), rtol=1e-4, atol=1e-4)
    # Against the CPU's quantised kernels (8-bit activations): within their rounding.
    want = k2t(cpu(ids)).double()
    assert (got - want).abs().max() <= 0.05 * want.abs().max()
    # Greedy decoding through the cache (M = 1 products on the device, prompt of 9 rows).
    prompt = [1, 5, 9, 200]
    tokens = list(generate(xpu, prompt, 10))
    assert tokens == list(generate(dense, prompt, 10))
    assert tokens == list(generate(cpu, prompt, 10))
