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

The pieces live in _tokenizer_metadata.py (the "tokenizer.ggml.*" keys), _pre_tokenizers.py
(the regexes) and _bpe_merges.py (the two merge algorithms).
"""
from __future__ import annotations

import codecs
import operator
from functools import lru_cache

from ._bpe_merges import _ByteLevelBPE, _SentencePieceBPE, byte_to_unicode
from ._pre_tokenizers import _PreTokenizer
from ._tokenizer_metadata import (TOKEN_BYTE, TOKEN_CONTROL, TOKEN_NORMAL,  # noqa: F401
                                  TOKEN_UNDEFINED, TOKEN_UNKNOWN, TOKEN_UNUSED,
                                  TOKEN_USER_DEFINED, _BYTE_TOKEN, _SPACE_SYMBOL, _checked_list,
                                  _end_of_generation_ids, _flag, _is_score, _key, _pre_tokenizer,
                                  _required, _special_ids, _token_types)

__all__ = ["GGUFTokenizer", "StreamingDecoder", "byte_to_unicode"]


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
