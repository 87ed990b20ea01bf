"""Small socket helpers shared by the TCPStore and the peer connections: exact reads, and
the store's request/reply format (a code byte and a list of byte strings, each with its
length in front)."""
import struct

_HEAD = struct.Struct("<BI")
_LEN = struct.Struct("<I")


def recv_exact(sock, nbytes):
    """Exactly nbytes from `sock`; ConnectionError when the peer closes first."""
    buf = bytearray(nbytes)
    view = memoryview(buf)
    got = 0
    while got < nbytes:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("connection closed by the other side")
        got += n
    return buf


def send_message(sock, code, args=()):
    parts = [_HEAD.pack(code, len(args))]
    for a in args:
        parts.append(_LEN.pack(len(a)))
        parts.append(a)
    sock.sendall(b"".join(parts))


def recv_message(sock):
    code, nargs = _HEAD.unpack(recv_exact(sock, _HEAD.size))
    args = []
    for _ in range(nargs):
        (n,) = _LEN.unpack(recv_exact(sock, _LEN.size))
        args.append(bytes(recv_exact(sock, n)))
    return code, args
