"""kiln.save / kiln.load: torch's checkpoint format, and safetensors (decision 0103).

kiln.save writes torch's zip format (what torch.save writes: torch.load reads it, with
weights_only=True or False) for what torch users save: tensors, Parameters and containers of
them, numbers, strings (see _torch_format_write). It writes safetensors instead when the
target is a path (or a file object whose name) ends in '.safetensors', or when metadata is
given (safetensors' string header; torch's format has none): then only a flat dict of
str -> Tensor is accepted, readable by safetensors.torch.load_file.

kiln.load tells the format from the first bytes (a zip archive: torch's format; a pickle:
torch's legacy format; otherwise safetensors). kiln is always weights_only: the pickle is read
by a restricted unpickler that knows only the globals of plain checkpoints and never runs
code from the file (weights_only=False is accepted and changes nothing).

As torch's, f is a path or a binary file-like object (write for save; read and seek for
load, which reads from its current position)."""
import io
import os
import shutil
import tempfile

from . import _C
from . import _torch_format_read as _read
from . import _torch_format_write as _write

_STREAM_NAME = "<file-like object>"


def _is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))


def _check_binary(fn, f, mode):
    if isinstance(f, io.TextIOBase):
        raise TypeError(f"{fn}: f is a text stream; checkpoints are bytes, so open the file "
                        f"in binary mode ('{mode}')")


def _wants_safetensors(f, metadata):
    if metadata is not None:
        return True
    name = f if _is_path(f) else getattr(f, "name", None)
    if isinstance(name, (bytes, os.PathLike)):
        name = os.fsdecode(name)
    return isinstance(name, str) and name.lower().endswith(".safetensors")


def save(obj, f, metadata=None):
    """Writes obj to the path or binary file-like object f: in torch's zip format (as
    torch.save), or as safetensors for a '.safetensors' target or when metadata is given."""
    if not _is_path(f) and not hasattr(f, "write"):
        raise AttributeError("expected 'f' to be string, path, or a file-like object with a "
                             f"'write' attribute, got {type(f).__name__}")
    if _wants_safetensors(f, metadata):
        _save_safetensors(obj, f, metadata)
        return
    if not _is_path(f):
        _check_binary("kiln.save", f, "wb")
    write = _write.serialize(obj)  # (checks obj before the target is touched)
    if _is_path(f):
        path = os.fsdecode(f)
        # torch names the archive's folder after the file
        archive = os.path.splitext(os.path.basename(path))[0] or "archive"
        with open(path, "wb") as fp:
            write(fp, archive)
        return
    # zipfile seeks back to finish each record: build the archive in memory, then hand f
    # the bytes (f may be a pipe or any object with write)
    buf = io.BytesIO()
    write(buf)
    f.write(buf.getbuffer())
    if hasattr(f, "flush"):
        f.flush()


def _save_safetensors(obj, f, metadata):
    if not isinstance(obj, dict) and not hasattr(obj, "items"):
        raise TypeError(f"kiln.save expects a dict of str -> Tensor, got {type(obj).__name__}")
    tensors = {}
    for k, v in obj.items():
        if not isinstance(k, str):
            raise TypeError(f"kiln.save: keys must be str, got {type(k).__name__}")
        if not isinstance(v, _C.Tensor):
            raise TypeError(f"kiln.save: the value of '{k}' is a {type(v).__name__}, not a "
                            "Tensor (only dicts of tensors are saved, as safetensors)")
        tensors[k] = v.detach()
    meta = {str(a): str(b) for a, b in (metadata or {}).items()}
    if _is_path(f):
        _C._save(tensors, os.fspath(f), meta)
        return
    _check_binary("kiln.save", f, "wb")
    # The C++ writer takes a path: write a temporary file (the same bytes a path gets), then
    # copy it into f.
    with tempfile.TemporaryDirectory(prefix="kiln-save-") as d:
        tmp = os.path.join(d, "stream.safetensors")
        _C._save(tensors, tmp, meta)
        with open(tmp, "rb") as src:
            shutil.copyfileobj(src, f)
    if hasattr(f, "flush"):
        f.flush()


