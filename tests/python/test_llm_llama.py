"""kiln.llm.llama / kiln.llm.generate against HuggingFace transformers (PyTorch): tiny random
Llama and Qwen2 models are converted here to GGUF names and shapes, as llama.cpp's converter
(convert_hf_to_gguf.py) does, and their logits and generations compared with HF's own."""
import math

import numpy as np
import pytest
import torch
import transformers

import kiln
from kiln.llm.generate import GenerationStats, Sampler, generate
from kiln.llm.llama import LlamaConfig, LlamaModel

transformers.logging.set_verbosity_error()

VOCAB, DIM, FFN = 300, 64, 160


# --- reference models and their conversion -----------------------------------------------

def hf_model(arch="llama", *, seed=0, layers=2, heads=4, kv_heads=2, theta=10000.0,
             tied=False, rope=None, context=128):
    """A tiny HF model with weights large enough for well-separated logits (greedy choices
    are then not near-ties) and non-trivial norm weights."""
    torch.manual_seed(seed)
    common = dict(vocab_size=VOCAB, hidden_size=DIM, intermediate_size=FFN,
                  num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv_heads, max_position_embeddings=context,
                  tie_word_embeddings=tied, initializer_range=0.1,
                  bos_token_id=None, eos_token_id=None, pad_token_id=None,
                  rope_parameters=dict(rope or {"rope_type": "default"}, rope_theta=theta))
    if arch == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    else:
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    return model.eval()


def to_kiln(t):
    return kiln.from_dlpack(t.detach().contiguous()).clone()


def permute_for_gguf(w, n_heads):
    """llama.cpp's converter reorders each head's rows of q/k so that rotating adjacent pairs
    reproduces HF's rotate_half."""
    head_dim = w.shape[0] // n_heads
    return w.reshape(n_heads, 2, head_dim // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_weights(model, arch="llama"):
    """The HF state dict under GGUF names (torch tensors)."""
    c = model.config
    sd = model.state_dict()
    w = {"token_embd.weight": sd["model.embed_tokens.weight"],
         "output_norm.weight": sd["model.norm.weight"]}
    if not c.tie_word_embeddings:
        w["output.weight"] = sd["lm_head.weight"]
    for i in range(c.num_hidden_layers):
        hf, g = f"model.layers.{i}.", f"blk.{i}."
        q, k = sd[hf + "self_attn.q_proj.weight"], sd[hf + "self_attn.k_proj.weight"]
        if arch == "llama":     # qwen2 files keep HF's order (llama.cpp uses NEOX RoPE there)
            q = permute_for_gguf(q, c.num_attention_heads)
            k = permute_for_gguf(k, c.num_key_value_heads)
        w[g + "attn_q.weight"], w[g + "attn_k.weight"] = q, k
        for x in "qkv":
            if hf + f"self_attn.{x}_proj.bias" in sd:
                w[g + f"attn_{x}.bias"] = sd[hf + f"self_attn.{x}_proj.bias"]
        names = {"attn_norm": "input_layernorm", "attn_v": "self_attn.v_proj",
                 "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
                 "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                 "ffn_down": "mlp.down_proj"}
        for gguf_name, hf_name in names.items():
            w[g + gguf_name + ".weight"] = sd[hf + hf_name + ".weight"]
    return w


def gguf_metadata(model, arch="llama"):
    c = model.config
    md = {"general.architecture": arch,
          f"{arch}.context_length": c.max_position_embeddings,
          f"{arch}.embedding_length": c.hidden_size,
          f"{arch}.block_count": c.num_hidden_layers,
          f"{arch}.feed_forward_length": c.intermediate_size,
          f"{arch}.attention.head_count": c.num_attention_heads,
          f"{arch}.attention.head_count_kv": c.num_key_value_heads,
          f"{arch}.rope.freq_base": float(c.rope_parameters["rope_theta"]),
          f"{arch}.attention.layer_norm_rms_epsilon": float(c.rms_norm_eps),
          f"{arch}.rope.dimension_count": c.hidden_size // c.num_attention_heads,
          f"{arch}.vocab_size": c.vocab_size}
    rope = c.rope_parameters
    if rope.get("rope_type") == "linear":
        md[f"{arch}.rope.scaling.type"] = "linear"
        md[f"{arch}.rope.scaling.factor"] = float(rope["factor"])
    return md


def llama3_rope_factors(model):
    """"rope_freqs.weight" as llama.cpp's converter computes it from a llama3 rope config."""
    c, rope = model.config, model.config.rope_parameters
    head_dim = c.hidden_size // c.num_attention_heads
    low_wavelen = rope["original_max_position_embeddings"] / rope["low_freq_factor"]
    high_wavelen = rope["original_max_position_embeddings"] / rope["high_freq_factor"]
    factors = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * math.pi * rope["rope_theta"] ** (i / head_dim)
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(rope["factor"])
        else:
            smooth = ((rope["original_max_position_embeddings"] / wavelen - rope["low_freq_factor"])
                      / (rope["high_freq_factor"] - rope["low_freq_factor"]))
            factors.append(1 / ((1 - smooth) / rope["factor"] + smooth))
    return torch.tensor(factors, dtype=torch.float32)


def kiln_model(model, arch="llama", dtype=kiln.float32, extra=None):
    weights = {n: to_kiln(t) for n, t in gguf_weights(model, arch).items()}
    weights.update(extra or {})
    config = LlamaConfig.from_gguf_metadata(gguf_metadata(model, arch))
    return LlamaModel(config, weights, dtype=dtype)


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.as_tensor(ids)).logits


def as_torch(t):
    return torch.from_numpy(t.numpy())


def assert_close(got, ref, rel=1e-4):
    """Max error within `rel` of the reference's largest magnitude."""
    got = as_torch(got) if isinstance(got, kiln.Tensor) else got
    assert got.shape == ref.shape
    err, scale = (got - ref).abs().max().item(), ref.abs().max().item()
    assert err <= rel * scale, f"max error {err:.3g} exceeds {rel} x {scale:.3g}"


def random_ids(length, batch=1, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (batch, length), generator=g)


def hf_greedy(model, prompt, n, **kw):
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=n, pad_token_id=0, **kw)
    return out[0, len(prompt):].tolist()


