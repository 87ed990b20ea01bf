"""kiln.llm.tokenizer: tokenizers built from a GGUF file's vocabulary metadata.

    tok = GGUFTokenizer.from_metadata(kiln.gguf.GGUFReader(path).metadata)
    ids = tok.encode("Hello world")            # BOS (and EOS) as the file asks
    tok.decode(ids)                            # "Hello world"
    stream = tok.stream_decoder()              # text while generating, token by token
    for i in ids: print(stream.add(i), end="")
    print(stream.flush())

Two of llama.cpp's tokenizer models:
- "llama": SentencePiece BPE. Spaces become "▁" (and one is put in front when
  add_space_prefix); starting from single characters, the adjacent pair whose concatenation
  has the highest score in the vocabulary is merged until none is left; a piece that is not a
  token falls back to its UTF-8 bytes as "<0xXX>" tokens (the unknown token without them).
- "gpt2": byte-level BPE. A pre-tokenizer regex cuts the text into words; each word's UTF-8
  bytes are spelled with GPT-2's printable byte alphabet and merged pair by pair in the order
  of "tokenizer.ggml.merges".

Special tokens: user-defined tokens (type 4) in the text are always matched as tokens, as in
llama.cpp; control and unknown tokens ("<s>", "<|eot_id|>") only with encode(...,
parse_special=True) -- by default "<s>" in the text is ordinary text. Longer special tokens are
matched first, and (SentencePiece) the text after a special token gets the space prefix again,
as llama.cpp does.

Where this differs from llama.cpp, on purpose:
- decode() removes the space prefix after a leading BOS too (llama.cpp keeps it there), so
  decode(encode(s)) == s, as SentencePiece's own decoder does.
- SentencePiece merges only produce normal, user-defined and unused tokens (as SentencePiece
  does; llama.cpp considers every token's text), and an unused token that comes out of the
  merges is split back into the pieces it was merged from (SentencePiece's resegmentation).
- decode() never applies llama.cpp's "clean_spaces" (removing the space before "." and the
  like): decoding stays lossless.
- A byte-level token's character outside GPT-2's byte alphabet decodes to its own UTF-8
  (llama.cpp writes "[UNK_BYTE_0x..]").
- Without bos/eos ids in a "gpt2" file there is no BOS/EOS (llama.cpp assumes id 11).
  As in llama.cpp: an out-of-range special id is ignored with a warning; add_space_prefix
  only affects "llama" files; no text normalisation (NFKC etc.: GGUF does not carry it).
- Pre-tokenizers: "default" (also when the key is absent; llama.cpp's chain of four
  regexes), "gpt-2"/"gpt2", "llama3"/"llama-v3"/"llama-bpe" and "qwen2"; others raise
  NotImplementedError. The regexes use the `regex` module when it is installed; without it
  \\p{L}, \\p{N} and \\p{P} become character classes computed once from `unicodedata` (its
  Unicode version may be older). \\s is Unicode's White_Space set either way.
"""
from __future__ import annotations

import codecs
import heapq
import math
import operator
import re
import sys
import unicodedata
import warnings
from functools import lru_cache

try:
    import regex as _regex_module
except ImportError:  # the character-class fallback below takes over
    _regex_module = None

__all__ = ["GGUFTokenizer", "StreamingDecoder", "byte_to_unicode"]

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


# ---------------------------------------------------------------------------------------------
# Pre-tokenizer regexes (for "gpt2" models)

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


# ---------------------------------------------------------------------------------------------
# Merging


@lru_cache(maxsize=1)
def byte_to_unicode():
    """GPT-2's reversible byte -> printable character table (a tuple of 256 one-character
    strings): printable Latin-1 bytes stand for themselves, the other 68 bytes, in order, for
    U+0100 onwards (so the space 0x20 is "Ġ")."""
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, n_moved = [], 0
    for byte in range(256):
        if byte in printable:
            table.append(chr(byte))
        else:
            table.append(chr(0x100 + n_moved))
            n_moved += 1
    return tuple(table)


