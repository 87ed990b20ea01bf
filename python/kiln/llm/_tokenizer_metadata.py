"""Reading and checking the tokenizer keys of GGUF metadata ("tokenizer.ggml.*")."""
from __future__ import annotations

import math
import re
import warnings

from ._pre_tokenizers import _PRE_TOKENIZERS


# "tokenizer.ggml.token_type" values (llama.cpp's llama_token_type).
TOKEN_UNDEFINED, TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL = 0, 1, 2, 3
TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 4, 5, 6

_SPACE_SYMBOL = "\u2581"  # SentencePiece's "▁"
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
# Control-token texts that end a turn (llama.cpp treats these as end-of-generation too).
_END_OF_TURN_TEXTS = frozenset([
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<EOT>", "<|end_of_text|>"])
_WORD_CACHE_SIZE = 1 << 16

# ---------------------------------------------------------------------------------------------
# Reading the metadata


def _key(name):
    return "tokenizer.ggml." + name


def _required(md, key):
    if key not in md:
        raise ValueError(f"GGUF metadata has no '{key}' (the tokenizer needs it)")
    return md[key]


def _checked_list(md, key, accepts, what, length=None):
    """md[key] as a list whose elements all pass accepts(), else ValueError naming the key."""
    value = _required(md, key)
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"GGUF metadata '{key}' must be a list of {what}, "
                         f"got {type(value).__name__}")
    for i, element in enumerate(value):
        if not accepts(element):
            raise ValueError(f"GGUF metadata '{key}'[{i}] must be {what}, got {element!r}")
    if length is not None and len(value) != length:
        raise ValueError(f"GGUF metadata '{key}' has {len(value)} entries but "
                         f"'{_key('tokens')}' has {length}")
    return list(value)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_score(v):
    return (_is_int(v) or isinstance(v, float)) and not math.isnan(v)


def _flag(md, name, default):
    key = _key(name)
    if key not in md:
        return default
    if not isinstance(md[key], bool):
        raise ValueError(f"GGUF metadata '{key}' must be a bool, got {md[key]!r}")
    return md[key]


def _token_id(md, name, n_tokens, default=None):
    """A special token id; an out-of-range one is ignored with a warning, as llama.cpp does."""
    key = _key(name)
    if default is not None and not 0 <= default < n_tokens:
        default = None
    if key not in md:
        return default
    value = md[key]
    if not _is_int(value):
        raise ValueError(f"GGUF metadata '{key}' must be a token id (int), got {value!r}")
    if not 0 <= value < n_tokens:
        warnings.warn(f"GGUF metadata '{key}' = {value} is outside the vocabulary "
                      f"(size {n_tokens}); ignored", stacklevel=3)
        return default
    return value


def _token_types(md, n_tokens):
    """The token types; without the key every token is normal (as llama.cpp)."""
    if _key("token_type") not in md:
        return [TOKEN_NORMAL] * n_tokens
    return _checked_list(md, _key("token_type"),
                         lambda v: _is_int(v) and TOKEN_UNDEFINED <= v <= TOKEN_BYTE,
                         "token types (ints 0-6)", n_tokens)


def _special_ids(md, n_tokens, sentencepiece):
    """bos_id, eos_id, unknown_id, padding_id; llama.cpp's defaults for SentencePiece files:
    <unk> 0, <s> 1, </s> 2."""
    return dict(bos_id=_token_id(md, "bos_token_id", n_tokens, 1 if sentencepiece else None),
                eos_id=_token_id(md, "eos_token_id", n_tokens, 2 if sentencepiece else None),
                unknown_id=_token_id(md, "unknown_token_id", n_tokens,
                                     0 if sentencepiece else None),
                padding_id=_token_id(md, "padding_token_id", n_tokens))


def _end_of_generation_ids(md, tokens, types):
    """End-of-turn ids besides EOS: the file's eot/eom ids and well-known control tokens."""
    found = [_token_id(md, name, len(tokens)) for name in ("eot_token_id", "eom_token_id")]
    return found + [i for i, t in enumerate(tokens)
                    if types[i] == TOKEN_CONTROL and t in _END_OF_TURN_TEXTS]


def _pre_tokenizer(md):
    """(name, regexes, ignore_merges, add_bos default) of a "gpt2" file's pre-tokenizer."""
    pre = md.get(_key("pre"), "default")
    if not isinstance(pre, str):
        raise ValueError(f"GGUF metadata '{_key('pre')}' must be a string, got {pre!r}")
    if pre not in _PRE_TOKENIZERS:
        raise NotImplementedError(
            f"pre-tokenizer {pre!r} ('{_key('pre')}') is not supported; kiln knows "
            f"{', '.join(sorted(_PRE_TOKENIZERS))}")
    return (pre, *_PRE_TOKENIZERS[pre])
