"""kiln.gguf: reading GGUF files (llama.cpp's model format, versions 2 and 3), and writing
them (version 3: GGUFWriter and save, from kiln.gguf_writer).

    f = kiln.gguf.GGUFReader("model.gguf")
    f.metadata["general.architecture"]        # plain Python values (lists for arrays)
    f.tensor("blk.0.attn_q.weight")           # kiln.Tensor, or kiln.quant.GGMLWeight if quantised

The file is memory-mapped (copy-on-write, populated up front) and its whole structure
validated when opened (a malformed file raises ValueError naming what is wrong; a tensor type
kiln does not know, TypeError). Tensors are views of the mapping unless copied.
"""
import os
from collections import namedtuple

from . import _C
from .gguf_writer import GGUFWriter, save  # noqa: F401  (re-exported: kiln.gguf.GGUFWriter)
from .quant import GGML_TYPES, GGMLWeight

GGUFTensorInfo = namedtuple("GGUFTensorInfo", "name type type_number shape offset nbytes")


class GGUFReader:
    def __init__(self, path):
        if isinstance(path, (bytes, bytearray, memoryview)):
            self._file = _C._gguf.GGUFFile.from_bytes(bytes(path))
        else:
            self._file = _C._gguf.GGUFFile.open(os.fspath(path))
        self._metadata = None
        self._infos = {i[0]: GGUFTensorInfo(*i) for i in self._file.tensor_infos()}

    @property
    def path(self):
        return self._file.path

    @property
    def version(self):
        return self._file.version

    @property
    def alignment(self):
        return self._file.alignment

    @property
    def metadata(self):
        """Key -> value (int, float, bool, str, or a list of those), in file order."""
        if self._metadata is None:
            self._metadata = self._file.metadata()
        return self._metadata

    def metadata_types(self):
        """Key -> the value's GGUF type ("u32", "string", "array[string]", ...)."""
        return self._file.metadata_types()

    @property
    def tensor_names(self):
        return list(self._infos)

    def tensor_info(self, name):
        try:
            return self._infos[name]
        except KeyError:
            raise KeyError(f"GGUF file {self.path!r} has no tensor {name!r}") from None

    def __contains__(self, name):
        return name in self._infos

    def tensor(self, name, copy=False):
        """The tensor: kiln.Tensor for plain types (F32, F16, BF16, F64, I8-I64) in torch's
        dimension order; a kiln.quant.GGMLWeight for block-quantised 2-D weights (other
        quantised shapes: dequantized float32). Without copy, a file's tensor lives in the
        file's memory map (no load time): writes to it are copy-on-write, private to this
        process, never reaching the file; two calls for one name share memory."""
        info = self.tensor_info(name)
        if not GGML_TYPES[info.type][3]:
            return self._file.tensor(name, copy)
        if len(info.shape) == 2:
            return GGMLWeight(self._file.tensor(name, copy), info.type, info.shape)
        return self._file.dequantize(name)

    def dequantize(self, name):
        """The tensor's values as float32 (any float or quantised type)."""
        return self._file.dequantize(name)

    def tensors(self, dequantize=False):
        """name -> tensor for every tensor (see tensor(); dequantize=True: all float32)."""
        return {n: (self.dequantize(n) if dequantize else self.tensor(n)) for n in self._infos}

    def __repr__(self):
        return (f"GGUFReader({self.path!r}, version {self.version}, {len(self._infos)} tensors, "
                f"{len(self.metadata)} metadata keys)")
