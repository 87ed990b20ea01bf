"""Point-to-point: send / recv / isend / irecv between two ranks of a group, matched by
(sender, tag) in the order they were sent, as torch's."""
from . import _tensors as tz
from . import _world
from ._mailbox import P2P
from .process_group import as_array_like
from .work import RecvWork, Work

__all__ = ["send", "recv", "isend", "irecv"]


def _peer(pg, rank, group_rank, name):
    """The group rank of the peer (given as global `rank` or as `group_rank`)."""
    if rank is not None and group_rank is not None:
        raise ValueError(f"Can not specify both {name} and group_{name}")
    if rank is None and group_rank is None:
        raise ValueError(f"Must specify either {name} or group_{name}")
    peer = group_rank if group_rank is not None else (
        rank if pg is _world.world.default_pg else _world.group_rank(pg, rank))
    if not 0 <= peer < pg.size():
        raise ValueError(f"Invalid {'destination' if name == 'dst' else 'source'} rank {peer}: "
                         f"the group has {pg.size()} ranks")
    if peer == pg.rank():
        if name == "dst":
            raise ValueError("Invalid destination rank: destination rank should not be the "
                             "same as the rank of the current process.")
        raise ValueError("Invalid source rank: source rank should not be the same as the "
                         "rank of the current process.")
    return peer


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Sends `tensor` to dst; returns a completed Work (the receiver's thread takes the
    data as it arrives, so the send never waits for a matching recv)."""
    pg = _world.resolve(group, "isend")
    if pg is None:
        return None
    tz.check_tensor(tensor)
    peer = _peer(pg, dst, group_dst, "dst")
    pg.send(peer, tz.flat_input(tensor), tag, P2P)
    return Work.completed([tensor])


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    isend(tensor, dst, group, tag, group_dst)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into `tensor` from src (any rank when src and group_src are None) the next
    message sent with `tag`; wait() on the returned Work fills the tensor."""
    pg = _world.resolve(group, "irecv")
    if pg is None:
        return None
    tz.check_tensor(tensor)
    if src is None and group_src is None:
        peers = tuple(p for p in range(pg.size()) if p != pg.rank())
    else:
        peers = (_peer(pg, src, group_src, "src"),)
    flat, write_back = tz.flat_view(tensor)

    def store(found):
        if found is None:
            return None
        peer, message = found
        flat[...] = as_array_like(message, flat, peer, "recv")
        write_back()
        return pg.global_ranks[peer]

    return RecvWork(lambda: store(pg.recv(peers, tag, "recv", P2P)),
                    lambda: store(pg.poll(peers, tag, P2P)), [tensor])


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Blocking irecv; returns the sender's (global) rank."""
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    return work._source_rank()
