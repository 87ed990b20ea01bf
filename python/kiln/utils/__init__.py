"""kiln.utils: data loading (kiln.utils.data) and activation checkpointing
(kiln.utils.checkpoint)."""
from . import data, checkpoint  # noqa: F401
