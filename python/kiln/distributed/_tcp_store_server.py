"""The server half of TCPStore: one listening socket in the master process and one thread per
connected client, all sharing a KeyValueTable. Blocking requests (get, wait) wait inside the
client's thread, so a slow key never delays another client."""
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
        threading.Thread(target=self._accept_loop, name="kiln-tcpstore-accept",
                         daemon=True).start()

    def close(self):
        self._closed = True
        try:
            self._listener.close()
        except OSError:
            pass

    def _accept_loop(self):
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # listener closed
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), name="kiln-tcpstore-client",
                             daemon=True).start()

    def _serve(self, conn):
        with conn:
            while True:
                try:
                    code, args = recv_message(conn)
                    status, reply = self._handle(code, args)
                    send_message(conn, status, reply)
                except (ConnectionError, OSError):
                    return  # the client went away

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
