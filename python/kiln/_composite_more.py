"""More torch functions composed of kiln's ops (decision 0080), and the registry that installs
them: this file holds the in-place forms (Tensor.<op>_ for out-of-place ops, kiln.<op>_ for
torch's top-level in-place functions, squeeze_ / t_ / transpose_ that change a tensor's view
of its memory); the others are grouped by theme in _composite_math.py (elementwise and
number functions), _composite_index.py (scatters into views, splitting, indices),
_composite_numeric.py (products, statistics, integration, histograms), _composite_factory.py
(windows, random state, dtype information, small factories), _composite_functional.py
(torch.* aliases of torch.nn.functional) and _composite_bits.py (bit shifts). install()
never replaces a name kiln has."""
from . import _C

FUNCTIONS = {}   # kiln.<name>
METHODS = {}     # Tensor.<name>
PROPERTIES = {}  # Tensor.<name> as a read-only property

_THEMES = ("_composite_math", "_composite_index", "_composite_numeric", "_composite_factory",
           "_composite_functional", "_composite_bits")


def export(function=True, method=True, name=None):
    """Registers fn as kiln.<name> (function) and Tensor.<name> (method)."""
    def register(fn):
        key = name or fn.__name__
        if function:
            FUNCTIONS[key] = fn
        if method:
            METHODS[key] = fn
        return fn
    return register


def install(namespace, tensor_type):
    import importlib
    for theme in _THEMES:
        importlib.import_module("." + theme, __package__)
    for name, fn in FUNCTIONS.items():
        namespace.setdefault(name, fn)
    for name, fn in METHODS.items():
        if not hasattr(tensor_type, name):
            setattr(tensor_type, name, fn)
    for name, getter in PROPERTIES.items():
        if not hasattr(tensor_type, name):
            setattr(tensor_type, name, property(getter))


# --- in-place forms of out-of-place ops ---------------------------------------------------

def _dtype_word(dtype):
    return str(dtype).split(".")[-1]


def write_back(self, result, name):
    """self.copy_(result) with torch's in-place rules: the result's dtype must be castable to
    self's (a float result does not go into an integer tensor) and its shape must be self's
    (copy_ refuses a larger one). copy_ keeps self's identity, bumps its version and refuses
    a leaf that requires grad."""
    if not _C.can_cast(result.dtype, self.dtype):
        raise RuntimeError(f"{name}: result type {_dtype_word(result.dtype)} can't be cast to "
                           f"the desired output type {_dtype_word(self.dtype)}")
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(f"{name}: output with shape {list(self.shape)} doesn't match the "
                           f"broadcast shape {list(result.shape)}")
    return self.copy_(result)


def _source(self):
    """What an in-place form computes from: with autograd a clone, since the op may save its
    input for the backward pass and copy_ is about to overwrite self."""
    return self.clone() if self.requires_grad else self


def _inplace_method(name, out_of_place):
    # The out-of-place form is looked up on the tensor at call time: some are installed later
    # than this module (by the theme modules).
    def method(self, *args, **kwargs):
        return write_back(self, getattr(_source(self), out_of_place)(*args, **kwargs), name)
    method.__name__ = name
    METHODS[name] = method
    return method


_UNARY = ("absolute", "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
          "arctanh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "deg2rad", "rad2deg",
          "fix", "frac", "log10", "negative", "sgn", "square", "sinc", "i0", "logit",
          "nan_to_num", "bitwise_not", "mvlgamma", "polygamma")
_BINARY = ("copysign", "gcd", "lcm", "hypot", "heaviside", "ldexp", "lerp", "nextafter",
           "true_divide", "xlogy", "cumsum", "cumprod", "addbmm", "addmm", "addmv", "addr",
           "baddbmm", "renorm", "index_reduce", "put")
for _name in _UNARY + _BINARY:
    _inplace_method(_name + "_", _name)


def clamp_max_(self, max):
    # kiln's clamp_max takes a number; torch's also a tensor (elementwise minimum)
    bound = (lambda x: _C.minimum(x, max)) if isinstance(max, _C.Tensor) else \
        (lambda x: x.clamp_max(max))
    return write_back(self, bound(_source(self)), "clamp_max_")


def clamp_min_(self, min):
    bound = (lambda x: _C.maximum(x, min)) if isinstance(min, _C.Tensor) else \
        (lambda x: x.clamp_min(min))
    return write_back(self, bound(_source(self)), "clamp_min_")


METHODS["clamp_max_"], METHODS["clamp_min_"] = clamp_max_, clamp_min_


