"""kiln.load of torch's checkpoints: the zip format (torch.save's default since torch 1.6) and
the legacy pickle stream (_use_new_zipfile_serialization=False).

kiln never runs code from a checkpoint (decision 0103): the pickle is read by an Unpickler
whose find_class knows only the globals torch's weights_only=True load accepts for plain
checkpoints (tensor and Parameter rebuilders, storage types, dtypes, torch.Size,
torch.device, OrderedDict, Counter, set, complex, bytes, bytearray), each mapped to a kiln
function that checks its arguments. Any other global is a pickle.UnpicklingError naming it.
Before unpickling, the opcodes are checked: those that build arbitrary objects (INST, OBJ,
NEWOBJ_EX, EXT*) are refused, and memo indices beyond the pickle's size (a corrupt file could
make the unpickler allocate a huge memo) are refused. BUILD stays (torch's state_dicts are
OrderedDicts with a _metadata attribute), so every global handed to the unpickler is
immutable: BUILD can set attributes of the OrderedDicts and Parameters the file creates, but
never of kiln's functions (where they would outlive the load). Any other failure of a damaged
file is a RuntimeError that says the file is corrupt."""
import collections
import io
import pickle
import pickletools
import struct
import warnings
import zipfile

import numpy as np

from . import _C
from ._size import Size

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001

_NUMPY = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
          "bfloat16": np.int16, "int64": np.int64, "int32": np.int32, "int16": np.int16,
          "int8": np.int8, "uint8": np.uint8, "bool": np.bool_, "complex64": np.complex64,
          "complex128": np.complex128}
_STORAGE_DTYPES = {"DoubleStorage": "float64", "FloatStorage": "float32",
                   "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
                   "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
                   "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
                   "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128"}
# torch's dtypes (pickled by their canonical names: GLOBAL torch float32) that kiln has
_DTYPE_NAMES = tuple(_NUMPY)
_FORBIDDEN_OPS = {"INST", "OBJ", "NEWOBJ_EX", "EXT1", "EXT2", "EXT4", "PERSID"}
_MEMO_OPS = {"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"}


class LoadError(RuntimeError):
    """A checkpoint kiln cannot read (corrupt, or something kiln does not support)."""


class _Passthrough(Exception):
    """Carries an exception raised by the caller's map_location through the unpickler."""


class _Frozen:
    """An object the unpickler may hold that BUILD cannot change (no __dict__, no setattr)."""
    __slots__ = ()

    def __init__(self, **fields):
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        raise AttributeError(f"kiln.load: refusing to set {name!r} of {self!r}")

    __delattr__ = __setattr__


class _Global(_Frozen):
    """A function of this module as the global the unpickler calls."""
    __slots__ = ("fn", "name")

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return self.name


class _StorageType(_Frozen):
    """torch.FloatStorage and friends: only a dtype to kiln."""
    __slots__ = ("name", "dtype")

    def __repr__(self):
        return f"torch.{self.name}"


class _Marker(_Frozen):
    """torch.Tensor / torch.nn.Parameter as _rebuild_from_type_v2's new_type."""
    __slots__ = ("name",)

    def __repr__(self):
        return self.name


_TENSOR = _Marker(name="torch.Tensor")
_PARAMETER = _Marker(name="torch.nn.parameter.Parameter")


class _Storage:
    """A loaded storage: its elements as a flat kiln tensor (views are made with
    as_strided, so tensors that shared a storage in the file share memory)."""
    __slots__ = ("tensor", "dtype")

    def __init__(self, tensor, dtype):
        self.tensor, self.dtype = tensor, dtype


def _int(v, what):
    if type(v) is not int:
        raise LoadError(f"kiln.load: corrupt checkpoint: {what} is a {type(v).__name__}, "
                        "not an int")
    return v


