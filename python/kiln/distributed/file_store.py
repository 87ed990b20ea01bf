"""FileStore (torch.distributed.FileStore): a store in a file that every process opens, on
one host or on a shared file system. The file is an append-only log of set / delete records;
each operation takes an exclusive flock, reads the records added since its last look, and
appends its own. Waiting for a key polls the file.

As torch's, the file is removed when `world_size` FileStore objects have been closed
(world_size=-1: never)."""
import fcntl
import os
import struct
import time
import weakref

from .store import Store

__all__ = ["FileStore"]

_RECORD = struct.Struct("<BII")  # op, key length, value length
_SET, _DELETE = 0, 1
_CLEANUP_KEY = "cleanup/"
_POLL_S = 0.005


class _LogFile:
    """The open log and the table rebuilt from it (separate from FileStore so the finalizer
    that removes the file holds no reference to the store)."""

    def __init__(self, path):
        self.path = path
        self.fd = None
        self.pid = None
        self.offset = 0
        self.table = {}

    def _ensure_open(self):
        # a descriptor inherited through fork shares its flock with the parent: reopen
        if self.fd is None or self.pid != os.getpid():
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self.pid = os.getpid()
            self.offset = 0
            self.table = {}

    def locked(self, action):
        """Runs action() with the file locked and the table up to date."""
        self._ensure_open()
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            self._catch_up()
            return action()
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _catch_up(self):
        size = os.fstat(self.fd).st_size
        if size < self.offset:  # the file was removed and made again
            self.offset, self.table = 0, {}
        if size == self.offset:
            return
        data = os.pread(self.fd, size - self.offset, self.offset)
        pos = 0
        while pos + _RECORD.size <= len(data):
            op, klen, vlen = _RECORD.unpack_from(data, pos)
            end = pos + _RECORD.size + klen + vlen
            if end > len(data):
                break  # torn record: never happens under the lock, but do not misparse
            key = data[pos + _RECORD.size:pos + _RECORD.size + klen].decode()
            if op == _SET:
                self.table[key] = data[pos + _RECORD.size + klen:end]
            else:
                self.table.pop(key, None)
            pos = end
        self.offset += pos

    def write(self, op, key, value=b""):
        k = key.encode()
        record = _RECORD.pack(op, len(k), len(value)) + k + value
        os.pwrite(self.fd, record, os.fstat(self.fd).st_size)
        self.offset += len(record)
        if op == _SET:
            self.table[key] = value
        else:
            self.table.pop(key, None)

    def close(self, world_size):
        """Counts this store as finished; the last of world_size removes the file."""
        try:
            done = self.locked(lambda: self._add(_CLEANUP_KEY, 1))
            os.close(self.fd)
            if world_size != -1 and done >= world_size:
                os.remove(self.path)
        except OSError:
            pass

    def _add(self, key, amount):
        value = int(self.table.get(key, b"0")) + amount
        self.write(_SET, key, str(value).encode())
        return value


class FileStore(Store):
    def __init__(self, file_name, world_size=-1):
        super().__init__()
        self._log = _LogFile(file_name)
        self._world_size = world_size
        self._log.locked(lambda: None)  # creates the file now, as torch does
        self._finalizer = weakref.finalize(self, _LogFile.close, self._log, world_size)

    @property
    def path(self):
        return self._log.path

    def _poll(self, ready, timeout_s):
        """Polls until ready() (run under the lock) is true; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while not self._log.locked(ready):
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True

    def _set(self, key, value):
        self._log.locked(lambda: self._log.write(_SET, key, value))

    def _get_waiting(self, key, timeout_s):
        if not self._poll(lambda: key in self._log.table, timeout_s):
            return None
        return self._log.locked(lambda: self._log.table[key])

    def _add(self, key, amount):
        return self._log.locked(lambda: self._log._add(key, amount))

    def _compare_set(self, key, expected, desired):
        def cas():
            current = self._log.table.get(key)
            if current is None:
                if expected == b"":
                    self._log.write(_SET, key, desired)
                    return desired
                return expected
            if current == expected:
                self._log.write(_SET, key, desired)
                return desired
            return current
        return self._log.locked(cas)

    def _delete(self, key):
        def delete():
            if key not in self._log.table:
                return False
            self._log.write(_DELETE, key)
            return True
        return self._log.locked(delete)

    def _num_keys(self):
        return self._log.locked(lambda: len(self._log.table))

    def _check(self, keys):
        return self._log.locked(lambda: all(k in self._log.table for k in keys))

    def _wait(self, keys, timeout_s):
        return self._poll(lambda: all(k in self._log.table for k in keys), timeout_s)

    def _append(self, key, value):
        self._log.locked(
            lambda: self._log.write(_SET, key, self._log.table.get(key, b"") + value))
