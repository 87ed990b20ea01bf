"""kiln.utils.data: datasets, samplers and the DataLoader, as torch.utils.data."""
from .dataset import Dataset, IterableDataset, TensorDataset, StackDataset, Subset, \
    ConcatDataset, ChainDataset, random_split  # noqa: F401
from .sampler import Sampler, SequentialSampler, RandomSampler, BatchSampler, \
    SubsetRandomSampler, WeightedRandomSampler  # noqa: F401
from .distributed import DistributedSampler  # noqa: F401
from ._worker import get_worker_info  # noqa: F401
from .dataloader import DataLoader, default_collate, default_convert  # noqa: F401
from . import distributed  # noqa: F401  (torch.utils.data.distributed.DistributedSampler)
