"""kiln.llm.convert: a Hugging Face Llama / Qwen2 / Mistral checkpoint folder as a GGUF file
that llama.cpp, transformers' GGUF loader and kiln.llm.load read.

    kiln.llm.convert.convert("Llama-folder", "model.gguf", type="q8_0")
    python -m kiln.llm convert Llama-folder model.gguf --type q8_0

Like llama.cpp's convert_hf_to_gguf.py: llama.cpp's metadata keys and tensor names; for
"llama" (and Mistral, written as "llama") the attn_q / attn_k rows permuted within each head,
because GGUF's llama RoPE rotates adjacent pairs where Hugging Face rotates the two halves of
a head ("qwen2" is neox-style in both, so left as it is). Norms and biases stay F32; matrices
get the requested type (a Q8_0 / Q4_0 matrix whose rows are not whole 32-value blocks: F16).
A byte-level BPE tokenizer.json (GPT-2, Llama 3, Qwen2 pre-tokenizers) becomes a "gpt2"
GGUF tokenizer; any other tokenizer is left out with a warning saying why.
"""
import json
import os
import warnings

from .. import _C
from ..gguf_writer import GGUFWriter
from .hf_checkpoint import _read_tensors, config_from_hf, weights_from_hf
from ._tokenizer_metadata import TOKEN_CONTROL, TOKEN_NORMAL, TOKEN_UNUSED, TOKEN_USER_DEFINED

# --type choices -> (ggml type of the matrices, llama.cpp's general.file_type (llama_ftype)).
FILE_TYPES = {"f32": ("F32", 0), "f16": ("F16", 1), "bf16": ("BF16", 32),
              "q8_0": ("Q8_0", 7), "q4_0": ("Q4_0", 2)}
_DTYPE_FILE_TYPES = {_C.float32: "f32", _C.float16: "f16", _C.bfloat16: "bf16"}
_QUANTIZED = ("Q8_0", "Q4_0")
_FALLBACK_TYPE = "F16"  # for matrices that cannot be quantised (as llama.cpp's converter)


def convert(folder, out_path, type=None, *, alignment=32):
    """Writes the checkpoint in `folder` to `out_path` as GGUF; returns {tensor name: ggml
    type written}. type: "f32", "f16", "bf16", "q8_0" or "q4_0" for the matrices (default:
    the checkpoint's own float type, so nothing is lost)."""
    folder = os.fspath(folder)
    hf_config = _read_json(folder, "config.json", required=True)
    config = config_from_hf(hf_config)
    weights = weights_from_hf(_read_tensors(folder), config)
    file_type = _file_type(type, weights)
    matrix_type, ftype_number = FILE_TYPES[file_type]
    if config.architecture == "llama":
        _permute_for_adjacent_pair_rope(weights, config)

    writer = GGUFWriter(out_path, alignment=alignment)
    for key, value, value_type in _model_metadata(folder, config, ftype_number, matrix_type):
        writer.add(key, value, type=value_type)
    try:
        tokenizer = tokenizer_metadata(folder, hf_config, config.vocab_size)
    except UnsupportedTokenizer as e:
        warnings.warn(f"{folder!r}: {e}; the GGUF file gets no tokenizer (kiln.llm.load then "
                      f"returns tokenizer None)", stacklevel=2)
        tokenizer = []
    for key, value, value_type in tokenizer:
        writer.add(key, value, type=value_type)
    written = {}
    for name in _gguf_order(weights):
        written[name] = _tensor_type(name, weights[name], matrix_type)
        writer.add_tensor(name, weights[name], type=written[name])
    writer.write()
    return written


def _read_json(folder, name, required=False):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        if required:
            raise ValueError(f"{folder!r} has no {name} (is it a Hugging Face checkpoint folder?)")
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _file_type(type, weights):
    if type is None:  # the checkpoint's own type: the first matrix's, as llama.cpp's "auto"
        dtypes = [w.dtype for w in weights.values() if w.dim() == 2]
        return _DTYPE_FILE_TYPES.get(dtypes[0] if dtypes else None, "f32")
    if str(type).lower() not in FILE_TYPES:
        raise ValueError(f"unknown --type {type!r}; expected one of {', '.join(FILE_TYPES)}")
    return str(type).lower()


