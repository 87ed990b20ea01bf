"""Factories and information composed of kiln's ops (decision 0080): window functions,
normal / range / asarray / empty_strided / fill, the default generator's state as bytes,
finfo / iinfo, devices."""
import builtins as _b
import math as _math
import warnings as _warnings

from . import _C
from ._composite_more import export, METHODS, PROPERTIES

_FLOATS = (_C.float16, _C.bfloat16, _C.float32, _C.float64)


# --- windows ------------------------------------------------------------------------------

def _window(name, window_length, periodic, dtype, requires_grad, values, device=None):
    """values(n, N) for n = 0..N-1 in float64, N one more than window_length when periodic
    (the last sample is then dropped), rounded once to dtype; computed on the CPU (a device
    may have no float64) and moved to `device`."""
    dtype = _C.get_default_dtype() if dtype is None else dtype
    if dtype not in _FLOATS:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window length, got "
                           f"window_length={window_length}")
    if window_length <= 1:
        r = _C.ones(window_length, dtype=dtype)
    else:
        size = window_length + 1 if periodic else window_length
        n = _C.arange(size, dtype=_C.float64)
        r = values(n, size).narrow(0, 0, window_length).to(dtype)
    if device is not None:
        r = r.to(device)
    return r.requires_grad_(True) if requires_grad else r


def _cosine_sum(coefficients):
    def values(n, size):
        r = _C.zeros_like(n)
        for k, a in enumerate(coefficients):
            r = r + (a if k == 0 else -a if k % 2 else a) * _C.cos(n * (2 * _math.pi * k /
                                                                       (size - 1)))
        return r
    return values


@export(method=False)
def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype, requires_grad,
                   _cosine_sum((0.5, 0.5)), device)


@export(method=False)
def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype, requires_grad,
                   _cosine_sum((alpha, beta)), device)


@export(method=False)
def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    return _window("blackman_window", window_length, periodic, dtype, requires_grad,
                   _cosine_sum((0.42, 0.5, 0.08)), device)


@export(method=False)
def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad,
                   lambda n, size: 1.0 - _C.abs(n * (2.0 / (size - 1)) - 1.0), device)


@export(method=False)
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    from . import special

    def values(n, size):
        half = (size - 1) / 2.0
        ratio = (n - half) / half
        arg = beta * _C.sqrt((1.0 - ratio * ratio).clamp(min=0.0))
        return special.i0(arg) / special.i0(_C.full((), float(beta), dtype=_C.float64))
    return _window("kaiser_window", window_length, periodic, dtype, requires_grad, values,
                   device)


# --- random -------------------------------------------------------------------------------

