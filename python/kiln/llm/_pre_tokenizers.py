"""Pre-tokenizer regexes of byte-level BPE ("gpt2") vocabularies, by llama.cpp's
"tokenizer.ggml.pre" names, compiled with the `regex` module or, without it, with
character classes built from `unicodedata` (see tokenizer.py)."""
from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

try:
    import regex as _regex_module
except ImportError:  # the character-class fallback takes over
    _regex_module = None


# GPT-2's pattern, as OpenAI's encoder and Hugging Face's ByteLevel pre-tokenizer have it.
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# Llama 3's (and Qwen 2's, which splits single digits). The original has (?i:'s|'t|...);
# llama.cpp spells the cases out, which keeps Unicode case folding ("ſ") out of it.
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_LLAMA3 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# llama.cpp's "default": each regex splits the pieces the previous ones left.
_DEFAULT_CHAIN = (r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", r"[0-9][0-9][0-9]")

# tokenizer.ggml.pre -> (regexes, ignore_merges, add_bos by default). ignore_merges: a word
# that is itself a token is taken whole (Llama 3's tokenizer.json says so).
_PRE_TOKENIZERS = {
    "default": (_DEFAULT_CHAIN, False, False),
    "gpt-2": ((_GPT2,), False, False),
    "gpt2": ((_GPT2,), False, False),
    "llama3": ((_LLAMA3,), True, True),
    "llama-v3": ((_LLAMA3,), True, True),
    "llama-bpe": ((_LLAMA3,), True, True),
    "qwen2": ((_QWEN2,), False, False),
}

# Unicode's White_Space property, as the body of a character class. Spelled out because
# Python's \s also takes \x1c-\x1f, which Oniguruma (Hugging Face) and llama.cpp do not.
_WHITESPACE_CLASS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_CLASS_ESCAPE = re.compile(r"\\p\{([LNP])\}|\\[sS]|\\.|\[|\]")


def _translate(pattern, category_classes):
    r"""Rewrites \p{L}, \p{N}, \p{P}, \s and \S of one of the patterns above for the regex
    engine in use; category_classes maps "L", "N", "P" to the body of a character class."""
    out, pos, in_class = [], 0, False
    for m in _CLASS_ESCAPE.finditer(pattern):
        out.append(pattern[pos:m.start()])
        pos = m.end()
        token = m.group()
        if token in ("[", "]"):
            in_class = token == "["
            out.append(token)
        elif m.group(1) or token == r"\s":
            body = category_classes[m.group(1)] if m.group(1) else _WHITESPACE_CLASS
            out.append(body if in_class else f"[{body}]")
        elif token == r"\S":
            assert not in_class, "\\S inside a character class is not supported"
            out.append(f"[^{_WHITESPACE_CLASS}]")
        else:
            out.append(token)
    out.append(pattern[pos:])
    return "".join(out)


@lru_cache(maxsize=None)
def _unicode_category_classes():
    """Character-class bodies for the general categories L, N and P, from unicodedata (only
    used without the `regex` module; about 0.2 s once)."""
    ranges = {"L": [], "N": [], "P": []}
    for cp in range(sys.maxunicode + 1):
        spans = ranges.get(unicodedata.category(chr(cp))[0])
        if spans is None:
            continue
        if spans and spans[-1][1] == cp - 1:
            spans[-1][1] = cp
        else:
            spans.append([cp, cp])
    return {name: "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}"
                          for a, b in spans)
            for name, spans in ranges.items()}


@lru_cache(maxsize=None)
def _compile(pattern, use_regex_module):
    if use_regex_module:
        return _regex_module.compile(_translate(pattern, {c: rf"\p{{{c}}}" for c in "LNP"}))
    return re.compile(_translate(pattern, _unicode_category_classes()))


class _PreTokenizer:
    """Splits text into words with a chain of regexes; matches and the text between them are
    both kept (Hugging Face's "isolated" split, llama.cpp's unicode_regex_split)."""

    def __init__(self, patterns, use_regex_module=None):
        if use_regex_module is None:
            use_regex_module = _regex_module is not None
        self._regexes = [_compile(p, use_regex_module) for p in patterns]

    def split(self, text):
        pieces = [text]
        for regex in self._regexes:
            pieces = [word for piece in pieces for word in self._split_one(regex, piece)]
        return pieces

    @staticmethod
    def _split_one(regex, text):
        pos = 0
        for m in regex.finditer(text):
            start, end = m.span()
            if start > pos:
                yield text[pos:start]
            if end > start:
                yield text[start:end]
            pos = end
        if pos < len(text):
            yield text[pos:]