def _model_metadata(folder, config, ftype_number, matrix_type):
    """(key, value, GGUF type) for the architecture's hyper-parameters, with llama.cpp's keys
    and types (u32 counts, f32 floats)."""
    arch = config.architecture
    entries = [
        ("general.architecture", arch, "string"),
        ("general.name", os.path.basename(os.path.normpath(folder)), "string"),
        ("general.file_type", ftype_number, "u32"),
        (f"{arch}.vocab_size", config.vocab_size, "u32"),
        (f"{arch}.context_length", config.context_length, "u32"),
        (f"{arch}.embedding_length", config.dim, "u32"),
        (f"{arch}.block_count", config.n_layers, "u32"),
        (f"{arch}.feed_forward_length", config.ffn_dim, "u32"),
        (f"{arch}.attention.head_count", config.n_heads, "u32"),
        (f"{arch}.attention.head_count_kv", config.n_kv_heads, "u32"),
        (f"{arch}.rope.freq_base", config.rope_theta, "f32"),
        (f"{arch}.attention.layer_norm_rms_epsilon", config.rms_eps, "f32"),
        (f"{arch}.rope.dimension_count", config.rope_dim, "u32"),
    ]
    if config.head_dim != config.dim // config.n_heads:  # readers assume dim / heads otherwise
        entries += [(f"{arch}.attention.key_length", config.head_dim, "u32"),
                    (f"{arch}.attention.value_length", config.head_dim, "u32")]
    if config.rope_scale != 1.0:
        entries += [(f"{arch}.rope.scaling.type", "linear", "string"),
                    (f"{arch}.rope.scaling.factor", config.rope_scale, "f32")]
    if matrix_type in _QUANTIZED:
        entries.append(("general.quantization_version", 2, "u32"))  # ggml's current blocks
    return entries


def _permute_for_adjacent_pair_rope(weights, config):
    """Reorders each head's attn_q / attn_k rows (and biases) from halves [x0..x(d/2-1) |
    x(d/2)..] to interleaved pairs, so that adjacent-pair RoPE on the permuted rows equals
    Hugging Face's rotate-half RoPE on the original ones (llama.cpp's converter does this)."""
    for name in list(weights):
        if name.endswith(("attn_q.weight", "attn_q.bias")):
            weights[name] = _permute_rows(weights[name], config.n_heads)
        elif name.endswith(("attn_k.weight", "attn_k.bias")):
            weights[name] = _permute_rows(weights[name], config.n_kv_heads)


def _permute_rows(w, n_heads):
    rows = w.shape[0]
    rest = tuple(w.shape[1:])
    if rows % (2 * n_heads):
        raise ValueError(f"cannot permute {rows} rows for {n_heads} heads of even size")
    return (w.reshape(n_heads, 2, rows // n_heads // 2, *rest)
            .transpose(1, 2).reshape(rows, *rest).contiguous())


def _tensor_type(name, tensor, matrix_type):
    """The ggml type a tensor is written as: vectors F32, matrices matrix_type."""
    if tensor.dim() != 2:
        return "F32"
    if matrix_type in _QUANTIZED and tensor.shape[1] % 32:
        return _FALLBACK_TYPE
    return matrix_type


# Within a block, the order llama.cpp's converter writes a Llama checkpoint in.
_BLOCK_ORDER = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                "ffn_gate", "ffn_up", "ffn_down")


def _gguf_order(weights):
    """Embedding, then each block's tensors, then output norm and output."""
    def key(name):
        if name.startswith("blk."):
            layer, _, rest = name[len("blk."):].partition(".")
            part, _, suffix = rest.partition(".")
            rank = _BLOCK_ORDER.index(part) if part in _BLOCK_ORDER else len(_BLOCK_ORDER)
            return (1, int(layer), rank, suffix)
        return ({"token_embd.weight": 0, "output_norm.weight": 2}.get(name, 3), 0, 0, name)
    return sorted(weights, key=key)


# --- the tokenizer -----------------------------------------------------------------------------

class UnsupportedTokenizer(Exception):
    """The folder's tokenizer cannot be written as a GGUF tokenizer (the message says why)."""


