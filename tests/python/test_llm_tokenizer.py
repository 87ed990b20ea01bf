"""kiln.llm.tokenizer against independent references: a SentencePiece BPE model and a Hugging
Face byte-level BPE, both trained here, offline, on Python's LICENSE.txt plus generated text.
The GGUF metadata is built from each trained model the way llama.cpp's converter does, and
kiln's ids must equal the reference library's on every string."""
import json
import math
import random
import time
import warnings

import pytest

spm = pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

from kiln.llm import _pre_tokenizers as pre_tk  # noqa: E402
from kiln.llm import tokenizer as tk  # noqa: E402
from kiln.llm.tokenizer import GGUFTokenizer  # noqa: E402

LICENSE = "/usr/lib/python3.11/LICENSE.txt"
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None)

# Strings chosen for edge cases; the expected ids always come from the reference library.
SAMPLES = [
    "", " ", "  ", "a", "Hello world", " leading space", "trailing space ", "two  spaces",
    "   three leading", "tabs\tand\nnewlines\n\n", "\n", "\r\n", "héllo wörld ñ 日本語 🙂",
    "numbers 0123456789 3.14159 -42 1e10", "punctuation!?;:,.()[]{}<>\"'`~@#$%^&*-_=+|\\/",
    "PSF LICENSE AGREEMENT FOR PYTHON", "don't we'll I'm they've it's you'd THEY'RE",
    "<s> literal </s> <unk> markers", "<0x0A> looks like a byte token", "▁ already a space symbol",
    "mixed 日本語 and English, 🙂🙂🙂 emoji", "\u00a0non-breaking\u2003em space\u3000ideographic",
    "zero\u200bwidth", "combining e\u0301 accents", "\x00\x01 control chars \x7f",
    "ſ long s and K kelvin", "x" * 300, " " * 50, "ab" * 100,
]


def _training_lines():
    """Python's license plus generated lines with digits, punctuation and non-ASCII text."""
    with open(LICENSE, encoding="utf-8") as f:
        lines = f.read().splitlines()
    rng = random.Random(0)
    words = ["héllo", "wörld", "ñ", "日本語", "🙂", "naïve", "café", "Straße", "ünïcödé",
             "data", "model", "token", "the", "and", "of"]
    for _ in range(300):
        parts = [rng.choice(words) for _ in range(rng.randint(3, 10))]
        parts.insert(rng.randint(0, len(parts)), str(rng.randint(0, 10 ** rng.randint(1, 6))))
        lines.append(" ".join(parts) + rng.choice([".", "!", "?", ",", ";", ""]))
    return lines


@pytest.fixture(scope="module")
def corpus():
    return _training_lines()


def _license_paragraphs():
    with open(LICENSE, encoding="utf-8") as f:
        return [p for p in f.read().split("\n\n") if p.strip()]


def _random_texts():
    """Any assigned code point, or a small alphabet that exercises merges and whitespace."""
    anything = st.text(st.characters(blacklist_categories=("Cs", "Cn")), max_size=40)
    merge_heavy = st.text(st.sampled_from(list(" \n\t  aeinorstTHE,.'0123456789éö日本🙂")),
                          max_size=80)
    return st.one_of(anything, merge_heavy)


def _streamed(tok, ids, skip_special=True):
    stream = tok.stream_decoder(skip_special)
    pieces = [stream.add(i) for i in ids]
    return pieces, stream.flush()


# ---------------------------------------------------------------------------------------------
# SentencePiece ("llama")


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory, corpus):
    """A SentencePiece BPE model with byte fallback and llama's normaliser settings (identity
    normalisation, whitespace kept, dummy prefix), plus a user-defined and a control symbol."""
    directory = tmp_path_factory.mktemp("spm")
    text_file = directory / "corpus.txt"
    text_file.write_text("\n".join(corpus), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text_file), model_prefix=str(directory / "m"), model_type="bpe",
        vocab_size=700, byte_fallback=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, allow_whitespace_only_pieces=True,
        user_defined_symbols=["<sep>"], control_symbols=["<|eot|>"], num_threads=1,
        minloglevel=2)
    return spm.SentencePieceProcessor(model_file=str(directory / "m.model"))


