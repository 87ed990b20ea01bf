"""More torch top-level functions and Tensor methods composed of kiln's ops: histogramdd,
segment_reduce, nonzero_static, the legacy norms (frobenius_norm, nuclear_norm,
norm_except_dim), the functional recurrent cells torch exposes at the top level (lstm_cell,
gru_cell, rnn_tanh_cell, rnn_relu_cell, over the same kernel as kiln.nn's cells) and small
Tensor API pieces (type, is_inference, is_pinned, pin_memory, output_nr, is_set_to).
install() adds them as kiln.<name> / Tensor.<name>, never replacing one kiln has."""
import builtins as _b
import collections as _collections
import numbers as _numbers

from . import _C

FUNCTIONS = {}
METHODS = {}
PROPERTIES = {}

_HistogramDD = _collections.namedtuple("histogramdd", ["hist", "bin_edges"])


def _export(function=True, method=False):
    def register(fn):
        if function:
            FUNCTIONS[fn.__name__] = fn
        if method:
            METHODS[fn.__name__] = fn
        return fn
    return register


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


# --- histogramdd --------------------------------------------------------------------------

@_export()
def histogramdd(input, bins, *, range=None, weight=None, density=False):
    """The histogram of the points input[..., :] (the innermost dim holds each point's D
    coordinates): bins is a count for every dim, a list of counts, or a list of 1-d edge
    tensors; range is the flat [lo0, hi0, lo1, hi1, ...]. Each bin holds its left edge, the
    last one also its right edge. Returns (hist, bin_edges) as torch.histogramdd."""
    if input.dtype not in (_C.float32, _C.float64):
        raise NotImplementedError(f'"histogramdd" not implemented for '
                                  f"'{_dtype_name(input.dtype)}'")
    if input.dim() < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    D = input.shape[-1]
    pts = input.detach().reshape(-1, D)
    if isinstance(bins, _numbers.Integral):
        bins = [int(bins)] * D
    else:
        bins = list(bins)
        if any(isinstance(b, _C.Tensor) for b in bins) and not all(
                isinstance(b, _C.Tensor) for b in bins):
            raise TypeError("histogramdd: bins must be all counts or all edge tensors")
    if len(bins) != D:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost "
                           "dimension of the input.")
    if range is not None and len(range) != 2 * D:
        raise RuntimeError(f"torch.histogramdd: for a {D}-dimensional histogram range should "
                           f"have {2 * D} elements, but got {len(range)}")
    if weight is not None and tuple(weight.shape) != tuple(input.shape[:-1]):
        raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the "
                           "same shape as the input tensor excluding its innermost dimension, "
                           f"but got input with shape {tuple(input.shape)} and weight with "
                           f"shape {tuple(weight.shape)}")
    from ._composite import searchsorted
    edges, index, inside, sizes = [], None, None, []
    for d in _b.range(D):
        x = pts[:, d]
        b = bins[d]
        if isinstance(b, _C.Tensor):
            if b.dim() != 1:
                raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, "
                                   f"but got {b.dim()} dimensions in the bins tensor for "
                                   f"dimension {d}")
            if b.dtype != input.dtype:
                raise RuntimeError("torch.histogramdd: input tensor and bins tensors should "
                                   "have the same dtype, but got input with dtype "
                                   f"{_dtype_name(input.dtype)} and bins for dimension {d} "
                                   f"with dtype {_dtype_name(b.dtype)}")
            e = b.detach()
        else:
            if b <= 0:
                raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {b} for "
                                   f"dimension {d}")
            if range is not None:
                lo, hi = float(range[2 * d]), float(range[2 * d + 1])
            elif x.numel():
                lo, hi = float(x.min().item()), float(x.max().item())
            else:
                lo, hi = 0.0, 1.0
            if lo > hi:
                raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                                   f"{lo:g} max {hi:g} for dimension {d}")
            if not (abs(lo) < float("inf") and abs(hi) < float("inf")):
                raise RuntimeError(f"torch.histogramdd: dimension {d}'s range [{lo:g}, {hi:g}] "
                                   "is not finite")
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            e = _C.linspace(lo, hi, b + 1, dtype=input.dtype, device=input.device)
        nb = _b.max(e.numel() - 1, 0)
        edges.append(e)
        sizes.append(nb)
        ok = (x >= e[0]) & (x <= e[-1]) if e.numel() else _C.zeros_like(x, dtype=_C.bool)
        i = (searchsorted(e, x, right=True) - 1).clamp(0, _b.max(nb - 1, 0))
        index = i if index is None else index * nb + i
        inside = ok if inside is None else inside & ok
    total = 1
    for s in sizes:
        total *= s
    w = (_C.ones(pts.shape[0], dtype=input.dtype, device=input.device) if weight is None
         else weight.detach().reshape(-1).to(input.dtype))
    hist = _C.zeros(total, dtype=input.dtype, device=input.device)
    if total and pts.shape[0]:
        hist = hist.scatter_add(0, index, _C.where(inside, w, _C.zeros_like(w)))
    hist = hist.reshape(sizes)
    if density:
        vol = None
        for d, e in enumerate(edges):
            wd = (e[1:] - e[:-1]).reshape([sizes[d] if j == d else 1 for j in _b.range(D)])
            vol = wd if vol is None else vol * wd
        hist = hist / (hist.sum() * vol)
    return _HistogramDD(hist, tuple(edges))


