"""kiln.llm: large-language-model inference from GGUF files (llama.cpp's format):
tokenizers from the file's vocabulary, a Llama-family decoder with a key/value cache, and
text generation. Weights stay in the file's quantised formats where kiln has kernels for
them (kiln.quant)."""