def _view(storage, offset, size, stride):
    """storage's elements as a tensor of the given geometry, bounds checked here with
    Python ints (so that no geometry from a damaged file reaches the C++ side unchecked)."""
    if type(storage) is not _Storage:
        raise LoadError("kiln.load: corrupt checkpoint: a tensor's storage is a "
                        f"{type(storage).__name__}")
    offset = _int(offset, "a storage offset")
    if not isinstance(size, tuple) or not isinstance(stride, tuple) or len(size) != len(stride):
        raise LoadError("kiln.load: corrupt checkpoint: a tensor's size and stride do not match")
    size = tuple(_int(s, "a size") for s in size)
    stride = tuple(_int(s, "a stride") for s in stride)
    if offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise LoadError("kiln.load: corrupt checkpoint: negative size, stride or offset")
    n = storage.tensor.numel()
    if 0 in size:
        offset = 0  # no element is read; the offset may lie past the storage's end
    elif offset + sum((s - 1) * st for s, st in zip(size, stride)) >= n:
        raise LoadError(f"kiln.load: corrupt checkpoint: a tensor of size {list(size)}, "
                        f"stride {list(stride)} and offset {offset} lies outside its "
                        f"storage of {n} elements")
    return storage.tensor.as_strided(size, stride, offset)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    t = _view(storage, storage_offset, size, stride)
    if requires_grad is True:
        t.requires_grad_(True)
    return t


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _view(storage, storage_offset, size, stride)


def _parameter(data, requires_grad):
    from .nn.parameter import Parameter  # (kiln.nn imports kiln: import late)
    if not isinstance(data, _C.Tensor) or type(requires_grad) is not bool:
        raise LoadError("kiln.load: corrupt checkpoint: bad arguments to _rebuild_parameter")
    return Parameter(data, requires_grad)


def _set_state(obj, state):
    """Python attributes a torch tensor carried (torch's _set_obj_state): plain names only."""
    if state is None:
        return obj
    if isinstance(state, tuple) and len(state) == 2:
        dict_state, slots = state
        state = dict(dict_state or {}, **(slots or {}))
    if not isinstance(state, dict):
        raise LoadError("kiln.load: corrupt checkpoint: a tensor's state is not a dict")
    for k, v in state.items():
        if not isinstance(k, str) or k.startswith("__"):
            raise LoadError(f"kiln.load: refusing to set the attribute {k!r} of a tensor")
        try:
            setattr(obj, k, v)
        except AttributeError as e:  # a name that is a read-only property of Tensor
            raise LoadError(f"kiln.load: a tensor of the checkpoint sets the attribute {k!r}, "
                            f"which a kiln Tensor cannot take ({e})") from None
    return obj


def _rebuild_parameter(data, requires_grad, backward_hooks=None):
    return _parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _set_state(_parameter(data, requires_grad), state)


_REBUILDERS = (_rebuild_tensor_v2, _rebuild_tensor, _rebuild_parameter,
               _rebuild_parameter_with_state)


def _rebuild_from_type_v2(func, new_type, args, state):
    func = func.fn if type(func) is _Global else None
    if func not in _REBUILDERS or new_type not in (_TENSOR, _PARAMETER) or \
            not isinstance(args, tuple):
        raise LoadError("kiln.load: corrupt checkpoint: bad arguments to "
                        "_rebuild_from_type_v2")
    from .nn.parameter import Parameter
    t = func(*args)
    if new_type is _PARAMETER and not isinstance(t, Parameter):
        t = _parameter(t, bool(t.requires_grad))
    return _set_state(t, state or None)


def _codecs_encode(obj, encoding="utf-8"):
    # protocol 2 writes bytes as _codecs.encode(str, 'latin1')
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1"):
        raise LoadError("kiln.load: corrupt checkpoint: bad arguments to _codecs.encode")
    return obj.encode("latin1")


def _bytearray(*args):
    if not args:
        return bytearray()
    if isinstance(args[0], (bytes, bytearray)) and len(args) == 1:
        return bytearray(args[0])
    if isinstance(args[0], str) and len(args) == 2 and args[1] in ("latin1", "latin-1"):
        return bytearray(args[0], "latin1")
    raise LoadError("kiln.load: corrupt checkpoint: bad arguments to bytearray")


def _size(dims=()):
    return Size(_int(d, "a torch.Size entry") for d in dims)


def _device(kind, index=None):
    name = kind if index is None else f"{kind}:{_int(index, 'a device index')}"
    if not isinstance(name, str):
        raise LoadError("kiln.load: corrupt checkpoint: bad arguments to torch.device")
    try:
        return _C.device(name)
    except Exception:
        raise LoadError(f"kiln.load: the checkpoint holds torch.device('{name}'), a device "
                        "kiln does not have") from None