# --- segment_reduce -----------------------------------------------------------------------

_SEGMENT_REDUCTIONS = ("sum", "prod", "mean", "max", "min")


@_export()
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """Reduces data along axis over consecutive segments given by lengths (..., S) or
    offsets (..., S + 1) (leading dims: those of data before axis): sum / prod / mean / max /
    min, empty segments giving initial (or 0, 1, nan, -inf, inf), as torch.segment_reduce.
    With initial, max / min / sum / prod include it, and mean is (initial + sum) / length."""
    if reduce not in _SEGMENT_REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    if not data.is_floating_point():
        raise NotImplementedError(f'"_segment_reduce_cpu" not implemented for '
                                  f"'{_dtype_name(data.dtype)}'")
    seg = lengths if lengths is not None else offsets
    if seg.dtype not in (_C.int32, _C.int64):
        raise NotImplementedError(f'"_segment_reduce_lengths_cpu_kernel1" not implemented for '
                                  f"'{_dtype_name(seg.dtype)}'")
    nd = data.dim()
    if not -nd <= axis < _b.max(nd, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}]"
                         f", but got {axis})")
    axis = axis % nd
    if axis != seg.dim() - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of "
                           f"{'lengths' if lengths is not None else 'offsets'} but got {axis}.")
    n = data.shape[axis]
    seg = seg.to(_C.int64)
    if lengths is not None:
        if not unsafe:
            if bool((seg < 0).any()):
                raise RuntimeError("lengths contains negative value!")
            if bool((seg.sum(-1) != n).any()):
                raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis "
                                   "to sum to data.size(lengths.dim()-1) when !unsafe.")
        zero = _C.zeros(tuple(seg.shape[:-1]) + (1,), dtype=_C.int64, device=seg.device)
        offs = _C.cat([zero, seg.cumsum(-1)], -1)
    else:
        offs = seg
    S = offs.shape[-1] - 1
    lead = tuple(data.shape[:axis])
    rest = tuple(data.shape[axis + 1:])
    # segment id of every position along axis: the last offset at or before it
    pos = _C.arange(n, dtype=_C.int64, device=data.device).expand(lead + (n,)).contiguous()
    from ._composite import searchsorted
    ids = searchsorted(offs.contiguous(), pos, right=True) - 1
    valid = (ids >= 0) & (ids < S) & (pos < offs[..., -1:])
    ids = _C.where(valid, ids, _C.full_like(ids, S))  # S: a dump slot dropped at the end
    ids = ids.reshape(lead + (n,) + (1,) * len(rest)).expand(tuple(data.shape))
    out_shape = lead + (S + 1,) + rest
    lens = (offs[..., 1:] - offs[..., :-1]).to(data.dtype)
    lens = lens.reshape(lead + (S,) + (1,) * len(rest))
    if reduce in ("sum", "mean"):
        base = 0.0 if initial is None else float(initial)
        out = _C.full(out_shape, base, dtype=data.dtype, device=data.device).scatter_add(
            axis, ids, data)
        out = out.narrow(axis, 0, S)
        if reduce == "mean":
            if initial is None:
                out = out / lens
            else:
                out = _C.where(lens > 0, out / lens, _C.full_like(out, float(initial)))
        return out
    fill = {"prod": 1.0, "max": float("-inf"), "min": float("inf")}[reduce]
    base = fill if initial is None else float(initial)
    how = {"prod": "prod", "max": "amax", "min": "amin"}[reduce]
    out = _C.full(out_shape, base, dtype=data.dtype, device=data.device).scatter_reduce(
        axis, ids, data, how, include_self=True)
    return out.narrow(axis, 0, S)


