"""kiln.save in torch's zip checkpoint format (what torch.save writes by default).

The archive (decision 0103): `<name>/data.pkl` (pickle protocol 2 of the object, each tensor
reduced to torch._utils._rebuild_tensor_v2 over a storage given as a persistent id
('storage', torch.<Type>Storage, key, location, numel)), `<name>/data/<key>` (each storage's
raw little-endian bytes, 64-byte aligned in the file), `.format_version`,
`.storage_alignment`, `byteorder`, `version` and `.data/serialization_id`.

torch is never imported: the pickle is written by Python's own pickler with stand-in classes
of this module where torch's globals go, and a pass over the finished pickle renames each
stand-in's GLOBAL opcode to torch's module and name (protocol 2 addresses the memo by index,
not by byte offset, so renaming is safe).

Only what torch.load(weights_only=True) reads is written (tensors, Parameters, dict,
OrderedDict, Counter, list, tuple, set, str, bytes, bytearray, int, float,
complex, bool, None, dtypes, devices, Sizes); anything else is a TypeError here rather than
a file neither kiln nor torch's default load can read back."""
import collections
import io
import pickle
import pickletools
import secrets
import struct
import sys
import zipfile

import numpy as np

from . import _C
from ._size import Size

ALIGNMENT = 64  # torch aligns each record's data to 64 bytes (.storage_alignment)

# kiln dtype name -> the legacy storage class torch names in the persistent id
STORAGE_TYPES = {
    "float64": "DoubleStorage", "float32": "FloatStorage", "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
    "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage",
    "bool": "BoolStorage", "complex64": "ComplexFloatStorage",
    "complex128": "ComplexDoubleStorage",
}

_RENAMES = {}  # "this_module standin_name" -> b"torch_module\ntorch_name\n"


def _stand_in(module, name):
    """A class of this module that pickles as a GLOBAL, renamed to module.name afterwards."""
    key = f"_torch_global_{module.replace('.', '_')}_{name}"
    if key not in globals():
        cls = type(key, (), {"__module__": __name__, "__qualname__": key})
        globals()[key] = cls
        _RENAMES[f"{__name__} {key}"] = f"{module}\n{name}\n".encode()
    return globals()[key]


class _Reduced:
    """An object that pickles as fn(*args) (fn a stand-in)."""
    __slots__ = ("fn", "args")

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


class _Storage:
    """One storage of the file: a contiguous run of elements that one or more saved tensors
    view. `lo` / `hi` bound the elements they use (of the kiln storage they share)."""

    def __init__(self, tensor, key):
        self.tensor, self.key = tensor, key  # any tensor viewing it (to read bytes from)
        self.lo, self.hi = None, 0

    def cover(self, offset, size, stride):
        if any(s == 0 for s in size):
            return
        last = offset + sum((s - 1) * st for s, st in zip(size, stride))
        self.lo = offset if self.lo is None else min(self.lo, offset)
        self.hi = max(self.hi, last + 1)

    def numel(self):
        return 0 if self.lo is None else self.hi - self.lo

    def data(self):
        """The storage's bytes (lo..hi) as a flat uint8 array, little-endian."""
        t = self.tensor
        if self.lo is None:
            return np.zeros(0, np.uint8)
        run = t.as_strided((self.hi,), (1,), 0)[self.lo:].contiguous()
        if run.device.type != "cpu":
            run = run.cpu()
        if run.dtype == _C.bfloat16:  # numpy has no bfloat16: its 16-bit patterns
            run = run.view(_C.int16)
        return np.ascontiguousarray(run.numpy()).reshape(-1).view(np.uint8)


