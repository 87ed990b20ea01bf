"""convert_conv2d_weight_memory_format / convert_conv3d_weight_memory_format (torch's): the
weights of every (transposed) convolution in a module tree laid out in memory_format, e.g.
channels_last, so that convolutions run on channels-last inputs without relayouts."""
from ...autograd import no_grad
from ..modules import conv as _conv

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _classes(*names):
    return tuple(getattr(_conv, n) for n in names if hasattr(_conv, n))


def _convert(module, memory_format, classes):
    if isinstance(module, classes):
        with no_grad():
            laid_out = module.weight.detach().clone(memory_format=memory_format)
        module.weight.data = laid_out
    for child in module.children():
        _convert(child, memory_format, classes)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    return _convert(module, memory_format, _classes("Conv2d", "ConvTranspose2d"))


def convert_conv3d_weight_memory_format(module, memory_format):
    return _convert(module, memory_format, _classes("Conv3d", "ConvTranspose3d"))
