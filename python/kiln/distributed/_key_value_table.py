"""The in-memory table behind HashStore and the TCPStore server: a dict of bytes guarded by a
condition variable, so that waiters wake as soon as a key they need is set."""
import threading
import time

__all__ = ["KeyValueTable"]


class KeyValueTable:
    def __init__(self):
        self._data = {}
        self._changed = threading.Condition()

    def set(self, key, value):
        with self._changed:
            self._data[key] = value
            self._changed.notify_all()

    def get_now(self, key):
        """The value of `key`, or None when it does not exist (no waiting)."""
        with self._changed:
            return self._data.get(key)

    def add(self, key, amount):
        """Adds `amount` to the integer stored at `key` (0 when absent); returns the sum."""
        with self._changed:
            value = int(self._data.get(key, b"0")) + amount
            self._data[key] = str(value).encode()
            self._changed.notify_all()
            return value

    def append(self, key, value):
        with self._changed:
            self._data[key] = self._data.get(key, b"") + value
            self._changed.notify_all()

    def compare_set(self, key, expected, desired):
        """torch's semantics: a missing key is created only when `expected` is empty (and
        `expected` itself is returned otherwise); an existing one is replaced when it equals
        `expected`. Returns the value the key holds afterwards."""
        with self._changed:
            current = self._data.get(key)
            if current is None:
                if expected == b"":
                    self._data[key] = desired
                    self._changed.notify_all()
                    return desired
                return expected
            if current == expected:
                self._data[key] = desired
                self._changed.notify_all()
                return desired
            return current

    def delete(self, key):
        with self._changed:
            return self._data.pop(key, None) is not None

    def num_keys(self):
        with self._changed:
            return len(self._data)

    def check(self, keys):
        with self._changed:
            return all(k in self._data for k in keys)

    def wait(self, keys, timeout_s):
        """True once every key exists, False when `timeout_s` seconds pass first."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not all(k in self._data for k in keys):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True
