"""kiln.utils: data loading (kiln.utils.data), activation checkpointing
(kiln.utils.checkpoint) and timing (kiln.utils.benchmark)."""
from . import data, checkpoint, benchmark  # noqa: F401
from . import hooks, _pytree  # noqa: F401  (torch.utils.hooks.RemovableHandle, torch.utils._pytree)
