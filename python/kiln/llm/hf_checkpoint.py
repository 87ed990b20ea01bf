"""Llama-family models from Hugging Face checkpoint folders (config.json + *.safetensors or
pytorch_model*.bin), mapped onto the GGUF tensor names the model uses, optionally quantised
on load.

Hugging Face's Llama applies RoPE to the two halves of each head ("neox" rotation), where
GGUF files from llama.cpp's converter have their Q/K rows permuted for adjacent pairs; the
checkpoint's rows are kept as they are and the config says "neox" instead.
"""
import json
import os

from .. import _C
from ..quant import GGMLWeight
from ..serialization import load as _load
from .llama import LlamaConfig, LlamaModel

_ARCHITECTURES = ("llama", "qwen2", "mistral")

_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def config_from_hf(cfg: dict) -> LlamaConfig:
    """A LlamaConfig from a Hugging Face config.json dict."""
    arch = cfg.get("model_type")
    if arch not in _ARCHITECTURES:
        raise NotImplementedError(f"model_type {arch!r} is not supported (supported: "
                                  f"{', '.join(_ARCHITECTURES)})")
    if arch == "mistral" and cfg.get("sliding_window") not in (None, 0) and \
            cfg["sliding_window"] < cfg.get("max_position_embeddings", 0):
        raise NotImplementedError("mistral with sliding-window attention is not supported")
    # transformers 5 writes "rope_parameters" ({"rope_theta", "rope_type", "factor", ...});
    # older configs a top-level "rope_theta" and an optional "rope_scaling".
    rope = dict(cfg.get("rope_parameters") or {})
    scaling = cfg.get("rope_scaling") or rope
    kind = scaling.get("rope_type", scaling.get("type"))
    theta = rope.get("rope_theta", cfg.get("rope_theta", 10000.0))
    if kind not in (None, "default", "linear"):
        raise NotImplementedError(f"rope_scaling of type {kind!r} is not supported")

    def need(key):
        if key not in cfg:
            raise ValueError(f"config.json has no {key!r}")
        return cfg[key]

    n_heads = need("num_attention_heads")
    return LlamaConfig(
        vocab_size=need("vocab_size"), dim=need("hidden_size"),
        n_layers=need("num_hidden_layers"), n_heads=n_heads,
        n_kv_heads=cfg.get("num_key_value_heads") or n_heads,
        ffn_dim=need("intermediate_size"), head_dim=cfg.get("head_dim"),
        rope_theta=float(theta), rms_eps=float(need("rms_norm_eps")),
        context_length=cfg.get("max_position_embeddings", 4096), rope_style="neox",
        rope_scale=float(scaling.get("factor", 1.0)) if kind == "linear" else 1.0,
        architecture="qwen2" if arch == "qwen2" else "llama")


def _shards(folder, index_name, suffix):
    """The weight files of a checkpoint folder: those its index names, else every *suffix."""
    index = os.path.join(folder, index_name)
    if os.path.exists(index):
        with open(index) as f:
            return sorted(set(json.load(f)["weight_map"].values()))
    return sorted(n for n in os.listdir(folder) if n.endswith(suffix))


def _read_tensors(folder):
    # safetensors first (what save_pretrained writes by default); otherwise PyTorch's
    # pytorch_model*.bin, read weights-only (kiln never runs pickled code: decision 0103).
    files = _shards(folder, "model.safetensors.index.json", ".safetensors")
    if not files:
        files = [n for n in _shards(folder, "pytorch_model.bin.index.json", ".bin")
                 if n.startswith("pytorch_model")]
    if not files:
        raise ValueError(f"{folder!r} holds no .safetensors or pytorch_model*.bin files")
    tensors = {}
    for name in files:
        tensors.update(_load(os.path.join(folder, name), map_location="cpu"))
    return tensors


def weights_from_hf(tensors: dict, config: LlamaConfig) -> dict:
    """Hugging Face names -> the GGUF names LlamaModel takes (unknown names: ValueError)."""
    out, unknown = {}, []
    for name, t in tensors.items():
        if name == "model.embed_tokens.weight":
            out["token_embd.weight"] = t
        elif name == "model.norm.weight":
            out["output_norm.weight"] = t
        elif name == "lm_head.weight":
            out["output.weight"] = t
        elif name.startswith("model.layers."):
            i, _, rest = name[len("model.layers."):].partition(".")
            if rest in _LAYER_NAMES and i.isdigit():
                out[f"blk.{i}.{_LAYER_NAMES[rest]}"] = t
            elif not rest.endswith("rotary_emb.inv_freq"):  # a buffer old checkpoints saved
                unknown.append(name)
        else:
            unknown.append(name)
    if unknown:
        raise ValueError(f"unexpected tensors in the checkpoint: {', '.join(unknown[:8])}"
                         f"{' ...' if len(unknown) > 8 else ''}")
    return out


def from_pretrained(folder, *, dtype=None, quantize=None):
    """A LlamaModel from a Hugging Face checkpoint folder. dtype: the activations' dtype
    (default: bfloat16 if the checkpoint is bfloat16, else float32). quantize: "Q8_0" or
    "Q4_0" to keep the projection matrices (and the output matrix) as ggml blocks: half /
    a quarter of bfloat16's bytes to stream per token."""
    with open(os.path.join(folder, "config.json")) as f:
        config = config_from_hf(json.load(f))
    weights = weights_from_hf(_read_tensors(folder), config)
    if dtype is None:
        mats = [w for w in weights.values() if w.dim() == 2]
        dtype = _C.bfloat16 if mats and all(w.dtype == _C.bfloat16 for w in mats) else _C.float32
    if quantize is not None:
        for name, w in list(weights.items()):
            if w.dim() == 2 and name != "token_embd.weight" and w.shape[1] % 32 == 0:
                weights[name] = GGMLWeight.quantize(w.float(), quantize)
    return LlamaModel(config, weights, dtype=dtype)