_REFUSED_TORCH = {  # globals torch's weights_only allows but kiln cannot rebuild
    "_rebuild_tensor_v3": "tensors of dtypes kiln does not have (uint16/32/64, float8 ...)",
    "_rebuild_qtensor": "quantized tensors", "_rebuild_sparse_tensor": "sparse tensors",
    "_rebuild_nested_tensor": "nested tensors", "_rebuild_meta_tensor_no_storage":
    "meta tensors", "_rebuild_wrapper_subclass": "tensor subclasses",
    "_rebuild_device_tensor_from_numpy": "tensors of devices kiln does not have",
    "_rebuild_device_tensor_from_cpu_tensor": "tensors of devices kiln does not have",
}


def _allowed_globals():
    # (classes: immutable built-in types, which NEWOBJ may also instantiate)
    g = {("collections", "OrderedDict"): collections.OrderedDict,
         ("collections", "Counter"): collections.Counter,
         ("builtins", "set"): set,
         ("builtins", "complex"): complex,
         ("torch", "Tensor"): _TENSOR, ("torch.nn.parameter", "Parameter"): _PARAMETER}
    functions = {("builtins", "bytearray"): _bytearray, ("_codecs", "encode"): _codecs_encode,
                 ("torch", "Size"): _size, ("torch", "device"): _device,
                 ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2}
    functions.update({("torch._utils", f.__name__): f for f in _REBUILDERS})
    for (module, name), fn in functions.items():
        g[(module, name)] = _Global(fn=fn, name=f"{module}.{name}")
    for name in _DTYPE_NAMES:
        g[("torch", name)] = getattr(_C, name)
    for name, dt in _STORAGE_DTYPES.items():
        g[("torch", name)] = _StorageType(name=name, dtype=dt)
    return g


_GLOBALS = _allowed_globals()


class _Unpickler(pickle.Unpickler):
    def __init__(self, data, load_storage, **kwargs):
        super().__init__(io.BytesIO(data), **kwargs)
        self._load_storage = load_storage

    def find_class(self, module, name):
        if module == "__builtin__":  # protocol 2 names Python 3's builtins so
            module = "builtins"
        found = _GLOBALS.get((module, name))
        if found is not None:
            return found
        why = ""
        if module == "torch._utils" and name in _REFUSED_TORCH:
            why = f" (kiln has no {_REFUSED_TORCH[name]})"
        raise pickle.UnpicklingError(
            f"kiln.load: the checkpoint refers to the global '{module}.{name}', which kiln "
            f"does not load{why}. kiln reads tensors, Parameters, containers, numbers, "
            "strings, dtypes, devices and sizes (what torch.load reads with weights_only=True) "
            "and never runs code from a checkpoint")

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) in (5, 6) and pid[0] == "storage"):
            raise pickle.UnpicklingError("kiln.load: the checkpoint has a persistent id kiln "
                                         f"does not know ({type(pid).__name__}); only "
                                         "storages are read")
        stype, key, location, numel = pid[1:5]
        if type(stype) is not _StorageType or not isinstance(key, str) or \
                not isinstance(location, str):
            raise LoadError("kiln.load: corrupt checkpoint: bad storage record")
        if len(pid) == 6 and pid[5] is not None:
            raise LoadError("kiln.load: storage views of torch's legacy format (before torch "
                            "1.0) are not supported")
        return self._load_storage(key, stype.dtype, location, _int(numel, "a storage size"))


def _check_opcodes(data):
    try:
        with warnings.catch_warnings():  # (pickletools warns about escapes in damaged text)
            warnings.simplefilter("ignore")
            ops = list(pickletools.genops(data))
        for op, arg, _ in ops:
            if op.name in _FORBIDDEN_OPS:
                raise pickle.UnpicklingError(
                    f"kiln.load: the checkpoint's pickle uses the opcode {op.name}, which "
                    "kiln does not run (it builds arbitrary objects)")
            if op.name in _MEMO_OPS and int(arg) > len(data):
                raise LoadError("kiln.load: corrupt checkpoint: memo index out of range")
    except ValueError as e:  # genops: truncated or unknown opcode
        raise LoadError(f"kiln.load: corrupt checkpoint: {e}") from None


def _unpickle(data, load_storage, encoding="ASCII"):
    _check_opcodes(data)
    return _Unpickler(data, load_storage, encoding=encoding).load()