def spm_metadata(sp):
    """GGUF metadata as llama.cpp's converter writes it for a SentencePiece model: each piece,
    its score and its type (the model proto's types, which GGUF's numbering mirrors)."""
    from sentencepiece import sentencepiece_model_pb2
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(sp.serialized_model_proto())
    types = [p.type for p in proto.pieces]
    for i, t in enumerate(types):  # the converter's own classification agrees
        assert (t == 2) == sp.IsUnknown(i) and (t == 3) == sp.IsControl(i)
        assert (t == 6) == sp.IsByte(i) and (t == 5) == sp.IsUnused(i)
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": [sp.IdToPiece(i) for i in range(sp.GetPieceSize())],
        "tokenizer.ggml.scores": [sp.GetScore(i) for i in range(sp.GetPieceSize())],
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.bos_token_id": sp.bos_id(),
        "tokenizer.ggml.eos_token_id": sp.eos_id(),
        "tokenizer.ggml.unknown_token_id": sp.unk_id(),
        "tokenizer.ggml.add_bos_token": True,
        "tokenizer.ggml.add_eos_token": False,
        "tokenizer.ggml.add_space_prefix": True,
    }


@pytest.fixture(scope="module")
def spm_tok(spm_model):
    return GGUFTokenizer.from_metadata(spm_metadata(spm_model))


def _check_spm(tok, sp, text):
    """kiln == SentencePiece for `text` (with and without BOS), and decoding restores it."""
    expected = sp.encode(text)
    assert tok.encode(text, add_bos=False) == expected, text
    ids = tok.encode(text)
    assert ids == [sp.bos_id()] + expected, text
    # A "▁" written in the text reads as a space (SentencePiece loses the difference too).
    decoded = text.replace("▁", " ")
    assert tok.decode(ids) == decoded == tok.decode(expected)
    assert sp.decode(ids) == decoded


@pytest.mark.parametrize("text", SAMPLES, ids=range(len(SAMPLES)))
def test_spm_matches_sentencepiece_on_samples(spm_tok, spm_model, text):
    if "<sep>" in text:
        pytest.skip("user-defined symbols: see test_spm_special_tokens")
    _check_spm(spm_tok, spm_model, text)


def test_spm_matches_sentencepiece_on_the_license(spm_tok, spm_model):
    paragraphs = _license_paragraphs()
    for paragraph in paragraphs:
        _check_spm(spm_tok, spm_model, paragraph)
    for line in "\n\n".join(paragraphs).splitlines():
        _check_spm(spm_tok, spm_model, line)


@SETTINGS
@given(text=_random_texts())
def test_spm_matches_sentencepiece_on_random_text(spm_tok, spm_model, text):
    text = text.replace("<sep>", "<sp>")
    _check_spm(spm_tok, spm_model, text)
    pieces, rest = _streamed(spm_tok, spm_tok.encode(text))
    assert "".join(pieces) + rest == text.replace("▁", " ")


def test_spm_byte_fallback_is_exercised(spm_tok, spm_model):
    # The samples mean something only if some characters are outside the vocabulary.
    ids = spm_tok.encode("日本語 🙂 \x00", add_bos=False)
    assert any(spm_tok.token_types[i] == tk.TOKEN_BYTE for i in ids)
    assert ids == spm_model.encode("日本語 🙂 \x00")