@export(method=False)
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False, out=None):
    """mean + std * N(0, 1) draws, broadcast over the tensor arguments (or of `size` when
    both are numbers); differentiable in tensor mean and std, as torch."""
    tensors = [t for t in (mean, std) if isinstance(t, _C.Tensor)]
    if not isinstance(std, _C.Tensor) and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if isinstance(std, _C.Tensor) and std.numel() and _b.bool((std.detach() < 0).any()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if tensors:
        shape = ()
        for t in tensors:
            shape = _C.broadcast_shapes(shape, tuple(t.shape))
        dtype = tensors[0].dtype if len(tensors) == 1 else _C.promote_types(
            tensors[0].dtype, tensors[1].dtype)
        if dtype not in _FLOATS:
            raise RuntimeError(f'"normal_kernel_cpu" not implemented for {dtype}')
    else:
        if size is None:
            raise TypeError("normal() missing 1 required positional argument: \"size\"")
        shape = tuple(size)
        dtype = _C.get_default_dtype() if dtype is None else dtype
    # the draws on the tensor arguments' device (else the one asked for)
    noise = _C.empty(shape, dtype=dtype, device=tensors[0].device if tensors else device)
    noise.normal_(0.0, 1.0, generator=generator) if generator is not None else noise.normal_()
    r = mean + std * noise
    if requires_grad:
        r.requires_grad_(True)
    return out.copy_(r) if out is not None else r


@export(method=False)
def get_rng_state():
    """The default generator's state (seed and offset) as bytes, as torch's ByteTensor."""
    import numpy as np
    state = _C.default_generator.get_state().numpy()
    return _C.tensor(np.ascontiguousarray(state).view(np.uint8))


@export(method=False)
def set_rng_state(new_state):
    import numpy as np
    if not isinstance(new_state, _C.Tensor) or new_state.dtype != _C.uint8:
        raise TypeError(f"expected a uint8 tensor (as kiln.get_rng_state returns), got "
                        f"{getattr(new_state, 'dtype', type(new_state).__name__)}")
    raw = new_state.numpy()
    size = _C.default_generator.get_state().numel() * 8
    if raw.size != size:
        raise RuntimeError(f"set_rng_state: expected a state of {size} bytes, got {raw.size}")
    _C.default_generator.set_state(_C.tensor(np.ascontiguousarray(raw).view(np.int64)))


# --- small factories ----------------------------------------------------------------------

@export(method=False)
def range(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """Deprecated in torch: start..end inclusive (floor((end - start) / step) + 1 values)."""
    _warnings.warn("kiln.range is deprecated and will be removed; use kiln.arange, which "
                   "excludes end", UserWarning, stacklevel=2)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    count = _math.floor((end - start) / step) + 1
    if count < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    r = (_C.arange(count, dtype=_C.float64) * float(step) + float(start)).to(
        _C.get_default_dtype() if dtype is None else dtype)
    if device is not None:
        r = r.to(device)
    return r.requires_grad_(True) if requires_grad else r


@export(method=False)
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    if isinstance(obj, _C.Tensor):
        r = obj
        if dtype is not None and dtype != r.dtype:
            if copy is False:
                raise ValueError("asarray: a dtype change needs a copy, and copy=False")
            r = r.to(dtype)
        elif copy:
            r = r.clone()
    else:
        r = _C.tensor(obj, dtype=dtype) if dtype is not None else _C.tensor(obj)
    if device is not None and r.device != _C.device(device):
        r = r.to(device)
    return r.requires_grad_(True) if requires_grad else r


@export(method=False)
def empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False,
                  layout=None, pin_memory=False):
    size, stride = tuple(size), tuple(stride)
    extent = 0 if 0 in size else 1 + sum((s - 1) * st for s, st in zip(size, stride))
    kwargs = {"dtype": dtype} if dtype is not None else {}
    if device is not None:
        kwargs["device"] = device
    r = _C.empty(extent, **kwargs).as_strided(size, stride)
    return r.requires_grad_(True) if requires_grad else r


@export(method=False)
def empty_permuted(size, physical_layout, *, dtype=None, device=None, requires_grad=False,
                   layout=None, pin_memory=False):
    """An empty tensor of `size` whose dims lie in memory in the order physical_layout
    (outermost first), as torch's."""
    size, order = tuple(size), tuple(physical_layout)
    if sorted(order) != list(_b.range(len(size))):
        raise RuntimeError(f"empty_permuted: physical_layout must be a permutation of the dims "
                           f"0..{len(size) - 1}, got {order}")
    kwargs = {"dtype": dtype} if dtype is not None else {}
    if device is not None:
        kwargs["device"] = device
    inverse = [order.index(d) for d in _b.range(len(size))]
    r = _C.empty([size[d] for d in order], **kwargs).permute(inverse)
    return r.requires_grad_(True) if requires_grad else r


_NUMPY_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16",
                 "bfloat16": "uint16", "int64": "int64", "int32": "int32", "int16": "int16",
                 "int8": "int8", "uint8": "uint8", "bool": "bool"}


