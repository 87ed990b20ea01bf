"""kiln.gguf.GGUFWriter: writing GGUF v3 files (llama.cpp's model format) from kiln values.

    with kiln.gguf.GGUFWriter("model.gguf") as w:
        w.add("general.architecture", "llama")
        w.add("llama.block_count", 2)                      # int -> i32 (i64 if it must)
        w.add("llama.context_length", 4096, type="u32")    # or ask for a type
        w.add_tensor("token_embd.weight", embedding)        # kiln.Tensor: its own ggml type
        w.add_tensor("blk.0.attn_q.weight", wq, type="Q8_0")  # converted while written
        w.add_tensor("output.weight", kiln.quant.quantize(wo, "Q4_0"))  # a GGMLWeight's blocks
    # or: kiln.gguf.save("model.gguf", metadata, tensors)

Layout (GGUF spec, little-endian): "GGUF", u32 version 3, u64 tensor count, u64 metadata
count; the metadata (string key, u32 value type, value); one info per tensor (name, u32 n_dims,
u64 dims innermost first, i.e. torch's order reversed, u32 ggml type, u64 offset into the
data section); zero padding to the alignment; the tensors' bytes, each padded to it.

Values are checked when added (ValueError naming the key or tensor); nothing touches the disk
until write(), which streams one tensor at a time (converting it then, if a type was asked
for) into "<path>.part" and renames that to the path only once everything is written.
"""
import math
import numbers
import os
import struct

from . import _C
from .quant import GGML_TYPES, GGMLWeight

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32
MAX_TENSOR_NAME_BYTES = 63  # ggml's GGML_MAX_NAME (64) counts the terminating NUL
MAX_DIMS = 4                # ggml's GGML_MAX_DIMS

# Metadata value type name (as kiln.gguf.GGUFReader.metadata_types() spells it) -> (GGUF
# number, struct format for scalars; None for string and array).
VALUE_TYPES = {
    "u8": (0, "<B"), "i8": (1, "<b"), "u16": (2, "<H"), "i16": (3, "<h"),
    "u32": (4, "<I"), "i32": (5, "<i"), "f32": (6, "<f"), "bool": (7, "<?"),
    "string": (8, None), "array": (9, None), "u64": (10, "<Q"), "i64": (11, "<q"),
    "f64": (12, "<d"),
}
_INT_RANGES = {"u8": (0, 2**8 - 1), "i8": (-2**7, 2**7 - 1), "u16": (0, 2**16 - 1),
               "i16": (-2**15, 2**15 - 1), "u32": (0, 2**32 - 1), "i32": (-2**31, 2**31 - 1),
               "u64": (0, 2**64 - 1), "i64": (-2**63, 2**63 - 1)}
_FLOAT_TYPES = ("f32", "f64")

# kiln dtype -> the ggml type that holds it as it is.
_GGML_TYPE_OF_DTYPE = {
    _C.float32: "F32", _C.float16: "F16", _C.bfloat16: "BF16", _C.float64: "F64",
    _C.int8: "I8", _C.int16: "I16", _C.int32: "I32", _C.int64: "I64",
}
_FLOAT_DTYPES = (_C.float32, _C.float16, _C.bfloat16, _C.float64)
# ggml types a float tensor can be converted to while it is written.
_CONVERTIBLE = {"F32": _C.float32, "F16": _C.float16, "BF16": _C.bfloat16, "F64": _C.float64,
                "Q8_0": None, "Q4_0": None}


