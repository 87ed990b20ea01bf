"""kiln.backends.onednn, as torch.backends.mkldnn: whether kiln hands tall matrix products,
Linear layers, int8 products and convolutions to oneDNN (decisions 0016, 0017, 0019, 0022).
`kiln.backends.onednn.enabled = False` (or `with kiln.backends.onednn.flags(enabled=False):`)
runs kiln's own kernels for them instead, from the next op on; KILN_ONEDNN=0 does the same
from the start."""
import contextlib
import sys
import types

from .. import _C


def is_available():
    """True when kiln was built with oneDNN (Debian's libdnnl)."""
    return _C._onednn_available()


@contextlib.contextmanager
def flags(enabled=False):
    """Sets `enabled` inside the block and restores the previous value after it."""
    before = _C._onednn_enabled()
    _C._set_onednn_enabled(bool(enabled))
    try:
        yield
    finally:
        _C._set_onednn_enabled(before)


class _OnednnModule(types.ModuleType):
    @property
    def enabled(self):
        """In use: available and not switched off."""
        return _C._onednn_enabled()

    @enabled.setter
    def enabled(self, value):
        _C._set_onednn_enabled(bool(value))


sys.modules[__name__].__class__ = _OnednnModule
