"""DataLoader and default_collate.

num_workers = 0 loads in the main process; num_workers > 0 runs worker processes in torch's
order and with its worker semantics (get_worker_info, per-worker seeds, worker_init_fn,
persistent_workers, prefetch_factor, timeout): see _worker_pool.py."""
import collections.abc
import numbers

from ... import _C
from . import _worker
from ._fetch import FetchSpec
from ._worker_pool import WorkerPool
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def _stack(tensors):
    """Stacks along a new first dim. In a worker process the batch is built straight in shared
    memory, through which it leaves the worker without a copy (kiln.multiprocessing), as
    torch's collate does."""
    first = tensors[0]
    if (_worker._current is not None and first.device.type == "cpu"
            and all(t.dtype == first.dtype and t.shape == first.shape for t in tensors)):
        out = _C._empty_shared([len(tensors), *first.shape], first.dtype)
        return _C.stack(tensors, 0, out=out)
    return _C.stack(tensors, 0)


def default_collate(batch):
    """Stacks a list of samples into a batch: tensors are stacked along a new first dim,
    numpy arrays and numbers become tensors (float64 for floats, int64 for ints, as torch),
    strings stay lists, and tuples, lists and dicts are collated field by field."""
    elem = batch[0]
    if isinstance(elem, _C.Tensor):
        return _stack(list(batch))
    if type(elem).__module__ == "numpy" and type(elem).__name__ == "ndarray":
        return _stack([_C.from_numpy(b) for b in batch])
    if type(elem).__module__ == "numpy" and hasattr(elem, "dtype") and elem.shape == ():
        return _C.tensor(batch)
    if isinstance(elem, bool):
        return _C.tensor(batch, dtype=_C.bool)
    if isinstance(elem, float):
        return _C.tensor(batch, dtype=_C.float64)
    if isinstance(elem, numbers.Integral):
        return _C.tensor(batch, dtype=_C.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        n = len(next(it))
        if not all(len(e) == n for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(s) for s in transposed]
        return [default_collate(s) for s in transposed]
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem)}")


def default_convert(data):
    """Without auto-batching (batch_size=None): numpy arrays become tensors, containers are
    converted element by element (tuples become lists, as torch)."""
    if type(data).__module__ == "numpy" and type(data).__name__ == "ndarray":
        return _C.from_numpy(data)
    if isinstance(data, collections.abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


_default_convert = default_convert


class DataLoader:
    """Iterates over a dataset in batches: in the main process, or with num_workers > 0 in
    worker processes (see the module docstring)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device=""):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.worker_init_fn = worker_init_fn
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        self.timeout = timeout
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            if shuffle not in (False, None):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._is_iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not self._is_iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else _default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None or (self._is_iterable and
                                                  self.batch_size is not None)

    def __iter__(self):
        # Every epoch draws the workers' base seed from the loader's generator first, with or
        # without workers (as torch), so a seeded shuffle gives the same order either way.
        base_seed = int(_C.empty((), dtype=_C.int64).random_(generator=self.generator).item())
        if self.num_workers > 0:
            yield from self._iter_workers(base_seed)
        elif self._is_iterable:
            yield from self._iterable_batches(self.dataset)
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self._fetch(self.dataset, indices)
        else:
            for i in self.sampler:
                yield self._fetch(self.dataset, i)

    def _fetch_spec(self):
        return FetchSpec(self._is_iterable, self._auto_collation, self.collate_fn,
                         self.batch_size, self.drop_last, self.worker_init_fn,
                         self.prefetch_factor, self.timeout)

    def _fetch(self, dataset, index):
        return self._fetch_spec().fetch(dataset, index)

    def _iterable_batches(self, dataset):
        return self._fetch_spec().iterable_batches(dataset)

    def _iter_workers(self, base_seed):
        """Batches from worker processes (_worker_pool.py); the pool lives for one epoch, or
        for the loader's lifetime with persistent_workers (seeded when it starts)."""
        pool = getattr(self, "_pool", None)
        if pool is None or pool.closed:
            pool = WorkerPool(self, base_seed)
            if self.persistent_workers:
                self._pool = pool
        try:
            yield from pool.batches()
        finally:
            if not self.persistent_workers:
                pool.close()

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()

    def __len__(self):
        if self._is_iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                return n // self.batch_size if self.drop_last else \
                    (n + self.batch_size - 1) // self.batch_size
            return n
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
