"""kiln.llm.llama: a Llama-family decoder for inference, from weights named as in GGUF files.

    config = LlamaConfig.from_gguf_metadata(reader.metadata, shapes)
    model = LlamaModel(config, weights, dtype=kiln.bfloat16)     # weights: GGUF name -> tensor
    cache = model.new_cache(batch=1, max_len=256)
    logits = model.forward(tokens, cache, start_pos=0, last_only=True)   # prefill
    logits = model.forward(next_token, cache, start_pos=n)               # one decode step

or simply `LlamaModel.from_gguf("model.gguf")`.

Conventions follow llama.cpp, whose files these weights come from:
- Linear weights are [out_features, in_features] (torch's order; kiln.gguf reports shapes so).
- RoPE for "llama" rotates ADJACENT pairs (x[2i], x[2i+1]) ("normal" style). llama.cpp's
  converter permutes the rows of attn_q / attn_k within each head so that this reproduces
  HuggingFace's rotate_half on the original weights. "qwen2" files are not permuted and use
  rotate_half ("neox" style) directly.
- "output.weight" absent means the output projection is tied to "token_embd.weight";
  "rope_freqs.weight" (Llama 3.1+) divides each rotary frequency by its factor.

A weight is a float kiln.Tensor, or a quantised weight: any object with `.linear(x)` (x @ W^T
in float32), e.g. kiln.quant.GGMLWeight; the embedding table may also be one if it has
`.dequantize_rows(ids)` or `.dequantize()`.
"""
from __future__ import annotations

import kiln
import kiln.nn.functional as F
from kiln import Tensor
from kiln.quant import GGMLWeight

from .llama_config import LlamaConfig  # noqa: F401  (re-exported: kiln.llm.llama.LlamaConfig)

_COMPUTE_DTYPES = (kiln.float32, kiln.bfloat16)
_WEIGHT_DTYPES = (kiln.float32, kiln.bfloat16, kiln.float16)


# --- weights -----------------------------------------------------------------------------

