"""Writes Llama-shaped GGUF files with random weights (no weights can be downloaded here):
TinyLlama-1.1B's shape by default, in Q8_0, Q4_0, BF16 or F32, with a dummy SentencePiece
vocabulary so that llama.cpp loads the file too. Quantisation runs through kiln.quant (byte-
identical to gguf-py's, tests/python/test_gguf_quant.py); gguf-py's GGUFWriter writes the file.

usage: python benchmarks/llm_gguf_writer.py OUT.gguf [--type q8_0] [--layers 22] [--dim 2048]
"""
import argparse
import time

import numpy as np

TINYLLAMA = dict(vocab=32000, dim=2048, ffn=5632, heads=32, kv_heads=4, layers=22, context=2048)


def dummy_vocab(n_vocab):
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = 0
    while len(toks) < n_vocab:  # "▁a", "▁b", ..., "▁aa", ... : distinct pieces
        s, k = "", i
        while True:
            s = letters[k % 26] + s
            k = k // 26 - 1
            if k < 0:
                break
        toks.append("\u2581" + s)
        types.append(1)
        i += 1
    scores = [0.0] * 259 + [-float(k) for k in range(n_vocab - 259)]
    return toks, scores, types


def write_llama_gguf(path, qtype="q8_0", seed=0, **shape):
    import gguf
    import kiln
    cfg = dict(TINYLLAMA, **shape)
    qtype = qtype.upper()
    raw_type = getattr(gguf.GGMLQuantizationType, qtype)
    head_dim = cfg["dim"] // cfg["heads"]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"random-llama-{qtype.lower()}")
    w.add_context_length(cfg["context"])
    w.add_embedding_length(cfg["dim"])
    w.add_block_count(cfg["layers"])
    w.add_feed_forward_length(cfg["ffn"])
    w.add_head_count(cfg["heads"])
    w.add_head_count_kv(cfg["kv_heads"])
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(cfg["vocab"])
    toks, scores, types = dummy_vocab(cfg["vocab"])
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    gen = kiln.Generator().manual_seed(seed)

    def matrix(name, rows, cols):
        x = kiln.randn(rows, cols, generator=gen) * 0.02
        if qtype in ("Q8_0", "Q4_0"):
            w.add_tensor(name, kiln.quant.quantize(x, qtype).raw.numpy(), raw_dtype=raw_type)
        elif qtype == "BF16":
            u = x.numpy().view(np.uint32)  # round to nearest even, keep the high 16 bits
            bits = ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)
            w.add_tensor(name, bits, raw_shape=(rows, cols), raw_dtype=raw_type)
        else:
            w.add_tensor(name, x.numpy())

    def norm(name):
        w.add_tensor(name, np.ones(cfg["dim"], dtype=np.float32))

    D, F, kv = cfg["dim"], cfg["ffn"], cfg["kv_heads"] * head_dim
    matrix("token_embd.weight", cfg["vocab"], D)
    for i in range(cfg["layers"]):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight")
        matrix(p + "attn_q.weight", D, D)
        matrix(p + "attn_k.weight", kv, D)
        matrix(p + "attn_v.weight", kv, D)
        matrix(p + "attn_output.weight", D, D)
        norm(p + "ffn_norm.weight")
        matrix(p + "ffn_gate.weight", F, D)
        matrix(p + "ffn_up.weight", F, D)
        matrix(p + "ffn_down.weight", D, F)
    norm("output_norm.weight")
    matrix("output.weight", cfg["vocab"], D)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--type", default="q8_0", choices=["q8_0", "q4_0", "bf16", "f32"])
    ap.add_argument("--layers", type=int, default=TINYLLAMA["layers"])
    ap.add_argument("--dim", type=int, default=TINYLLAMA["dim"])
    ap.add_argument("--ffn", type=int, default=TINYLLAMA["ffn"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.time()
    write_llama_gguf(a.out, a.type, a.seed, layers=a.layers, dim=a.dim, ffn=a.ffn)
    print(f"wrote {a.out} in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
