"""kiln.quant: weights kept in ggml's block-quantised formats (llama.cpp's Q8_0, Q4_0, and the
K-quants read from GGUF files), and the Linear product over them.

`GGMLWeight` holds a Linear weight [out_features, in_features] as its raw blocks. For Q8_0,
Q4_0, Q4_K, Q5_K and Q6_K, `linear(x)` runs in the quantised domain as llama.cpp does
(activations quantised to 8 bits per 32-value block, exact integer block products; decoding
reads about one byte per weight); other types are dequantised per call (load them with
`dequantize()` instead). `to("xpu")` moves the blocks to the GPU backend, whose kernels for
the same five types read them there (decision 0087).
"""
from . import _C
from ._C import Tensor

_g = _C._gguf

# name -> (number, values per block, bytes per block, block-quantised?)
GGML_TYPES = {name: (num, elems, nbytes, q) for name, num, elems, nbytes, q in _g.types()}
_NAMES = {num: name for name, (num, _, _, _) in GGML_TYPES.items()}


def _type_number(type):
    if isinstance(type, int) and type in _NAMES:
        return type
    if isinstance(type, str) and type.upper() in GGML_TYPES:
        return GGML_TYPES[type.upper()][0]
    raise TypeError(f"unknown ggml type {type!r}; expected one of {sorted(GGML_TYPES)}")


def kernel_isa():
    """The instruction-set variant of the Q8_0 / Q4_0 kernels ("avx512_vnni", "avx2", ...)."""
    return _g.kernel_isa()


class GGMLWeight:
    """A Linear weight of shape [out_features, in_features] stored as ggml blocks: `raw` is a
    uint8 tensor [out_features, row_bytes] (the bytes of a GGUF tensor, row by row)."""

    def __init__(self, raw, type, shape):
        num = _type_number(type)
        name = _NAMES[num]
        _, elems, block_bytes, quantized = GGML_TYPES[name]
        if not quantized:
            raise TypeError(f"GGMLWeight: {name} is not a block-quantised type")
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2:
            raise ValueError(f"GGMLWeight: expected a 2-D shape [out_features, in_features], got {shape}")
        out_f, in_f = shape
        if in_f % elems:
            raise ValueError(f"GGMLWeight: {name} rows hold a multiple of {elems} values, got {in_f}")
        row_bytes = in_f // elems * block_bytes
        if not isinstance(raw, Tensor) or raw.dtype != _C.uint8 or tuple(raw.shape) != (out_f, row_bytes):
            got = f"{raw.dtype} {tuple(raw.shape)}" if isinstance(raw, Tensor) else type(raw).__name__
            raise ValueError(f"GGMLWeight: expected raw uint8 blocks of shape {(out_f, row_bytes)} "
                             f"for a {name} weight {shape}, got {got}")
        self.raw = raw
        self.type = name
        self.shape = shape

    @classmethod
    def quantize(cls, weight, type="Q8_0"):
        """Quantises a float weight [out_features, in_features] to Q8_0 or Q4_0 blocks."""
        num = _type_number(type)
        if weight.dim() != 2:
            raise ValueError(f"GGMLWeight.quantize: expected a 2-D weight, got shape {tuple(weight.shape)}")
        return cls(_g.quantize(weight.detach(), num), num, tuple(weight.shape))

    @property
    def in_features(self):
        return self.shape[1]

    @property
    def out_features(self):
        return self.shape[0]

    @property
    def nbytes(self):
        return self.raw.numel()

    @property
    def has_kernel(self):
        """Whether linear() multiplies in the block format (on the CPU and on xpu alike)."""
        return _g.has_kernel(_type_number(self.type))

    @property
    def device(self):
        return self.raw.device

    def to(self, device):
        """The same weight with its blocks on `device`."""
        return GGMLWeight(self.raw.to(device), self.type, self.shape)

    def linear(self, x, bias=None):
        """x[..., in_features] @ W^T (+ bias) -> float32 [..., out_features]."""
        return _g.ggml_linear(x, self.raw, _type_number(self.type), self.in_features, bias)

    def dequantize(self):
        """The weight's values as a float32 tensor [out_features, in_features], on the weight's
        device (blocks off the CPU are dequantised on the host)."""
        if self.raw.device.type != "cpu":
            return _g.dequantize(self.raw.cpu(), _type_number(self.type), self.in_features).to(self.raw.device)
        return _g.dequantize(self.raw, _type_number(self.type), self.in_features)

    def dequantize_rows(self, ids):
        """Rows `ids` (an int64 tensor of any shape) as float32 [*ids.shape, in_features]: an
        embedding lookup that reads only the rows it needs. Off the CPU the rows are gathered on
        the device, dequantised on the host (a few rows per decoding step) and sent back."""
        flat = ids.reshape(-1)
        if self.raw.device.type != "cpu":
            picked = self.raw.index_select(0, flat.to(self.raw.device)).cpu()
            rows = _g.dequantize(picked, _type_number(self.type), self.in_features).to(self.raw.device)
        else:
            rows = _g.dequantize(self.raw.index_select(0, flat), _type_number(self.type), self.in_features)
        return rows.reshape(*ids.shape, self.in_features)

    def __repr__(self):
        return f"GGMLWeight({self.type}, shape={list(self.shape)}, {self.nbytes} bytes)"


def quantize(weight, type="Q8_0"):
    """A GGMLWeight holding `weight` [out_features, in_features] as Q8_0 or Q4_0 blocks."""
    return GGMLWeight.quantize(weight, type)
