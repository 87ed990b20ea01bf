"""PrefixStore (torch.distributed.PrefixStore): every key of `store` seen as "prefix/key",
so that process groups sharing one store never read each other's keys."""
from .store import Store

__all__ = ["PrefixStore"]


class PrefixStore(Store):
    def __init__(self, prefix, store):
        super().__init__(store.timeout)
        self._prefix = prefix
        self._store = store

    @property
    def underlying_store(self):
        return self._store

    def _key(self, key):
        return f"{self._prefix}/{key}"

    @property
    def timeout(self):
        return self._store.timeout

    def set_timeout(self, timeout):
        self._store.set_timeout(timeout)

    def _set(self, key, value):
        self._store._set(self._key(key), value)

    def _get_waiting(self, key, timeout_s):
        return self._store._get_waiting(self._key(key), timeout_s)

    def _add(self, key, amount):
        return self._store._add(self._key(key), amount)

    def _compare_set(self, key, expected, desired):
        return self._store._compare_set(self._key(key), expected, desired)

    def _delete(self, key):
        return self._store._delete(self._key(key))

    def _num_keys(self):
        return self._store._num_keys()  # as torch: the underlying store's count

    def _check(self, keys):
        return self._store._check([self._key(k) for k in keys])

    def _wait(self, keys, timeout_s):
        return self._store._wait([self._key(k) for k in keys], timeout_s)

    def _append(self, key, value):
        self._store._append(self._key(key), value)
