"""The collective algorithms, on contiguous 1-D numpy arrays and group ranks.

Every reduction combines the ranks' contributions in one fixed order, so all ranks end up
with bit-identical results (DistributedDataParallel relies on that to keep replicas equal).
Small all_reduces send the whole array to every peer and reduce locally (one round trip);
large ones use the ring (reduce-scatter, then all-gather), where each rank sends and
receives 2 * (n - 1) / n times the array whatever the number of ranks."""
import numpy as np

# below this many bytes the single-round direct exchange beats the ring's 2 * (n - 1) rounds
RING_MIN_BYTES = 256 * 1024
SEGMENT_BYTES = 1 << 20


def _peers(pg):
    return [p for p in range(pg.size()) if p != pg.rank()]


def _reduce_in_rank_order(parts, ufunc, out):
    """out = parts[0] op parts[1] op ... (left to right), the same order on every rank."""
    acc = np.array(parts[0], copy=True)
    for part in parts[1:]:
        ufunc(acc, part, out=acc)
    out[...] = acc


def all_reduce(pg, tag, flat, ufunc, what="all_reduce"):
    if pg.size() == 1:
        return
    if flat.nbytes < RING_MIN_BYTES or flat.size < pg.size():
        for peer in _peers(pg):
            pg.send(peer, flat, tag)
        parts = [flat if p == pg.rank() else pg.recv_like(p, flat, tag, what)
                 for p in range(pg.size())]
        _reduce_in_rank_order(parts, ufunc, flat)
        return
    chunks = np.array_split(flat, pg.size())
    _ring_reduce_scatter(pg, tag, chunks, ufunc, what)
    _ring_all_gather(pg, tag, chunks, what)


def _segments(chunk):
    """chunk in pieces of about SEGMENT_BYTES: the ring sends piece i + 1 while it folds in
    piece i, so the reduction overlaps the transfer instead of waiting for a whole chunk."""
    return np.array_split(chunk, max(1, chunk.nbytes // SEGMENT_BYTES))


def _ring_step(pg, tag, outgoing, incoming, combine, what):
    """Sends `outgoing` to the next rank while receiving the previous rank's counterpart of
    `incoming` piece by piece; combine(received, piece) consumes each received piece."""
    n, r = pg.size(), pg.rank()
    send_parts, recv_parts = _segments(outgoing), _segments(incoming)
    nxt, prv = (r + 1) % n, (r - 1) % n
    pg.send(nxt, send_parts[0], tag)
    for i, piece in enumerate(recv_parts):
        if i + 1 < len(send_parts):
            pg.send(nxt, send_parts[i + 1], tag)
        combine(pg.recv_like(prv, piece, tag, what), piece)
    for extra in send_parts[len(recv_parts) + 1:]:  # chunks differ by at most one element
        pg.send(nxt, extra, tag)


def _ring_reduce_scatter(pg, tag, chunks, ufunc, what):
    """Afterwards rank r holds the full reduction of chunk (r + 1) % n. At step s rank r
    passes its partial chunk (r - s) on to r + 1 and folds in chunk (r - s - 1) from r - 1."""
    n, r = pg.size(), pg.rank()
    for step in range(n - 1):
        _ring_step(pg, tag, chunks[(r - step) % n], chunks[(r - step - 1) % n],
                   lambda got, piece: ufunc(got, piece, out=piece), what)


def _ring_all_gather(pg, tag, chunks, what):
    """Passes the reduced chunks around the ring: at step s rank r sends chunk (r + 1 - s)
    and receives chunk (r - s)."""
    n, r = pg.size(), pg.rank()
    for step in range(n - 1):
        _ring_step(pg, tag, chunks[(r + 1 - step) % n], chunks[(r - step) % n],
                   lambda got, piece: piece.__setitem__(Ellipsis, got), what)


def broadcast(pg, tag, flat, root, what="broadcast"):
    if pg.rank() == root:
        for peer in _peers(pg):
            pg.send(peer, flat, tag)
    else:
        flat[...] = pg.recv_like(root, flat, tag, what)


def reduce(pg, tag, flat, root, ufunc, what="reduce"):
    if pg.rank() != root:
        pg.send(root, flat, tag)
        return
    parts = [flat if p == root else pg.recv_like(p, flat, tag, what)
             for p in range(pg.size())]
    _reduce_in_rank_order(parts, ufunc, flat)


def all_gather(pg, tag, flat, outs, what="all_gather"):
    """outs[p] (contiguous 1-D arrays) receive rank p's `flat`."""
    for peer in _peers(pg):
        pg.send(peer, flat, tag)
    for p in range(pg.size()):
        outs[p][...] = flat if p == pg.rank() else pg.recv_like(p, outs[p], tag, what)


def gather(pg, tag, flat, outs, root, what="gather"):
    if pg.rank() != root:
        pg.send(root, flat, tag)
        return
    for p in range(pg.size()):
        outs[p][...] = flat if p == root else pg.recv_like(p, outs[p], tag, what)


def scatter(pg, tag, ins, flat, root, what="scatter"):
    if pg.rank() != root:
        flat[...] = pg.recv_like(root, flat, tag, what)
        return
    for peer in _peers(pg):
        pg.send(peer, ins[peer], tag)
    flat[...] = ins[root]


def all_to_all(pg, tag, ins, outs, what="all_to_all"):
    """outs[p] receives rank p's ins[this rank]."""
    for peer in _peers(pg):
        pg.send(peer, ins[peer], tag)
    for p in range(pg.size()):
        outs[p][...] = ins[p] if p == pg.rank() else pg.recv_like(p, outs[p], tag, what)


def reduce_scatter(pg, tag, ins, flat, ufunc, what="reduce_scatter"):
    """flat = ins[this rank] reduced over all ranks (in rank order)."""
    for peer in _peers(pg):
        pg.send(peer, ins[peer], tag)
    parts = [ins[p] if p == pg.rank() else pg.recv_like(p, flat, tag, what)
             for p in range(pg.size())]
    _reduce_in_rank_order(parts, ufunc, flat)


def barrier(pg, tag, deadline=None):
    """Returns once every rank of the group has entered the barrier."""
    empty = np.empty(0, np.uint8)
    for peer in _peers(pg):
        pg.send(peer, empty, tag)
    for peer in _peers(pg):
        pg.recv(peer, tag, "barrier", deadline=deadline)


# -- variable-size byte strings, for the *_object collectives --

def _recv_bytes(pg, peer, tag, what):
    return bytes(pg.recv(peer, tag, what)[1].payload)


def broadcast_bytes(pg, tag, data, root):
    if pg.rank() == root:
        for peer in _peers(pg):
            pg.send(peer, data, tag)
        return data
    return _recv_bytes(pg, root, tag, "broadcast_object_list")


def all_gather_bytes(pg, tag, data):
    for peer in _peers(pg):
        pg.send(peer, data, tag)
    return [data if p == pg.rank() else _recv_bytes(pg, p, tag, "all_gather_object")
            for p in range(pg.size())]


def gather_bytes(pg, tag, data, root):
    if pg.rank() != root:
        pg.send(root, data, tag)
        return None
    return [data if p == root else _recv_bytes(pg, p, tag, "gather_object")
            for p in range(pg.size())]


def scatter_bytes(pg, tag, datas, root):
    if pg.rank() != root:
        return _recv_bytes(pg, root, tag, "scatter_object_list")
    for peer in _peers(pg):
        pg.send(peer, datas[peer], tag)
    return datas[root]
