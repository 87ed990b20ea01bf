"""LlamaConfig: the shape of a Llama-family decoder, from GGUF metadata (llama.cpp's keys)."""
from __future__ import annotations

from dataclasses import dataclass

# architecture -> RoPE style ("normal": adjacent pairs; "neox": first half with second half).
# "qwen2" differs from "llama" only by that and by its q/k/v biases (optional here for both).
# Mistral 7B files are written by llama.cpp's converter as "llama"; a file that says "mistral"
# comes from a newer architecture this module does not implement.
_ROPE_STYLE_BY_ARCHITECTURE = {"llama": "normal", "qwen2": "neox"}


@dataclass
class LlamaConfig:
    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    head_dim: int | None = None        # default dim // n_heads
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    context_length: int = 4096
    rope_dim: int | None = None        # rotated dimensions per head; default head_dim
    rope_style: str = "normal"         # "normal" (llama) or "neox" (qwen2), see module doc
    rope_scale: float = 1.0            # linear RoPE scaling: positions are divided by this
    architecture: str = "llama"

    def __post_init__(self):
        for name in ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim",
                     "context_length"):
            _require_positive_int(name, getattr(self, name))
        if self.head_dim is None:
            if self.dim % self.n_heads:
                raise ValueError(f"LlamaConfig: dim {self.dim} is not a multiple of n_heads "
                                 f"{self.n_heads}; give head_dim explicitly")
            self.head_dim = self.dim // self.n_heads
        _require_positive_int("head_dim", self.head_dim)
        if self.rope_dim is None:
            self.rope_dim = self.head_dim
        _require_positive_int("rope_dim", self.rope_dim)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"LlamaConfig: n_heads {self.n_heads} is not a multiple of "
                             f"n_kv_heads {self.n_kv_heads}")
        if self.rope_dim % 2 or self.rope_dim > self.head_dim:
            raise ValueError(f"LlamaConfig: rope_dim must be even and at most head_dim "
                             f"{self.head_dim}, got {self.rope_dim}")
        if self.rope_style not in ("normal", "neox"):
            raise ValueError(f"LlamaConfig: rope_style must be 'normal' or 'neox', "
                             f"got {self.rope_style!r}")
        for name in ("rope_theta", "rms_eps", "rope_scale"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"LlamaConfig: {name} must be a positive number, got {value!r}")

    @classmethod
    def from_gguf_metadata(cls, md: dict, tensor_shapes: dict | None = None) -> "LlamaConfig":
        """The config from a GGUF file's metadata (llama.cpp's keys). tensor_shapes (name ->
        shape) is only used for the vocabulary size when the metadata does not give it."""
        arch = md.get("general.architecture")
        if arch is None:
            raise ValueError("GGUF metadata has no 'general.architecture' key")
        if arch not in _ROPE_STYLE_BY_ARCHITECTURE:
            raise NotImplementedError(
                f"architecture {arch!r} is not supported by kiln.llm.llama (supported: "
                f"{', '.join(sorted(_ROPE_STYLE_BY_ARCHITECTURE))})")
        meta = _ArchMetadata(md, arch)
        if meta.optional_int("expert_count", 0):
            raise NotImplementedError(f"{arch!r} model with mixture-of-experts layers "
                                      f"({arch}.expert_count) is not supported")
        n_heads = meta.single_int("attention.head_count")
        head_dim = meta.optional_int("attention.key_length", None)
        value_dim = meta.optional_int("attention.value_length", head_dim)
        if head_dim is not None and value_dim != head_dim:
            raise NotImplementedError(f"key_length {head_dim} != value_length {value_dim} is "
                                      f"not supported")
        return cls(
            vocab_size=_vocab_size(md, meta, tensor_shapes),
            dim=meta.required_int("embedding_length"),
            n_layers=meta.required_int("block_count"),
            n_heads=n_heads,
            n_kv_heads=meta.single_int("attention.head_count_kv", n_heads),
            ffn_dim=meta.required_int("feed_forward_length"),
            head_dim=head_dim,
            rope_theta=meta.optional_float("rope.freq_base", 10000.0),
            # llama.cpp requires the epsilon too: a silent default would change every output.
            rms_eps=meta.required_float("attention.layer_norm_rms_epsilon"),
            context_length=meta.required_int("context_length"),
            rope_dim=meta.optional_int("rope.dimension_count", None),
            rope_style=_ROPE_STYLE_BY_ARCHITECTURE[arch],
            rope_scale=_rope_scale(meta),
            architecture=arch,
        )


def _require_positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"LlamaConfig: {name} must be a positive integer, got {value!r}")


class _ArchMetadata:
    """Typed reads of "{arch}.*" metadata keys, with errors naming the key."""

    def __init__(self, md, arch):
        self.md, self.arch = md, arch

    def _get(self, name, convert, default, required):
        key = f"{self.arch}.{name}"
        if key not in self.md:
            if required:
                raise ValueError(f"GGUF metadata is missing the required key {key!r}")
            return default
        value = self.md[key]
        try:
            if isinstance(value, (bool, str, list)):
                raise TypeError
            return convert(value)
        except (TypeError, ValueError):
            raise ValueError(f"GGUF metadata key {key!r}: expected a number, got {value!r}") \
                from None

    def required_int(self, name):
        return self._get(name, int, None, True)

    def optional_int(self, name, default):
        return self._get(name, int, default, False)

    def required_float(self, name):
        return self._get(name, float, None, True)

    def optional_float(self, name, default):
        return self._get(name, float, default, False)

    def single_int(self, name, default=None):
        """A per-model count that some files store per layer (an array): all equal is fine."""
        key = f"{self.arch}.{name}"
        value = self.md.get(key)
        if isinstance(value, list):
            if not value or any(v != value[0] for v in value):
                raise NotImplementedError(f"{key!r} differs between layers ({value}); "
                                          f"per-layer head counts are not supported")
            if not isinstance(value[0], int) or isinstance(value[0], bool):
                raise ValueError(f"GGUF metadata key {key!r}: expected integers, got {value!r}")
            return value[0]
        if default is not None:
            return self.optional_int(name, default)
        return self.required_int(name)


def _vocab_size(md, meta, tensor_shapes):
    size = meta.optional_int("vocab_size", None)
    if size is not None:
        return size
    if tensor_shapes and "token_embd.weight" in tensor_shapes:
        return int(tensor_shapes["token_embd.weight"][0])
    tokens = md.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list) and tokens:
        return len(tokens)
    raise ValueError(f"GGUF metadata gives no vocabulary size: none of '{meta.arch}.vocab_size', "
                     f"'tokenizer.ggml.tokens' or a 'token_embd.weight' shape")


def _rope_scale(meta):
    key = f"{meta.arch}.rope.scaling.type"
    kind = meta.md.get(key, "none")
    if kind == "none":
        return 1.0
    if kind == "linear":
        return meta.optional_float("rope.scaling.factor", 1.0)
    raise NotImplementedError(f"RoPE scaling {kind!r} ({key}) is not supported (only 'linear')")
