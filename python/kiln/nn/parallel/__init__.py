"""kiln.nn.parallel (torch.nn.parallel): DistributedDataParallel over kiln.distributed, and
DataParallel (single device: it calls the module)."""
from ..modules.parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
