"""get_worker_info and WorkerInfo (torch.utils.data.get_worker_info).

In a DataLoader worker process get_worker_info() returns that worker's WorkerInfo (set by
_worker_pool._worker_loop), so a dataset can shard itself as in torch's docs; in the main
process it returns None."""

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
