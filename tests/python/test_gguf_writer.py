"""kiln.gguf.GGUFWriter and the Hugging Face -> GGUF converter against independent readers:
llama.cpp's gguf-py (GGUFReader) for every metadata type and tensor type, transformers'
GGUF loader for converted models (its own undoing of llama.cpp's Q/K permutation), the
original transformers model for logits, and Hugging Face tokenizers for the tokenizer."""
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

import kiln  # noqa: E402
import kiln.gguf  # noqa: E402
import kiln.llm  # noqa: E402
from kiln.llm.convert import convert  # noqa: E402
from kiln.quant import quantize  # noqa: E402

VT = gguf.GGUFValueType

# --- metadata -------------------------------------------------------------------------------

# (key, value, type given to add or None, expected gguf-py value type(s), expected value)
METADATA = [
    ("t.u8", 255, "u8", [VT.UINT8], 255),
    ("t.i8", -128, "i8", [VT.INT8], -128),
    ("t.u16", 65535, "u16", [VT.UINT16], 65535),
    ("t.i16", -32768, "i16", [VT.INT16], -32768),
    ("t.u32", 2**32 - 1, "u32", [VT.UINT32], 2**32 - 1),
    ("t.i32", -2**31, "i32", [VT.INT32], -2**31),
    ("t.f32", 0.1, "f32", [VT.FLOAT32], float(np.float32(0.1))),
    ("t.bool", False, "bool", [VT.BOOL], False),
    ("t.string", "héllo 🙂", "string", [VT.STRING], "héllo 🙂"),
    ("t.u64", 2**64 - 1, "u64", [VT.UINT64], 2**64 - 1),
    ("t.i64", -2**63, "i64", [VT.INT64], -2**63),
    ("t.f64", 0.1, "f64", [VT.FLOAT64], 0.1),
    ("t.f64_from_int", 3, "f64", [VT.FLOAT64], 3.0),
    # inferred
    ("i.int", 7, None, [VT.INT32], 7),
    ("i.big_int", 2**40, None, [VT.INT64], 2**40),
    ("i.negative_big", -2**40, None, [VT.INT64], -2**40),
    ("i.float", 1.5, None, [VT.FLOAT32], 1.5),
    ("i.bool", True, None, [VT.BOOL], True),
    ("i.str", "", None, [VT.STRING], ""),
    ("i.ints", [1, -2, 3], None, [VT.ARRAY, VT.INT32], [1, -2, 3]),
    ("i.big_ints", [1, 2**33], None, [VT.ARRAY, VT.INT64], [1, 2**33]),
    ("i.floats", [0.5, -2], None, [VT.ARRAY, VT.FLOAT32], [0.5, -2.0]),
    ("i.bools", (True, False), None, [VT.ARRAY, VT.BOOL], [True, False]),
    ("i.strs", ["a", "", "ü"], None, [VT.ARRAY, VT.STRING], ["a", "", "ü"]),
    # arrays of a given element type
    ("a.u8", [0, 255], "u8", [VT.ARRAY, VT.UINT8], [0, 255]),
    ("a.u32", [1, 2], "array[u32]", [VT.ARRAY, VT.UINT32], [1, 2]),
    ("a.i16", [-1, 2], "i16", [VT.ARRAY, VT.INT16], [-1, 2]),
    ("a.f64", [0.1, 2], "f64", [VT.ARRAY, VT.FLOAT64], [0.1, 2.0]),
    ("a.u64", [2**64 - 1], "u64", [VT.ARRAY, VT.UINT64], [2**64 - 1]),
    ("a.i64", [-5], "i64", [VT.ARRAY, VT.INT64], [-5]),
    ("a.i8", [-5], "i8", [VT.ARRAY, VT.INT8], [-5]),
    ("a.u16", [5], "u16", [VT.ARRAY, VT.UINT16], [5]),
    ("a.empty", [], "u32", [VT.ARRAY], []),
]


def _write_metadata(path, alignment=32):
    with kiln.gguf.GGUFWriter(path, alignment=alignment) as w:
        for key, value, value_type, _, _ in METADATA:
            w.add(key, value, type=value_type)
        w.add("nested", [[1, 2], [3]])
    return path