def test_spm_long_text_is_fast(spm_tok, spm_model):
    text = "\n".join(_license_paragraphs())
    text = (text * (10_000 // len(text) + 1))[:10_000]
    start = time.perf_counter()
    ids = spm_tok.encode(text, add_bos=False)
    elapsed = time.perf_counter() - start
    assert ids == spm_model.encode(text)
    assert elapsed < 1.0, f"10k characters took {elapsed:.2f} s"
    assert spm_tok.decode(ids) == text


def test_spm_bos_eos_and_flags(spm_tok, spm_model):
    text = "Python Software Foundation"
    body = spm_model.encode(text)
    assert spm_tok.add_bos and not spm_tok.add_eos
    assert (spm_tok.bos_id, spm_tok.eos_id) == (spm_model.bos_id(), spm_model.eos_id())
    assert spm_tok.encode(text, add_eos=True) == [spm_tok.bos_id] + body + [spm_tok.eos_id]
    assert spm_tok.encode(text, add_bos=False, add_eos=True) == body + [spm_tok.eos_id]
    assert spm_tok.encode("") == [spm_tok.bos_id]
    assert spm_tok.vocab_size == len(spm_tok) == spm_model.GetPieceSize()
    assert spm_tok.is_special(spm_tok.bos_id) and spm_tok.is_special(spm_model.unk_id())
    assert not spm_tok.is_special(body[0])
    assert spm_tok.is_eos(spm_tok.eos_id) and not spm_tok.is_eos(spm_tok.bos_id)
    assert spm_tok.eog_ids == {spm_tok.eos_id}
    # Special tokens are left out of decode unless asked for.
    ids = [spm_tok.bos_id] + body + [spm_tok.eos_id]
    assert spm_tok.decode(ids) == text
    assert spm_tok.decode(ids, skip_special=False) == "<s>" + text + "</s>"


def test_spm_special_tokens(spm_tok, spm_model):
    """User-defined symbols are always matched, control tokens with parse_special=True; the
    text after either gets the space prefix again (llama.cpp), i.e. ids are the reference's
    for each text fragment, joined by the special ids."""
    sep, eot = spm_model.PieceToId("<sep>"), spm_model.PieceToId("<|eot|>")
    bos = spm_model.bos_id()
    sp = spm_model.encode
    assert spm_tok.encode("a<sep>b c", add_bos=False) == sp("a") + [sep] + sp("b c")
    assert spm_tok.encode("<sep>x<sep>", add_bos=False) == [sep] + sp("x") + [sep]
    # Control tokens are text unless parse_special.
    assert spm_tok.encode("hi<|eot|>", add_bos=False) == sp("hi<|eot|>")
    assert spm_tok.encode("hi<|eot|> there<s>", add_bos=False, parse_special=True) == \
        sp("hi") + [eot] + sp(" there") + [bos]
    assert spm_tok.decode(sp("hi") + [eot], skip_special=False) == "hi<|eot|>"
    assert spm_tok.decode([sep]) == "<sep>"


def test_spm_streaming_holds_back_partial_characters(spm_tok):
    text = "☃𝄞 and é ꙮ"  # characters outside the vocabulary: byte tokens
    ids = spm_tok.encode(text)
    pieces, rest = _streamed(spm_tok, ids)
    assert "".join(pieces) + rest == text and rest == ""
    assert "" in pieces[1:]  # a byte token that did not finish its character
    assert all("\ufffd" not in p for p in pieces)
    # Ending in the middle of a character: flush() gives the replacement character.
    byte_ids = [i for i in ids if spm_tok.token_types[i] == tk.TOKEN_BYTE]
    stream = spm_tok.stream_decoder()
    assert stream.add(byte_ids[0]) == ""
    assert stream.flush() == "\ufffd"
    assert spm_tok.token_to_piece(byte_ids[0]) == "\ufffd"
    assert spm_tok.decode(byte_ids[:1]) == "\ufffd"


@SETTINGS
@given(ids=st.lists(st.integers(0, 699), max_size=30), skip=st.booleans())
def test_streaming_equals_decode_for_any_ids(spm_tok, ids, skip):
    pieces, rest = _streamed(spm_tok, ids, skip)
    assert "".join(pieces) + rest == spm_tok.decode(ids, skip)


def test_spm_token_to_piece(spm_tok, spm_model):
    for i in range(spm_tok.vocab_size):
        piece = spm_model.IdToPiece(i)
        if spm_model.IsByte(i) or spm_model.IsUnused(i):
            continue
        assert spm_tok.token_to_piece(i) == piece.replace("▁", " ")
    assert spm_tok.token_to_piece(spm_tok.bos_id, skip_special=True) == ""
    newline = spm_model.PieceToId("<0x0A>")
    assert spm_tok.token_to_piece(newline) == "\n"


def test_spm_unused_pieces_are_resegmented(tmp_path, spm_model):
    """A merged piece marked unused is split back into its parts, as SentencePiece does."""
    from sentencepiece import sentencepiece_model_pb2
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(spm_model.serialized_model_proto())
    text = "the Python Software Foundation license"
    used = spm_model.encode(text)
    multi = [i for i in used if len(spm_model.IdToPiece(i)) > 2][:3]
    assert multi
    for i in multi:
        proto.pieces[i].type = sentencepiece_model_pb2.ModelProto.SentencePiece.UNUSED
    (tmp_path / "u.model").write_bytes(proto.SerializeToString())
    reference = spm.SentencePieceProcessor(model_file=str(tmp_path / "u.model"))
    tok = GGUFTokenizer.from_metadata(spm_metadata(reference))
    assert reference.encode(text) != used
    assert tok.encode(text, add_bos=False) == reference.encode(text)


def test_spm_without_byte_tokens_uses_unknown(spm_model):
    md = spm_metadata(spm_model)
    tokens, types = list(md["tokenizer.ggml.tokens"]), list(md["tokenizer.ggml.token_type"])
    for i, t in enumerate(types):
        if t == tk.TOKEN_BYTE:
            tokens[i], types[i] = f"[UNUSED{i}]", tk.TOKEN_UNUSED
    md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"] = tokens, types
    tok = GGUFTokenizer.from_metadata(md)
    with_bytes = GGUFTokenizer.from_metadata(spm_metadata(spm_model))
    text = "a ☃𝄞 b"
    ids = tok.encode(text, add_bos=False)
    # Every character that fell back to bytes is now one unknown token.
    assert ids.count(spm_model.unk_id()) == 2
    assert [i for i in ids if i != spm_model.unk_id()] == \
        [i for i in with_bytes.encode(text, add_bos=False)
         if with_bytes.token_types[i] != tk.TOKEN_BYTE]


def test_spm_without_space_prefix(spm_model):
    from sentencepiece import sentencepiece_model_pb2
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(spm_model.serialized_model_proto())
    proto.normalizer_spec.add_dummy_prefix = False
    reference = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    md = spm_metadata(spm_model)
    md["tokenizer.ggml.add_space_prefix"] = False
    tok = GGUFTokenizer.from_metadata(md)
    for text in SAMPLES[:16] + _license_paragraphs()[:5]:
        assert tok.encode(text, add_bos=False) == reference.encode(text)
        assert tok.decode(tok.encode(text)) == text


# ---------------------------------------------------------------------------------------------
# Byte-level BPE ("gpt2")

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_PATTERN = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                  r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                  r"|\s+(?!\S)|\s+")
# Each pre-tokenizer name -> (Hugging Face pre-tokenizer, ignore_merges), built independently.
REFERENCE_PRE = {
    "gpt-2": (lambda: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), False),
    "llama-bpe": (lambda: [LLAMA3_PATTERN], True),
    "qwen2": (lambda: [LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")], False),
    "default": (lambda: [r"[\p{P}\$\+<=>\^~\|]+", GPT2_PATTERN, r"\p{N}+", "[0-9][0-9][0-9]"],
                False),
}


@pytest.fixture(scope="module")
def bpe_trained(corpus):
    """A byte-level BPE trained with Hugging Face tokenizers; <|endoftext|> is a special
    (control) token and <sep> a non-special added (user-defined) token."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.add_tokens(["<sep>"])
    return tokenizer


def bpe_metadata(trained, pre):
    """GGUF metadata as llama.cpp's converter writes it for a byte-level BPE tokenizer."""
    vocab = trained.get_vocab(with_added_tokens=True)
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    added = {t.content: t.special for t in trained.get_added_tokens_decoder().values()}
    types = [tk.TOKEN_NORMAL if t not in added else
             tk.TOKEN_CONTROL if added[t] else tk.TOKEN_USER_DEFINED for t in tokens]
    merges = json.loads(trained.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    eot = vocab["<|endoftext|>"]
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre,
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.merges": merges, "tokenizer.ggml.bos_token_id": eot,
            "tokenizer.ggml.eos_token_id": eot}


def bpe_reference(trained, pre):
    """The same vocabulary and merges with the reference pre-tokenizer for `pre`."""
    make_pre, ignore_merges = REFERENCE_PRE[pre]
    model = json.loads(trained.to_str())["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
              for m in model["merges"]]
    reference = Tokenizer(models.BPE(model["vocab"], merges, ignore_merges=ignore_merges))
    pre_tokenizer = make_pre()
    if isinstance(pre_tokenizer, list):
        pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in pre_tokenizer]
            + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    reference.pre_tokenizer = pre_tokenizer
    reference.decoder = decoders.ByteLevel()
    reference.add_special_tokens(["<|endoftext|>"])
    reference.add_tokens(["<sep>"])
    assert reference.get_vocab() == trained.get_vocab()
    return reference


@pytest.fixture(scope="module", params=sorted(REFERENCE_PRE))
def bpe_pair(request, bpe_trained):
    pre = request.param
    return GGUFTokenizer.from_metadata(bpe_metadata(bpe_trained, pre)), \
        bpe_reference(bpe_trained, pre)


def _check_bpe(tok, reference, text):
    expected = reference.encode(text, add_special_tokens=False).ids
    assert tok.encode(text, add_bos=False) == expected, text
    assert tok.decode(expected) == text
    assert reference.decode(expected, skip_special_tokens=False) == text


@pytest.mark.parametrize("text", SAMPLES, ids=range(len(SAMPLES)))
def test_bpe_matches_tokenizers_on_samples(bpe_pair, text):
    _check_bpe(*bpe_pair, text)


def test_bpe_matches_tokenizers_on_the_license(bpe_pair):
    text = "\n\n".join(_license_paragraphs())
    _check_bpe(*bpe_pair, text)
    for line in text.splitlines():
        _check_bpe(*bpe_pair, line)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(text=_random_texts())
def test_bpe_matches_tokenizers_on_random_text(bpe_pair, text):
    text = text.replace("<sep>", "<sp>")
    tok = bpe_pair[0]
    _check_bpe(*bpe_pair, text)
    pieces, rest = _streamed(tok, tok.encode(text))
    assert "".join(pieces) + rest == text


def test_bpe_special_tokens(bpe_pair):
    tok, reference = bpe_pair
    eot = tok.token_to_id("<|endoftext|>")
    # Hugging Face always matches added tokens; kiln matches control tokens only when asked.
    text = "one<|endoftext|> two<sep>three"
    expected = reference.encode(text, add_special_tokens=False).ids
    assert tok.encode(text, add_bos=False, parse_special=True) == expected
    assert eot in expected and eot not in tok.encode(text, add_bos=False)
    assert tok.decode(expected) == "one two<sep>three"
    assert tok.decode(expected, skip_special=False) == text
    assert tok.is_eog(eot) and tok.is_special(eot)


def test_bpe_defaults(bpe_trained):
    llama3 = GGUFTokenizer.from_metadata(bpe_metadata(bpe_trained, "llama-bpe"))
    gpt2 = GGUFTokenizer.from_metadata(bpe_metadata(bpe_trained, "gpt-2"))
    assert llama3.add_bos and not gpt2.add_bos  # llama.cpp's defaults per pre-tokenizer
    assert llama3.encode("hi")[0] == llama3.bos_id
    md = bpe_metadata(bpe_trained, "gpt-2")
    del md["tokenizer.ggml.pre"], md["tokenizer.ggml.bos_token_id"]
    tok = GGUFTokenizer.from_metadata(md)
    assert tok.pre == "default" and tok.bos_id is None
    with pytest.raises(ValueError, match="no BOS"):
        tok.encode("x", add_bos=True)


def test_bpe_long_text_is_fast(bpe_trained):
    tok = GGUFTokenizer.from_metadata(bpe_metadata(bpe_trained, "gpt-2"))
    reference = bpe_reference(bpe_trained, "gpt-2")
    text = "\n".join(_license_paragraphs())
    text = (text * (10_000 // len(text) + 1))[:10_000]
    start = time.perf_counter()
    ids = tok.encode(text)
    elapsed = time.perf_counter() - start
    assert ids == reference.encode(text).ids
    assert elapsed < 1.0, f"10k characters took {elapsed:.2f} s"


def test_byte_to_unicode_table():
    table = tk.byte_to_unicode()
    assert len(set(table)) == 256
    assert set(table) == set(pre_tokenizers.ByteLevel.alphabet())
    assert all(c.isprintable() and not c.isspace() for c in table)
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("A")] == "A"


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(text=_random_texts())
def test_fallback_regexes_split_like_the_regex_module(text):
    """Without the `regex` module, the unicodedata character classes split identically."""
    pytest.importorskip("regex")
    for patterns, _, _ in pre_tk._PRE_TOKENIZERS.values():
        with_module = pre_tk._PreTokenizer(patterns, use_regex_module=True).split(text)
        assert pre_tk._PreTokenizer(patterns, use_regex_module=False).split(text) == with_module
        assert "".join(with_module) == text


def test_bpe_without_the_regex_module(bpe_trained, monkeypatch):
    monkeypatch.setattr(pre_tk, "_regex_module", None)
    for pre in ("llama-bpe", "default"):
        tok = GGUFTokenizer.from_metadata(bpe_metadata(bpe_trained, pre))
        reference = bpe_reference(bpe_trained, pre)
        for text in SAMPLES + _license_paragraphs():
            _check_bpe(tok, reference, text)


# ---------------------------------------------------------------------------------------------
# Bad metadata


def _spm_broken(md, key, value):
    md = dict(md)
    if value is _DELETE:
        del md[key]
    else:
        md[key] = value
    return md


_DELETE = object()
BAD_METADATA = [
    ("tokenizer.ggml.model", _DELETE, ValueError, "'tokenizer.ggml.model'"),
    ("tokenizer.ggml.model", 3, ValueError, "'tokenizer.ggml.model' must be a string"),
    ("tokenizer.ggml.model", "bert", NotImplementedError, "'bert'"),
    ("tokenizer.ggml.tokens", _DELETE, ValueError, "has no 'tokenizer.ggml.tokens'"),
    ("tokenizer.ggml.tokens", "abc", ValueError, "'tokenizer.ggml.tokens' must be a list"),
    ("tokenizer.ggml.tokens", [], ValueError, "'tokenizer.ggml.tokens' is empty"),
    ("tokenizer.ggml.scores", _DELETE, ValueError, "has no 'tokenizer.ggml.scores'"),
    ("tokenizer.ggml.scores", [0.0] * 5, ValueError, "'tokenizer.ggml.scores' has 5 entries"),
    ("tokenizer.ggml.scores", "nan", ValueError, "'tokenizer.ggml.scores'"),
    ("tokenizer.ggml.token_type", [1] * 3, ValueError, "'tokenizer.ggml.token_type' has 3"),
    ("tokenizer.ggml.bos_token_id", "1", ValueError, "'tokenizer.ggml.bos_token_id' must be"),
    ("tokenizer.ggml.bos_token_id", True, ValueError, "'tokenizer.ggml.bos_token_id' must be"),
    ("tokenizer.ggml.add_bos_token", 1, ValueError, "'tokenizer.ggml.add_bos_token' must be"),
    ("tokenizer.ggml.add_space_prefix", "yes", ValueError, "'tokenizer.ggml.add_space_prefix'"),
]


@pytest.mark.parametrize("key,value,error,message", BAD_METADATA,
                         ids=[f"{k.split('.')[-1]}-{i}" for i, (k, *_) in
                              enumerate(BAD_METADATA)])
def test_bad_spm_metadata(spm_model, key, value, error, message):
    md = spm_metadata(spm_model)
    if value == "nan":
        value = list(md[key])
        value[7] = math.nan
    with pytest.raises(error, match=message.replace("[", r"\[").replace("(", r"\(")):
        GGUFTokenizer.from_metadata(_spm_broken(md, key, value))


def test_bad_token_types_and_merges(spm_model, bpe_trained):
    md = spm_metadata(spm_model)
    types = list(md["tokenizer.ggml.token_type"])
    types[4] = 9
    with pytest.raises(ValueError, match=r"'tokenizer.ggml.token_type'\[4\] must be"):
        GGUFTokenizer.from_metadata(_spm_broken(md, "tokenizer.ggml.token_type", types))
    tokens = list(md["tokenizer.ggml.tokens"])
    tokens[2] = None
    with pytest.raises(ValueError, match=r"'tokenizer.ggml.tokens'\[2\] must be strings"):
        GGUFTokenizer.from_metadata(_spm_broken(md, "tokenizer.ggml.tokens", tokens))
    md = bpe_metadata(bpe_trained, "gpt-2")
    with pytest.raises(ValueError, match="has no 'tokenizer.ggml.merges'"):
        GGUFTokenizer.from_metadata(_spm_broken(md, "tokenizer.ggml.merges", _DELETE))
    merges = list(md["tokenizer.ggml.merges"])
    merges[3] = "nospace"
    with pytest.raises(ValueError, match=r"'tokenizer.ggml.merges'\[3\].*'nospace'"):
        GGUFTokenizer.from_metadata(_spm_broken(md, "tokenizer.ggml.merges", merges))
    with pytest.raises(NotImplementedError, match="pre-tokenizer 'starcoder'"):
        GGUFTokenizer.from_metadata(_spm_broken(md, "tokenizer.ggml.pre", "starcoder"))
    with pytest.raises(ValueError, match="'tokenizer.ggml.add_bos_token' is true but"):
        md = _spm_broken(md, "tokenizer.ggml.bos_token_id", _DELETE)
        GGUFTokenizer.from_metadata(_spm_broken(md, "tokenizer.ggml.add_bos_token", True))


def test_out_of_range_special_id_warns_and_is_ignored(spm_model):
    md = _spm_broken(spm_metadata(spm_model), "tokenizer.ggml.padding_token_id", 10 ** 6)
    with pytest.warns(UserWarning, match="'tokenizer.ggml.padding_token_id' = 1000000"):
        tok = GGUFTokenizer.from_metadata(md)
    assert tok.padding_id is None


def test_bad_arguments(spm_tok):
    with pytest.raises(TypeError, match="takes a str"):
        spm_tok.encode(b"bytes")
    for bad in (-1, spm_tok.vocab_size, 1.5):
        with pytest.raises(ValueError, match="outside the vocabulary"):
            spm_tok.decode([bad])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GGUFTokenizer.from_metadata(spm_metadata_default_ids(spm_tok))


def spm_metadata_default_ids(tok):
    """Without the special-id keys, llama.cpp's SentencePiece defaults (unk 0, bos 1, eos 2)."""
    md = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tok.tokens,
          "tokenizer.ggml.scores": [0.0] * tok.vocab_size,
          "tokenizer.ggml.token_type": tok.token_types}
    made = GGUFTokenizer.from_metadata(md)
    assert (made.unknown_id, made.bos_id, made.eos_id) == (0, 1, 2) and made.add_bos
    return md


# --- hostile vocabularies ----------------------------------------------------------------------

def _mutations(md, rnd):
    """A copy of a valid metadata dict with one structural fault of the kind a corrupt or
    hostile GGUF file can carry (values of the wrong type, lengths that disagree, ids out of
    range, empty or huge strings, odd unicode)."""
    md = {k: (list(v) if isinstance(v, list) else v) for k, v in md.items()}
    key = rnd.choice(sorted(md))
    kind = rnd.randrange(8)
    v = md[key]
    if kind == 0:
        md[key] = rnd.choice([None, 3, -1, 2.5, "x", True, [], [1, "a"], {"a": 1}])
    elif kind == 1 and isinstance(v, list) and v:
        md[key] = v[:rnd.randrange(len(v))]
    elif kind == 2 and isinstance(v, list) and v:
        i = rnd.randrange(len(v))
        v[i] = rnd.choice(["", "\udcff", "\u2581" * 300, "<0xZZ>", "<0x41>", None, -7, float("nan")])
    elif kind == 3:
        del md[key]
    elif kind == 4 and isinstance(v, list) and v:
        md[key] = v + v[:rnd.randrange(1, len(v) + 1)]      # duplicated entries
    elif kind == 5:
        md[key] = 10 ** 12 if isinstance(v, int) else v
    elif kind == 6 and key.endswith("merges") and v:
        v[rnd.randrange(len(v))] = rnd.choice(["a", "a b c", " ", "\u2581 \u2581"])
    else:
        md["tokenizer.ggml.tokens"] = [t if rnd.random() > 0.05 else "" for t in md["tokenizer.ggml.tokens"]]
    return md


@pytest.mark.parametrize("which", ["spm", "bpe"])
def test_mutated_vocabularies_raise_or_work(which, spm_model, bpe_trained):
    """Every mutated vocabulary is either rejected with ValueError / NotImplementedError /
    TypeError, or loads and then encodes and decodes text without any other exception."""
    import random
    md = spm_metadata(spm_model) if which == "spm" else bpe_metadata(bpe_trained, "gpt-2")
    rnd = random.Random(11)
    outcomes = {"rejected": 0, "works": 0}
    for _ in range(150):
        bad = _mutations(md, rnd)
        try:
            tok = GGUFTokenizer.from_metadata(bad)
        except (ValueError, NotImplementedError, TypeError):
            outcomes["rejected"] += 1
            continue
        ids = tok.encode("Hello wörld, 123 🙂\n\tend")
        assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids)
        tok.decode(ids)
        tok.decode([rnd.randrange(tok.vocab_size) for _ in range(20)])
        outcomes["works"] += 1
    assert outcomes["rejected"] > 0 and outcomes["works"] > 0, outcomes
