"""kiln.utils.data: datasets, samplers and the DataLoader, as torch.utils.data."""
from .dataset import Dataset, IterableDataset, TensorDataset, Subset, ConcatDataset, \
    random_split  # noqa: F401
from .sampler import Sampler, SequentialSampler, RandomSampler, BatchSampler, \
    SubsetRandomSampler  # noqa: F401
from .dataloader import DataLoader, default_collate, default_convert  # noqa: F401
