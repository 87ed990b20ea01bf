"""Where the receiver threads leave incoming messages until an operation takes them.

A message is filed under (peer, channel, tag): collectives use channel COLLECTIVE and the
sequence number of the operation as tag, point-to-point messages channel P2P and the user's
tag, so messages of different operations never mix even when they run concurrently (async
ops) or when an earlier one failed half-way. Messages with the same key are kept in arrival
order (TCP preserves the sender's order)."""
import collections
import threading
import time

from .errors import DistBackendError

COLLECTIVE, P2P, CONTROL = 0, 1, 2


class Message:
    __slots__ = ("dtype_code", "payload")

    def __init__(self, dtype_code, payload):
        self.dtype_code = dtype_code  # ord() of the sender's numpy dtype char (0: bytes)
        self.payload = payload  # a bytearray


class Mailbox:
    def __init__(self):
        self._arrived = threading.Condition()
        self._queues = collections.defaultdict(collections.deque)
        self._failures = {}  # peer -> the error that closed its connection
        self._closed = None  # why every take() now fails (the group was destroyed)

    def put(self, peer, channel, tag, message):
        with self._arrived:
            self._queues[(peer, channel, tag)].append(message)
            self._arrived.notify_all()

    def fail(self, peer, error):
        with self._arrived:
            self._failures.setdefault(peer, error)
            self._arrived.notify_all()

    def close(self, reason):
        """Fails every current and future take(): destroy_process_group uses it so that an
        operation still waiting (an async op on the group's worker thread, or a recv on
        another thread) raises at once instead of holding its thread until the timeout."""
        with self._arrived:
            self._closed = reason
            self._arrived.notify_all()

    def failure(self, peer):
        with self._arrived:
            return self._failures.get(peer)

    def _pop(self, peers, channel, tag):
        for peer in peers:
            queue = self._queues.get((peer, channel, tag))
            if queue:
                message = queue.popleft()
                if not queue:
                    del self._queues[(peer, channel, tag)]
                return peer, message
        return None

    def take(self, peers, channel, tag, deadline, what):
        """The next message from any of `peers` (in that order of preference) under
        (channel, tag) as (peer, Message). Raises DistBackendError when every one of the
        peers has disconnected, or when `deadline` (time.monotonic) passes."""
        with self._arrived:
            while True:
                if self._closed is not None:
                    raise DistBackendError(f"{what}: {self._closed}")
                found = self._pop(peers, channel, tag)
                if found is not None:
                    return found
                dead = [p for p in peers if p in self._failures]
                if len(dead) == len(peers):
                    raise DistBackendError(f"{what}: {self._failures[dead[0]]}")
                left = deadline - time.monotonic()
                if left <= 0:
                    names = ", ".join(str(p) for p in peers)
                    raise DistBackendError(
                        f"{what}: timed out waiting for data from rank {names} "
                        "(the process group's timeout passed; is that rank alive and "
                        "running the same collectives in the same order?)")
                self._arrived.wait(left)

    def poll(self, peers, channel, tag):
        """take() without waiting: None when nothing has arrived."""
        with self._arrived:
            return self._pop(peers, channel, tag)
