"""kiln: a PyTorch-like deep-learning runtime. `import kiln` works like `import torch`:
kiln.Tensor, kiln.tensor/zeros/rand..., dtypes (kiln.float32, ...), devices ("cpu",
"testing:0"), autograd (requires_grad, backward, kiln.no_grad, kiln.autograd.grad)."""
import builtins as _builtins
import os as _os

from . import _C
from ._C import *  # noqa: F401,F403  (ops, factories, dtypes, devices, Generator, Stream, ...)
from ._C import Tensor, dtype, device, Generator, OutOfMemoryError  # noqa: F401
from ._C import _int_mm, _standard_gamma, _standard_gamma_grad  # noqa: F401  (star skips _ names)
from ._size import Size
from . import autograd, return_types  # noqa: F401
from .autograd import (no_grad, enable_grad, set_grad_enabled, inference_mode,  # noqa: F401
                       is_grad_enabled, is_inference_mode_enabled)

__version__ = _C.__version__

# dtype aliases, as torch.
float = _C.float32
double = _C.float64
half = _C.float16
short = _C.int16
int = _C.int32
long = _C.int64
cfloat = _C.complex64
cdouble = _C.complex128
# `bool` is kiln.bool (bound by the star import above).

# Functions that exist only as Tensor methods in C++ or need Python around them.


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()


def is_floating_point(input):
    return input.is_floating_point()


def clone(input, *, memory_format=None):
    return input.clone()


def detach(input):
    return input.detach()


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A kiln tensor over the memory of `ext_tensor` (an object with __dlpack__, such as a
    torch tensor or a numpy array, or a DLPack capsule), without a copy: writes through
    either side are seen by the other. CPU memory only. copy=True copies it instead."""
    if device is not None and _C.device(device).type != "cpu":
        raise BufferError(f"kiln.from_dlpack: can only import to the CPU, not {device}")
    t = _C._from_dlpack(ext_tensor)
    return t.clone() if copy else t


def _tensor_hash(self):
    return id(self)


def _tensor_iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(self.unbind(0))


def _tensor_array(self, dtype=None, copy=None):
    import numpy as np
    a = self.numpy(force=True)
    if dtype is not None:
        a = a.astype(dtype, copy=False)
    return np.array(a, copy=True) if copy else a


def _tensor_deepcopy(self, memo):
    r = self.detach().clone()
    if type(self) is not Tensor:  # a Python subclass stays one (Parameter has its own)
        r = Tensor._make_subclass(type(self), r, False)
    r.requires_grad_(self.requires_grad)
    if self.grad is not None:
        r.grad = self.grad.detach().clone()
    memo[id(self)] = r
    if self.__dict__:  # Python attributes are deep-copied too, as torch
        import copy
        r.__dict__.update(copy.deepcopy(self.__dict__, memo))
    return r


def _tensor_format(self, spec):
    if self.dim() == 0:
        return self.item().__format__(spec)
    return object.__format__(repr(self), spec)


def _tensor_contains(self, element):
    if isinstance(element, (Tensor, _builtins.bool, _builtins.int, _builtins.float)):
        return _builtins.bool((self == element).any())
    raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed "
                       f"in a {type(element)}.")


def _tensor_xpu(self, device=None, non_blocking=False, memory_format=None):
    """A copy on the xpu device (this tensor itself when it is already there), as torch's."""
    target = "xpu" if device is None else (f"xpu:{device}" if isinstance(device, _builtins.int)
                                           else device)
    r = self if self.device.type == "xpu" and device is None else self.to(target)
    return r if memory_format is None else r.contiguous(memory_format=memory_format)


def _tensor_new_empty_strided(self, size, stride, *, dtype=None, device=None,
                              requires_grad=False):
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         device=self.device if device is None else device,
                         requires_grad=requires_grad)


_tensor_backward_all = Tensor.backward


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """torch's Tensor.backward; inputs= limits the accumulation to those tensors."""
    if inputs is None:
        return _tensor_backward_all(self, gradient, retain_graph, create_graph)
    return autograd.backward(self, gradient, retain_graph, create_graph, inputs)


Tensor.backward = _tensor_backward
Tensor.xpu = _tensor_xpu
Tensor.new_empty_strided = _tensor_new_empty_strided
Tensor.__hash__ = _tensor_hash
Tensor.__contains__ = _tensor_contains
Tensor.__iter__ = _tensor_iter
Tensor.__array__ = _tensor_array
Tensor.__deepcopy__ = _tensor_deepcopy
from . import _pickle  # noqa: E402  (Tensor.__reduce_ex__: pickle, multiprocessing)
_pickle.install(Tensor)
Tensor.__format__ = _tensor_format
Tensor.__array_priority__ = 1000  # numpy defers to kiln's reflected operators
Tensor.is_tensor = staticmethod(is_tensor)

from . import nn, optim, utils, profiler, backends  # noqa: E402,F401
from . import testing, signal  # noqa: E402,F401  (torch.testing, torch.signal.windows)
from . import masked  # noqa: E402,F401  (torch.masked)
from . import multiprocessing  # noqa: E402,F401  (tensors cross processes in shared memory)


def _after_fork_in_child():
    # libgomp's thread pool does not survive fork: a forked child entering a parallel region
    # with the parent's pool size hangs. Children start with one thread (a child whose parent
    # never ran a parallel region may raise it again with set_num_threads).
    _C.set_num_threads(1)