def _weight_spec(config):
    """GGUF tensor name -> (expected shape, required?, may be a quantised object?)."""
    c = config
    q_rows, kv_rows = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    spec = {
        "token_embd.weight": ((c.vocab_size, c.dim), True, True),
        "output_norm.weight": ((c.dim,), True, False),
        "output.weight": ((c.vocab_size, c.dim), False, True),
        "rope_freqs.weight": ((c.rope_dim // 2,), False, False),
    }
    for i in range(c.n_layers):
        p = f"blk.{i}."
        spec.update({
            p + "attn_norm.weight": ((c.dim,), True, False),
            p + "attn_q.weight": ((q_rows, c.dim), True, True),
            p + "attn_k.weight": ((kv_rows, c.dim), True, True),
            p + "attn_v.weight": ((kv_rows, c.dim), True, True),
            p + "attn_q.bias": ((q_rows,), False, False),
            p + "attn_k.bias": ((kv_rows,), False, False),
            p + "attn_v.bias": ((kv_rows,), False, False),
            p + "attn_output.weight": ((c.dim, q_rows), True, True),
            p + "ffn_norm.weight": ((c.dim,), True, False),
            p + "ffn_gate.weight": ((c.ffn_dim, c.dim), True, True),
            p + "ffn_up.weight": ((c.ffn_dim, c.dim), True, True),
            p + "ffn_down.weight": ((c.dim, c.ffn_dim), True, True),
        })
    return spec


def _names(names, limit=12):
    names = list(names)
    more = f" ... and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _check_weights(config, weights):
    """Every problem with the weights at once, as one ValueError, before anything is built."""
    spec = _weight_spec(config)
    problems = []
    missing = [n for n, (_, required, _) in spec.items() if required and n not in weights]
    if missing:
        problems.append(f"missing tensors: {_names(missing)}")
    unexpected = [n for n in weights if n not in spec]
    if unexpected:
        problems.append(f"unexpected tensors (not part of a {config.n_layers}-layer "
                        f"{config.architecture} model): {_names(unexpected)}")
    for i in range(config.n_layers):
        biases = [f"blk.{i}.attn_{x}.bias" in weights for x in "qkv"]
        if any(biases) and not all(biases):
            problems.append(f"blk.{i}: attn_q/attn_k/attn_v biases must be given all or none")
    for name, w in weights.items():
        if name in spec:
            problem = _check_weight(name, w, *spec[name])
            if problem:
                problems.append(problem)
    if problems:
        raise ValueError("LlamaModel: the weights do not match the config:\n  - "
                         + "\n  - ".join(problems))


def _check_weight(name, w, shape, _required, may_be_quantised):
    if isinstance(w, Tensor):
        if w.dtype not in _WEIGHT_DTYPES:
            return f"{name}: expected a float32, bfloat16 or float16 tensor, got {w.dtype}"
        given = tuple(w.shape)
    elif may_be_quantised and callable(getattr(w, "linear", None)):
        if name == "token_embd.weight" and not (hasattr(w, "dequantize_rows")
                                                or hasattr(w, "dequantize")):
            return (f"{name}: a quantised embedding table needs .dequantize_rows(ids) or "
                    f".dequantize(); {type(w).__name__} has neither")
        given = getattr(w, "shape", None)
        if given is None:          # a quantised object that does not say its shape
            return None
        given = tuple(int(s) for s in given)
    else:
        kind = "a float kiln.Tensor or an object with .linear(x)" if may_be_quantised \
            else "a float kiln.Tensor"
        return f"{name}: expected {kind}, got {type(w).__name__}"
    if given != shape:
        return f"{name}: expected shape {list(shape)}, got {list(given)}"
    return None


def _linear(x, weight, bias=None, *, residual=None, out_dtype=None):
    """x @ weight^T (+ bias) (+ residual), in x's dtype unless out_dtype says otherwise.

    weight is a float Tensor (already in the compute dtype) or a quantised weight whose
    .linear(x) returns float32. Tensor weights go through fused_linear, which adds the bias and
    the residual to the float32 sums before the one rounding."""
    if isinstance(weight, Tensor):
        return F.fused_linear(x, weight, bias, residual=residual, out_dtype=out_dtype)
    y = weight.linear(x)
    if bias is not None:
        y = y + bias
    if residual is not None:
        y = y + residual
    return y.to(out_dtype or x.dtype)


class _Layer:
    """One decoder block's weights, ready for the forward pass (in the compute dtype).

    When q/k/v (and gate/up) are all plain tensors they are concatenated at load into one
    weight, so that each block runs one projection instead of three (two): decoding is a
    chain of small ops, and fewer ops is what makes it fast."""
    __slots__ = ("attn_norm", "qkv", "q", "k", "v", "qkv_bias", "attn_output", "ffn_norm",
                 "gate_up", "gate", "up", "down")

    def __init__(self, weights, i, convert):
        def w(name):
            return weights.get(f"blk.{i}.{name}")

        self.attn_norm = convert(w("attn_norm.weight"))
        self.ffn_norm = convert(w("ffn_norm.weight"))
        self.attn_output = convert(w("attn_output.weight"))
        self.down = convert(w("ffn_down.weight"))
        q, k, v = (convert(w(f"attn_{x}.weight")) for x in "qkv")
        self.qkv = self.q = self.k = self.v = None
        if all(isinstance(t, Tensor) for t in (q, k, v)):
            self.qkv = kiln.cat([q, k, v], 0)
        else:
            self.q, self.k, self.v = q, k, v
        biases = [w(f"attn_{x}.bias") for x in "qkv"]
        self.qkv_bias = None if biases[0] is None else kiln.cat([convert(b) for b in biases], 0)
        gate, up = convert(w("ffn_gate.weight")), convert(w("ffn_up.weight"))
        self.gate_up = self.gate = self.up = None
        if isinstance(gate, Tensor) and isinstance(up, Tensor):
            self.gate_up = kiln.cat([gate, up], 0)
        else:
            self.gate, self.up = gate, up

    def project_qkv(self, h):
        """[B, T, dim] -> [B, T, (n_heads + 2 n_kv_heads) * head_dim]"""
        if self.qkv is not None:
            return _linear(h, self.qkv, self.qkv_bias)
        qkv = kiln.cat([_linear(h, w) for w in (self.q, self.k, self.v)], -1)
        return qkv if self.qkv_bias is None else qkv + self.qkv_bias

    def feed_forward(self, h, residual, ffn_dim):
        """residual + down(silu(gate(h)) * up(h))"""
        if self.gate_up is not None:
            gate_up = _linear(h, self.gate_up)
            gate, up = gate_up[..., :ffn_dim], gate_up[..., ffn_dim:]
        else:
            gate, up = _linear(h, self.gate), _linear(h, self.up)
        return _linear(F.silu(gate) * up, self.down, residual=residual)


# --- rotary position embedding -----------------------------------------------------------

class _Rotary:
    """RoPE as out = x * cos + partner(x) * sin, with tables laid out per dimension:
    "normal" pairs dimension 2i with 2i+1, "neox" pairs i with i + rope_dim/2; the sin table
    carries the sign (-sin on the first of each pair). Tables are computed in float64 and
    grown on demand (doubling), so a 128k-token context costs nothing until it is used."""

    def __init__(self, config, freq_factors, dtype, device="cpu"):
        self.rope_dim, self.head_dim = config.rope_dim, config.head_dim
        self.style, self.dtype, self.device = config.rope_style, dtype, device
        inv_freq = kiln.tensor([config.rope_theta ** (-2.0 * i / self.rope_dim)
                                for i in range(self.rope_dim // 2)], dtype=kiln.float64)
        if freq_factors is not None:       # Llama 3.1+: per-frequency divisors
            inv_freq = inv_freq / freq_factors.cpu().to(kiln.float64)
        self.inv_freq = inv_freq / config.rope_scale    # linear scaling: positions / scale
        self.cos = self.sin = None
        self.capacity = 0
        self.max_positions = config.context_length

    def tables(self, start, length):
        """cos, signed sin for positions [start, start + length): [length, 1, rope_dim]."""
        end = start + length
        if end > self.capacity:
            self._grow(end)
        return self.cos[start:end], self.sin[start:end]

    def _grow(self, needed):
        capacity = max(needed, min(self.max_positions, max(64, 2 * self.capacity)))
        angles = kiln.outer(kiln.arange(capacity, dtype=kiln.float64), self.inv_freq)
        cos, sin = angles.cos(), angles.sin()
        if self.style == "normal":
            cos = cos.repeat_interleave(2, -1)
            sin = kiln.stack([-sin, sin], -1).flatten(-2)
        else:
            cos = kiln.cat([cos, cos], -1)
            sin = kiln.cat([-sin, sin], -1)
        self.cos = cos.unsqueeze(1).to(self.dtype).to(self.device)
        self.sin = sin.unsqueeze(1).to(self.dtype).to(self.device)
        self.capacity = capacity

    def apply(self, x, cos, sin):
        """x [B, T, heads, head_dim] -> rotated copy (dimensions past rope_dim unchanged)."""
        if self.rope_dim < self.head_dim:
            rotated = self.apply(x[..., :self.rope_dim], cos, sin)
            return kiln.cat([rotated, x[..., self.rope_dim:]], -1)
        if self.style == "normal":    # swap each adjacent pair
            partner = x.unflatten(-1, (self.rope_dim // 2, 2)).flip(-1).flatten(-2)
        else:                         # swap the two halves
            partner = x.roll(self.rope_dim // 2, -1)
        return kiln.addcmul(x * cos, partner, sin)


# --- key/value cache ---------------------------------------------------------------------

class KVCache:
    """Keys and values of every layer, preallocated as [batch, n_kv_heads, max_len, head_dim]
    so that decoding writes in place and never reallocates. `length` is how many positions
    hold valid entries (forward sets it to start_pos + tokens)."""

    def __init__(self, n_layers, batch, n_kv_heads, max_len, head_dim, dtype, device="cpu"):
        shape = (batch, n_kv_heads, max_len, head_dim)
        self.keys = [kiln.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.values = [kiln.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.batch, self.max_len, self.length = batch, max_len, 0

    def reset(self):
        self.length = 0


# --- the model ---------------------------------------------------------------------------

class LlamaModel:
    """device: where the weights, cache and computation live ("cpu", or "xpu" for the GPU
    backend). On xpu, kiln.quant.GGMLWeight matrices of the types ggml_linear has kernels for
    (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) stay quantised, their blocks moved to the device; other
    quantised weights are dequantised to `dtype` at load (decision 0087)."""

    def __init__(self, config: LlamaConfig, weights: dict, *, dtype=kiln.float32, device="cpu"):
        if dtype not in _COMPUTE_DTYPES:
            raise ValueError(f"LlamaModel: dtype must be kiln.float32 or kiln.bfloat16, "
                             f"got {dtype}")
        if not isinstance(config, LlamaConfig):
            raise TypeError(f"LlamaModel: config must be a LlamaConfig, got "
                            f"{type(config).__name__}")
        _check_weights(config, weights)
        self.config, self.dtype = config, dtype
        self.device = kiln.device(device) if isinstance(device, str) else device
        on_cpu = self.device.type == "cpu"
        converted = {}

        def convert(w):
            """Tensors to the compute dtype and the device (once per tensor: a tied table is
            shared); off the CPU, quantised weights move there as blocks where the device
            multiplies them in that format, else they are dequantised."""
            if w is None:
                return w
            if not isinstance(w, Tensor):
                if on_cpu:
                    return w
                if id(w) not in converted:
                    if isinstance(w, GGMLWeight) and w.has_kernel:
                        converted[id(w)] = w.to(self.device)
                    else:
                        converted[id(w)] = w.dequantize().to(dtype).contiguous().to(self.device)
                return converted[id(w)]
            if w.dtype == dtype and w.device == self.device:
                return w
            if id(w) not in converted:
                converted[id(w)] = w.to(dtype).contiguous().to(self.device)
            return converted[id(w)]

        self._embedding = self._embedding_table(weights["token_embd.weight"], convert)
        self._output_norm = convert(weights["output_norm.weight"])
        # Tied output: the embedding weight itself (a quantised table keeps its fast .linear).
        self._output = convert(weights.get("output.weight", weights["token_embd.weight"]))
        self._layers = [_Layer(weights, i, convert) for i in range(config.n_layers)]
        self._rotary = _Rotary(config, weights.get("rope_freqs.weight"), dtype, self.device)
        self._groups = config.n_heads // config.n_kv_heads

    @classmethod
    def from_gguf(cls, source, *, dtype=kiln.float32, device="cpu"):
        """A model from a GGUF file path (or a kiln.gguf.GGUFReader). Quantised weights stay
        quantised (kiln.quant.GGMLWeight)."""
        from kiln.gguf import GGUFReader
        reader = source if isinstance(source, GGUFReader) else GGUFReader(source)
        shapes = {n: reader.tensor_info(n).shape for n in reader.tensor_names}
        config = LlamaConfig.from_gguf_metadata(reader.metadata, shapes)
        return cls(config, reader.tensors(), dtype=dtype, device=device)

    @staticmethod
    def _embedding_table(table, convert):
        if isinstance(table, Tensor) or hasattr(table, "dequantize_rows"):
            return convert(table)
        # A quantised table without row access: dequantised once at load.
        return convert(table.dequantize())

    def new_cache(self, batch=1, max_len=None) -> KVCache:
        """An empty cache for `batch` sequences of up to max_len positions (default: the
        context length; for long-context models pass what you need: the cache is
        2 * n_layers * batch * n_kv_heads * max_len * head_dim values)."""
        c = self.config
        max_len = c.context_length if max_len is None else max_len
        if not isinstance(batch, int) or batch <= 0:
            raise ValueError(f"new_cache: batch must be a positive integer, got {batch!r}")
        if not isinstance(max_len, int) or not 0 < max_len <= c.context_length:
            raise ValueError(f"new_cache: max_len must be in [1, {c.context_length}] (the "
                             f"context length), got {max_len!r}")
        return KVCache(c.n_layers, batch, c.n_kv_heads, max_len, c.head_dim, self.dtype, self.device)

    def __call__(self, tokens, cache=None, start_pos=None, *, last_only=False):
        return self.forward(tokens, cache, start_pos, last_only=last_only)

    def forward(self, tokens, cache: KVCache | None = None, start_pos: int | None = None, *,
                last_only=False):
        """Logits (float32) [B, T, vocab] for tokens [B, T] at positions start_pos.. (or
        [B, 1, vocab] for the last position only, with last_only=True).

        With a cache, the new keys/values are written at [start_pos, start_pos + T) and the
        tokens attend to every cached position before them; start_pos defaults to
        cache.length (continue where the last call stopped). Without a cache, start_pos is 0
        and the tokens attend to each other causally."""
        tokens = self._check_tokens(tokens)
        batch, length = tokens.shape
        start_pos = self._check_positions(cache, start_pos, batch, length)
        c = self.config
        with kiln.inference_mode():
            x = self._embed(tokens)
            cos, sin = self._rotary.tables(start_pos, length)
            mask = self._causal_mask(start_pos, length)
            for i, layer in enumerate(self._layers):
                kv = (cache.keys[i], cache.values[i]) if cache is not None else None
                x = self._attention(layer, x, kv, start_pos, cos, sin, mask)
                h = F.rms_norm(x, (c.dim,), layer.ffn_norm, c.rms_eps)
                x = layer.feed_forward(h, x, c.ffn_dim)
            if last_only:
                x = x[:, -1:]
            x = F.rms_norm(x, (c.dim,), self._output_norm, c.rms_eps)
            logits = _linear(x, self._output, out_dtype=kiln.float32)
        if cache is not None:
            cache.length = start_pos + length
        return logits

    def _check_tokens(self, tokens):
        if not isinstance(tokens, Tensor):
            raise TypeError(f"LlamaModel.forward: tokens must be a kiln.Tensor of token ids "
                            f"[batch, length], got {type(tokens).__name__}")
        if tokens.dim() != 2 or tokens.shape[1] == 0 or tokens.shape[0] == 0:
            raise ValueError(f"LlamaModel.forward: tokens must be [batch, length] with both "
                             f"non-zero, got shape {list(tokens.shape)}")
        if tokens.dtype not in (kiln.int64, kiln.int32):
            raise ValueError(f"LlamaModel.forward: tokens must be int64, got {tokens.dtype}")
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.config.vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"LlamaModel.forward: token id {bad} is outside the vocabulary "
                             f"[0, {self.config.vocab_size})")
        return tokens.to(kiln.int64).to(self.device)

    def _check_positions(self, cache, start_pos, batch, length):
        if cache is None:
            if start_pos not in (None, 0):
                raise ValueError("LlamaModel.forward: start_pos needs a cache holding the "
                                 "earlier positions")
            if length > self.config.context_length:
                raise ValueError(f"LlamaModel.forward: {length} tokens exceed the context "
                                 f"length {self.config.context_length}")
            return 0
        start_pos = cache.length if start_pos is None else start_pos
        if cache.batch != batch:
            raise ValueError(f"LlamaModel.forward: the cache holds batch {cache.batch}, the "
                             f"tokens have batch {batch}")
        if not isinstance(start_pos, int) or not 0 <= start_pos <= cache.length:
            raise ValueError(f"LlamaModel.forward: start_pos must be in [0, {cache.length}] "
                             f"(the cache's filled length), got {start_pos!r}")
        if start_pos + length > cache.max_len:
            raise ValueError(f"LlamaModel.forward: positions {start_pos}..{start_pos + length - 1}"
                             f" do not fit the cache's max_len {cache.max_len}")
        return start_pos

    def _embed(self, tokens):
        table = self._embedding
        if isinstance(table, Tensor):
            return F.embedding(tokens, table)
        return table.dequantize_rows(tokens).to(self.dtype)

    def _causal_mask(self, start_pos, length):
        """Boolean [groups * T, start_pos + T] mask (True = attend) for the folded query rows
        (see _attention), or None for a single new token, which sees every cached position."""
        if length == 1:
            return None
        query_pos = kiln.arange(start_pos, start_pos + length, device=self.device).repeat(self._groups)
        key_pos = kiln.arange(start_pos + length, device=self.device)
        return key_pos.unsqueeze(0) <= query_pos.unsqueeze(1)

    def _attention(self, layer, x, kv_cache, start_pos, cos, sin, mask):
        """x + attn_output(attention(rope(q), rope(k), v)) for x [B, T, dim]."""
        c = self.config
        batch, length, _ = x.shape
        n_heads, n_kv, head_dim = c.n_heads, c.n_kv_heads, c.head_dim
        h = F.rms_norm(x, (c.dim,), layer.attn_norm, c.rms_eps)
        qkv = layer.project_qkv(h).view(batch, length, n_heads + 2 * n_kv, head_dim)
        qk = self._rotary.apply(qkv[:, :, :n_heads + n_kv], cos, sin)   # q and k in one go
        q = qk[:, :, :n_heads].transpose(1, 2)                  # [B, n_heads, T, head_dim]
        k = qk[:, :, n_heads:].transpose(1, 2)                  # [B, n_kv, T, head_dim]
        v = qkv[:, :, n_heads + n_kv:].transpose(1, 2)
        if kv_cache is not None:
            keys, values = kv_cache
            end = start_pos + length
            keys.narrow(2, start_pos, length).copy_(k)
            values.narrow(2, start_pos, length).copy_(v)
            k, v = keys.narrow(2, 0, end), values.narrow(2, 0, end)
        # Grouped-query attention with the query heads that share a kv head folded into rows:
        # [B, n_heads, T, hd] -> [B, n_kv, groups * T, hd] (row g * T + t). SDPA then needs no
        # enable_gqa, whose one-token decode path measured 5-10x slower than this.
        q = q.reshape(batch, n_kv, self._groups * length, head_dim)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        out = out.view(batch, n_heads, length, head_dim).transpose(1, 2)
        out = out.reshape(batch, length, n_heads * head_dim)
        return _linear(out, layer.attn_output, residual=x)