def _format(head):
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:1] == b"\x80":  # a pickle: torch's legacy format starts with its magic number
        return "legacy"
    if head[257:262] == b"ustar":
        raise RuntimeError("kiln.load: torch's tar checkpoint format (before torch 0.4) is "
                           "not supported")
    return "safetensors"


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Reads a checkpoint written by torch.save / kiln.save (torch's zip or legacy format) or
    a safetensors file, from a path or a file-like object (from its current position to its
    end). map_location as torch's: None (where the tensors were saved), a device or str, a
    dict of saved location -> location, or a function (storage, location) -> storage or None.

    kiln is always weights_only (weights_only=False is accepted and changes nothing): only
    tensors, Parameters, containers, numbers, strings, dtypes, devices and sizes are read,
    and any other global in the file is a pickle.UnpicklingError. mmap is accepted; the
    values are always read into memory."""
    _read.check_map_location(map_location)
    if pickle_module is not None:
        raise TypeError("kiln.load: pickle_module is not supported (kiln reads checkpoints "
                        "with its own restricted unpickler)")
    unknown = set(pickle_load_args) - {"encoding"}
    if unknown:
        raise TypeError(f"kiln.load got unexpected keyword arguments {sorted(unknown)}")
    encoding = pickle_load_args.get("encoding", "ASCII")
    if _is_path(f):
        path = os.fspath(f)
        with open(path, "rb") as fp:
            kind = _format(fp.read(512))
            fp.seek(0)
            if kind == "zip":
                return _read.load_zip(fp, map_location, repr(os.fsdecode(path)), encoding)
            if kind == "legacy":
                return _read.load_legacy(fp.read(), map_location, repr(os.fsdecode(path)),
                                         encoding)
        return _map_safetensors(_C._load(path, _device_arg(map_location)), map_location)
    for attr in ("read", "seek"):
        if not hasattr(f, attr):
            raise AttributeError(f"'{type(f).__name__}' object has no attribute '{attr}'. "
                                 "kiln.load takes a path or a seekable binary file-like object "
                                 "(read and seek, as torch.load), such as io.BytesIO or a file "
                                 "opened 'rb'")
    _check_binary("kiln.load", f, "rb")
    data = f.read()
    kind = _format(data[:512])
    if kind == "zip":
        return _read.load_zip(io.BytesIO(data), map_location, _STREAM_NAME, encoding)
    if kind == "legacy":
        return _read.load_legacy(data, map_location, _STREAM_NAME, encoding)
    # The C++ safetensors reader maps a file and copies the tensors out: a temporary file.
    with tempfile.TemporaryDirectory(prefix="kiln-load-") as d:
        tmp = os.path.join(d, "stream.safetensors")
        with open(tmp, "wb") as dst:
            dst.write(data)
        del data
        try:
            loaded = _C._load(tmp, _device_arg(map_location))
        except (ValueError, RuntimeError, OSError) as e:
            # the message names the temporary file, which the caller never saw
            raise type(e)(str(e).replace(tmp, _STREAM_NAME)) from None
    return _map_safetensors(loaded, map_location)


def _device_arg(map_location):
    """The device the C++ safetensors reader places tensors on (None: the CPU); dicts and
    functions are applied afterwards."""
    if map_location is None or isinstance(map_location, dict) or \
            (callable(map_location) and not isinstance(map_location, _C.device)):
        return None
    return str(map_location)


def _map_safetensors(tensors, map_location):
    # safetensors keeps no location: its tensors were saved from (and are read to) the CPU
    if _device_arg(map_location) is not None or map_location is None:
        return tensors
    try:
        return {k: _read.place(v, "cpu", map_location) for k, v in tensors.items()}
    except _read._Passthrough as p:
        raise p.args[0] from None
