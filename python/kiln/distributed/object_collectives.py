"""The *_object collectives: picklable Python objects instead of tensors. As torch's, the
objects are pickled (so only use them with trusted peers); the pickles travel as
variable-length messages, so no size exchange or padding is needed."""
import io
import pickle

from . import _algorithms as algo
from . import _world

__all__ = ["broadcast_object_list", "all_gather_object", "gather_object",
           "scatter_object_list"]


def _dumps(obj):
    buf = io.BytesIO()
    pickle.Pickler(buf).dump(obj)
    return buf.getvalue()


def _loads(data):
    return pickle.loads(data)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """object_list's items on every rank become rank src's (the list keeps its length)."""
    pg = _world.resolve(group, "broadcast_object_list")
    if pg is None:
        return
    root = _world.peer_rank(pg, src, group_src, "src", "broadcast")
    data = _dumps(list(object_list)) if pg.rank() == root else b""
    received = [None]

    def run(tag):
        received[0] = algo.broadcast_bytes(pg, tag, data, root)
    pg.run(run, False)
    if pg.rank() != root:
        objects = _loads(received[0])
        if len(objects) != len(object_list):
            raise RuntimeError(f"broadcast_object_list: rank {root} sent {len(objects)} "
                               f"objects but this rank's list holds {len(object_list)}")
        object_list[:] = objects


def all_gather_object(object_list, obj, group=None):
    """object_list[i] becomes rank i's obj (object_list must have the group's size)."""
    pg = _world.resolve(group, "all_gather_object")
    if pg is None:
        return
    data = _dumps(obj)
    gathered = [None]

    def run(tag):
        gathered[0] = algo.all_gather_bytes(pg, tag, data)
    pg.run(run, False)
    for i, item in enumerate(gathered[0]):
        object_list[i] = _loads(item)  # IndexError for a short list, as torch


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """On rank dst, object_gather_list[i] becomes rank i's obj."""
    pg = _world.resolve(group, "gather_object")
    if pg is None:
        return
    root = _world.peer_rank(pg, dst, group_dst, "dst", "gather")
    if pg.rank() == root:
        if not object_gather_list:
            raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    elif object_gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination "
                         "ranks.")
    data = _dumps(obj)
    gathered = [None]

    def run(tag):
        gathered[0] = algo.gather_bytes(pg, tag, data, root)
    pg.run(run, False)
    if pg.rank() == root:
        for i, item in enumerate(gathered[0]):
            object_gather_list[i] = _loads(item)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None):
    """scatter_object_output_list[0] becomes rank src's scatter_object_input_list[this
    rank]."""
    pg = _world.resolve(group, "scatter_object_list")
    if pg is None:
        return
    if not isinstance(scatter_object_output_list, list) or \
            len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size "
                         "at least 1.")
    root = _world.peer_rank(pg, src, group_src, "src", "scatter")
    datas = []
    if pg.rank() == root:
        if scatter_object_input_list is None or \
                len(scatter_object_input_list) != pg.size():
            raise ValueError("scatter_object_list: scatter_object_input_list must hold one "
                             f"object per rank ({pg.size()}) on the source rank")
        datas = [_dumps(o) for o in scatter_object_input_list]
    received = [None]

    def run(tag):
        received[0] = algo.scatter_bytes(pg, tag, datas, root)
    pg.run(run, False)
    scatter_object_output_list[0] = _loads(received[0])
