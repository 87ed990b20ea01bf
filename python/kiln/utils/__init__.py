"""kiln.utils: data loading (kiln.utils.data), activation checkpointing
(kiln.utils.checkpoint), timing (kiln.utils.benchmark) and FLOP counting
(kiln.utils.flop_counter)."""
from . import data, checkpoint, benchmark  # noqa: F401
from . import hooks, _pytree  # noqa: F401  (torch.utils.hooks.RemovableHandle, torch.utils._pytree)
from . import flop_counter  # noqa: F401
