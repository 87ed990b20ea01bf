"""Connects every pair of ranks of a process group once, with addresses exchanged through
the group's store: each rank listens on a free port and publishes "host:port"; then it
connects to every lower rank and accepts one connection from every higher rank. A new
connection starts with the connecting rank's number, so the acceptor knows who it is.

Nothing authenticates a peer beyond that number (as with gloo): a connection that announces
an impossible rank is dropped, but a process on the network that claims a valid rank before
the real one connects is taken for it. Run jobs on a trusted network; the *_object
collectives unpickle what peers send."""
import os
import socket
import struct
import time

from ._connection import PeerConnection
from ._wire import recv_exact
from .errors import DistNetworkError

_RANK = struct.Struct("<q")
# how long an accepted connection may take to send its rank (peers send it at once)
_HANDSHAKE_S = 10.0


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


def _listen(host, size):
    """A listening socket on `host` (the address advertised to the peers), as gloo binds to
    its interface's address rather than to all of them; on every interface only when `host`
    is not an address of this machine (KILN_DIST_HOST naming a NAT's outside address)."""
    try:
        return socket.create_server((host, 0), family=socket.AF_INET, backlog=max(size, 8))
    except OSError:
        return socket.create_server(("", 0), family=socket.AF_INET, backlog=max(size, 8))


def _handshake(sock, rank, size, connections, deadline):
    """The rank a new connection announces, or None for one to drop: a connection that
    closes or stays silent (a port scanner, a health check) or names a rank that cannot
    connect to this one (not higher than this rank, out of range, already connected)."""
    sock.settimeout(max(min(deadline - time.monotonic(), _HANDSHAKE_S), 0.01))
    try:
        (peer,) = _RANK.unpack(recv_exact(sock, _RANK.size))
    except (OSError, ConnectionError):
        return None
    if not rank < peer < size or peer in connections:
        return None
    return peer


def connect_mesh(store, rank, size, timeout_s, mailbox):
    """{peer rank: PeerConnection} for every other rank of the group. On failure nothing is
    left open: the connections made so far are closed (with their receiver threads)."""
    deadline = time.monotonic() + timeout_s
    host = advertised_host(store)
    listener = _listen(host, size)
    connections = {}
    try:
        store.set(f"addr/{rank}", f"{host}:{listener.getsockname()[1]}")
        for peer in range(rank):
            peer_host, port = store.get(f"addr/{peer}").decode().rsplit(":", 1)
            sock = _connect(peer_host, int(port), deadline)
            try:
                sock.sendall(_RANK.pack(rank))
            except OSError:
                sock.close()
                raise
            connections[peer] = PeerConnection(sock, peer, mailbox, timeout_s)
        while len(connections) < size - 1:
            listener.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                missing = sorted(set(range(size)) - set(connections) - {rank})
                raise DistNetworkError(f"rank {rank}: ranks {missing} did not connect "
                                       "before the timeout") from None
            peer = _handshake(sock, rank, size, connections, deadline)
            if peer is None:
                sock.close()
                continue
            connections[peer] = PeerConnection(sock, peer, mailbox, timeout_s)
        return connections
    except BaseException:
        for conn in connections.values():
            conn.close()
        raise
    finally:
        listener.close()
