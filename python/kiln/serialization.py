"""kiln.save / kiln.load: a dict of tensors (a state_dict) as a safetensors file.

Unlike torch.save (pickle), only a flat mapping of str -> Tensor is accepted; the file is
readable by safetensors.torch.load_file, and kiln.load reads files written by
safetensors.torch.save_file. As torch's, f is a path or a binary file-like object (write for
save; read and seek for load, which reads from its current position)."""
import io
import os
import shutil
import tempfile

from . import _C

_STREAM_NAME = "<file-like object>"


def _is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))


def _check_binary(fn, f, mode):
    if isinstance(f, io.TextIOBase):
        raise TypeError(f"{fn}: f is a text stream; safetensors data is bytes, so open the file "
                        f"in binary mode ('{mode}')")


def save(obj, f, metadata=None):
    """Writes obj (a dict of name -> Tensor) to the path or file-like object f as
    safetensors."""
    if not isinstance(obj, dict) and not hasattr(obj, "items"):
        raise TypeError(f"kiln.save expects a dict of str -> Tensor, got {type(obj).__name__}")
    if not _is_path(f) and not hasattr(f, "write"):
        raise AttributeError("expected 'f' to be string, path, or a file-like object with a "
                             f"'write' attribute, got {type(f).__name__}")
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


def load(f, map_location=None, weights_only=True):
    """Reads a safetensors file (a path, or a file-like object from its current position to
    its end) into a dict of name -> Tensor (on map_location, or the CPU)."""
    if callable(map_location) or isinstance(map_location, dict):
        raise NotImplementedError("kiln.load: map_location must be a device or None")
    device = None if map_location is None else str(map_location)
    if _is_path(f):
        return _C._load(os.fspath(f), device)
    for attr in ("read", "seek"):
        if not hasattr(f, attr):
            raise AttributeError(f"'{type(f).__name__}' object has no attribute '{attr}'. "
                                 "kiln.load takes a path or a seekable binary file-like object "
                                 "(read and seek, as torch.load), such as io.BytesIO or a file "
                                 "opened 'rb'")
    _check_binary("kiln.load", f, "rb")
    # The C++ reader maps a file and copies the tensors out: read f into a temporary one.
    with tempfile.TemporaryDirectory(prefix="kiln-load-") as d:
        tmp = os.path.join(d, "stream.safetensors")
        with open(tmp, "wb") as dst:
            shutil.copyfileobj(f, dst)
        try:
            return _C._load(tmp, device)
        except (ValueError, RuntimeError, OSError) as e:
            # the message names the temporary file, which the caller never saw
            raise type(e)(str(e).replace(tmp, _STREAM_NAME)) from None