@export(method=False)
def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-d tensor sharing the memory of an object with the buffer protocol (bytes are
    read-only there too), as torch.frombuffer."""
    import numpy as np
    name = str(dtype).replace("kiln.", "")
    if name not in _NUMPY_DTYPES:
        raise TypeError(f"frombuffer: unsupported dtype {dtype}")
    a = np.frombuffer(buffer, dtype=_NUMPY_DTYPES[name], count=count, offset=offset)
    if a.size == 0:
        raise ValueError("both buffer length (0) and count (0) must not be 0")
    r = _C.from_numpy(a)
    if name == "bfloat16":
        r = r.view(_C.bfloat16)
    return r.requires_grad_(True) if requires_grad else r


@export(method=False)
def fill(input, value):
    if isinstance(value, _C.Tensor):
        if value.dim():
            raise RuntimeError("fill only supports 0-dimension value tensor but got tensor "
                               f"with {value.dim()} dimensions.")
        return value.to(input.dtype).expand(tuple(input.shape)).clone()
    return _C.full_like(input, value)


# --- dtype and device information ---------------------------------------------------------

_BFLOAT16 = {"bits": 16, "eps": 0.0078125, "max": 3.3895313892515355e+38,
             "tiny": 1.1754943508222875e-38, "resolution": 0.01}


class finfo:
    """Machine limits of a floating dtype, as torch.finfo."""

    def __init__(self, type=None):
        type = _C.get_default_dtype() if type is None else type
        type = {_C.complex64: _C.float32, _C.complex128: _C.float64}.get(type, type)  # as torch
        if type not in _FLOATS:
            raise TypeError("kiln.finfo() requires a floating point input type. Use "
                            "kiln.iinfo to handle 'kiln.finfo'")
        name = str(type).split(".")[-1]
        if name == "bfloat16":
            info = dict(_BFLOAT16)
        else:
            import numpy as np
            f = np.finfo(name)
            info = {"bits": int(f.bits), "eps": float(f.eps), "max": float(f.max),
                    "tiny": float(f.tiny), "resolution": 10.0 ** -int(f.precision)}
        self.bits, self.eps, self.max = info["bits"], info["eps"], info["max"]
        self.min = -self.max
        self.tiny = self.smallest_normal = info["tiny"]
        self.resolution = info["resolution"]
        self.dtype = name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"eps={self.eps}, smallest_normal={self.tiny}, tiny={self.tiny}, "
                f"dtype={self.dtype})")


_INT_BITS = {"uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64}


class iinfo:
    """Limits of an integer dtype, as torch.iinfo."""

    def __init__(self, type):
        name = str(type).split(".")[-1]
        if name not in _INT_BITS:
            raise TypeError("kiln.iinfo() requires an integer input type. Use kiln.finfo to "
                            "handle 'kiln.iinfo'")
        self.bits = _INT_BITS[name]
        signed = name != "uint8"
        self.min = -(2 ** (self.bits - 1)) if signed else 0
        self.max = 2 ** (self.bits - 1) - 1 if signed else 2 ** self.bits - 1
        self.dtype = name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


export(method=False)(finfo)
export(method=False)(iinfo)


class layout:
    """A tensor layout (torch.layout). kiln.Tensor is dense and strided: Tensor.layout is
    kiln.strided (code that checks layouts, as kiln.testing.assert_close's check_layout, works
    unchanged). kiln.sparse_coo / kiln.sparse_csr are the layouts of kiln.sparse's tensors,
    Python objects over dense kiln tensors (decision 0108)."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"kiln.{self._name}"

    def __reduce__(self):
        return (_layout_named, (self._name,))


def _layout_named(name):
    return {"strided": strided, "sparse_coo": sparse_coo, "sparse_csr": sparse_csr}[name]


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
export(method=False)(layout)
export(method=False, name="strided")(strided)
export(method=False, name="sparse_coo")(sparse_coo)
export(method=False, name="sparse_csr")(sparse_csr)
PROPERTIES["layout"] = lambda self: strided


@export()
def get_device(input):
    """-1 for a CPU tensor, else the device's index, as torch."""
    d = input.device
    return -1 if d.type == "cpu" else (d.index if d.index is not None else 0)


def dim_order(self):
    """The dims from outermost to innermost in memory: an insertion sort by stride in which
    a dim of size 1 or stride 0 decides nothing (it stays where its index puts it), equal
    strides put the larger dim outside, as torch."""
    strides, shape = self.stride(), tuple(self.shape)

    def inner_first(a, b):  # 1: b is inner to a, -1: a is inner to b, 0: undecided
        if shape[a] == 1 or shape[b] == 1 or strides[a] == 0 or strides[b] == 0:
            return 0
        if strides[a] != strides[b]:
            return 1 if strides[a] > strides[b] else -1
        return 1 if shape[a] > shape[b] else 0
    order = list(_b.range(self.dim() - 1, -1, -1))  # innermost first
    for i in _b.range(1, len(order)):
        j = i
        for k in _b.range(i - 1, -1, -1):
            c = inner_first(order[k], order[j])
            if c > 0:
                order[k], order[j] = order[j], order[k]
                j = k
            elif c < 0:
                break
    return tuple(reversed(order))


METHODS["dim_order"] = dim_order