# --- logits ----------------------------------------------------------------------------

@pytest.mark.parametrize("kv_heads,theta,tied,layers", [
    (2, 10000.0, False, 2),     # grouped-query attention
    (4, 500000.0, True, 3),     # one kv head per query head, tied output
])
def test_full_forward_matches_hf(kv_heads, theta, tied, layers):
    hf = hf_model(kv_heads=kv_heads, theta=theta, tied=tied, layers=layers)
    model = kiln_model(hf)
    ids = random_ids(23)
    assert_close(model.forward(to_kiln(ids)), hf_logits(hf, ids))
    last = model.forward(to_kiln(ids), last_only=True)
    assert tuple(last.shape) == (1, 1, VOCAB) and last.dtype == kiln.float32
    assert_close(last, hf_logits(hf, ids)[:, -1:])


def test_cached_decode_matches_full_forward():
    hf = hf_model()
    model = kiln_model(hf)
    ids = random_ids(20)
    full = model.forward(to_kiln(ids))
    cache = model.new_cache(batch=1, max_len=32)
    steps = [model.forward(to_kiln(ids[:, :6]), cache, 0)]
    for t in range(6, 20):
        steps.append(model.forward(to_kiln(ids[:, t:t + 1]), cache, t))
    assert cache.length == 20
    decoded = as_torch(kiln.cat(steps, 1))
    assert_close(decoded, as_torch(full))
    assert_close(decoded, hf_logits(hf, ids))


def test_chunked_prefill_equals_one_prefill():
    hf = hf_model(kv_heads=2)
    model = kiln_model(hf)
    ids = to_kiln(random_ids(17))
    whole = model.forward(ids, model.new_cache(max_len=17), 0)
    cache = model.new_cache(max_len=17)
    first = model.forward(ids[:, :9], cache, 0)
    second = model.forward(ids[:, 9:], cache)          # start_pos defaults to cache.length
    assert_close(kiln.cat([first, second], 1), as_torch(whole))


def test_rewinding_the_cache_overwrites_later_positions():
    model = kiln_model(hf_model())
    ids = random_ids(10)
    other = random_ids(4, seed=7)
    cache = model.new_cache(max_len=16)
    model.forward(to_kiln(torch.cat([ids[:, :6], other], 1)), cache, 0)
    rewound = model.forward(to_kiln(ids[:, 6:]), cache, 6)    # replaces the 4 other tokens
    assert_close(rewound, as_torch(model.forward(to_kiln(ids)))[:, 6:])


def test_batch_of_two():
    hf = hf_model()
    model = kiln_model(hf)
    ids = random_ids(11, batch=2)
    ref = hf_logits(hf, ids)
    assert_close(model.forward(to_kiln(ids)), ref)
    cache = model.new_cache(batch=2, max_len=11)
    prefill = model.forward(to_kiln(ids[:, :8]), cache, 0)
    rest = [model.forward(to_kiln(ids[:, t:t + 1]), cache, t) for t in range(8, 11)]
    assert_close(kiln.cat([prefill] + rest, 1), ref)


