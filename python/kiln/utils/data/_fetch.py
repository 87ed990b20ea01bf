"""How a batch is read from a dataset: shared by the DataLoader's main-process path and its
worker processes (which get these settings, not the loader: with the spawn start method
everything a worker needs is pickled, and a loader holds samplers and generators)."""


class FetchSpec:
    """The loader settings a fetch needs (picklable when its collate_fn and
    worker_init_fn are)."""

    def __init__(self, is_iterable, auto_collation, collate_fn, batch_size, drop_last,
                 worker_init_fn=None, prefetch_factor=2, timeout=0):
        self.is_iterable = is_iterable
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor
        self.timeout = timeout

    def fetch(self, dataset, index):
        """One batch (a list of indices) or, without auto-batching, one sample; a dataset's
        __getitems__ reads a whole batch when it has one (as torch's fetcher)."""
        if self.auto_collation:
            getitems = getattr(dataset, "__getitems__", None)
            data = getitems(index) if callable(getitems) else [dataset[i] for i in index]
            return self.collate_fn(data)
        return self.collate_fn(dataset[index])

    def iterable_batches(self, dataset):
        """The batches of an IterableDataset (samples grouped by batch_size, or one by one)."""
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
