"""kiln.llm: large-language-model inference from GGUF files (llama.cpp's format):
tokenizers from the file's vocabulary, a Llama-family decoder with a key/value cache, and
text generation. Weights stay in the file's quantised formats where kiln has kernels for
them (kiln.quant).

    model, tok = kiln.llm.load("model.gguf")
    text = tok.stream_decoder()      # holds back characters split across byte tokens
    for t in kiln.llm.generate(model, tok.encode("Once upon a time"), 64, eos_id=tok.eog_ids):
        print(text.add(t), end="", flush=True)
    print(text.flush())
"""
from .generate import GenerationStats, generate  # noqa: F401
from .llama import KVCache, LlamaConfig, LlamaModel  # noqa: F401
from .loader import load  # noqa: F401
from .hf_checkpoint import from_pretrained  # noqa: F401  (Hugging Face checkpoint folders)


def __getattr__(name):
    # The tokenizer module is imported on first use (it compiles its regular expressions).
    if name == "GGUFTokenizer":
        from .tokenizer import GGUFTokenizer
        return GGUFTokenizer
    raise AttributeError(f"module 'kiln.llm' has no attribute {name!r}")
