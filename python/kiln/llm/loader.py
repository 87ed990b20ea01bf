"""kiln.llm.load: a Llama-family model and its tokenizer from one GGUF file."""
from .. import _C
from ..gguf import GGUFReader
from ..quant import GGMLWeight


def load(path, *, dtype=None, dequantize=False, device="cpu"):
    """(LlamaModel, GGUFTokenizer) from a GGUF file; the tokenizer is None when the file has
    none (no "tokenizer.ggml.model" key, e.g. converted without a byte-level BPE tokenizer).

    Weights stay in the file's format: block-quantised matrices as kiln.quant.GGMLWeight
    (Q8_0 / Q4_0 multiply in the quantised domain; other block types are dequantised per
    product, so dequantize=True is the faster choice for K-quant files), float matrices as
    tensors. dequantize=True widens every weight to float32 (then to `dtype`).
    dtype: the activations' dtype: float32, or bfloat16 (the default for a BF16 file, whose
    weights are then used as they are).
    device: "cpu", or "xpu" to run on the GPU backend (Q8_0, Q4_0, Q4_K, Q5_K and Q6_K
    matrices stay quantised on the device; other block types are dequantised to `dtype`).
    """
    from .llama import LlamaConfig, LlamaModel
    from .tokenizer import GGUFTokenizer

    reader = GGUFReader(path)
    shapes = {n: reader.tensor_info(n).shape for n in reader.tensor_names}
    config = LlamaConfig.from_gguf_metadata(reader.metadata, shapes)
    weights = reader.tensors(dequantize=dequantize)
    if dtype is None:
        matrices = [w for w in weights.values() if not isinstance(w, GGMLWeight) and w.dim() == 2]
        dtype = _C.bfloat16 if matrices and all(w.dtype == _C.bfloat16 for w in matrices) else _C.float32
    model = LlamaModel(config, weights, dtype=dtype, device=device)
    if "tokenizer.ggml.model" not in reader.metadata:
        return model, None
    return model, GGUFTokenizer.from_metadata(reader.metadata)
