"""kiln.signal: signal-processing helpers, as torch.signal (window functions)."""
from . import windows

__all__ = ["windows"]