# tokenizer.json pre-tokenizer regexes (as Hugging Face writes them) -> llama.cpp's
# tokenizer.ggml.pre name, and whether that name's tokenizers take a word that is itself a
# token whole ("ignore_merges", which llama.cpp and kiln tie to the name).
_GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_REGEX = _LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")
_PRE_BY_REGEX = {_GPT2_REGEX: "gpt-2", _LLAMA3_REGEX: "llama-bpe", _QWEN2_REGEX: "qwen2"}
_IGNORE_MERGES = {"gpt-2": False, "llama-bpe": True, "qwen2": False}


def tokenizer_metadata(folder, hf_config, vocab_size):
    """(key, value, GGUF type) entries of a "gpt2" GGUF tokenizer from the folder's
    tokenizer.json (a byte-level BPE), as llama.cpp's converter writes them; the vocabulary is
    padded to the model's vocab_size with unused "[PAD<id>]" tokens.
    UnsupportedTokenizer if there is no such tokenizer."""
    spec = _read_json(folder, "tokenizer.json")
    if spec is None:
        raise UnsupportedTokenizer("no tokenizer.json")
    model = spec.get("model") or {}
    pre = _byte_level_pre_tokenizer_name(spec)
    _check_bpe_options(model, pre)
    tokens, types = _vocabulary(model, spec.get("added_tokens") or [], vocab_size)
    token_ids = {t: i for i, t in enumerate(tokens)}
    token_config = _read_json(folder, "tokenizer_config.json") or {}
    if spec.get("normalizer") is not None:
        warnings.warn(f"tokenizer.json's normalizer ({spec['normalizer'].get('type')}) is not "
                      f"part of a GGUF tokenizer; text is encoded without it (as llama.cpp)",
                      stacklevel=3)
    entries = [
        ("tokenizer.ggml.model", "gpt2", "string"),
        ("tokenizer.ggml.pre", pre, "string"),
        ("tokenizer.ggml.tokens", tokens, "array[string]"),
        ("tokenizer.ggml.token_type", types, "array[i32]"),
        ("tokenizer.ggml.merges", [_merge_text(m) for m in model.get("merges") or []],
         "array[string]"),
    ]
    special = {}
    for name, gguf_name in (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("pad", "padding")):
        special[name] = _special_token_id(name, token_config, hf_config, token_ids, model)
        if special[name] is not None:
            entries.append((f"tokenizer.ggml.{gguf_name}_token_id", special[name], "u32"))
    add_bos, add_eos = _adds_bos_eos(spec, token_config, token_ids, special)
    entries += [("tokenizer.ggml.add_bos_token", add_bos, "bool"),
                ("tokenizer.ggml.add_eos_token", add_eos, "bool")]
    if isinstance(token_config.get("chat_template"), str):
        entries.append(("tokenizer.chat_template", token_config["chat_template"], "string"))
    return entries


def _byte_level_pre_tokenizer_name(spec):
    """llama.cpp's name for the byte-level BPE's pre-tokenizer (UnsupportedTokenizer if the
    model is not one, or its pre-tokenizer is not one kiln and llama.cpp know)."""
    model_type = (spec.get("model") or {}).get("type")
    if model_type != "BPE":
        raise UnsupportedTokenizer(f"tokenizer.json's model is {model_type!r}, not a BPE")
    if not _has_byte_level(spec.get("decoder"), "decoders"):
        raise UnsupportedTokenizer("tokenizer.json's decoder is not ByteLevel (not a byte-level BPE)")
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel":
        _check_byte_level(pre, use_regex=True)
        return "gpt-2"
    steps = pre.get("pretokenizers") or []
    if pre.get("type") == "Sequence" and len(steps) == 2 and steps[0].get("type") == "Split"             and steps[1].get("type") == "ByteLevel":
        split, byte_level = steps
        _check_byte_level(byte_level, use_regex=False)
        regex = (split.get("pattern") or {}).get("Regex")
        if split.get("behavior") == "Isolated" and not split.get("invert") and regex in _PRE_BY_REGEX:
            return _PRE_BY_REGEX[regex]
        raise UnsupportedTokenizer(f"tokenizer.json's pre-tokenizer splits on {regex!r}, which "
                                   f"is not GPT-2's, Llama 3's or Qwen2's pattern")
    if not _has_byte_level(pre, "pretokenizers"):
        raise UnsupportedTokenizer("tokenizer.json has no ByteLevel pre-tokenizer (not a "
                                   "byte-level BPE)")
    raise UnsupportedTokenizer(f"tokenizer.json's pre-tokenizer {json.dumps(pre)[:200]} is not "
                               f"one a GGUF tokenizer names")


