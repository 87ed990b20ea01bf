"""kiln.utils: data loading (kiln.utils.data)."""
from . import data  # noqa: F401