def _merge(symbols, priority):
    """Merges adjacent symbols in place, best pair first, until no pair can be merged; returns
    the surviving symbols in order. priority(left, right) -> a number (lower merges first) or
    None when the pair does not merge. Equal priorities merge leftmost first.

    A heap of candidate pairs with lazy invalidation (as llama.cpp): merging only ever grows
    the left symbol and empties the right one, so a popped pair is still current exactly when
    both symbols are non-empty and their lengths still add up to the pair's length."""
    n = len(symbols)
    prev = list(range(-1, n - 1))
    next_ = list(range(1, n + 1))
    if n:
        next_[-1] = -1
    heap = []

    def consider(left, right):
        p = priority(symbols[left], symbols[right])
        if p is not None:
            heapq.heappush(heap, (p, left, right, len(symbols[left]) + len(symbols[right])))

    for i in range(n - 1):
        consider(i, i + 1)
    while heap:
        _, left, right, size = heapq.heappop(heap)
        a, b = symbols[left], symbols[right]
        if not a or not b or len(a) + len(b) != size:
            continue  # one side was merged since this pair was queued
        symbols[left], symbols[right] = a + b, ""
        after = next_[left] = next_[right]
        if after != -1:
            prev[after] = left
        if prev[left] != -1:
            consider(prev[left], left)
        if after != -1:
            consider(left, after)
    return [s for s in symbols if s]


class _SentencePieceBPE:
    """llama.cpp's "llama" tokenizer (SentencePiece BPE, scores-based)."""

    def __init__(self, tokens, types, scores, token_to_id, unknown_id, add_space_prefix):
        self._token_to_id = token_to_id
        self._unknown_id = unknown_id
        self.add_space_prefix = add_space_prefix
        # Only these pieces can come out of a merge (SentencePiece leaves control, unknown and
        # byte pieces out); negated so that the heap's smallest is the highest score.
        mergeable = (TOKEN_NORMAL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_UNDEFINED)
        self._merge_priority = {text: -float(scores[i]) for i, text in enumerate(tokens)
                                if types[i] in mergeable}
        self._unused = {text for i, text in enumerate(tokens) if types[i] == TOKEN_UNUSED}
        self._byte_ids = [self._byte_token(token_to_id, b) for b in range(256)]

    @staticmethod
    def _byte_token(token_to_id, byte):
        found = token_to_id.get(f"<0x{byte:02X}>")
        if found is None and byte < 0x80:  # llama.cpp also tries the character itself
            found = token_to_id.get(chr(byte))
        return found

    def encode(self, text, space_prefix):
        if self.add_space_prefix and space_prefix:
            text = " " + text
        text = text.replace(" ", _SPACE_SYMBOL)
        # Which unused pieces were merged from what (to split them back afterwards).
        merged_from = {}
        merge_priority = self._merge_priority

        def priority(left, right):
            return merge_priority.get(left + right)

        def priority_noting_unused(left, right):
            piece = left + right
            if piece in self._unused:
                merged_from[piece] = (left, right)
            return merge_priority.get(piece)

        if self._unused:
            priority = priority_noting_unused
        ids = []
        for piece in _merge(list(text), priority):
            self._emit(piece, merged_from, ids)
        return ids

    def _emit(self, piece, merged_from, ids):
        token = self._token_to_id.get(piece)
        if token is not None and piece in merged_from:
            left, right = merged_from[piece]
            self._emit(left, merged_from, ids)
            self._emit(right, merged_from, ids)
        elif token is not None:
            ids.append(token)
        else:
            ids.extend(self._byte_fallback(piece))

    def _byte_fallback(self, piece):
        byte_ids = [self._byte_ids[b] for b in piece.encode("utf-8")]
        if None not in byte_ids:
            return byte_ids
        if self._unknown_id is not None:
            return [self._unknown_id]  # one per piece, as SentencePiece without byte fallback
        raise ValueError(f"cannot encode {piece!r}: the vocabulary has neither its byte tokens "
                         f"(<0x..>) nor an unknown token")


