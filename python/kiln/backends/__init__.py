"""kiln.backends, as torch.backends: the CPU's instruction-set level (kiln.backends.cpu) and
the switch for oneDNN (kiln.backends.onednn, as torch.backends.mkldnn)."""
from . import cpu, onednn  # noqa: F401