class GGUFWriter:
    """Collects metadata and tensors, then writes them as one GGUF v3 file (see module doc).

    add(key, value, type=None): type is one of VALUE_TYPES' names ("u32", "f64", "string",
    ...); for a list it names the element type ("u32" or "array[u32]"). Without it: bool ->
    bool, int -> i32 (i64, then u64, when it does not fit), float -> f32, str -> string,
    list/tuple -> array of the items' kind (ints and floats together: f32; lists: arrays).
    add_tensor(name, value, type=None): value a kiln.Tensor (float32/16, bfloat16, float64,
    int8-64) or a kiln.quant.GGMLWeight; type ("F16", "Q8_0", ...) converts a float tensor
    when it is written. Tensors are read at write() time, not copied when added."""

    def __init__(self, path, alignment=DEFAULT_ALIGNMENT):
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 8 or \
                alignment & (alignment - 1):
            # The spec asks for a multiple of 8, llama.cpp for a power of two.
            raise ValueError(f"GGUFWriter: alignment must be a power of two >= 8, got {alignment!r}")
        self.path = os.fspath(path)
        self.alignment = alignment
        self._metadata = {}   # key -> encoded bytes (type number + value)
        self._tensors = {}    # name -> _PendingTensor
        self._written = False
        if alignment != DEFAULT_ALIGNMENT:
            self._metadata["general.alignment"] = _encode_value("general.alignment", alignment, "u32")

    # -- collecting ------------------------------------------------------------------------

    def add(self, key, value, type=None):
        """Adds the metadata entry key = value (see the class doc for the types)."""
        self._check_open()
        if not isinstance(key, str) or not key:
            raise ValueError(f"GGUFWriter: a metadata key must be a non-empty str, got {key!r}")
        _utf8(key, f"metadata key {key!r}")
        if key == "general.alignment":
            raise ValueError("GGUFWriter: 'general.alignment' is set by the alignment argument "
                             "of GGUFWriter(path, alignment=...)")
        if key in self._metadata:
            raise ValueError(f"GGUFWriter: duplicate metadata key {key!r}")
        self._metadata[key] = _encode_value(key, value, type)

    def add_tensor(self, name, value, type=None):
        """Adds a tensor (see the class doc); its bytes are read when write() runs."""
        self._check_open()
        if not isinstance(name, str) or not name:
            raise ValueError(f"GGUFWriter: a tensor name must be a non-empty str, got {name!r}")
        if len(_utf8(name, f"tensor name {name!r}")) > MAX_TENSOR_NAME_BYTES:
            raise ValueError(f"GGUFWriter: tensor name {name!r} is longer than "
                             f"{MAX_TENSOR_NAME_BYTES} bytes (ggml's limit)")
        if name in self._tensors:
            raise ValueError(f"GGUFWriter: duplicate tensor name {name!r}")
        self._tensors[name] = _PendingTensor.make(name, value, type)

    # -- writing ---------------------------------------------------------------------------

    def write(self):
        """Writes the file: header, metadata, tensor infos, then each tensor in turn."""
        self._check_open()
        partial = self.path + ".part"
        try:
            with open(partial, "wb") as f:
                self._write_header(f)
                for tensor in self._tensors.values():
                    tensor.write_to(f)
                    f.write(bytes(_padding(tensor.nbytes, self.alignment)))
            os.replace(partial, self.path)
            self._written = True
        except BaseException:
            if os.path.exists(partial):
                os.remove(partial)
            raise

    def _write_header(self, f):
        f.write(GGUF_MAGIC)
        f.write(struct.pack("<IQQ", GGUF_VERSION, len(self._tensors), len(self._metadata)))
        for key, encoded in self._metadata.items():
            f.write(_encode_string(key))
            f.write(encoded)
        offset = 0
        for name, tensor in self._tensors.items():
            f.write(_encode_string(name))
            f.write(struct.pack("<I", len(tensor.shape)))
            f.write(struct.pack(f"<{len(tensor.shape)}Q", *reversed(tensor.shape)))
            f.write(struct.pack("<IQ", GGML_TYPES[tensor.type][0], offset))
            offset += tensor.nbytes + _padding(tensor.nbytes, self.alignment)
        f.write(bytes(_padding(f.tell(), self.alignment)))

    def _check_open(self):
        if self._written:
            raise ValueError(f"GGUFWriter: {self.path!r} has already been written")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and not self._written:
            self.write()
        return False

    def __repr__(self):
        return (f"GGUFWriter({self.path!r}, {len(self._metadata)} metadata keys, "
                f"{len(self._tensors)} tensors{', written' if self._written else ''})")


def save(path, metadata, tensors, alignment=DEFAULT_ALIGNMENT):
    """Writes a GGUF file from metadata (key -> value, types inferred as GGUFWriter.add does)
    and tensors (name -> kiln.Tensor or kiln.quant.GGMLWeight), in the dicts' order."""
    writer = GGUFWriter(path, alignment)
    for key, value in metadata.items():
        writer.add(key, value)
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    writer.write()


# --- tensors --------------------------------------------------------------------------------