# --- nonzero_static -----------------------------------------------------------------------

@_export(method=True)
def nonzero_static(input, *, size, fill_value=-1):
    """The indices of input's nonzero elements as a (size, input.dim()) int64 tensor: the
    first size of them (row-major order), padded with fill_value rows, as torch."""
    if isinstance(size, bool) or not isinstance(size, _numbers.Integral):
        raise TypeError(f"nonzero_static(): argument 'size' must be int, not "
                        f"{type(size).__name__}")
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    idx = _C.nonzero(input)
    have = idx.shape[0]
    if have >= size:
        return idx[:size].clone() if have > size else idx
    pad = _C.full((size - have, idx.shape[1]), fill_value, dtype=_C.int64, device=idx.device)
    return _C.cat([idx, pad], 0)


# --- legacy norms -------------------------------------------------------------------------

def _float_or_complex(input, what):
    if not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError(f"{what}: input dtype should be either floating point or complex. "
                           f"Got {_dtype_name(input.dtype).capitalize()} instead.")


@_export()
def frobenius_norm(input, dim, keepdim=False):
    """sqrt(sum |x|^2) over dim (one or two dims, () for all), as torch's legacy
    frobenius_norm (linalg.vector_norm(input, 2, dim, keepdim))."""
    from . import linalg
    dims = (dim,) if isinstance(dim, _numbers.Integral) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions "
                           "instead.")
    _float_or_complex(input, "norm()")
    return linalg.vector_norm(input, 2, dims if dims else None, keepdim)


@_export()
def nuclear_norm(input, dim=None, keepdim=False):
    """The sum of the singular values over the matrix dims (the last two when dim is not
    given: nuclear_norm(input, keepdim) or nuclear_norm(input, dim, keepdim)), as torch's
    legacy nuclear_norm (linalg.matrix_norm(input, 'nuc', dim, keepdim))."""
    from . import linalg
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    if dim is None:
        dim = (-2, -1)
    elif isinstance(dim, _numbers.Integral) or len(dim) != 2:
        raise RuntimeError("nuclear_norm: dim must be a 2-tuple of ints")
    if not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError("linalg.matrix_norm: Expected a floating point or complex tensor as "
                           f"input. Got {_dtype_name(input.dtype).capitalize()}")
    return linalg.matrix_norm(input, "nuc", tuple(dim), keepdim)


@_export()
def norm_except_dim(v, pow=2, dim=0):
    """The pow-norm of v over every dim but dim, kept as size-1 dims (weight normalisation's
    norm); dim=-1 gives the norm of all of v as a 0-d tensor, as torch."""
    from . import linalg
    if isinstance(pow, bool) or not isinstance(pow, _numbers.Integral):
        raise TypeError(f"norm_except_dim(): argument 'pow' (position 2) must be int, not "
                        f"{type(pow).__name__}")
    _float_or_complex(v, "norm()")
    if dim == -1:
        return linalg.vector_norm(v, pow)
    nd = v.dim()
    if nd == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -_b.max(nd, 1) <= dim < _b.max(nd, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-_b.max(nd, 1)}, {_b.max(nd, 1) - 1}], but got {dim})")
    d = dim % _b.max(nd, 1)
    others = tuple(i for i in _b.range(nd) if i != d)
    return linalg.vector_norm(v, pow, others, keepdim=True)


# --- functional recurrent cells -----------------------------------------------------------

