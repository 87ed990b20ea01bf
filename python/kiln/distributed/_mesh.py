"""Connects every pair of ranks of a process group once, with addresses exchanged through
the group's store: each rank listens on a free port and publishes "host:port"; then it
connects to every lower rank and accepts one connection from every higher rank. A new
connection starts with the connecting rank's number, so the acceptor knows who it is."""
import os
import socket
import struct
import time

from ._connection import PeerConnection
from ._wire import recv_exact
from .errors import DistNetworkError

_RANK = struct.Struct("<q")


def advertised_host(store):
    """The address other ranks should use to reach this process. KILN_DIST_HOST overrides;
    with a TCPStore it is this host's address on the interface that reaches the master
    (right on multi-host clusters); otherwise the address of the host name."""
    if os.environ.get("KILN_DIST_HOST"):
        return os.environ["KILN_DIST_HOST"]
    from .hash_store import HashStore
    from .prefix_store import PrefixStore
    from .tcp_store import TCPStore
    while isinstance(store, PrefixStore):
        store = store.underlying_store
    if isinstance(store, TCPStore):
        return store.local_address()
    if isinstance(store, HashStore):  # a HashStore cannot span processes on two hosts
        return "127.0.0.1"
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _connect(host, port, deadline):
    while True:
        left = deadline - time.monotonic()
        try:
            return socket.create_connection((host, port), timeout=max(left, 0.01))
        except OSError:
            if left <= 0:
                raise DistNetworkError(f"could not connect to a peer at {host}:{port} "
                                       "before the timeout") from None
            time.sleep(0.02)


def connect_mesh(store, rank, size, timeout_s, mailbox):
    """{peer rank: PeerConnection} for every other rank of the group."""
    deadline = time.monotonic() + timeout_s
    listener = socket.create_server(("", 0), family=socket.AF_INET, backlog=max(size, 8))
    try:
        store.set(f"addr/{rank}", f"{advertised_host(store)}:{listener.getsockname()[1]}")
        connections = {}
        for peer in range(rank):
            host, port = store.get(f"addr/{peer}").decode().rsplit(":", 1)
            sock = _connect(host, int(port), deadline)
            sock.sendall(_RANK.pack(rank))
            connections[peer] = PeerConnection(sock, peer, mailbox, timeout_s)
        while len(connections) < size - 1:
            listener.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                missing = sorted(set(range(size)) - set(connections) - {rank})
                raise DistNetworkError(f"rank {rank}: ranks {missing} did not connect "
                                       "before the timeout") from None
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            (peer,) = _RANK.unpack(recv_exact(sock, _RANK.size))
            connections[peer] = PeerConnection(sock, peer, mailbox, timeout_s)
        return connections
    finally:
        listener.close()