class _PendingTensor:
    """A tensor to write: its torch-order shape, ggml type, byte count, and the source value
    (converted to `type` only when written, so one converted copy exists at a time)."""

    def __init__(self, name, source, shape, type):
        self.name, self.source, self.shape, self.type = name, source, shape, type
        _, elems, block_bytes, _ = GGML_TYPES[type]
        self.nbytes = math.prod(shape) // elems * block_bytes

    @classmethod
    def make(cls, name, value, type):
        if isinstance(value, GGMLWeight):
            if type is not None and str(type).upper() != value.type:
                raise ValueError(f"GGUFWriter: tensor {name!r} is a {value.type} GGMLWeight; "
                                 f"it cannot be written as {type!r}")
            return cls(name, value, value.shape, value.type)
        if not isinstance(value, _C.Tensor):
            raise ValueError(f"GGUFWriter: tensor {name!r} must be a kiln.Tensor or a "
                             f"kiln.quant.GGMLWeight, got {_type_name(value)}")
        if value.dtype not in _GGML_TYPE_OF_DTYPE:
            raise ValueError(f"GGUFWriter: tensor {name!r} has dtype {value.dtype}, which GGUF "
                             f"cannot hold (supported: {', '.join(map(str, _GGML_TYPE_OF_DTYPE))})")
        shape = tuple(int(s) for s in value.shape)
        if not 1 <= len(shape) <= MAX_DIMS:
            raise ValueError(f"GGUFWriter: tensor {name!r} has {len(shape)} dimensions; GGUF "
                             f"tensors have 1 to {MAX_DIMS} (reshape it)")
        return cls(name, value, shape, _target_type(name, value, shape, type))

    def write_to(self, f):
        data = self._converted()
        if data.numel():
            f.write(memoryview(data.reshape(-1).view(_C.uint8).numpy()))

    def _converted(self):
        """The bytes to write, as a contiguous tensor of the target type (any dtype)."""
        if isinstance(self.source, GGMLWeight):
            return self.source.raw.contiguous()
        tensor = self.source.detach()
        if GGML_TYPES[self.type][3]:  # block-quantised: quantise the rows
            rows = tensor.reshape(-1, self.shape[-1]).float().contiguous()
            return GGMLWeight.quantize(rows, self.type).raw.contiguous()
        dtype = _CONVERTIBLE.get(self.type) or tensor.dtype
        return tensor.to(dtype).contiguous()


def _target_type(name, tensor, shape, type):
    own = _GGML_TYPE_OF_DTYPE[tensor.dtype]
    if type is None:
        return own
    wanted = str(type).upper()
    if wanted == own:
        return own
    if wanted not in _CONVERTIBLE:
        raise ValueError(f"GGUFWriter: tensor {name!r} cannot be converted to {type!r} "
                         f"(kiln converts float tensors to {', '.join(_CONVERTIBLE)})")
    if tensor.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"GGUFWriter: tensor {name!r} has dtype {tensor.dtype}; only float "
                         f"tensors are converted (to {type!r} here)")
    block = GGML_TYPES[wanted][1]
    if shape[-1] % block:
        raise ValueError(f"GGUFWriter: tensor {name!r} {list(shape)}: {wanted} needs the last "
                         f"dimension to be a multiple of {block}")
    return wanted


def _padding(n, alignment):
    return -n % alignment


# --- metadata values -------------------------------------------------------------------------

def _encode_value(key, value, type):
    """The bytes of one metadata value: u32 type number, then the value."""
    type_name = _parse_type(key, type)
    if isinstance(value, (list, tuple)):
        element_type = type_name[len("array["):-1] if type_name and type_name.startswith("array[") \
            else type_name
        return struct.pack("<I", VALUE_TYPES["array"][0]) + _encode_array(key, value, element_type)
    if type_name is not None and type_name.startswith("array"):
        raise ValueError(f"GGUFWriter: metadata {key!r}: type {type!r} needs a list, got "
                         f"{_type_name(value)}")
    type_name = type_name or _infer_scalar_type(key, value)
    return struct.pack("<I", VALUE_TYPES[type_name][0]) + _encode_scalar(key, value, type_name)


def _parse_type(key, type):
    """A VALUE_TYPES name, "array[<name>]", or None; ValueError for anything else."""
    if type is None:
        return None
    if isinstance(type, str):
        name = type.lower()
        inner = name[len("array["):-1] if name.startswith("array[") and name.endswith("]") else None
        if (name in VALUE_TYPES and name != "array") or \
                (inner is not None and _parse_type(key, inner) is not None):
            return name
    raise ValueError(f"GGUFWriter: metadata {key!r}: unknown value type {type!r}; expected one "
                     f"of {', '.join(n for n in VALUE_TYPES if n != 'array')} or 'array[<type>]'")


