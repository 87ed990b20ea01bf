"""Store (torch.distributed.Store): the key-value base class of HashStore, TCPStore,
FileStore and PrefixStore. Subclasses implement the _-prefixed primitives on bytes; this
class converts str arguments, applies the timeout and raises torch's errors."""
import datetime

from .errors import DistStoreError

__all__ = ["Store"]

DEFAULT_STORE_TIMEOUT = datetime.timedelta(seconds=300)


def to_bytes(value):
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)):  # torch also takes a list of byte values
        return bytes(value)
    raise TypeError(f"store values must be str or bytes, not {type(value).__name__}")


def to_seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def timeout_error(keys, seconds):
    return DistStoreError(f"wait timeout after {round(seconds * 1000)}ms, keys: "
                          + ", ".join(keys))


class Store:
    def __init__(self, timeout=DEFAULT_STORE_TIMEOUT):
        self._timeout = timeout if isinstance(timeout, datetime.timedelta) else \
            datetime.timedelta(seconds=float(timeout))

    # -- what subclasses implement (keys are str, values bytes) --
    def _set(self, key, value):
        raise NotImplementedError

    def _get_waiting(self, key, timeout_s):
        """The value of `key`, waiting up to timeout_s for it; None on timeout."""
        raise NotImplementedError

    def _add(self, key, amount):
        raise NotImplementedError

    def _compare_set(self, key, expected, desired):
        raise NotImplementedError

    def _delete(self, key):
        raise NotImplementedError

    def _num_keys(self):
        raise NotImplementedError

    def _check(self, keys):
        raise NotImplementedError

    def _wait(self, keys, timeout_s):
        """True once all keys exist, False on timeout."""
        raise NotImplementedError

    def _append(self, key, value):
        raise NotImplementedError

    # -- torch's API --
    @property
    def timeout(self):
        return self._timeout

    def set_timeout(self, timeout):
        self._timeout = timeout if isinstance(timeout, datetime.timedelta) else \
            datetime.timedelta(milliseconds=float(timeout))

    def set(self, key, value):
        self._set(key, to_bytes(value))

    def get(self, key):
        """The value of `key` as bytes; waits up to the store's timeout for it to be set."""
        seconds = self.timeout.total_seconds()
        value = self._get_waiting(key, seconds)
        if value is None:
            raise timeout_error([key], seconds)
        return value

    def add(self, key, amount):
        return self._add(key, int(amount))

    def compare_set(self, key, expected_value, desired_value):
        return self._compare_set(key, to_bytes(expected_value), to_bytes(desired_value))

    def delete_key(self, key):
        return self._delete(key)

    def num_keys(self):
        return self._num_keys()

    def check(self, keys):
        return self._check(list(keys))

    def wait(self, keys, timeout=None):
        seconds = self.timeout.total_seconds() if timeout is None else to_seconds(timeout)
        keys = list(keys)
        if not self._wait(keys, seconds):
            raise timeout_error(keys, seconds)

    def append(self, key, value):
        self._append(key, to_bytes(value))

    def multi_get(self, keys):
        return [self.get(k) for k in keys]

    def multi_set(self, keys, values):
        for k, v in zip(keys, values):
            self.set(k, v)

    def has_extended_api(self):
        return True