def test_metadata_read_by_gguf_py_and_kiln(tmp_path):
    path = _write_metadata(tmp_path / "m.gguf")
    reader = gguf.GGUFReader(path)
    assert reader.fields["GGUF.version"].contents() == 3
    assert "general.alignment" not in reader.fields  # only written when not 32
    assert [k for k in reader.fields if not k.startswith("GGUF.")] == \
        [m[0] for m in METADATA] + ["nested"]
    for key, _, _, types, expected in METADATA:
        field = reader.fields[key]
        assert field.types == types, key
        assert field.contents() == expected, key
    # kiln's own reader: the same values, and the nested array kept nested
    kiln_reader = kiln.gguf.GGUFReader(path)
    assert kiln_reader.version == 3
    for key, _, _, _, expected in METADATA:
        assert kiln_reader.metadata[key] == expected, key
    assert kiln_reader.metadata["nested"] == [[1, 2], [3]]
    assert kiln_reader.metadata_types()["t.u16"] == "u16"
    assert kiln_reader.metadata_types()["a.empty"] == "array[u32]"


# --- tensors --------------------------------------------------------------------------------

def _tensors():
    """name -> (value given to add_tensor, type given or None, expected ggml type, expected
    numpy array (what gguf-py's data holds) or raw bytes (block-quantised))."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 64)).astype(np.float32)
    t = kiln.tensor(x)
    out = {
        "f32.1d": (kiln.tensor(x[0]), None, "F32", x[0]),
        "f32.3d": (kiln.tensor(x.reshape(3, 2, 64)), None, "F32", x.reshape(3, 2, 64)),
        "f32.4d": (kiln.tensor(x.reshape(2, 3, 4, 16)), None, "F32", x.reshape(2, 3, 4, 16)),
        "f32.transposed": (t.t(), None, "F32", x.T),  # not contiguous: written in logical order
        "f16": (t.to(kiln.float16), None, "F16", x.astype(np.float16)),
        "f16.converted": (t, "F16", "F16", x.astype(np.float16)),
        "f64": (kiln.tensor(x.astype(np.float64)), None, "F64", x.astype(np.float64)),
        "i8": (kiln.tensor(np.arange(-8, 8, dtype=np.int8)), None, "I8", np.arange(-8, 8, dtype=np.int8)),
        "i16": (kiln.tensor(np.arange(5, dtype=np.int16)), None, "I16", np.arange(5, dtype=np.int16)),
        "i32": (kiln.tensor(np.arange(7, dtype=np.int32) - 3), None, "I32", np.arange(7, dtype=np.int32) - 3),
        "i64": (kiln.arange(9) * (2**40), None, "I64", np.arange(9, dtype=np.int64) * (2**40)),
        "q8_0.weight": (quantize(t, "Q8_0"), None, "Q8_0", quantize(t, "Q8_0").raw.numpy().tobytes()),
        "q4_0.weight": (quantize(t, "Q4_0"), None, "Q4_0", quantize(t, "Q4_0").raw.numpy().tobytes()),
        "q8_0.converted": (t, "q8_0", "Q8_0", quantize(t, "Q8_0").raw.numpy().tobytes()),
    }
    bf16 = t.to(kiln.bfloat16)
    out["bf16"] = (bf16, None, "BF16", bf16.view(kiln.uint8).numpy().tobytes())
    out["bf16.converted"] = (t, "BF16", "BF16", bf16.view(kiln.uint8).numpy().tobytes())
    return out


@pytest.mark.parametrize("alignment", [32, 64])
def test_tensors_read_by_gguf_py_and_kiln(tmp_path, alignment):
    tensors = _tensors()
    path = tmp_path / "t.gguf"
    with kiln.gguf.GGUFWriter(path, alignment=alignment) as w:
        w.add("general.architecture", "test")
        for name, (value, ggml_type, _, _) in tensors.items():
            w.add_tensor(name, value, type=ggml_type)
    reader = gguf.GGUFReader(path)
    if alignment != 32:
        assert reader.fields["general.alignment"].contents() == alignment
    assert [t.name for t in reader.tensors] == list(tensors)
    for info in reader.tensors:
        value, _, ggml_type, expected = tensors[info.name]
        assert info.tensor_type.name == ggml_type, info.name
        assert info.data_offset % alignment == 0, info.name
        shape = value.shape
        assert list(info.shape) == list(reversed(shape)), info.name  # innermost first
        if isinstance(expected, bytes):
            assert np.asarray(info.data).tobytes() == expected, info.name
        else:
            assert info.data.dtype == expected.dtype, info.name
            np.testing.assert_array_equal(info.data.reshape(expected.shape), expected, err_msg=info.name)
    # kiln's reader: same names, shapes and values (quantised ones as GGMLWeight blocks)
    kiln_reader = kiln.gguf.GGUFReader(path)
    assert kiln_reader.alignment == alignment
    for name, (value, _, ggml_type, expected) in tensors.items():
        got = kiln_reader.tensor(name)
        assert kiln_reader.tensor_info(name).type == ggml_type
        assert tuple(got.shape) == tuple(value.shape)
        if isinstance(expected, bytes):
            raw = got.raw if ggml_type.startswith("Q") else got.view(kiln.uint8)
            assert raw.numpy().tobytes() == expected, name
        else:
            np.testing.assert_array_equal(got.numpy(), expected, err_msg=name)


def test_save_writes_metadata_and_tensors(tmp_path):
    w = kiln.tensor(np.arange(64, dtype=np.float32).reshape(2, 32))
    kiln.gguf.save(tmp_path / "s.gguf", {"general.architecture": "x", "x.count": 3},
                   {"a": w, "b": quantize(w, "Q8_0")})
    r = kiln.gguf.GGUFReader(tmp_path / "s.gguf")
    assert r.metadata == {"general.architecture": "x", "x.count": 3}
    np.testing.assert_array_equal(r.tensor("a").numpy(), w.numpy())
    assert r.tensor("b").raw.numpy().tobytes() == quantize(w, "Q8_0").raw.numpy().tobytes()
    assert not (tmp_path / "s.gguf.part").exists()


def _writer(tmp_path):
    w = kiln.gguf.GGUFWriter(tmp_path / "bad.gguf")
    w.add("dup", 1)
    w.add_tensor("dup.tensor", kiln.zeros(4))
    return w


@pytest.mark.parametrize("call, match", [
    (lambda w: w.add("dup", 2), "duplicate metadata key 'dup'"),
    (lambda w: w.add("", 2), "non-empty str"),
    (lambda w: w.add(3, 2), "non-empty str"),
    (lambda w: w.add("general.alignment", 64), "alignment argument"),
    (lambda w: w.add("k.empty", []), "'k.empty' is an empty list"),
    (lambda w: w.add("k.mixed", [1, "a"]), "'k.mixed'.*one kind"),
    (lambda w: w.add("k.none", None), "'k.none'.*NoneType"),
    (lambda w: w.add("k.range", 256, type="u8"), "'k.range'.*256 does not fit in u8"),
    (lambda w: w.add("k.negative", -1, type="u32"), "'k.negative'.*does not fit in u32"),
    (lambda w: w.add("k.huge", 2**64), "'k.huge'.*outside the range"),
    (lambda w: w.add("k.f32", 1e300, type="f32"), "'k.f32'.*does not fit in f32"),
    (lambda w: w.add("k.type", 1, type="uint128"), "'k.type'.*unknown value type"),
    (lambda w: w.add("k.float_as_int", 1.5, type="i32"), "'k.float_as_int'.*expected a i32"),
    (lambda w: w.add("k.bool_as_int", True, type="i32"), "'k.bool_as_int'.*expected a i32"),
    (lambda w: w.add("k.array_type", 3, type="array[u8]"), "'k.array_type'.*needs a list"),
    (lambda w: w.add("k.item", [1, 300], type="u8"), r"'k.item\[1\]'.*does not fit"),
    (lambda w: w.add("k.surrogate", "\ud800"), "'k.surrogate'.*UTF-8"),
    (lambda w: w.add_tensor("dup.tensor", kiln.zeros(4)), "duplicate tensor name 'dup.tensor'"),
    (lambda w: w.add_tensor("", kiln.zeros(4)), "non-empty str"),
    (lambda w: w.add_tensor("x" * 64, kiln.zeros(4)), "longer than 63 bytes"),
    (lambda w: w.add_tensor("np", np.zeros(4)), "'np' must be a kiln.Tensor"),
    (lambda w: w.add_tensor("u8", kiln.zeros(4, dtype=kiln.uint8)), "'u8' has dtype kiln.uint8"),
    (lambda w: w.add_tensor("bool", kiln.zeros(4, dtype=kiln.bool)), "'bool' has dtype"),
    (lambda w: w.add_tensor("scalar", kiln.tensor(1.0)), "'scalar' has 0 dimensions"),
    (lambda w: w.add_tensor("5d", kiln.zeros(1, 1, 1, 1, 2)), "'5d' has 5 dimensions"),
    (lambda w: w.add_tensor("q", kiln.zeros(2, 48), type="Q8_0"), "'q'.*multiple of 32"),
    (lambda w: w.add_tensor("iq", kiln.zeros(2, 32, dtype=kiln.int32), type="Q8_0"), "'iq'.*only float"),
    (lambda w: w.add_tensor("k", kiln.zeros(2, 32), type="Q4_K"), "'k' cannot be converted"),
    (lambda w: w.add_tensor("g", quantize(kiln.zeros(2, 32), "Q8_0"), type="F32"), "'g' is a Q8_0"),
])
def test_bad_input_raises_a_clear_error(tmp_path, call, match):
    w = _writer(tmp_path)
    with pytest.raises(ValueError, match=match):
        call(w)
    w.write()  # the writer is still usable: nothing bad was recorded
    assert kiln.gguf.GGUFReader(tmp_path / "bad.gguf").metadata == {"dup": 1}


def test_writer_lifecycle_errors(tmp_path):
    for alignment in (0, 12, 4, 32.0, True):
        with pytest.raises(ValueError, match="alignment"):
            kiln.gguf.GGUFWriter(tmp_path / "a.gguf", alignment=alignment)
    w = _writer(tmp_path)
    w.write()
    with pytest.raises(ValueError, match="already been written"):
        w.add("later", 1)
    with pytest.raises(ValueError, match="already been written"):
        w.write()
    # An error inside the with block writes nothing.
    with pytest.raises(RuntimeError):
        with kiln.gguf.GGUFWriter(tmp_path / "never.gguf") as w:
            w.add("a", 1)
            raise RuntimeError("stop")
    assert not (tmp_path / "never.gguf").exists()


# --- converting Hugging Face checkpoints ---------------------------------------------------

PROMPT = [3, 200, 17, 42, 299, 5, 120]
VOCAB = 384


def _hf_model(arch):
    """A tiny random transformers model (weights, norms and biases perturbed)."""
    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  rms_norm_eps=1e-6, rope_theta=5e5)
    if arch == "llama":
        hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common, tie_word_embeddings=False))
    else:
        hf = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common, tie_word_embeddings=True))
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return hf.eval()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """arch -> (folder, transformers model, its logits on PROMPT)."""
    out = {}
    for arch in ("llama", "qwen2"):
        folder = tmp_path_factory.mktemp(arch)
        hf = _hf_model(arch)
        hf.save_pretrained(folder)
        with torch.no_grad():
            out[arch] = folder, hf, hf(torch.tensor([PROMPT])).logits.numpy()[0]
    return out


def _kiln_logits(model, ids):
    with kiln.inference_mode():
        return model.forward(kiln.tensor([ids]), model.new_cache(1, len(ids)), 0).numpy()[0]


def _convert_quietly(folder, out, type):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = convert(folder, out, type)
    return written, [str(w.message) for w in caught]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_converted_f32_equals_the_original_model(checkpoints, tmp_path, arch):
    folder, hf, want = checkpoints[arch]
    out = tmp_path / f"{arch}.gguf"
    written, messages = _convert_quietly(folder, out, "f32")
    assert any("no tokenizer" in m for m in messages)  # the checkpoint has no tokenizer.json
    assert set(written.values()) == {"F32"}
    assert ("output.weight" in written) == (arch == "llama")  # qwen2 here ties it
    assert ("blk.0.attn_q.bias" in written) == (arch == "qwen2")
    md = kiln.gguf.GGUFReader(out).metadata
    assert md["general.architecture"] == arch and md[f"{arch}.block_count"] == 2
    assert md[f"{arch}.attention.head_count_kv"] == 2 and md[f"{arch}.rope.freq_base"] == 5e5
    # transformers reading the GGUF (it undoes llama's Q/K permutation itself)
    from_gguf = transformers.AutoModelForCausalLM.from_pretrained(
        str(tmp_path), gguf_file=out.name, dtype=torch.float32).eval()
    with torch.no_grad():
        got = from_gguf(torch.tensor([PROMPT])).logits.numpy()[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # kiln reading the GGUF (adjacent-pair RoPE on the permuted rows for llama)
    model, tok = kiln.llm.load(out)
    assert tok is None
    np.testing.assert_allclose(_kiln_logits(model, PROMPT), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("arch, qtype", [("llama", "q8_0"), ("qwen2", "q4_0")])
def test_converted_quantised_model(checkpoints, tmp_path, arch, qtype):
    folder, _, want = checkpoints[arch]
    out = tmp_path / "q.gguf"
    written, _ = _convert_quietly(folder, out, qtype)
    assert written["blk.0.ffn_up.weight"] == written["token_embd.weight"] == qtype.upper()
    assert written["blk.0.ffn_norm.weight"] == "F32"
    reader = gguf.GGUFReader(out)
    assert reader.fields["general.file_type"].contents() == {"q8_0": 7, "q4_0": 2}[qtype]
    # The blocks, dequantised by transformers (gguf-py's dequantiser) and by kiln: one function.
    from_gguf = transformers.AutoModelForCausalLM.from_pretrained(
        str(tmp_path), gguf_file=out.name, dtype=torch.float32).eval()
    with torch.no_grad():
        on_file = from_gguf(torch.tensor([PROMPT])).logits.numpy()[0]
    widened, _ = kiln.llm.load(out, dequantize=True)
    np.testing.assert_allclose(_kiln_logits(widened, PROMPT), on_file, rtol=1e-4,
                               atol=1e-4 * np.abs(on_file).max())
    # Q8_0 blocks kept: close to the original float model.
    if qtype == "q8_0":
        model, _ = kiln.llm.load(out)
        err = np.abs(_kiln_logits(model, PROMPT) - want).max() / np.abs(want).max()
        assert err < 0.05, err


def test_quantised_matrix_with_partial_blocks_falls_back_to_f16(tmp_path):
    torch.manual_seed(1)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=48, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=2, max_position_embeddings=32)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    written, _ = _convert_quietly(tmp_path, tmp_path / "m.gguf", "q8_0")
    assert written["blk.0.attn_q.weight"] == "F16"   # rows of 48 values
    assert written["blk.0.ffn_down.weight"] == "Q8_0"  # rows of 64 values
    assert gguf.GGUFReader(tmp_path / "m.gguf").tensors[1].tensor_type.name in ("F32", "F16")


def test_command_line_convert_writes_the_same_file(checkpoints, tmp_path):
    folder, _, _ = checkpoints["llama"]
    cli_out, function_out = tmp_path / "cli.gguf", tmp_path / "function.gguf"
    r = subprocess.run([sys.executable, "-m", "kiln.llm", "convert", str(folder), str(cli_out),
                        "--type", "f32"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "21 tensors (21 F32)" in r.stdout and "no tokenizer" in r.stderr
    _convert_quietly(folder, function_out, "f32")
    assert cli_out.read_bytes() == function_out.read_bytes()
    r = subprocess.run([sys.executable, "-m", "kiln.llm", "generate", str(cli_out), "hi"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "has no tokenizer" in r.stderr
    r = subprocess.run([sys.executable, "-m", "kiln.llm", "convert", str(tmp_path / "missing"),
                        str(tmp_path / "x.gguf")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "config.json" in r.stderr


def test_convert_rejects_what_it_cannot_write(checkpoints, tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        convert(tmp_path, tmp_path / "x.gguf")
    with pytest.raises(ValueError, match="unknown --type 'q5_k'"):
        convert(checkpoints["llama"][0], tmp_path / "x.gguf", "q5_k")
    (tmp_path / "config.json").write_text('{"model_type": "gpt_neox"}')
    with pytest.raises(NotImplementedError, match="gpt_neox"):
        convert(tmp_path, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


# --- tokenizers -----------------------------------------------------------------------------

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEXTS = ["Hello world", " leading space", "don't we'll THEY'RE", "numbers 12345 3.14",
         "héllo wörld 日本語 🙂", "tabs\tand\nnewlines\n\n", "x <sep> y", "", "  two  spaces ",
         "<|endoftext|> is special"]


def _train_bpe(style):
    """A byte-level BPE trained offline on Python's license: "gpt2" (GPT-2's ByteLevel regex,
    no BOS) or "llama3" (Llama 3's split regex, ignore_merges, a template adding BOS)."""
    with open("/usr/lib/python3.11/LICENSE.txt", encoding="utf-8") as f:
        corpus = f.read().splitlines() + ["héllo wörld 日本語 🙂 12345"] * 5
    tok = Tokenizer(models.BPE(ignore_merges=style == "llama3"))
    if style == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=340, special_tokens=["<|endoftext|>", "<|begin|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens(["<sep>"])
    if style == "llama3":
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin|> $A", special_tokens=[("<|begin|>", tok.token_to_id("<|begin|>"))])
    return tok


@pytest.mark.parametrize("style, pre", [("gpt2", "gpt-2"), ("llama3", "llama-bpe")])
def test_byte_level_bpe_tokenizer_is_converted(checkpoints, tmp_path, style, pre):
    source, _, want = checkpoints["qwen2" if style == "gpt2" else "llama"]
    folder = tmp_path / "with_tokenizer"
    folder.mkdir()
    for f in source.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    reference = _train_bpe(style)
    reference.save(str(folder / "tokenizer.json"))
    bos = "<|begin|>" if style == "llama3" else "<|endoftext|>"
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": bos, "eos_token": {"content": "<|endoftext|>"}, "chat_template": "{{ x }}"}))
    out = tmp_path / "t.gguf"
    _, messages = _convert_quietly(folder, out, "f32")
    assert not messages
    model, tok = kiln.llm.load(out)
    np.testing.assert_allclose(_kiln_logits(model, PROMPT), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())
    assert tok.model == "gpt2" and tok.pre == pre and tok.vocab_size == VOCAB
    assert tok.bos_id == reference.token_to_id(bos)
    assert tok.eos_id == reference.token_to_id("<|endoftext|>")
    assert tok.add_bos == (style == "llama3")
    assert tok.tokens[-1] == f"[PAD{VOCAB - 1}]"  # padded to the model's vocabulary
    for text in TEXTS:
        expected = reference.encode(text).ids  # with the template's BOS where there is one
        assert tok.encode(text, parse_special=True) == expected, text  # HF matches specials
        assert tok.decode(expected, skip_special=False) == \
            reference.decode(expected, skip_special_tokens=False), text
    md = kiln.gguf.GGUFReader(out).metadata
    assert md["tokenizer.chat_template"] == "{{ x }}"
    assert md["tokenizer.ggml.token_type"][reference.token_to_id("<sep>")] == 4  # user-defined
    assert md["tokenizer.ggml.token_type"][reference.token_to_id("<|endoftext|>")] == 3  # control


def test_other_tokenizers_are_left_out_with_a_warning(checkpoints, tmp_path):
    source = checkpoints["llama"][0]
    for f in source.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    wordpiece.save(str(tmp_path / "tokenizer.json"))
    _, messages = _convert_quietly(tmp_path, tmp_path / "w.gguf", "f32")
    assert any("'WordPiece', not a BPE" in m and "no tokenizer" in m for m in messages)
    assert kiln.llm.load(tmp_path / "w.gguf")[1] is None
    assert "tokenizer.ggml.model" not in gguf.GGUFReader(tmp_path / "w.gguf").fields
