"""The two merge algorithms: SentencePiece BPE by scores ("llama") and byte-level BPE by
merge rank ("gpt2"), with GPT-2's byte alphabet."""
from __future__ import annotations

import heapq
from functools import lru_cache

from ._tokenizer_metadata import (TOKEN_NORMAL, TOKEN_UNDEFINED, TOKEN_UNUSED, TOKEN_USER_DEFINED,
                                  _SPACE_SYMBOL, _WORD_CACHE_SIZE, _key)


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