def _has_byte_level(step, children):
    if not step:
        return False
    return step.get("type") == "ByteLevel" or any(
        _has_byte_level(s, children) for s in step.get(children) or [])


def _check_byte_level(step, use_regex):
    if step.get("add_prefix_space"):
        raise UnsupportedTokenizer("tokenizer.json's ByteLevel adds a prefix space, which GGUF "
                                   "byte-level tokenizers do not")
    if step.get("use_regex", True) != use_regex:
        raise UnsupportedTokenizer(f"tokenizer.json's ByteLevel has use_regex "
                                   f"{step.get('use_regex', True)} where {use_regex} was expected")


def _check_bpe_options(model, pre):
    for option in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        if model.get(option):
            raise UnsupportedTokenizer(f"tokenizer.json's BPE sets {option}")
    if model.get("byte_fallback"):
        raise UnsupportedTokenizer("tokenizer.json's BPE uses byte fallback (not byte-level)")
    # kiln and llama.cpp tie "take a word that is a token whole" to the pre-tokenizer's name.
    expected = _IGNORE_MERGES[pre]
    if bool(model.get("ignore_merges", False)) != expected:
        raise UnsupportedTokenizer(f"tokenizer.json's ignore_merges is "
                                   f"{bool(model.get('ignore_merges'))}, but {pre!r} tokenizers "
                                   f"have {expected}")


def _vocabulary(model, added_tokens, vocab_size):
    """Tokens and their GGUF types: the BPE's vocabulary, then the added tokens (special ones
    control tokens, the others user-defined), gaps and the rest up to vocab_size unused."""
    by_id = {int(i): (text, TOKEN_NORMAL) for text, i in (model.get("vocab") or {}).items()}
    for added in added_tokens:
        kind = TOKEN_CONTROL if added.get("special") else TOKEN_USER_DEFINED
        by_id[int(added["id"])] = (added["content"], kind)
    if not by_id:
        raise UnsupportedTokenizer("tokenizer.json has an empty vocabulary")
    if max(by_id) >= vocab_size:
        raise UnsupportedTokenizer(f"tokenizer.json has token id {max(by_id)}, beyond the "
                                   f"model's vocab_size {vocab_size}")
    tokens = [by_id.get(i, (f"[PAD{i}]", TOKEN_UNUSED)) for i in range(vocab_size)]
    return [t for t, _ in tokens], [k for _, k in tokens]


def _merge_text(merge):
    """A merge as GGUF stores it: "left right" (tokenizer.json: that string, or a pair)."""
    return merge if isinstance(merge, str) else " ".join(merge)


def _special_token_id(name, token_config, hf_config, token_ids, model):
    """The id of the bos / eos / unk / pad token: tokenizer_config.json's token text, else
    config.json's id (the first of a list), else for unk the BPE's unk_token; or None."""
    text = token_config.get(f"{name}_token")
    if isinstance(text, dict):
        text = text.get("content")
    if name == "unk" and text is None:
        text = model.get("unk_token")
    if isinstance(text, str) and text in token_ids:
        return token_ids[text]
    value = hf_config.get(f"{name}_token_id")
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(token_ids):
        return value
    return None


def _adds_bos_eos(spec, token_config, token_ids, special):
    """Whether encoding adds BOS / EOS: tokenizer_config.json's add_bos_token / add_eos_token,
    else whether tokenizer.json's template post-processor starts / ends with them."""
    template = _template(spec.get("post_processor"))
    added = {}
    for name, position in (("bos", 0), ("eos", -1)):
        flag = token_config.get(f"add_{name}_token")
        if isinstance(flag, bool):
            added[name] = flag
            continue
        item = template[position] if template else {}
        token = (item.get("SpecialToken") or {}).get("id")
        added[name] = token is not None and special[name] is not None and             token_ids.get(token) == special[name]
    return added["bos"], added["eos"]


def _template(post_processor):
    """The "single" template of a TemplateProcessing post-processor (also inside a Sequence)."""
    if not post_processor:
        return None
    if post_processor.get("type") == "TemplateProcessing":
        return post_processor.get("single")
    for step in post_processor.get("processors") or []:
        found = _template(step)
        if found:
            return found
    return None
