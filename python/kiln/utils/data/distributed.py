"""DistributedSampler (torch.utils.data.distributed.DistributedSampler): each of num_replicas
processes reads its own share of the dataset, the shares padded (or cut, drop_last) to one
length.

kiln has no distributed process-group API: when num_replicas / rank are not given they are taken
from kiln.distributed if such a module exists and is initialised, and otherwise default to a
single process (num_replicas=1, rank=0) where torch would raise without a process group."""
import math

from ... import _C
from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _process_group():
    """(world size, rank) of an initialised kiln.distributed process group, or (1, 0)."""
    try:
        from ... import distributed as dist
    except ImportError:
        return 1, 0
    if getattr(dist, "is_available", lambda: False)() and \
            getattr(dist, "is_initialized", lambda: False)():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


class DistributedSampler(Sampler):
    """Indices for replica `rank` of `num_replicas`: every num_replicas-th index of the
    (shuffled with seed + epoch: identical on every replica) order, starting at rank. Without
    drop_last the order is padded with its own first indices to a multiple of num_replicas; with
    drop_last the tail that does not divide evenly is dropped. Call set_epoch(e) before each
    epoch for a new shuffle."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            world, own = _process_group()
            num_replicas = world if num_replicas is None else num_replicas
            rank = own if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas <= 0:
            raise ValueError("num_replicas should be a positive integer value, but got "
                             f"num_replicas={num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # the largest per-replica count that every replica can fill without repeats
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            # a fresh generator seeded from (seed, epoch) only: the same permutation on every
            # replica, a different one each epoch
            g = _C.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = _C.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        if len(indices) != self.total_size:
            raise AssertionError(f"expected {self.total_size} indices, got {len(indices)}")
        indices = indices[self.rank:self.total_size:self.num_replicas]
        return iter(indices)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch that seeds the next shuffle (with seed)."""
        self.epoch = epoch