class _TensorRecord:
    """A saved tensor: reduced to torch._utils._rebuild_tensor_v2 (Parameters additionally
    through _rebuild_parameter, or _rebuild_parameter_with_state when they carry Python
    attributes; plain tensors with attributes through torch._tensor._rebuild_from_type_v2, as
    torch)."""
    __slots__ = ("storage", "offset", "size", "stride", "requires_grad", "parameter", "state")

    def __reduce__(self):
        s = self.storage
        offset = self.offset - s.lo if s.lo is not None else 0
        hooks = collections.OrderedDict()  # backward hooks: torch always writes an empty one
        if self.parameter:
            inner = _Reduced(_stand_in("torch._utils", "_rebuild_tensor_v2"),
                             (s, offset, self.size, self.stride, False, hooks))
            if self.state:
                return (_stand_in("torch._utils", "_rebuild_parameter_with_state"),
                        (inner, self.requires_grad, collections.OrderedDict(), self.state))
            return (_stand_in("torch._utils", "_rebuild_parameter"),
                    (inner, self.requires_grad, collections.OrderedDict()))
        plain = (_stand_in("torch._utils", "_rebuild_tensor_v2"),
                 (s, offset, self.size, self.stride, self.requires_grad, hooks))
        if self.state:  # a plain tensor with Python attributes: torch's _rebuild_from_type_v2
            return (_stand_in("torch._tensor", "_rebuild_from_type_v2"),
                    (plain[0], _stand_in("torch", "Tensor"), plain[1], self.state))
        return plain


def _dtype_name(dt):
    return str(dt).split(".")[-1]


class _Converter:
    """Copies the object tree, tensors replaced by records and kiln's dtype / device / Size
    by torch's; shared and recursive containers stay shared (memo by id)."""

    def __init__(self):
        self.memo = {}
        self.storages = {}  # (device, base address, dtype) -> _Storage, in order of first use
        self.in_progress = set()

    def storage_for(self, t):
        dt = _dtype_name(t.dtype)
        if t.numel() == 0:  # no memory: a storage of its own, with no elements
            key = ("empty", id(t))
        else:
            # Views of one kiln storage share one file storage, as torch: the storage is
            # identified by its element 0's address. Views with another dtype get their own
            # (torch refuses to save those).
            base = t.data_ptr() - t.storage_offset() * t.element_size()
            key = (str(t.device), base, dt)
        s = self.storages.get(key)
        if s is None:
            s = self.storages[key] = _Storage(t, str(len(self.storages)))
        return s

    def tensor(self, t):
        if type(t) is not _C.Tensor and not isinstance(t, _nn_parameter()):
            raise TypeError(f"kiln.save: cannot save a {type(t).__name__} (a Tensor subclass) "
                            "in torch's format; save a Tensor or a Parameter")
        if _dtype_name(t.dtype) not in STORAGE_TYPES:
            raise TypeError(f"kiln.save: no torch storage type for dtype {t.dtype}")
        r = _TensorRecord()
        r.parameter = isinstance(t, _nn_parameter())
        r.state = {k: self(v) for k, v in vars(t).items()}
        r.requires_grad = bool(t.requires_grad)
        d = t.detach()
        r.size, r.stride = tuple(int(s) for s in d.shape), tuple(int(s) for s in d.stride())
        r.storage = self.storage_for(d)
        r.offset = int(d.storage_offset()) if d.numel() else 0
        r.storage.cover(r.offset, r.size, r.stride)
        return r

    def __call__(self, o):
        t = type(o)
        if o is None or t in (bool, int, float, complex, str, bytes, bytearray):
            return o
        if id(o) in self.memo:
            return self.memo[id(o)][1]
        if isinstance(o, _C.Tensor):
            return self._keep(o, self.tensor(o))
        if isinstance(o, _C.dtype):
            return _stand_in("torch", _dtype_name(o))
        if isinstance(o, _C.device):
            args = (o.type,) if o.index is None else (o.type, o.index)
            return self._keep(o, _Reduced(_stand_in("torch", "device"), args))
        if t is Size:
            return self._keep(o, _Reduced(_stand_in("torch", "Size"), (tuple(o),)))
        if t in (dict, collections.OrderedDict, collections.Counter):
            new = self._keep(o, t())
            for k, v in o.items():
                new[self(k)] = self(v)
            if t is collections.OrderedDict and vars(o):
                # the attributes of an OrderedDict (torch's state_dicts keep _metadata)
                # travel too, as torch's pickle writes them (BUILD)
                vars(new).update((k, self(v)) for k, v in vars(o).items())
            return new
        if t is list:
            new = self._keep(o, [])
            new.extend(self(v) for v in o)
            return new
        if t in (tuple, set):  # (not frozenset: torch's weights_only load refuses it)
            if id(o) in self.in_progress:
                raise ValueError(f"kiln.save: a {t.__name__} that contains itself cannot be "
                                 "saved")
            self.in_progress.add(id(o))
            new = t(self(v) for v in o)
            self.in_progress.discard(id(o))
            return self._keep(o, new)
        # numpy scalars, enums and other subclasses of numbers and str: their plain value
        # (torch would pickle their class, which its weights_only load refuses)
        if isinstance(o, np.generic) and o.dtype.kind in "biufc":
            return o.item()
        for base in (bool, int, float, complex, str, bytes):
            if isinstance(o, base):
                return base(o)
        raise TypeError(f"kiln.save: cannot save a {t.__name__} in torch's format (kiln writes "
                        "tensors, dicts, OrderedDicts, lists, tuples, sets, numbers, strings, "
                        "bytes, None, dtypes, devices and Sizes: what torch.load reads with "
                        "weights_only=True)")

    def _keep(self, o, new):
        self.memo[id(o)] = (o, new)  # o is kept alive so that its id is not reused
        return new


