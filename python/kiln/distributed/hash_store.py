"""HashStore (torch.distributed.HashStore): a store inside one process, shared by threads."""
from ._key_value_table import KeyValueTable
from .store import Store

__all__ = ["HashStore"]


class HashStore(Store):
    def __init__(self):
        super().__init__()
        self._table = KeyValueTable()

    def _set(self, key, value):
        self._table.set(key, value)

    def _get_waiting(self, key, timeout_s):
        if not self._table.wait([key], timeout_s):
            return None
        return self._table.get_now(key)

    def _add(self, key, amount):
        return self._table.add(key, amount)

    def _compare_set(self, key, expected, desired):
        return self._table.compare_set(key, expected, desired)

    def _delete(self, key):
        return self._table.delete(key)

    def _num_keys(self):
        return self._table.num_keys()

    def _check(self, keys):
        return self._table.check(keys)

    def _wait(self, keys, timeout_s):
        return self._table.wait(keys, timeout_s)

    def _append(self, key, value):
        self._table.append(key, value)