class _ByteLevelBPE:
    """llama.cpp's "gpt2" tokenizer (byte-level BPE with ranked merges)."""

    def __init__(self, merges, token_to_id, unknown_id, pre_tokenizer, ignore_merges):
        self._token_to_id = token_to_id
        self._unknown_id = unknown_id
        self._pre_tokenizer = pre_tokenizer
        self._ignore_merges = ignore_merges
        self._ranks = {}
        for rank, merge in enumerate(merges):
            cut = merge.find(" ", 1)  # the left part may itself be a space (llama.cpp too)
            if cut < 0:
                raise ValueError(f"GGUF metadata '{_key('merges')}'[{rank}] must be two "
                                 f"tokens separated by a space, got {merge!r}")
            self._ranks.setdefault((merge[:cut], merge[cut + 1:]), rank)
        self._latin1_to_symbol = {i: c for i, c in enumerate(byte_to_unicode())}
        self._word_cache = {}

    def encode(self, text, space_prefix):
        ids = []
        for word in self._pre_tokenizer.split(text):
            word_ids = self._word_cache.get(word)
            if word_ids is None:
                if len(self._word_cache) >= _WORD_CACHE_SIZE:
                    self._word_cache.clear()
                word_ids = self._word_cache[word] = self._encode_word(word)
            ids.extend(word_ids)
        return ids

    def _encode_word(self, word):
        # The word's UTF-8 bytes, one GPT-2 alphabet character per byte.
        spelled = word.encode("utf-8").decode("latin-1").translate(self._latin1_to_symbol)
        whole = self._token_to_id.get(spelled)
        if self._ignore_merges and whole is not None:
            return [whole]
        ids = []
        for piece in _merge(list(spelled), lambda a, b: self._ranks.get((a, b))):
            token = self._token_to_id.get(piece)
            if token is not None:
                ids.append(token)
                continue
            # A merge whose result is not a token: its bytes one by one (llama.cpp drops
            # bytes that are not tokens either; the unknown token stands in if there is one).
            for symbol in piece:
                token = self._token_to_id.get(symbol, self._unknown_id)
                if token is not None:
                    ids.append(token)
        return ids


# ---------------------------------------------------------------------------------------------
# The tokenizer


