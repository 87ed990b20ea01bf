"""DataLoader and default_collate.

kiln's DataLoader loads in the main process. num_workers > 0 is accepted and runs the workers'
shares there, one fetch at a time, in the order torch's worker processes deliver them: batch k
of a map-style dataset by worker k % num_workers (the batches in sampler order, as torch's
in-order loading), an IterableDataset's batches round-robin over the workers still producing.
While a worker's share is fetched (the dataset read, collate_fn, worker_init_fn),
get_worker_info() returns its WorkerInfo (id, num_workers, seed = base_seed + id with base_seed
drawn from the loader's generator per iteration, as torch; dataset = the worker's own shallow
copy), so an IterableDataset can shard itself as in torch's docs. There is no parallelism, and
the workers do not reseed kiln's / Python's / numpy's global RNGs (they share the main
process's, torch's workers seed their own with `seed`)."""
import collections.abc
import copy
import numbers

from ... import _C
from ._worker import WorkerInfo, _as_worker
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def default_collate(batch):
    """Stacks a list of samples into a batch: tensors are stacked along a new first dim,
    numpy arrays and numbers become tensors (float64 for floats, int64 for ints, as torch),
    strings stay lists, and tuples, lists and dicts are collated field by field."""
    elem = batch[0]
    if isinstance(elem, _C.Tensor):
        return _C.stack(list(batch), 0)
    if type(elem).__module__ == "numpy" and type(elem).__name__ == "ndarray":
        return _C.stack([_C.from_numpy(b) for b in batch], 0)
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
    """Iterates over a dataset in batches, in the main process (num_workers > 0: the workers'
    shares fetched there in torch's order, see the module docstring)."""

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
        self.timeout = timeout
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
        if self.num_workers > 0:
            yield from self._iter_workers()
        elif self._is_iterable:
            yield from self._iterable_batches(self.dataset)
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self._fetch(self.dataset, indices)
        else:
            for i in self.sampler:
                yield self._fetch(self.dataset, i)

    def _fetch(self, dataset, index):
        """One batch (a list of indices) or, without auto-batching, one sample; a dataset's
        __getitems__ reads a whole batch when it has one (as torch's fetcher)."""
        if self._auto_collation:
            getitems = getattr(dataset, "__getitems__", None)
            data = getitems(index) if callable(getitems) else [dataset[i] for i in index]
            return self.collate_fn(data)
        return self.collate_fn(dataset[index])

    def _iterable_batches(self, dataset):
        it = iter(dataset)
        if self.batch_size is None:
            for x in it:
                yield self.collate_fn(x)
            return
        batch = []
        for x in it:
            batch.append(x)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def _iter_workers(self):
        """The workers' shares, in the main process (see the module docstring)."""
        n = self.num_workers
        base_seed = int(_C.empty((), dtype=_C.int64).random_(generator=self.generator).item())
        infos = []
        for wid in range(n):
            try:
                dataset = copy.copy(self.dataset)
            except Exception:  # an uncopyable dataset is shared by the workers
                dataset = self.dataset
            info = WorkerInfo(id=wid, num_workers=n, seed=base_seed + wid, dataset=dataset)
            if self.worker_init_fn is not None:
                with _as_worker(info):
                    self.worker_init_fn(wid)
            infos.append(info)
        if self._is_iterable:
            streams = [self._iterable_batches(info.dataset) for info in infos]
            active = list(range(n))
            while active:
                for wid in list(active):
                    with _as_worker(infos[wid]):
                        try:
                            batch = next(streams[wid])
                        except StopIteration:
                            active.remove(wid)
                            continue
                    yield batch
            return
        tasks = self.batch_sampler if self.batch_sampler is not None else self.sampler
        for k, index in enumerate(tasks):
            info = infos[k % n]
            with _as_worker(info):
                batch = self._fetch(info.dataset, index)
            yield batch

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