def _encode_array(key, items, element_type):
    """u32 element type, u64 count, the elements (arrays of arrays: each inner one complete)."""
    items = list(items)
    if element_type is None:
        if not items:
            raise ValueError(f"GGUFWriter: metadata {key!r} is an empty list; give its element "
                             f"type, e.g. type='array[u32]'")
        element_type = _infer_element_type(key, items)
    head = struct.pack("<IQ", VALUE_TYPES[element_type.partition("[")[0]][0], len(items))
    if element_type.startswith("array"):
        inner = element_type[len("array["):-1] or None
        for i, item in enumerate(items):
            if not isinstance(item, (list, tuple)):
                raise ValueError(f"GGUFWriter: metadata {key!r}[{i}] must be a list, got "
                                 f"{_type_name(item)}")
            head += _encode_array(f"{key}[{i}]", item, inner)
        return head
    if element_type == "string":
        return head + b"".join(_encode_scalar(f"{key}[{i}]", v, "string") for i, v in enumerate(items))
    for i, v in enumerate(items):
        _check_scalar(f"{key}[{i}]", v, element_type)
    if element_type in _FLOAT_TYPES:
        items = [float(v) for v in items]
    return head + _pack(key, f"<{len(items)}{VALUE_TYPES[element_type][1][1]}", items, element_type)


def _infer_scalar_type(key, value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Integral):
        return _smallest_int_type(key, [value])
    if isinstance(value, numbers.Real):
        return "f32"
    if isinstance(value, str):
        return "string"
    raise ValueError(f"GGUFWriter: metadata {key!r}: cannot store a {_type_name(value)} "
                     f"(expected bool, int, float, str or a list of those)")


def _infer_element_type(key, items):
    kinds = {_kind(v) for v in items}
    if kinds == {"int"}:
        return _smallest_int_type(key, items)
    if kinds <= {"int", "float"}:
        return "f32"
    if kinds == {"array"}:
        inner = [v for item in items for v in item]
        return f"array[{_infer_element_type(key, inner) if inner else ''}]"
    if len(kinds) == 1 and None not in kinds:
        return kinds.pop()
    raise ValueError(f"GGUFWriter: metadata {key!r}: a list's items must all be of one kind "
                     f"(bool, int/float, str or list), got {sorted(str(k) for k in kinds)}")


def _kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, numbers.Integral):
        return "int"
    if isinstance(v, numbers.Real):
        return "float"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "array"
    return None


def _smallest_int_type(key, values):
    for name in ("i32", "i64", "u64"):
        low, high = _INT_RANGES[name]
        if all(low <= v <= high for v in values):
            return name
    raise ValueError(f"GGUFWriter: metadata {key!r}: an integer is outside the range of "
                     f"every GGUF integer type")


def _check_scalar(key, value, type_name):
    """ValueError unless value can be stored as type_name."""
    if type_name == "bool":
        ok = isinstance(value, bool)
    elif type_name == "string":
        ok = isinstance(value, str)
    elif type_name in _INT_RANGES:
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        if ok and not _INT_RANGES[type_name][0] <= value <= _INT_RANGES[type_name][1]:
            raise ValueError(f"GGUFWriter: metadata {key!r}: {value} does not fit in {type_name}")
    else:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok:
        raise ValueError(f"GGUFWriter: metadata {key!r}: expected a {type_name} value, got "
                         f"{value!r} ({_type_name(value)})")


def _encode_scalar(key, value, type_name):
    if type_name == "string":
        _check_scalar(key, value, "string")
        return _encode_string(value, f"metadata {key!r}")
    if type_name.startswith("array"):
        raise ValueError(f"GGUFWriter: metadata {key!r}: type {type_name!r} needs a list, got "
                         f"{_type_name(value)}")
    _check_scalar(key, value, type_name)
    if type_name in _FLOAT_TYPES:
        value = float(value)
    return _pack(key, VALUE_TYPES[type_name][1], [value], type_name)


def _pack(key, fmt, values, type_name):
    try:
        return struct.pack(fmt, *values)
    except (struct.error, OverflowError):  # a float beyond f32's range
        raise ValueError(f"GGUFWriter: metadata {key!r}: a value does not fit in {type_name}") from None


def _encode_string(text, what=None):
    data = _utf8(text, what or f"string {text!r}")
    return struct.pack("<Q", len(data)) + data


def _utf8(text, what):
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"GGUFWriter: {what} is not valid UTF-8 text ({e.reason})") from None


def _type_name(value):
    return type(value).__name__