def _no_storages(*_):
    raise LoadError("kiln.load: corrupt checkpoint: a storage where none may be")


# --- placing storages (map_location) -------------------------------------------------------

def _to_device(t, target):
    try:
        dev = target if isinstance(target, _C.device) else _C.device(str(target))
        return t if dev.type == "cpu" else t.to(dev)
    except LoadError:
        raise
    except Exception as e:
        raise LoadError(f"kiln.load: the checkpoint's storage is on '{target}', which kiln "
                        f"cannot place it on ({e}); pass map_location='cpu' (or a dict or "
                        "function) to load it elsewhere") from None


def place(t, location, map_location):
    """t (a CPU tensor holding a storage saved on `location`) where map_location says, with
    torch's rules: None (the saved location), a device or str (everything there), a dict
    (saved location -> location; others stay) or a function (storage, location) -> storage or
    None (None: the saved location)."""
    if map_location is None:
        target = location
    elif isinstance(map_location, (str, _C.device)) or hasattr(map_location, "type"):
        target = str(map_location)
    elif isinstance(map_location, dict):
        target = map_location.get(location, location)
    elif callable(map_location):
        try:
            r = map_location(t, location)
        except Exception as e:
            raise _Passthrough(e) from None
        if r is not None:
            if not isinstance(r, _C.Tensor):
                raise _Passthrough(TypeError(
                    f"kiln.load: map_location returned a {type(r).__name__}; expected the "
                    "storage (a kiln tensor) or None"))
            return r
        target = location
    else:
        raise _Passthrough(TypeError(
            "kiln.load: map_location must be None, a str, a device, a dict or a function, "
            f"not {type(map_location).__name__}"))
    return _to_device(t, target)


def check_map_location(map_location):
    if not (map_location is None or isinstance(map_location, (str, _C.device, dict))
            or hasattr(map_location, "type") or callable(map_location)):
        raise TypeError("kiln.load: map_location must be None, a str, a device, a dict or a "
                        f"function, not {type(map_location).__name__}")


def _tensor_from_bytes(raw, dtype, byteorder):
    """A flat tensor of the storage bytes raw (a writable uint8 array that the tensor keeps)."""
    itemsize = np.dtype(_NUMPY[dtype]).itemsize
    if len(raw) % itemsize:
        raise LoadError("kiln.load: corrupt checkpoint: a storage's size is not a multiple of "
                        "its element size")
    arr = raw.view(_NUMPY[dtype])
    if byteorder == "big" and itemsize > 1:
        arr.byteswap(inplace=True)
    t = _C.from_numpy(arr)
    return t.view(_C.bfloat16) if dtype == "bfloat16" else t


# --- the two file formats ------------------------------------------------------------------

def _guarded(what, fn):
    """Runs fn; a failure that comes from the file's contents becomes one clear error."""
    try:
        return fn()
    except _Passthrough as p:
        raise p.args[0] from None
    except LoadError:
        raise
    except pickle.UnpicklingError as e:
        if str(e).startswith("kiln.load"):
            raise
        raise pickle.UnpicklingError(f"kiln.load: {what} is not a readable torch checkpoint "
                                     f"(corrupt pickle): {e}") from None
    except Exception as e:
        raise LoadError(f"kiln.load: {what} is not a readable torch checkpoint (corrupt or "
                        f"truncated): {type(e).__name__}: {e}") from None


def load_zip(fileobj, map_location, what, encoding="ASCII"):
    return _guarded(what, lambda: _load_zip(fileobj, map_location, encoding))


