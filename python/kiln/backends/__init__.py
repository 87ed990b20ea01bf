"""kiln.backends, as torch.backends: the CPU's instruction-set level (kiln.backends.cpu) and
the switch for oneDNN (kiln.backends.onednn, as torch.backends.mkldnn)."""
from . import cpu, onednn  # noqa: F401
from . import cudnn, cuda, mps  # noqa: F401  (as torch CPU-only builds have them)
