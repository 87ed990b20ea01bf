"""Lazy modules (torch.nn.LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*,
LazyInstanceNorm*): the input size (in_features, in_channels, num_features) is read from the
first input; until then the parameters and buffers are Uninitialized placeholders. At that
first call they get their shapes, are initialised as the ordinary module would be, and the
module's class becomes the ordinary one (LazyLinear -> Linear)."""
import itertools

from ... import _C
from ..._C import Tensor
from ...autograd import no_grad
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d,  # noqa: F401
                   ConvTranspose2d, ConvTranspose3d)
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .linear import Linear, _factory
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d
from ..parameter import Parameter
from ..._torch_function_dispatch import disabled_torch_function_impl as _disabled_torch_function_impl

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin", "LazyLinear",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class UninitializedParameter(Parameter):
    """A parameter without a shape yet (an empty tensor of the wanted dtype and device);
    materialize(shape) gives it its storage and makes it a plain Parameter, in place."""
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Tensor._make_subclass(cls, _C.empty(0, **_factory(device, dtype)),
                                     requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass  # built by __new__

    def materialize(self, shape, device=None, dtype=None):
        data = _C.empty(tuple(shape), device=device or self.device, dtype=dtype or self.dtype)
        _C._set_data(self, data)
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return "<UninitializedParameter>"

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]

    def __reduce_ex__(self, proto):
        return (type(self), (self.requires_grad,))


class UninitializedBuffer(Tensor):
    """A buffer without a shape yet. Unlike torch's, materialize returns the new tensor
    instead of changing this object (a kiln Tensor cannot change its class): the lazy
    modules put the returned tensor in place of the placeholder."""
    # Out of __torch_function__ dispatch (decision 0109): ops on it give plain tensors.
    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        return Tensor._make_subclass(cls, _C.empty(0, **_factory(device, dtype)),
                                     requires_grad)

    def __init__(self, requires_grad=False, device=None, dtype=None):
        pass  # built by __new__

    def materialize(self, shape, device=None, dtype=None):
        return _C.empty(tuple(shape), device=device or self.device, dtype=dtype or self.dtype)

    def __repr__(self):
        return "<UninitializedBuffer>"

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]


def is_lazy(value):
    return isinstance(value, (UninitializedParameter, UninitializedBuffer))


class LazyModuleMixin:
    """Put before the ordinary module class: LazyX(LazyModuleMixin, X). A forward pre-hook
    calls initialize_parameters(*inputs) once, then turns the module into cls_to_become."""
    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def _materialize(self, name, shape):
        if name in self._parameters:
            self._parameters[name].materialize(shape)
        else:
            self._buffers[name] = self._buffers[name].materialize(shape)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # placeholders are saved as they are (detaching would make them plain tensors)
        members = itertools.chain(
            self._parameters.items(),
            ((n, b) for n, b in self._buffers.items()
             if n not in self._non_persistent_buffers_set))
        for name, value in members:
            if value is not None:
                destination[prefix + name] = value if is_lazy(value) or keep_vars \
                    else value.detach()

    def _load_from_state_dict(self, state_dict, prefix, *args):
        # a checkpoint of the initialised module gives the placeholders their shapes
        for name, value in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and value is not None and is_lazy(value) \
                    and not is_lazy(state_dict[key]):
                with no_grad():
                    self._materialize(name, state_dict[key].shape)
        super()._load_from_state_dict(state_dict, prefix, *args)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    def has_uninitialized_params(self):
        return any(is_lazy(v) for v in itertools.chain(self._parameters.values(),
                                                        self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        delattr(module, "_initialize_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """Linear with in_features = input.shape[-1]."""
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False, device, dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self._materialize("weight", (self.out_features, self.in_features))
                if self.bias is not None:
                    self._materialize("bias", (self.out_features,))
                self.reset_parameters()


class _LazyConvMixin(LazyModuleMixin):
    """in_channels = the input's channel dimension (dim 1, or 0 unbatched)."""

    def _init_lazy(self, out_channels, bias, device, dtype):
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input):
        unbatched = len(self.kernel_size) + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(f"Expected {unbatched}D (unbatched) or {unbatched + 1}D "
                               f"(batched) input to {type(self).__name__}, but got input of "
                               f"size: {input.shape}")
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._get_in_channels(input)
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        with no_grad():
            self._materialize("weight", shape)
            if self.bias is not None:
                self._materialize("bias", (self.out_channels,))
            self.reset_parameters()


def _lazy_conv(base):
    class LazyConv(_LazyConvMixin, base):
        cls_to_become = base

        def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                     groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
            super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                             padding_mode, device, dtype)
            self._init_lazy(out_channels, bias, device, dtype)

    LazyConv.__name__ = LazyConv.__qualname__ = "Lazy" + base.__name__
    LazyConv.__doc__ = f"{base.__name__} with in_channels read from the first input."
    return LazyConv


def _lazy_conv_transpose(base):
    class LazyConvTranspose(_LazyConvMixin, base):
        cls_to_become = base

        def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                     groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                     dtype=None):
            super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups,
                             False, dilation, padding_mode, device, dtype)
            self._init_lazy(out_channels, bias, device, dtype)

    LazyConvTranspose.__name__ = LazyConvTranspose.__qualname__ = "Lazy" + base.__name__
    LazyConvTranspose.__doc__ = f"{base.__name__} with in_channels read from the first input."
    return LazyConvTranspose


LazyConv1d = _lazy_conv(Conv1d)
LazyConv2d = _lazy_conv(Conv2d)
LazyConv3d = _lazy_conv(Conv3d)
LazyConvTranspose1d = _lazy_conv_transpose(ConvTranspose1d)
LazyConvTranspose2d = _lazy_conv_transpose(ConvTranspose2d)
LazyConvTranspose3d = _lazy_conv_transpose(ConvTranspose3d)


class _LazyNormMixin(LazyModuleMixin):
    """num_features = input.shape[1] (torch's rule, unbatched inputs included)."""

    def _init_lazy(self, affine, bias, track_running_stats, device, dtype):
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = _C.tensor(0, dtype=_C.int64, **_factory(device, None))

    def reset_parameters(self):
        if self.has_uninitialized_params() or self.num_features == 0:
            return
        # _NormBase.reset_parameters in torch (kiln's InstanceNorm has no such method)
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()
        if self.affine:
            self.weight.fill_(1)
            if self.bias is not None:
                self.bias.zero_()

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        with no_grad():
            names = (["weight"] if self.affine else []) + \
                (["bias"] if self.affine and self.bias is not None else []) + \
                (["running_mean", "running_var"] if self.track_running_stats else [])
            for name in names:
                self._materialize(name, (self.num_features,))
            self.reset_parameters()


def _lazy_norm(base):
    # affine and track_running_stats default to True for the instance norms too (torch's
    # lazy defaults, unlike InstanceNorm's own)
    class LazyNorm(_LazyNormMixin, base):
        cls_to_become = base

        def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                     device=None, dtype=None, *, bias=True):
            # built empty (no affine, no stats), then given the placeholders
            super().__init__(0, eps, momentum, False, False, device, dtype)
            self._init_lazy(affine, bias, track_running_stats, device, dtype)

    LazyNorm.__name__ = LazyNorm.__qualname__ = "Lazy" + base.__name__
    LazyNorm.__doc__ = f"{base.__name__} with num_features read from the first input."
    return LazyNorm


LazyBatchNorm1d = _lazy_norm(BatchNorm1d)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d)
