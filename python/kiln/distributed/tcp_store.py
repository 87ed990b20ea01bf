"""TCPStore (torch.distributed.TCPStore): a key-value store served over TCP by the master
process (is_master=True, which also runs the server) to every other process. Each TCPStore
object holds one client connection; requests from several threads take turns on it."""
import socket
import threading
import time

from . import _tcp_store_server as proto
from ._wire import recv_message, send_message
from .errors import DistNetworkError
from .store import DEFAULT_STORE_TIMEOUT, Store

__all__ = ["TCPStore"]

# key every client increments on connecting; the master waits for world_size of them
# (torch counts the same key in num_keys)
_INIT_KEY = "init/"


def _connect(host, port, timeout_s):
    """A socket connected to (host, port), retrying while the server is not up yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            sock = socket.create_connection((host, port), timeout=max(left, 0.01))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(None)
            return sock
        except OSError:
            if time.monotonic() >= deadline:
                raise DistNetworkError(
                    f"The client socket has timed out after {round(timeout_s * 1000)}ms "
                    f"while trying to connect to ({host}, {port}).") from None
            time.sleep(min(0.05, max(left, 0)))


class TCPStore(Store):
    def __init__(self, host_name, port, world_size=None, is_master=False,
                 timeout=DEFAULT_STORE_TIMEOUT, wait_for_workers=True, multi_tenant=False,
                 master_listen_fd=None, use_libuv=True):
        super().__init__(timeout)
        self._host = host_name
        self._server = None
        if is_master:
            self._server = proto.TCPStoreServer(port, master_listen_fd)
            port = self._server.port
        self._port = port
        self._world_size = world_size
        self._lock = threading.Lock()
        self._sock = _connect(host_name, port, self._timeout.total_seconds())
        self._request(proto.ADD, [_INIT_KEY.encode(), b"1"])
        if is_master and wait_for_workers and world_size is not None:
            self._wait([_INIT_KEY], self._timeout.total_seconds(), count=world_size)

    @property
    def host(self):
        return self._host

    @property
    def port(self):
        return self._port

    @property
    def libuvBackend(self):  # noqa: N802  (torch's name)
        return False

    def local_address(self):
        """The address of this host on the interface that reaches the master: what the
        other ranks should connect to."""
        return self._sock.getsockname()[0]

    def _request(self, code, args, reply_timeout_s=None):
        with self._lock:
            # a blocking request may legitimately take its whole wait; allow a margin on top
            self._sock.settimeout(None if reply_timeout_s is None else reply_timeout_s + 30)
            try:
                send_message(self._sock, code, args)
                return recv_message(self._sock)
            except (OSError, ConnectionError) as e:
                raise DistNetworkError(f"TCPStore connection to ({self._host}, {self._port}) "
                                       f"failed: {e}") from None

    def _set(self, key, value):
        self._request(proto.SET, [key.encode(), value])

    def _get_waiting(self, key, timeout_s):
        status, reply = self._request(proto.GET, [key.encode(),
                                                  str(int(timeout_s * 1000)).encode()],
                                      timeout_s)
        return None if status == proto.TIMEOUT else reply[0]

    def _add(self, key, amount):
        return int(self._request(proto.ADD, [key.encode(), str(amount).encode()])[1][0])

    def _compare_set(self, key, expected, desired):
        return self._request(proto.COMPARE_SET, [key.encode(), expected, desired])[1][0]

    def _delete(self, key):
        return self._request(proto.DELETE, [key.encode()])[1][0] == b"1"

    def _num_keys(self):
        return int(self._request(proto.NUM_KEYS, [])[1][0])

    def _check(self, keys):
        return self._request(proto.CHECK, [k.encode() for k in keys])[1][0] == b"1"

    def _wait(self, keys, timeout_s, count=None):
        if count is not None:  # wait for the init counter to reach `count`
            deadline = time.monotonic() + timeout_s
            while int(self._get_waiting(keys[0], timeout_s) or 0) < count:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)
            return True
        status, _ = self._request(proto.WAIT, [str(int(timeout_s * 1000)).encode()]
                                  + [k.encode() for k in keys], timeout_s)
        return status == proto.OK

    def _append(self, key, value):
        self._request(proto.APPEND, [key.encode(), value])

    def __del__(self):
        try:
            self._sock.close()
            if self._server is not None:
                self._server.close()
        except Exception:
            pass