def _check_cell(name, gates, input, hx, w_ih, w_hh, b_ih, b_hh):
    hidden = w_hh.shape[1] if w_hh.dim() == 2 else -1
    if w_ih.dim() != 2 or w_ih.shape[0] != gates * hidden:
        raise RuntimeError(f"weight_ih first dim must be {gates} * hidden_size = "
                           f"{gates * hidden}, but got {w_ih.shape[0] if w_ih.dim() else 0}")
    if w_hh.shape[0] != gates * hidden:
        raise RuntimeError(f"weight_hh first dim must be {gates} * hidden_size = "
                           f"{gates * hidden}, but got {w_hh.shape[0]}")
    if input.dim() < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-_b.max(input.dim(), 1)}, {_b.max(input.dim(), 1) - 1}], but got 1)")
    if input.shape[1] != w_ih.shape[1]:
        raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected "
                           f"{w_ih.shape[1]}")
    for h in hx:
        if not isinstance(h, _C.Tensor):
            raise TypeError(f"{name}(): argument 'hx' (position 2) must be Tensor, not "
                            f"{type(h).__name__}")
        if h.dim() < 2:
            raise IndexError("Dimension out of range (expected to be in range of [-1, 0], "
                             "but got 1)")
        if input.shape[0] != h.shape[0]:
            raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden0 "
                               f"batch size {h.shape[0]}")
        if h.shape[1] != hidden:
            raise RuntimeError(f"hidden0 has inconsistent hidden_size: got {h.shape[1]}, "
                               f"expected {hidden}")
    for b in (b_ih, b_hh):
        if b is not None and tuple(b.shape) != (gates * hidden,):
            raise RuntimeError(f"The expanded size of the tensor ({gates * hidden}) must match "
                               f"the existing size ({b.shape[-1] if b.dim() else 1}) at "
                               f"non-singleton dimension 1.  Target sizes: "
                               f"[{input.shape[0]}, {gates * hidden}].  Tensor sizes: "
                               f"{list(b.shape)}")
    if (b_ih is None) != (b_hh is None):  # torch adds the given one alone
        present = b_ih if b_ih is not None else b_hh
        zero = _C.zeros_like(present)
        b_ih = b_ih if b_ih is not None else zero
        b_hh = b_hh if b_hh is not None else zero
    return b_ih, b_hh


def _cell(mode, input, h, c, w_ih, w_hh, b_ih, b_hh):
    from ._C import _nn
    return _nn.rnn_cell(mode, input, h, c, w_ih, w_hh, b_ih, b_hh)


@_export()
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step: (h', c') from input (N, I), hx = (h, c) (N, H) and the gate weights
    (4H, I) / (4H, H) in torch's i, f, g, o order, as torch.lstm_cell."""
    if not isinstance(hx, (tuple, list)):
        raise TypeError(f"lstm_cell(): argument 'hx' (position 2) must be tuple of Tensors, "
                        f"not {type(hx).__name__}")
    if len(hx) != 2:
        raise RuntimeError("lstm_cell expects two hidden states")
    b_ih, b_hh = _check_cell("lstm_cell", 4, input, hx, w_ih, w_hh, b_ih, b_hh)
    h, c = _cell("LSTM", input, hx[0], hx[1], w_ih, w_hh, b_ih, b_hh)
    return h, c


def _single(name, mode, gates):
    def cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
        b1, b2 = _check_cell(name, gates, input, (hx,), w_ih, w_hh, b_ih, b_hh)
        return _cell(mode, input, hx, None, w_ih, w_hh, b1, b2)[0]
    cell.__name__ = cell.__qualname__ = name
    cell.__doc__ = (f"One {mode} step: h' from input (N, I), hx (N, H), w_ih ({gates}H, I), "
                    f"w_hh ({gates}H, H) and the optional biases, as torch.{name}.")
    FUNCTIONS[name] = cell
    return cell


gru_cell = _single("gru_cell", "GRU", 3)
rnn_tanh_cell = _single("rnn_tanh_cell", "RNN_TANH", 1)
rnn_relu_cell = _single("rnn_relu_cell", "RNN_RELU", 1)


# --- Tensor API pieces --------------------------------------------------------------------