def _load_zip(fileobj, map_location, encoding):
    zf = zipfile.ZipFile(fileobj)
    names = zf.namelist()
    pkl = next((n for n in names if n.endswith("data.pkl") and n.count("/") <= 1), None)
    if pkl is None:
        raise LoadError("kiln.load: a zip archive without data.pkl is not a torch checkpoint")
    prefix = pkl[:-len("data.pkl")]
    if any(n.startswith(prefix + "code/") or n == prefix + "constants.pkl" for n in names):
        raise LoadError("kiln.load: this is a TorchScript archive (torch.jit.save); kiln "
                        "reads torch.save checkpoints")
    byteorder = "little"
    if prefix + "byteorder" in names:
        byteorder = zf.read(prefix + "byteorder").decode("ascii", "replace")
        if byteorder not in ("little", "big"):
            raise LoadError(f"kiln.load: unknown byte order {byteorder!r} in the checkpoint")
    loaded = {}

    def load_storage(key, dtype, location, numel):
        if key in loaded:
            s = loaded[key]
            if s.dtype != dtype:
                raise LoadError(f"kiln.load: storage {key} is read as two dtypes")
            return s
        name = f"{prefix}data/{key}"
        nbytes = numel * np.dtype(_NUMPY[dtype]).itemsize
        size = zf.getinfo(name).file_size
        if size != nbytes:
            raise LoadError(f"kiln.load: corrupt checkpoint: storage {key} has {size} bytes, "
                            f"its record says {numel} elements of {dtype}")
        t = _tensor_from_bytes(_read_record(zf, name, nbytes), dtype, byteorder)
        s = loaded[key] = _Storage(place(t, location, map_location), dtype)
        return s

    return _unpickle(zf.read(pkl), load_storage, encoding)


def _read_record(zf, name, nbytes):
    """The record's bytes, read in pieces into one array (no second full-size copy); zipfile
    checks the CRC when the last piece is read."""
    out = np.empty(nbytes, np.uint8)
    pos = 0
    with zf.open(name) as r:
        while pos < nbytes:
            piece = r.read(min(1 << 24, nbytes - pos))
            if not piece:
                raise LoadError(f"kiln.load: corrupt checkpoint: record {name} is truncated")
            out[pos:pos + len(piece)] = np.frombuffer(piece, np.uint8)
            pos += len(piece)
        r.read(1)  # (reaches the end: the CRC check)
    return out


def _pickle_end(data, pos):
    """The end of the pickle that starts at data[pos] (after its STOP)."""
    try:
        stream = io.BytesIO(data)
        stream.seek(pos)
        last = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for op, _, p in pickletools.genops(stream):  # (positions are the stream's)
                last = p
        return last + 1
    except (ValueError, TypeError) as e:
        raise LoadError(f"kiln.load: corrupt checkpoint: {e}") from None


def load_legacy(data, map_location, what, encoding="ASCII"):
    return _guarded(what, lambda: _load_legacy(data, map_location, encoding))


def _load_legacy(data, map_location, encoding):
    pos = 0

    def next_pickle(load_storage=_no_storages):
        nonlocal pos
        end = _pickle_end(data, pos)
        obj = _unpickle(bytes(data[pos:end]), load_storage, encoding)
        pos = end
        return obj

    if next_pickle() != LEGACY_MAGIC:
        raise LoadError("kiln.load: not a torch checkpoint (bad magic number)")
    if next_pickle() != LEGACY_PROTOCOL:
        raise LoadError("kiln.load: unsupported version of torch's legacy format")
    sys_info = next_pickle()
    little = not isinstance(sys_info, dict) or sys_info.get("little_endian", True)
    pending = {}  # key -> (storage, numel): filled after the object, as the file orders them

    def load_storage(key, dtype, location, numel):
        if key not in pending:
            empty = _C.from_numpy(np.zeros(numel, dtype=_NUMPY[dtype]))
            if dtype == "bfloat16":
                empty = empty.view(_C.bfloat16)
            pending[key] = (_Storage(place(empty, location, map_location), dtype), numel)
        return pending[key][0]

    obj = next_pickle(load_storage)
    keys = next_pickle()
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise LoadError("kiln.load: corrupt checkpoint: bad storage key list")
    for key in keys:
        if key not in pending:
            raise LoadError(f"kiln.load: corrupt checkpoint: storage {key} is not used")
        s, numel = pending[key]
        (count,) = struct.unpack("<q" if little else ">q", bytes(data[pos:pos + 8]))
        itemsize = np.dtype(_NUMPY[s.dtype]).itemsize
        if count != numel or pos + 8 + count * itemsize > len(data):
            raise LoadError(f"kiln.load: corrupt checkpoint: storage {key} is truncated or "
                            "of the wrong size")
        raw = np.frombuffer(data, np.uint8, count * itemsize, pos + 8).copy()
        pos += 8 + count * itemsize
        src = _tensor_from_bytes(raw, s.dtype, "little" if little else "big")
        from . import no_grad
        with no_grad():  # (the storage's views may require grad)
            s.tensor.copy_(src.to(s.tensor.device) if s.tensor.device.type != "cpu" else src)
    return obj