def test_bfloat16_compute():
    hf = hf_model()
    model = kiln_model(hf, dtype=kiln.bfloat16)
    ids = random_ids(16)
    logits = model.forward(to_kiln(ids))
    assert logits.dtype == kiln.float32
    assert_close(logits, hf_logits(hf, ids), rel=0.05)
    cache = model.new_cache(max_len=16)
    assert cache.keys[0].dtype == kiln.bfloat16
    steps = [model.forward(to_kiln(ids[:, :10]), cache, 0)]
    steps += [model.forward(to_kiln(ids[:, t:t + 1]), cache, t) for t in range(10, 16)]
    assert_close(kiln.cat(steps, 1), hf_logits(hf, ids), rel=0.05)


def test_qwen2_neox_rope_and_biases_match_hf():
    hf = hf_model("qwen2", tied=True)
    model = kiln_model(hf, "qwen2")
    assert model.config.rope_style == "neox"
    ids = random_ids(15)
    assert_close(model.forward(to_kiln(ids)), hf_logits(hf, ids))
    prompt = random_ids(6, seed=3)[0].tolist()
    assert list(generate(model, prompt, 12)) == hf_greedy(hf, prompt, 12)


def test_llama3_rope_frequency_factors_match_hf():
    rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    hf = hf_model(theta=500000.0, rope=rope)
    model = kiln_model(hf, extra={"rope_freqs.weight": to_kiln(llama3_rope_factors(hf))})
    ids = random_ids(40)
    assert_close(model.forward(to_kiln(ids)), hf_logits(hf, ids))


def test_linear_rope_scaling_matches_hf():
    hf = hf_model(rope={"rope_type": "linear", "factor": 4.0})
    model = kiln_model(hf)
    assert model.config.rope_scale == 4.0
    ids = random_ids(30)
    assert_close(model.forward(to_kiln(ids)), hf_logits(hf, ids))


# --- quantised-weight objects and GGUF files -----------------------------------------------

class FakeQuantWeight:
    """Stands in for a quantised weight: .linear returns x @ W^T in float32 and counts calls."""

    def __init__(self, weight):
        self.weight = weight.float()
        self.shape = tuple(weight.shape)
        self.calls = 0

    def linear(self, x):
        self.calls += 1
        return kiln.matmul(x.float(), self.weight.t())

    def dequantize(self):
        return self.weight.clone()


def test_quantised_weight_objects_are_used():
    hf = hf_model(tied=True)
    weights = {n: to_kiln(t) for n, t in gguf_weights(hf).items()}
    fakes = {n: FakeQuantWeight(w) for n, w in weights.items()
             if w.dim() == 2 and not n.startswith("blk.1.")}   # layer 1 stays plain
    weights.update(fakes)
    config = LlamaConfig.from_gguf_metadata(gguf_metadata(hf))
    ids = random_ids(9)
    for dtype, rel in ((kiln.float32, 1e-4), (kiln.bfloat16, 0.05)):
        model = LlamaModel(config, weights, dtype=dtype)
        assert_close(model.forward(to_kiln(ids)), hf_logits(hf, ids), rel=rel)
    for name, fake in fakes.items():
        # The embedding table is dequantised at load; its .linear is the tied output.
        assert fake.calls == 2, name


