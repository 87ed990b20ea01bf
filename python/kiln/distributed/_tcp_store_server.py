"""The server half of TCPStore: one listening socket in the master process and one thread per
connected client, all sharing a KeyValueTable. Blocking requests (get, wait) wait inside the
client's thread, so a slow key never delays another client.

As torch's TCPStore, the server listens on every interface (the other hosts of a job must
reach it) and does not authenticate clients: run it on a trusted network. It never unpickles
what clients send; values are opaque bytes."""
import socket
import threading

from ._key_value_table import KeyValueTable
from ._wire import recv_message, send_message

# request codes
SET, GET, ADD, COMPARE_SET, DELETE, NUM_KEYS, CHECK, WAIT, APPEND = range(9)
# reply codes
OK, TIMEOUT = 0, 1


class TCPStoreServer:
    def __init__(self, port, listen_fd=None):
        if listen_fd is not None:
            self._listener = socket.socket(fileno=listen_fd)
        else:
            self._listener = socket.create_server(("", port), family=socket.AF_INET,
                                                  backlog=128, reuse_port=False)
        self.port = self._listener.getsockname()[1]
        self._table = KeyValueTable()
        self._closed = False
        self._clients = set()  # open client connections, closed with the server
        self._clients_lock = threading.Lock()
        threading.Thread(target=self._accept_loop, name="kiln-tcpstore-accept",
                         daemon=True).start()

    def close(self):
        """Stops serving: no new connections, and the clients' connections are closed (their
        next request fails, as with torch's store when the master goes away)."""
        self._closed = True
        # shutdown() first: on Linux, close() alone does not wake the thread blocked in
        # accept(), which keeps the socket listening and serves one more client
        for sock in [self._listener] + self._take_clients():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _take_clients(self):
        with self._clients_lock:
            clients, self._clients = list(self._clients), set()
            return clients

    def _accept_loop(self):
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # listener closed
            with self._clients_lock:
                if self._closed:
                    conn.close()
                    return
                self._clients.add(conn)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), name="kiln-tcpstore-client",
                             daemon=True).start()

    def _serve(self, conn):
        with conn:
            while not self._closed:
                try:
                    code, args = recv_message(conn)
                    status, reply = self._handle(code, args)
                    send_message(conn, status, reply)
                except (ConnectionError, OSError):
                    break  # the client went away, or the server was closed
                except (ValueError, IndexError):
                    break  # a malformed request (not a kiln client): drop the connection
            with self._clients_lock:
                self._clients.discard(conn)

    def _handle(self, code, args):
        t = self._table
        if code == SET:
            t.set(args[0].decode(), args[1])
            return OK, []
        if code == GET:
            key = args[0].decode()
            if not t.wait([key], int(args[1]) / 1000):
                return TIMEOUT, []
            return OK, [t.get_now(key)]
        if code == ADD:
            return OK, [str(t.add(args[0].decode(), int(args[1]))).encode()]
        if code == COMPARE_SET:
            return OK, [t.compare_set(args[0].decode(), args[1], args[2])]
        if code == DELETE:
            return OK, [b"1" if t.delete(args[0].decode()) else b"0"]
        if code == NUM_KEYS:
            return OK, [str(t.num_keys()).encode()]
        if code == CHECK:
            return OK, [b"1" if t.check([a.decode() for a in args]) else b"0"]
        if code == WAIT:
            keys = [a.decode() for a in args[1:]]
            return (OK if t.wait(keys, int(args[0]) / 1000) else TIMEOUT), []
        if code == APPEND:
            t.append(args[0].decode(), args[1])
            return OK, []
        raise ConnectionError(f"unknown store request {code}")
