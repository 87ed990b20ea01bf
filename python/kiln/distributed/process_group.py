"""ProcessGroup: a set of ranks connected pairwise over TCP (the "gloo" backend of kiln).

It owns the connections and the Mailbox, numbers the collectives (every rank calls the
collectives of a group in the same order, so the n-th call has the same number everywhere
and its messages are filed under it), and runs operations either on the caller's thread or,
with async_op=True, on the group's one worker thread (so async operations of a group run in
the order they were issued, as torch's)."""
import concurrent.futures
import datetime
import threading
import time

import numpy as np

from ._mailbox import COLLECTIVE, Mailbox
from ._mesh import connect_mesh
from .errors import DistBackendError
from .work import Work

__all__ = ["ProcessGroup"]


class ProcessGroup:
    def __init__(self, store, rank, size, timeout, global_ranks, group_name):
        self._rank = rank
        self._size = size
        self._timeout = timeout
        self._global_ranks = list(global_ranks)
        self.group_name = group_name
        self._mailbox = Mailbox()
        self._peers = connect_mesh(store, rank, size, timeout.total_seconds(),
                                   self._mailbox) if size > 1 else {}
        self._tag_lock = threading.Lock()
        self._next_tag = 0
        self._executor = None

    # -- torch's ProcessGroup API --
    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return "gloo"

    def _get_backend_name(self):
        return "gloo"

    @property
    def group_desc(self):
        return self.group_name

    @property
    def timeout(self):
        return self._timeout

    @property
    def global_ranks(self):
        return list(self._global_ranks)

    def __repr__(self):
        return f"<kiln ProcessGroup {self.group_name!r} rank {self._rank} of {self._size}>"

    # -- running operations --
    def new_tag(self):
        with self._tag_lock:
            tag = self._next_tag
            self._next_tag += 1
            return tag

    def run(self, fn, async_op, outputs=()):
        """fn(tag) now (returns None), or on the worker thread (returns a Work)."""
        tag = self.new_tag()
        if not async_op:
            fn(tag)
            return None
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix=f"kiln-dist-{self.group_name}")
        return Work(self._executor.submit(fn, tag), outputs)

    def deadline(self, timeout=None):
        t = self._timeout if timeout is None else timeout
        seconds = t.total_seconds() if isinstance(t, datetime.timedelta) else float(t)
        return time.monotonic() + seconds

    # -- moving bytes --
    def send(self, peer, payload, tag, channel=COLLECTIVE):
        """Sends a contiguous numpy array (or bytes) to group rank `peer`."""
        code = ord(payload.dtype.char) if isinstance(payload, np.ndarray) else 0
        self._peers[peer].send(channel, tag, payload, code)

    def recv(self, peers, tag, what, channel=COLLECTIVE, deadline=None):
        """(peer, Message): the next message under `tag` from one of `peers`."""
        if isinstance(peers, int):
            peers = (peers,)
        return self._mailbox.take(peers, channel, tag,
                                  self.deadline() if deadline is None else deadline, what)

    def poll(self, peers, tag, channel):
        return self._mailbox.poll(peers, channel, tag)

    def recv_like(self, peer, like, tag, what):
        """The next array from `peer`, checked to have `like`'s dtype and size."""
        _, message = self.recv(peer, tag, what)
        return as_array_like(message, like, peer, what)

    def shutdown(self):
        # Wake whatever still waits for a message first (the worker thread's async op, a
        # recv on another thread): otherwise it would sit until the group's timeout, and the
        # executor's worker thread, which the interpreter joins at exit, would hold the
        # process that long.
        self._mailbox.close(f"the process group {self.group_name!r} was destroyed")
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        for conn in self._peers.values():
            conn.close()
        self._peers = {}


def as_array_like(message, like, peer, what):
    """message's payload as an array of like's dtype; DistBackendError when the sender's
    tensor has another dtype or size (tensors must match across ranks)."""
    code = ord(like.dtype.char)
    if message.dtype_code != code or len(message.payload) != like.nbytes:
        theirs = np.dtype(chr(message.dtype_code)).name if message.dtype_code else "bytes"
        raise DistBackendError(
            f"{what}: rank {peer} sent {len(message.payload)} bytes of {theirs} where this "
            f"rank expects {like.nbytes} bytes of {like.dtype.name}: the tensors must have "
            "the same shape and dtype on every rank")
    return np.frombuffer(message.payload, dtype=like.dtype)
