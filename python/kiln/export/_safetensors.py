"""safetensors in pure Python (numpy), for kiln.export's archives: written and read without
the C++ reader, so that a corrupted or forged file can only raise a Python exception. The
layout is the safetensors format (8-byte little-endian header length, a JSON header of
{name: {dtype, shape, data_offsets}}, then the bytes), readable by safetensors.numpy."""
import json
import struct

import numpy as np

__all__ = ["dumps", "loads"]

# safetensors dtype -> (kiln dtype name, numpy dtype it is stored as)
_DTYPES = {"F64": ("float64", np.float64), "F32": ("float32", np.float32),
           "F16": ("float16", np.float16), "BF16": ("bfloat16", np.int16),
           "I64": ("int64", np.int64), "I32": ("int32", np.int32),
           "I16": ("int16", np.int16), "I8": ("int8", np.int8), "U8": ("uint8", np.uint8),
           "BOOL": ("bool", np.bool_), "C64": ("complex64", np.complex64),
           "C128": ("complex128", np.complex128)}
_BY_KILN = {v[0]: k for k, v in _DTYPES.items()}
_MAX_HEADER = 64 << 20


def _to_numpy(t):
    import kiln
    t = t.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    t = t.contiguous()
    name = str(t.dtype).split(".")[-1]
    if name not in _BY_KILN:
        raise TypeError(f"cannot save a tensor of dtype {t.dtype}")
    if name == "bfloat16":
        t = t.view(kiln.int16)
    return _BY_KILN[name], np.ascontiguousarray(t.numpy())


def dumps(tensors, metadata=None):
    """The safetensors bytes of {name: kiln tensor}."""
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        code, arr = _to_numpy(t)
        data = arr.tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(chunks)


def loads(buf):
    """{name: kiln tensor} from safetensors bytes; ValueError for anything malformed."""
    import kiln
    if len(buf) < 8:
        raise ValueError("safetensors data too short")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > _MAX_HEADER or 8 + n > len(buf):
        raise ValueError("safetensors header length out of range")
    header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("safetensors header is not an object")
    data = memoryview(buf)[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise ValueError(f"bad safetensors entry {name!r}")
        code, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if code not in _DTYPES:
            raise ValueError(f"unknown safetensors dtype {code!r}")
        if not isinstance(shape, list) or len(shape) > 64 or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise ValueError(f"bad shape for {name!r}")
        if not isinstance(offs, list) or len(offs) != 2 or not all(
                isinstance(o, int) and not isinstance(o, bool) for o in offs):
            raise ValueError(f"bad data_offsets for {name!r}")
        begin, end = offs
        kname, np_dtype = _DTYPES[code]
        numel = 1
        for s in shape:
            numel *= s
        if not 0 <= begin <= end <= len(data) or end - begin != numel * \
                np.dtype(np_dtype).itemsize:
            raise ValueError(f"data_offsets of {name!r} do not match its shape and the file")
        arr = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(shape).copy()
        t = kiln.from_numpy(arr)
        if kname == "bfloat16":
            t = t.view(kiln.bfloat16)
        out[name] = t
    return out