class GGUFTokenizer:
    """Encodes text to token ids and back with the vocabulary of a GGUF file.

    Attributes: tokens (the vocabulary's strings), token_types, bos_id / eos_id / unknown_id /
    padding_id (None where the file has none), add_bos / add_eos (encode's defaults),
    model ("llama" or "gpt2"), pre ("gpt2" models' pre-tokenizer name).
    """

    def __init__(self, model, tokens, token_types, encoder, *, bos_id, eos_id, unknown_id,
                 padding_id, add_bos, add_eos, end_of_generation_ids=(), pre=None):
        self.model, self.pre = model, pre
        self.tokens, self.token_types = tokens, token_types
        self._encoder = encoder
        self.bos_id, self.eos_id = bos_id, eos_id
        self.unknown_id, self.padding_id = unknown_id, padding_id
        self.add_bos, self.add_eos = add_bos, add_eos
        self.eog_ids = frozenset(i for i in (eos_id, *end_of_generation_ids) if i is not None)
        self._special_ids = frozenset(i for i in (bos_id, eos_id, unknown_id, padding_id)
                                      if i is not None)
        # The "▁" put in front on encode comes off again on decode.
        self._strip_space_prefix = isinstance(encoder, _SentencePieceBPE) and \
            encoder.add_space_prefix
        self._token_to_id = encoder._token_to_id
        self._always_matched, self._matched_if_parse_special = self._special_tokens()
        self._bytes_cache = {}

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def from_metadata(cls, md):
        """The tokenizer that a GGUF file's metadata (key -> value) describes.

        ValueError names the key that is missing or malformed; NotImplementedError names a
        tokenizer model or pre-tokenizer this module does not implement."""
        model = _required(md, _key("model"))
        if not isinstance(model, str):
            raise ValueError(f"GGUF metadata '{_key('model')}' must be a string, got {model!r}")
        if model not in ("llama", "gpt2"):
            raise NotImplementedError(f"tokenizer model {model!r} ('{_key('model')}') is not "
                                      f"supported; kiln implements 'llama' and 'gpt2'")
        tokens = _checked_list(md, _key("tokens"), lambda v: isinstance(v, str), "strings")
        if not tokens:
            raise ValueError(f"GGUF metadata '{_key('tokens')}' is empty")
        types = _token_types(md, len(tokens))
        token_to_id = {text: i for i, text in enumerate(tokens)}  # duplicates: the last wins
        ids = _special_ids(md, len(tokens), sentencepiece=model == "llama")
        if model == "llama":
            scores = _checked_list(md, _key("scores"), _is_score, "numbers", len(tokens))
            encoder = _SentencePieceBPE(tokens, types, scores, token_to_id, ids["unknown_id"],
                                        _flag(md, "add_space_prefix", True))
            pre, add_bos_default = None, True  # llama.cpp adds BOS to SentencePiece text
        else:
            pre, patterns, ignore_merges, add_bos_default = _pre_tokenizer(md)
            merges = _checked_list(md, _key("merges"), lambda v: isinstance(v, str), "strings")
            encoder = _ByteLevelBPE(merges, token_to_id, ids["unknown_id"],
                                    _PreTokenizer(patterns), ignore_merges)
        add_bos = _flag(md, "add_bos_token", add_bos_default)
        add_eos = _flag(md, "add_eos_token", False)
        for flag, name in ((add_bos, "bos"), (add_eos, "eos")):
            if flag and ids[f"{name}_id"] is None and _key(f"add_{name}_token") in md:
                raise ValueError(f"GGUF metadata '{_key(f'add_{name}_token')}' is true but "
                                 f"there is no valid '{_key(f'{name}_token_id')}'")
        return cls(model, tokens, types, encoder, pre=pre,
                   add_bos=add_bos and ids["bos_id"] is not None,
                   add_eos=add_eos and ids["eos_id"] is not None,
                   end_of_generation_ids=_end_of_generation_ids(md, tokens, types), **ids)

    def _special_tokens(self):
        """(id, text) of the tokens that encode matches in the text, longest first (llama.cpp's
        order): user-defined ones always; with parse_special, control and unknown ones too."""
        matched = [(i, t) for i, t in enumerate(self.tokens) if t and self.token_types[i] in
                   (TOKEN_CONTROL, TOKEN_UNKNOWN, TOKEN_USER_DEFINED)]
        matched.sort(key=lambda m: -len(m[1]))
        always = [m for m in matched if self.token_types[m[0]] == TOKEN_USER_DEFINED]
        return always, matched

    # -- queries --------------------------------------------------------------------------------

    @property
    def vocab_size(self):
        return len(self.tokens)

    def __len__(self):
        return len(self.tokens)

    def __repr__(self):
        pre = f", pre={self.pre!r}" if self.pre else ""
        return (f"GGUFTokenizer(model={self.model!r}{pre}, vocab_size={self.vocab_size}, "
                f"bos_id={self.bos_id}, eos_id={self.eos_id})")

    def token_to_id(self, text):
        """The id of the token whose vocabulary string is `text`, or None."""
        return self._token_to_id.get(text)

    def is_special(self, token_id):
        """Control and unknown tokens, and the file's BOS/EOS/unknown/padding ids: what
        decode(skip_special=True) leaves out."""
        token_id = self._check_id(token_id)
        return (self.token_types[token_id] in (TOKEN_CONTROL, TOKEN_UNKNOWN)
                or token_id in self._special_ids)

    def is_eos(self, token_id):
        return self.eos_id is not None and token_id == self.eos_id

    def is_eog(self, token_id):
        """End of generation: EOS, the file's end-of-turn/message ids, and control tokens such
        as "<|eot_id|>" or "<|im_end|>" (see eog_ids, which generate(eos_id=...) accepts)."""
        return token_id in self.eog_ids

    def _check_id(self, token_id):
        """token_id as a Python int (NumPy and tensor scalars are fine), or ValueError."""
        try:
            index = operator.index(token_id)
        except TypeError:
            index = None
        if index is None or isinstance(token_id, bool) or not 0 <= index < len(self.tokens):
            raise ValueError(f"token id {token_id!r} is outside the vocabulary "
                             f"(size {len(self.tokens)})")
        return index

    # -- encoding -------------------------------------------------------------------------------

    def encode(self, text, add_bos=None, add_eos=None, parse_special=False):
        """Token ids of `text`. add_bos / add_eos: None follows the file. parse_special: match
        control tokens written in the text ("<s>", "<|eot_id|>") as those tokens."""
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        ids = []
        if self.add_bos if add_bos is None else add_bos:
            ids.append(self._required_id(self.bos_id, "BOS"))
        # A space prefix goes before the first text and before the text after each special
        # token (llama.cpp's SentencePiece rule; the byte-level encoder ignores it).
        after_special = True
        for fragment in self._split_special_tokens(text, parse_special):
            if isinstance(fragment, int):
                ids.append(fragment)
                after_special = True
            else:
                ids.extend(self._encoder.encode(fragment, after_special))
                after_special = False
        if self.add_eos if add_eos is None else add_eos:
            ids.append(self._required_id(self.eos_id, "EOS"))
        return ids

    def _required_id(self, token_id, name):
        if token_id is None:
            raise ValueError(f"this tokenizer has no {name} token (the GGUF file names none)")
        return token_id

    def _split_special_tokens(self, text, parse_special):
        """text -> text fragments and special token ids, longest token texts matched first."""
        fragments = [text] if text else []
        specials = self._matched_if_parse_special if parse_special else self._always_matched
        for token_id, token_text in specials:
            split = []
            for fragment in fragments:
                if isinstance(fragment, int) or token_text not in fragment:
                    split.append(fragment)
                    continue
                for k, part in enumerate(fragment.split(token_text)):
                    if k:
                        split.append(token_id)
                    if part:
                        split.append(part)
            fragments = split
        return fragments

    # -- decoding -------------------------------------------------------------------------------

    def token_to_bytes(self, token_id, skip_special=False):
        """The bytes a token stands for: byte tokens their byte, SentencePiece's "▁" a space,
        byte-level characters their bytes; control tokens their text (nothing with
        skip_special); unused tokens nothing (as llama.cpp)."""
        token_id = self._check_id(token_id)
        if skip_special and self.is_special(token_id):
            return b""
        piece = self._bytes_cache.get(token_id)
        if piece is None:
            piece = self._bytes_cache[token_id] = self._piece_bytes(token_id)
        return piece

    def _piece_bytes(self, token_id):
        text, kind = self.tokens[token_id], self.token_types[token_id]
        if kind == TOKEN_UNUSED:
            return b""
        if kind in (TOKEN_CONTROL, TOKEN_UNKNOWN, TOKEN_USER_DEFINED):
            return text.encode("utf-8")
        if kind == TOKEN_BYTE:
            m = _BYTE_TOKEN.fullmatch(text)
            if m:
                return bytes([int(m.group(1), 16)])
        if isinstance(self._encoder, _SentencePieceBPE):
            return text.replace(_SPACE_SYMBOL, " ").encode("utf-8")
        return _byte_level_to_bytes(text)

    def token_to_piece(self, token_id, skip_special=False):
        """A token's text (for display; a byte token that is part of a multi-byte character
        shows as U+FFFD: stream_decoder() puts those together)."""
        return self.token_to_bytes(token_id, skip_special).decode("utf-8", errors="replace")

    def decode(self, ids, skip_special=True):
        """Text of `ids`: special tokens left out unless skip_special=False; the space prefix
        of the first piece (after a leading BOS) removed; invalid UTF-8 becomes U+FFFD."""
        stream = StreamingDecoder(self, skip_special)
        return b"".join(stream._next_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def stream_decoder(self, skip_special=True):
        """A StreamingDecoder: decoded text token by token, as generation goes."""
        return StreamingDecoder(self, skip_special)


def _byte_level_to_bytes(text):
    table = _unicode_to_byte()
    return b"".join(bytes([table[c]]) if c in table else c.encode("utf-8") for c in text)


@lru_cache(maxsize=1)
def _unicode_to_byte():
    return {c: b for b, c in enumerate(byte_to_unicode())}


class StreamingDecoder:
    """Turns token ids into text one at a time. add(id) returns the text that is complete so
    far (a character whose UTF-8 bytes are split over byte tokens waits for its last byte);
    flush() returns what is left (an incomplete character as U+FFFD). The pieces joined equal
    tokenizer.decode(all ids)."""

    def __init__(self, tokenizer, skip_special=True):
        self._tokenizer = tokenizer
        self._skip_special = skip_special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._at_start = True  # nothing written yet: the space prefix is still to remove

    def add(self, token_id):
        return self._utf8.decode(self._next_bytes(token_id))

    def flush(self):
        return self._utf8.decode(b"", final=True)

    def _next_bytes(self, token_id):
        tok = self._tokenizer
        piece = tok.token_to_bytes(token_id, self._skip_special)
        if not self._at_start or (token_id == tok.bos_id and tok.bos_id is not None):
            return piece  # a leading BOS, shown or not, keeps the start state
        if piece:
            self._at_start = False
            if tok._strip_space_prefix and piece.startswith(b" "):
                piece = piece[1:]
        return piece
