"""kiln.save / kiln.load: a dict of tensors (a state_dict) as a safetensors file.

Unlike torch.save (pickle), only a flat mapping of str -> Tensor is accepted; the file is
readable by safetensors.torch.load_file, and kiln.load reads files written by
safetensors.torch.save_file."""
import os

from . import _C


def save(obj, f, metadata=None):
    """Writes obj (a dict of name -> Tensor) to the path f as safetensors."""
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
    _C._save(tensors, os.fspath(f), {str(a): str(b) for a, b in (metadata or {}).items()})


def load(f, map_location=None, weights_only=True):
    """Reads a safetensors file into a dict of name -> Tensor (on map_location, or the CPU)."""
    if callable(map_location) or isinstance(map_location, dict):
        raise NotImplementedError("kiln.load: map_location must be a device or None")
    return _C._load(os.fspath(f), None if map_location is None else str(map_location))