def write_gguf(path, hf, quantise=False):
    import gguf
    md = gguf_metadata(hf)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(md["llama.context_length"])
    writer.add_embedding_length(md["llama.embedding_length"])
    writer.add_block_count(md["llama.block_count"])
    writer.add_feed_forward_length(md["llama.feed_forward_length"])
    writer.add_head_count(md["llama.attention.head_count"])
    writer.add_head_count_kv(md["llama.attention.head_count_kv"])
    writer.add_rope_freq_base(md["llama.rope.freq_base"])
    writer.add_layer_norm_rms_eps(md["llama.attention.layer_norm_rms_epsilon"])
    writer.add_rope_dimension_count(md["llama.rope.dimension_count"])
    writer.add_token_list([f"t{i}" for i in range(VOCAB)])     # the vocabulary size's source
    for name, t in gguf_weights(hf).items():
        array = t.float().numpy()
        if quantise and array.ndim == 2:
            raw = kiln.quant.quantize(kiln.tensor(array), "Q8_0").raw.numpy()
            writer.add_tensor(name, raw, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("quantise,rel", [(False, 1e-4), (True, 0.03)])
def test_from_gguf_file(tmp_path, quantise, rel):
    hf = hf_model()
    path = tmp_path / "tiny.gguf"
    write_gguf(path, hf, quantise)
    model = LlamaModel.from_gguf(path)
    assert model.config.vocab_size == VOCAB and model.config.n_kv_heads == 2
    ids = random_ids(18)
    assert_close(model.forward(to_kiln(ids)), hf_logits(hf, ids), rel=rel)


# --- generation ------------------------------------------------------------------------

@pytest.mark.parametrize("kv_heads,tied", [(2, False), (4, True)])
def test_greedy_generate_matches_hf(kv_heads, tied):
    hf = hf_model(kv_heads=kv_heads, tied=tied, seed=2)
    model = kiln_model(hf)
    prompt = random_ids(7, seed=5)[0].tolist()
    stream = generate(model, prompt, 25)
    assert list(stream) == hf_greedy(hf, prompt, 25)
    stats = stream.stats
    assert isinstance(stats, GenerationStats)
    assert stats.prompt_tokens == 7 and stats.generated_tokens == 25
    assert stats.stop_reason == "max_new_tokens"
    assert stats.prefill_ms > 0 and stats.decode_tokens_per_s > 0


def test_repetition_penalty_matches_hf():
    hf = hf_model(seed=4)
    model = kiln_model(hf)
    prompt = random_ids(5, seed=6)[0].tolist()
    got = list(generate(model, prompt, 20, repetition_penalty=1.8))
    assert got == hf_greedy(hf, prompt, 20, repetition_penalty=1.8)
    assert got != list(generate(model, prompt, 20))


def test_repetition_penalty_equals_hf_logits_processor():
    logits = torch.randn(VOCAB, generator=torch.Generator().manual_seed(0)) * 3
    history = [5, 7, 7, 42, 299, 0] + logits.topk(3).indices.tolist() + \
        (-logits).topk(3).indices.tolist()          # seen tokens of both signs
    ref = transformers.RepetitionPenaltyLogitsProcessor(1.8)(torch.tensor([history]),
                                                             logits[None].clone())[0]
    got = Sampler(repetition_penalty=1.8).penalize(to_kiln(logits), history)
    assert torch.equal(as_torch(got), ref)


def next_token_logits(hf, prompt, generated):
    """HF's logits for each generated token's position: [len(generated), vocab]."""
    ids = prompt + generated
    return hf_logits(hf, [ids])[0, len(prompt) - 1:len(ids) - 1]


def test_sampling_is_reproducible_and_respects_top_k_and_top_p():
    hf = hf_model(seed=3)
    model = kiln_model(hf)
    prompt = random_ids(5, seed=8)[0].tolist()
    first = list(generate(model, prompt, 30, temperature=1.0, top_k=4, seed=11))
    assert first == list(generate(model, prompt, 30, temperature=1.0, top_k=4, seed=11))
    assert first != list(generate(model, prompt, 30, temperature=1.0, top_k=4, seed=12))
    top4 = next_token_logits(hf, prompt, first).topk(4).indices
    assert all(t in row.tolist() for t, row in zip(first, top4))
    assert len(set(first)) > 1

    nucleus = list(generate(model, prompt, 30, temperature=1.0, top_p=0.6, seed=1))
    probs = next_token_logits(hf, prompt, nucleus).double().softmax(-1)
    for token, p in zip(nucleus, probs):
        # Inside the nucleus: the mass of strictly more likely tokens is below top_p.
        assert p[p > p[token]].sum().item() < 0.6 + 1e-6
    assert nucleus == list(generate(model, prompt, 30, temperature=1.0, top_p=0.6, seed=1))


def test_generation_stops_at_eos_stop_callback_and_context_length():
    hf = hf_model(seed=2, context=20)
    model = kiln_model(hf)
    prompt = random_ids(6, seed=9)[0].tolist()
    greedy = list(generate(model, prompt, 10))
    eos = greedy[3]
    expected = greedy[:greedy.index(eos) + 1]          # the eos token is yielded, then stop
    stream = generate(model, prompt, 10, eos_id=eos)
    assert list(stream) == expected and stream.stats.stop_reason == "eos"
    assert list(generate(model, prompt, 10, eos_id=[10**6, eos])) == expected

    stream = generate(model, prompt, 10, stop=lambda ids: len(ids) == 4)
    assert list(stream) == greedy[:4] and stream.stats.stop_reason == "stop"

    stream = generate(model, prompt, 100)              # 6 prompt tokens + 14 = context 20
    assert list(stream) == hf_greedy(hf, prompt, 14)
    assert stream.stats.stop_reason == "context_length"
    assert list(generate(model, prompt, 0)) == []


# --- errors ----------------------------------------------------------------------------

def test_config_errors():
    hf = hf_model()
    md = gguf_metadata(hf)
    for key in ("llama.embedding_length", "llama.block_count", "llama.context_length",
                "llama.attention.layer_norm_rms_epsilon", "general.architecture"):
        bad = {k: v for k, v in md.items() if k != key}
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            LlamaConfig.from_gguf_metadata(bad)
    with pytest.raises(NotImplementedError, match="gpt2"):
        LlamaConfig.from_gguf_metadata(dict(md, **{"general.architecture": "gpt2"}))
    with pytest.raises(NotImplementedError, match="mixture-of-experts"):
        LlamaConfig.from_gguf_metadata(dict(md, **{"llama.expert_count": 8}))
    with pytest.raises(ValueError, match="block_count"):
        LlamaConfig.from_gguf_metadata(dict(md, **{"llama.block_count": "two"}))
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        LlamaConfig.from_gguf_metadata(dict(md, **{"llama.attention.head_count_kv": 3}))

    # Defaults and the other sources of the vocabulary size.
    md = {k: v for k, v in md.items()
          if k not in ("llama.vocab_size", "llama.attention.head_count_kv")}
    config = LlamaConfig.from_gguf_metadata(md, {"token_embd.weight": (VOCAB, DIM)})
    assert (config.vocab_size, config.n_kv_heads, config.head_dim) == (VOCAB, 4, 16)
    md["tokenizer.ggml.tokens"] = ["x"] * 123
    assert LlamaConfig.from_gguf_metadata(md).vocab_size == 123
    del md["tokenizer.ggml.tokens"]
    with pytest.raises(ValueError, match="vocabulary size"):
        LlamaConfig.from_gguf_metadata(md)


def test_weight_errors():
    hf = hf_model()
    config = LlamaConfig.from_gguf_metadata(gguf_metadata(hf))
    weights = {n: to_kiln(t) for n, t in gguf_weights(hf).items()}

    missing = {n: w for n, w in weights.items() if n != "blk.1.ffn_up.weight"}
    with pytest.raises(ValueError, match=r"missing tensors: blk\.1\.ffn_up\.weight"):
        LlamaModel(config, missing)
    wrong = dict(weights, **{"blk.0.attn_k.weight": kiln.zeros(64, 64)})
    with pytest.raises(ValueError, match=r"blk\.0\.attn_k\.weight: expected shape \[32, 64\], "
                                         r"got \[64, 64\]"):
        LlamaModel(config, wrong)
    with pytest.raises(ValueError, match=r"unexpected tensors.*blk\.2\.attn_q\.weight"):
        LlamaModel(config, dict(weights, **{"blk.2.attn_q.weight": kiln.zeros(64, 64)}))
    int_norm = kiln.zeros(64, dtype=kiln.int64)
    with pytest.raises(ValueError, match="int64"):
        LlamaModel(config, dict(weights, **{"output_norm.weight": int_norm}))
    with pytest.raises(ValueError, match=r"output_norm\.weight: expected a float kiln\.Tensor"):
        LlamaModel(config, dict(weights, **{"output_norm.weight": np.ones(64)}))
    with pytest.raises(ValueError, match="dtype"):
        LlamaModel(config, weights, dtype=kiln.float16)

    model = LlamaModel(config, weights)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.forward(kiln.tensor([[1, VOCAB]]))
    with pytest.raises(ValueError, match=r"\[batch, length\]"):
        model.forward(kiln.tensor([1, 2]))
    cache = model.new_cache(max_len=4)
    with pytest.raises(ValueError, match="max_len 4"):
        model.forward(kiln.tensor([[1, 2, 3, 4, 5]]), cache, 0)
    with pytest.raises(ValueError, match="start_pos"):
        model.forward(kiln.tensor([[1]]), cache, 2)           # nothing cached before 2
    with pytest.raises(ValueError, match="batch"):
        model.forward(kiln.tensor([[1], [2]]), cache, 0)
    with pytest.raises(ValueError, match="max_len"):
        model.new_cache(max_len=10**6)
    with pytest.raises(ValueError, match="prompt"):
        list(generate(model, [], 3))
    with pytest.raises(ValueError, match="top_k"):
        generate(model, [1], 3, temperature=1.0, top_k=0)
