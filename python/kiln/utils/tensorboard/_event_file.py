"""Event files: TFRecord framing of encoded `Event` messages, buffered and flushed to disk.

A record is: uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, the data,
uint32 masked CRC-32C of the data. The file's first record is an Event carrying
file_version "brain.Event:2", which TensorBoard's loaders expect.

Writing is synchronous, into a list of pending records that goes to the file (and the file is
flushed) when max_queue records are pending, on flush() / close(), and every flush_secs:
checked at each add and by a daemon thread that sleeps flush_secs between flushes. (torch's
writer hands every record to a background thread through a queue of max_queue items.) A
writer that is garbage-collected or still open at interpreter exit is flushed and closed by
a weakref.finalize hook."""
import itertools
import math
import os
import socket
import struct
import threading
import time
import weakref

from ._crc32c import masked_crc32c
from ._proto import Message

FILE_VERSION = "brain.Event:2"
SOURCE_WRITER = "kiln.utils.tensorboard"
SESSION_LOG_START = 1

_uid = itertools.count()
_uid_lock = threading.Lock()


def frame_record(data):
    """One TFRecord: length, masked CRC of the length, data, masked CRC of the data."""
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", masked_crc32c(header)) + data
            + struct.pack("<I", masked_crc32c(data)))


def encode_event(wall_time, step=None, *, file_version=None, summary=None,
                 session_log_status=None, source_writer=None):
    """Event: wall_time 1 (double), step 2 (int64), file_version 3, summary 5,
    session_log 7 (SessionLog{status 1}), source_metadata 10 (SourceMetadata{writer 1})."""
    ev = Message().double(1, wall_time)
    if step is not None:
        ev.varint(2, step)
    if file_version is not None:
        ev.string(3, file_version)
    if summary is not None:
        ev.message(5, summary)
    if session_log_status is not None:
        ev.message(7, Message().varint(1, session_log_status))
    if source_writer is not None:
        ev.message(10, Message().string(1, source_writer))
    return ev.encoded()


class _RecordFile:
    """The open file, its pending records and the flush thread's stop flag (kept apart from
    EventFileWriter so that the thread and the finalizer do not keep the writer alive)."""

    def __init__(self, path, max_queue, flush_secs):
        self.path = path
        self.max_queue = max(1, int(max_queue))
        # None: no time-based flushing; 0: every add flushes
        self.flush_secs = math.inf if flush_secs is None else float(flush_secs)
        self.file = open(path, "wb")
        self.pending = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.last_flush = time.monotonic()
        self.closed = False

    def add(self, record):
        with self.lock:
            if self.closed:
                raise OSError("Writer is closed")
            self.pending.append(record)
            if (len(self.pending) >= self.max_queue
                    or time.monotonic() - self.last_flush >= self.flush_secs):
                self._write_out()

    def _write_out(self):
        if self.pending:
            self.file.write(b"".join(self.pending))
            self.pending.clear()
        self.file.flush()
        self.last_flush = time.monotonic()

    def flush(self):
        with self.lock:
            if self.closed:
                raise OSError("Writer is closed")
            self._write_out()

    def flush_loop(self):
        while not self.stop.wait(self.flush_secs):
            with self.lock:
                if self.closed:
                    return
                if time.monotonic() - self.last_flush >= self.flush_secs:
                    try:
                        self._write_out()
                    except OSError:
                        return

    def close(self):
        self.stop.set()
        with self.lock:
            if self.closed:
                return
            try:
                self._write_out()
            finally:
                self.closed = True
                self.file.close()


class EventFileWriter:
    """Writes encoded Event messages to a new event file in `logdir`:
    events.out.tfevents.<10-digit time>.<host>.<pid>.<n><filename_suffix>, n counting the
    files this process has opened."""

    def __init__(self, logdir, max_queue=10, flush_secs=120, filename_suffix=""):
        self._logdir = logdir
        self._max_queue, self._flush_secs = max_queue, flush_secs
        self._filename_suffix = filename_suffix
        self._open()

    def _open(self):
        os.makedirs(self._logdir, exist_ok=True)
        with _uid_lock:
            n = next(_uid)
        name = "events.out.tfevents.%010d.%s.%s.%s" % (time.time(), socket.gethostname(),
                                                     os.getpid(), n)
        self._file_name = os.path.join(self._logdir, name) + self._filename_suffix
        self._records = _RecordFile(self._file_name, self._max_queue, self._flush_secs)
        self._finalizer = weakref.finalize(self, self._records.close)
        if 0 < self._records.flush_secs < math.inf:
            threading.Thread(target=self._records.flush_loop, daemon=True,
                             name="kiln-tensorboard-flush").start()
        self.add_event(encode_event(time.time(), file_version=FILE_VERSION,
                                    source_writer=SOURCE_WRITER))
        self.flush()

    def get_logdir(self):
        return self._logdir

    @property
    def file_name(self):
        return self._file_name

    def add_event(self, event_bytes):
        """Append one encoded Event."""
        self._records.add(frame_record(bytes(event_bytes)))

    def flush(self):
        self._records.flush()

    def close(self):
        self._finalizer()     # runs _RecordFile.close once

    def reopen(self):
        """After close(): a new event file in the same directory (nothing if still open)."""
        if self._records.closed:
            self._open()
