"""get_worker_info and WorkerInfo (torch.utils.data.get_worker_info).

kiln's DataLoader runs its "workers" in the main process (see dataloader.py): while it fetches
for worker i, get_worker_info() returns that worker's WorkerInfo, so a dataset can shard itself
as in torch's docs; at any other time it returns None, as in torch's main process."""

__all__ = ["WorkerInfo", "get_worker_info"]


class WorkerInfo:
    """id, num_workers, seed and dataset (the worker's own copy) of the worker that is fetching;
    read-only after creation, as torch's."""

    _frozen = False

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        self._keys = tuple(kwargs)
        self._frozen = True

    def __setattr__(self, key, val):
        if self._frozen:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        super().__setattr__(key, val)

    def __repr__(self):
        items = ", ".join(f"{k}={getattr(self, k)}" for k in self._keys)
        return f"{self.__class__.__name__}({items})"


_current = None


def get_worker_info():
    """The WorkerInfo of the DataLoader worker fetching now; None outside a worker."""
    return _current


class _as_worker:
    """Sets the current WorkerInfo for the duration of a with-block (restores the previous)."""

    def __init__(self, info):
        self.info = info
        self.prev = None

    def __enter__(self):
        global _current
        self.prev, _current = _current, self.info
        return self.info

    def __exit__(self, *exc):
        global _current
        _current = self.prev
        return False