_os.register_at_fork(after_in_child=_after_fork_in_child)
from .serialization import save, load  # noqa: E402,F401
from .nn.parameter import Parameter as _Parameter  # noqa: E402,F401


def _tensor_set_data(self, value):
    _C._set_data(self, value)


Tensor.data = property(lambda self: self.detach(), _tensor_set_data)


def _resize_as_(self, other, memory_format=None):
    # torch.Tensor.resize_as_ / torch.resize_as_: self resized to other's shape.
    return self.resize_(other.shape) if memory_format is None else \
        self.resize_(other.shape, memory_format=memory_format)


def _conj_physical_(self):
    # In place; a real tensor is its own conjugate.
    return self.copy_(self.conj_physical()) if self.is_complex() else self


Tensor.resize_as_ = _resize_as_
Tensor.conj_physical_ = _conj_physical_
resize_as_, conj_physical_ = _resize_as_, _conj_physical_

from . import _composite  # noqa: E402  (torch functions composed of kiln's ops)

_composite.install(globals(), Tensor)

from . import special, linalg, fft  # noqa: E402,F401  (torch.special / .linalg / .fft)
from ._stft import stft, istft  # noqa: E402  (torch.stft / torch.istft over kiln.fft)
Tensor.stft, Tensor.istft = stft, istft


def _set_real(self, value):
    _C._real(self).copy_(value)


def _set_imag(self, value):
    _C._imag(self).copy_(value)


# torch's Tensor.real / .imag: views of the parts that can also be assigned to (x.imag = t).
Tensor.real = property(_C._real, _set_real)
Tensor.imag = property(_C._imag, _set_imag)
Tensor.__complex__ = lambda self: _builtins.complex(self.item())
Tensor.cfloat = lambda self: self.to(_C.complex64)
Tensor.cdouble = lambda self: self.to(_C.complex128)
igamma, igammac = special.gammainc, special.gammaincc  # torch.igamma / torch.igammac
Tensor.igamma = special.gammainc
Tensor.igammac = special.gammaincc
Tensor.igamma_ = lambda self, other: self.copy_(special.gammainc(self, other))
Tensor.igammac_ = lambda self, other: self.copy_(special.gammaincc(self, other))
from . import _linalg_legacy  # noqa: E402  (torch.det, torch.svd, Tensor.inverse, ...)
_linalg_legacy.install(globals(), Tensor)
from ._compile import compile  # noqa: E402,F401  (graph mode, decision 0081)
from . import func  # noqa: E402,F401  (torch.func transforms, decision 0082)
from . import quant, gguf  # noqa: E402,F401  (ggml block formats, GGUF files: decision 0083)
from . import xpu  # noqa: E402,F401  (the OpenCL GPU backend, decision 0086)
from ._settings import (set_printoptions, use_deterministic_algorithms,  # noqa: E402,F401
                        are_deterministic_algorithms_enabled,
                        is_deterministic_algorithms_warn_only_enabled,
                        set_deterministic_debug_mode, get_deterministic_debug_mode,
                        set_float32_matmul_precision, get_float32_matmul_precision,
                        set_default_device, get_default_device)
vmap = func.vmap
from ._control_flow import (cond, while_loop, typename, set_warn_always,  # noqa: E402,F401
                            is_warn_always_enabled, compiled_with_cxx11_abi)
from . import amp  # noqa: E402,F401  (torch.amp: autocast, GradScaler; decision 0091)
from .amp import (autocast, is_autocast_enabled, get_autocast_dtype,  # noqa: E402,F401
                  set_autocast_enabled, set_autocast_dtype, is_autocast_cache_enabled,
                  set_autocast_cache_enabled)
from . import distributions  # noqa: E402,F401  (torch.distributions, decision 0095)
from . import _composite_lowrank, _composite_extra  # noqa: E402  (svd_lowrank, lobpcg; histogramdd, segment_reduce, rnn cells, ...)
_composite_lowrank.install(globals(), Tensor)
_composite_extra.install(globals(), Tensor)
from . import cuda, random  # noqa: E402,F401  (torch.cuda as a CPU-only build has it; torch.random)
from . import distributed  # noqa: E402,F401  (torch.distributed over sockets, decision 0105)
import math as _math  # noqa: E402
inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e  # torch.inf, ..., torch.e
newaxis = None  # torch.newaxis, as numpy's
from . import _round  # noqa: E402  (round(decimals=) as torch computes it)
_round.install(globals(), Tensor)
from . import _out_forms  # noqa: E402  (out= for the functions written in Python)
_out_forms.install(globals())
from . import sparse  # noqa: E402,F401  (torch.sparse: COO / CSR tensors, decision 0108)
from . import _torch_function_install, overrides  # noqa: E402,F401  (__torch_function__, decision 0109)
_torch_function_install.arm()
from . import fx  # noqa: E402,F401  (torch.fx: symbolic tracing, GraphModule, decision 0110)

# Imported on first use, as torch's: kiln.export (torch.export, decision 0112) and kiln.library
# (torch.library, decision 0111) cost 20-40 ms each at import; kiln.ops (torch.ops: custom
# operators as kiln.ops.<namespace>.<op>) is the namespace kiln.library fills.
_LAZY_SUBMODULES = ("export", "library")


def __getattr__(name):
    import importlib
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "ops":
        return importlib.import_module(f"{__name__}._ops_namespace").ops
    raise AttributeError(f"module 'kiln' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_SUBMODULES) | {"ops"})