_TYPE_NAMES = {
    "float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
    "bfloat16": "BFloat16Tensor", "int8": "CharTensor", "uint8": "ByteTensor",
    "int16": "ShortTensor", "int32": "IntTensor", "int64": "LongTensor", "bool": "BoolTensor",
    "complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor",
    "complex32": "ComplexHalfTensor",
}
_TYPE_DTYPES = {v: k for k, v in _TYPE_NAMES.items()}


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """With no dtype: the tensor's type name, 'kiln.FloatTensor' (CPU) or
    'kiln.xpu.FloatTensor', as torch's 'torch.FloatTensor'. With a dtype or such a name (the
    'torch.' spelling is accepted too): the tensor converted to it (itself if it already is)."""
    if dtype is None:
        word = _dtype_name(self.dtype)
        name = _TYPE_NAMES.get(word)
        if name is None:
            raise RuntimeError(f"kiln: no legacy tensor type name for {self.dtype}")
        dev = self.device.type
        return f"kiln.{name}" if dev == "cpu" else f"kiln.{dev}.{name}"
    device = self.device
    if isinstance(dtype, str):
        parts = dtype.split(".")
        if len(parts) not in (2, 3) or parts[0] not in ("kiln", "torch") or \
                parts[-1] not in _TYPE_DTYPES:
            raise ValueError(f"invalid type: '{dtype}'")
        if len(parts) == 3:
            device = _C.device(parts[1])
        else:
            device = _C.device("cpu")
        dtype = getattr(_C, _TYPE_DTYPES[parts[-1]])
    elif not isinstance(dtype, _C.dtype):
        raise ValueError(f"invalid type: '{dtype}'")
    if dtype == self.dtype and device == self.device:
        return self
    return self.to(device=device, dtype=dtype, non_blocking=non_blocking)


def _is_inference(self):
    """False: kiln's inference_mode turns autograd off but does not mark the tensors it makes
    (torch's inference tensors), so no kiln tensor is one."""
    return False


@_export()
def is_inference(input):
    """Whether input is an inference tensor: never, in kiln (see Tensor.is_inference)."""
    return _is_inference(input)


def _is_pinned(self, device=None):
    """False: kiln allocates no pinned (page-locked) host memory."""
    return False


def _pin_memory(self, device=None):
    raise RuntimeError("kiln has no pinned (page-locked) host memory: its only accelerator "
                       "backend (xpu, OpenCL) copies from ordinary host memory, so pin_memory() "
                       "is not available")


def _output_nr(self):
    """Which output of the autograd node that made it this tensor is (0 for leaves and
    tensors outside autograd), as torch's Tensor.output_nr."""
    if self.grad_fn is None:
        return 0
    from .autograd import enable_grad
    with enable_grad():
        probe = self.view_as(self)
    edges = probe.grad_fn.next_functions if probe.grad_fn is not None else ()
    return int(edges[0][1]) if edges else 0


def _is_set_to(self, tensor):
    """True when both tensors view the same memory the same way: same storage start, offset,
    sizes and strides, as torch's Tensor.is_set_to."""
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"is_set_to(): argument 'tensor' (position 1) must be Tensor, not "
                        f"{type(tensor).__name__}")
    if self._is_same(tensor):
        return True
    if self.data_ptr() == 0 or tensor.data_ptr() == 0:
        return False  # distinct tensors without memory: nothing shows they share a storage
    return (self.data_ptr() - self.storage_offset() * self.element_size()
            == tensor.data_ptr() - tensor.storage_offset() * tensor.element_size()
            and self.storage_offset() == tensor.storage_offset()
            and self.device == tensor.device
            and tuple(self.shape) == tuple(tensor.shape)
            and tuple(self.stride()) == tuple(tensor.stride()))


METHODS.update({"type": _type, "is_inference": _is_inference, "is_pinned": _is_pinned,
                "pin_memory": _pin_memory, "is_set_to": _is_set_to})
PROPERTIES["output_nr"] = _output_nr


def install(namespace, tensor_type):
    for name, fn in FUNCTIONS.items():
        namespace.setdefault(name, fn)
    for name, fn in METHODS.items():
        if not hasattr(tensor_type, name):
            setattr(tensor_type, name, fn)
    for name, getter in PROPERTIES.items():
        if not hasattr(tensor_type, name):
            setattr(tensor_type, name, property(getter))