def _nn_parameter():
    from .nn.parameter import Parameter  # (kiln.nn imports kiln: import late)
    return Parameter


def _pickle(root):
    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if type(obj) is _Storage:
                dt = _dtype_name(obj.tensor.dtype)
                location = sys.intern(str(obj.tensor.device))  # one memo entry, as torch
                return ("storage", _stand_in("torch", STORAGE_TYPES[dt]), obj.key, location,
                        obj.numel())
            return None

    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(root)
    return _rename_globals(buf.getvalue())


def _rename_globals(data):
    out, prev = [], 0
    for op, arg, pos in pickletools.genops(data):
        if op.name == "GLOBAL" and arg in _RENAMES:
            out.append(data[prev:pos])
            out.append(b"c" + _RENAMES[arg])
            prev = pos + 1 + len(arg) + 1  # opcode, "module\nname\n"
    out.append(data[prev:])
    return b"".join(out)


def _write_record(zf, fp, name, data):
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    nbytes = len(data)
    # Pad the local header's extra field so that the data starts on a 64-byte boundary
    # (torch's reader, memory-mapped loads included, expects it): 30 fixed bytes, the name,
    # the extra field (4 + padding) and, for big records, zipfile's 20-byte zip64 field.
    header = 30 + len(name.encode("utf-8")) + 4
    if nbytes * 1.05 > zipfile.ZIP64_LIMIT:  # zipfile's own test
        header += 20
    pad = -(fp.tell() + header) % ALIGNMENT
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    zf.writestr(info, data)
    info.extra = b""  # the padding is needed in the local header only


def serialize(obj):
    """Checks and pickles obj (nothing is written yet: a TypeError leaves the target alone);
    returns write(fp, archive) that writes the archive to the seekable binary file fp (at
    position 0), the archive's records named <archive>/..., as torch names them after the
    file."""
    if sys.byteorder != "little":
        raise RuntimeError("kiln.save writes torch's format on little-endian machines only")
    conv = _Converter()
    root = conv(obj)
    data_pkl = _pickle(root)

    def write(fp, archive="archive"):
        with zipfile.ZipFile(fp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            _write_record(zf, fp, f"{archive}/data.pkl", data_pkl)
            _write_record(zf, fp, f"{archive}/.format_version", b"1")
            _write_record(zf, fp, f"{archive}/.storage_alignment", str(ALIGNMENT).encode())
            _write_record(zf, fp, f"{archive}/byteorder", b"little")
            for s in conv.storages.values():
                _write_record(zf, fp, f"{archive}/data/{s.key}", memoryview(s.data()))
            _write_record(zf, fp, f"{archive}/version", b"3\n")
            # a random id per save, as torch's (it only identifies the file)
            _write_record(zf, fp, f"{archive}/.data/serialization_id",
                          f"{secrets.randbelow(10 ** 40):040d}".encode())

    return write
