"""One TCP connection to one peer of a process group.

Sending happens on the caller's thread (serialised by a lock, so frames never interleave).
Receiving happens on a dedicated thread that reads every frame as soon as it arrives and
files it in the Mailbox. Because every rank always drains its sockets, a send can never
block forever on a peer that is itself blocked sending (the classic deadlock of ring
algorithms over blocking sockets), and a peer that dies is noticed at once: its socket
reports end-of-file and every operation waiting on it fails."""
import socket
import struct
import threading

from ._mailbox import Message
from .errors import DistBackendError

# channel, numpy dtype char, tag, payload length
FRAME = struct.Struct("<BBqQ")
# how often a waiting receiver looks whether its connection was closed (seconds)
_RECEIVE_POLL_S = 0.2


class PeerConnection:
    def __init__(self, sock, peer, mailbox, timeout_s):
        self.peer = peer
        self._sock = sock
        self._mailbox = mailbox
        self._send_lock = threading.Lock()
        self._closed = False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # the timeout bounds a send to a peer that stopped reading; the receiver thread
        # treats it as "nothing yet" and keeps waiting
        sock.settimeout(timeout_s)
        # The receiver reads through its own descriptor of the same socket, with a short
        # timeout: it rechecks `_closed` that often, so close() ends it promptly even when
        # shutdown() cannot wake a blocked read (a peer that already reset the connection),
        # and the send timeout above stays the group's.
        self._recv_sock = sock.dup()
        self._recv_sock.settimeout(_RECEIVE_POLL_S)
        self._receiver = threading.Thread(target=self._receive_loop,
                                          name=f"kiln-dist-recv-{peer}", daemon=True)
        self._receiver.start()

    def send(self, channel, tag, payload, dtype_code=0):
        """Sends one frame; `payload` is anything with the buffer protocol (a contiguous
        numpy array is sent from its own memory, without a copy)."""
        view = memoryview(payload).cast("B")
        header = FRAME.pack(channel, dtype_code, tag, view.nbytes)
        with self._send_lock:
            try:
                self._sock.sendall(header)
                if view.nbytes:
                    self._sock.sendall(view)
            except OSError as e:
                error = self._mailbox.failure(self.peer) or \
                    f"sending to rank {self.peer} failed: {e}"
                # A send that timed out may have written part of a frame: the stream can no
                # longer be parsed, so end the connection (the peer sees end-of-file rather
                # than reading the next frame's header as payload) and fail its operations.
                self._mailbox.fail(self.peer, error)
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                raise DistBackendError(error) from None

    def _read_exact(self, view):
        got = 0
        while got < len(view):
            try:
                n = self._recv_sock.recv_into(view[got:])
            except TimeoutError:
                if self._closed:
                    return False
                continue  # an idle peer: keep waiting, operations have their own deadlines
            if n == 0:
                return False
            got += n
        return True

    def _receive_loop(self):
        header = bytearray(FRAME.size)
        try:
            while True:
                if not self._read_exact(memoryview(header)):
                    break
                channel, dtype_code, tag, nbytes = FRAME.unpack(header)
                payload = bytearray(nbytes)
                if nbytes and not self._read_exact(memoryview(payload)):
                    break
                self._mailbox.put(self.peer, channel, tag, Message(dtype_code, payload))
            reason = "connection closed by the other side"
        except OSError as e:
            reason = str(e)
        if not self._closed:
            self._mailbox.fail(self.peer, f"Connection closed by peer (rank {self.peer}): "
                                          f"{reason}")

    def close(self):
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._recv_sock.close()
