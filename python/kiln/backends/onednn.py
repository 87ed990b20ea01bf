"""kiln.backends.onednn, as torch.backends.mkldnn: whether kiln hands tall matrix products,
Linear layers, int8 products and convolutions to oneDNN (decisions 0016, 0017, 0019, 0022).
`kiln.backends.onednn.enabled = False` (or `with kiln.backends.onednn.flags(enabled=False):`)
runs kiln's own kernels for them instead, from the next op on; KILN_ONEDNN=0 does the same
from the start.

`allow_winograd` (as torch.backends.cudnn.allow_tf32): float32 3x3 stride-1 convolutions big
enough to gain run oneDNN's Winograd kernels, 1.3-2.7x faster on ResNet-50's layers, with
errors of a few float32 ulps of the output's scale instead of one or two (decision 0030). On
by default; `allow_winograd = False` or KILN_WINOGRAD=0 keeps the direct kernels."""
import contextlib
import sys
import types

from .. import _C


def is_available():
    """True when kiln was built with oneDNN (Debian's libdnnl)."""
    return _C._onednn_available()


@contextlib.contextmanager
def flags(enabled=False, allow_winograd=None):
    """Sets `enabled` (and `allow_winograd` unless None) inside the block and restores the
    previous values after it."""
    before = _C._onednn_enabled(), _C._onednn_winograd_allowed()
    _C._set_onednn_enabled(bool(enabled))
    if allow_winograd is not None:
        _C._set_onednn_winograd_allowed(bool(allow_winograd))
    try:
        yield
    finally:
        _C._set_onednn_enabled(before[0])
        _C._set_onednn_winograd_allowed(before[1])


class _OnednnModule(types.ModuleType):
    @property
    def enabled(self):
        """In use: available and not switched off."""
        return _C._onednn_enabled()

    @enabled.setter
    def enabled(self, value):
        _C._set_onednn_enabled(bool(value))

    @property
    def allow_winograd(self):
        """Whether large float32 3x3 stride-1 convolutions may use Winograd's algorithm."""
        return _C._onednn_winograd_allowed()

    @allow_winograd.setter
    def allow_winograd(self, value):
        _C._set_onednn_winograd_allowed(bool(value))


sys.modules[__name__].__class__ = _OnednnModule