def float_power_(self, exponent):
    # torch computes float_power in float64 and writes only into a float64 tensor
    if self.dtype != _C.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {_dtype_word(self.dtype)}"
                           " but the operation's result requires dtype float64")
    return write_back(self, _source(self).float_power(exponent), "float_power_")


METHODS["float_power_"] = float_power_


# --- kiln.<op>_(input, ...): torch's top-level in-place functions -------------------------

def _call_method(name):
    def function(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    function.__name__ = name
    FUNCTIONS[name] = function


for _name in ("abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
              "arctan_", "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_",
              "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "detach_",
              "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_",
              "gcd_", "i0_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_",
              "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "round_",
              "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_",
              "tanh_", "trunc_", "xlogy_", "zero_", "index_put_", "addmv_"):
    _call_method(_name)


# --- in-place view changes (squeeze_, t_, transpose_, ...) --------------------------------

def _bump_version(self):
    # An in-place op on an empty view bumps the shared version counter without a write.
    flat = self.reshape(1) if self.dim() == 0 else self
    flat.narrow(0, 0, 0).zero_()


def _restride(self, view, name):
    """Makes self (the same Python object) a view `view` of its memory, as torch's in-place
    view ops: the version counter moves on, a leaf requiring grad is refused."""
    if self.requires_grad and self.is_leaf and _C.is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an "
                           f"in-place operation (op '{name}').")
    if self.requires_grad and not self.is_leaf:
        # kiln can rebind a tensor's memory only without autograd history
        raise NotImplementedError(f"{name}: in-place view change of a tensor with autograd "
                                  f"history; use the out-of-place {name[:-1]}")
    _C._set_data(self, view)
    _bump_version(self)
    return self


def squeeze_(self, dim=None):
    return _restride(self, self.squeeze() if dim is None else self.squeeze(dim), "squeeze_")


def unsqueeze_(self, dim):
    return _restride(self, self.unsqueeze(dim), "unsqueeze_")


def t_(self):
    return _restride(self, self.t(), "t_")


def transpose_(self, dim0, dim1):
    return _restride(self, self.transpose(dim0, dim1), "transpose_")


def swapaxes_(self, axis0, axis1):
    return _restride(self, self.transpose(axis0, axis1), "swapaxes_")


def swapdims_(self, dim0, dim1):
    return _restride(self, self.transpose(dim0, dim1), "swapdims_")


def as_strided_(self, size, stride, storage_offset=None):
    offset = self.storage_offset() if storage_offset is None else storage_offset
    return _restride(self, self.as_strided(size, stride, offset), "as_strided_")


for _fn in (squeeze_, unsqueeze_, t_, transpose_, swapaxes_, swapdims_, as_strided_):
    METHODS[_fn.__name__] = _fn
FUNCTIONS["as_strided_"] = as_strided_


# --- in-place random and element-wise callables -------------------------------------------

_MANTISSA_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


_INT_END = {"bool": 2, "uint8": 256, "int8": 128, "int16": 2 ** 15, "int32": 2 ** 31,
            "int64": 2 ** 63 - 1}


def random_(self, from_=0, to=None, *, generator=None):
    """Integers uniform over [from_, to) (one argument: [0, from_)); without bounds, [0, 2^m]
    for floats with an m-bit mantissa (every such integer is exact) and [0, max] for ints."""
    if to is None and from_ != 0:
        from_, to = 0, from_
    if to is None:
        name = _dtype_word(self.dtype)
        to = 2 ** _MANTISSA_BITS[name] + 1 if name in _MANTISSA_BITS else _INT_END[name]
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_}"
                           f" >= to={to}")
    kwargs = {} if generator is None else {"generator": generator}
    draws = _C.randint(int(from_), int(to), tuple(self.shape), **kwargs)
    return self.copy_(draws.to(self.dtype))


def apply_(self, callable):
    """Replaces each element x by callable(x) (CPU tensors without autograd, as torch)."""
    if self.requires_grad:
        raise RuntimeError("apply_ is only implemented on CPU tensors that do not require grad")
    values = [callable(v) for v in self.reshape(-1).tolist()]
    return self.copy_(_C.tensor(values, dtype=self.dtype).reshape(tuple(self.shape)))


def map_(self, tensor, callable):
    if self.requires_grad:
        raise RuntimeError("map_ is only implemented on CPU tensors that do not require grad")
    other = tensor.expand(tuple(self.shape)).reshape(-1).tolist()
    values = [callable(a, b) for a, b in zip(self.reshape(-1).tolist(), other)]
    return self.copy_(_C.tensor(values, dtype=self.dtype).reshape(tuple(self.shape)))


for _fn in (random_, apply_, map_):
    METHODS[_fn.__name__] = _fn
