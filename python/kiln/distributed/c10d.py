"""Process groups: init_process_group / destroy_process_group / new_group, the queries
(get_rank, get_world_size, ...) and the barriers."""
import datetime

import numpy as np

from . import _algorithms, _world
from ._mailbox import CONTROL
from ._world import GroupMember, world
from .backend import Backend
from .errors import DistBackendError
from .prefix_store import PrefixStore
from .process_group import ProcessGroup
from .rendezvous import rendezvous

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available",
           "is_gloo_available", "is_nccl_available", "is_mpi_available", "is_ucc_available",
           "is_xccl_available", "is_torchelastic_launched", "is_backend_available",
           "get_rank", "get_world_size", "get_backend", "new_group", "get_global_rank",
           "get_group_rank", "get_process_group_ranks", "barrier", "monitored_barrier",
           "default_pg_timeout"]

default_pg_timeout = datetime.timedelta(minutes=30)


def is_available():
    return True


def is_gloo_available():
    return True


def is_nccl_available():
    return False


def is_mpi_available():
    return False


def is_ucc_available():
    return False


def is_xccl_available():
    return False


def is_backend_available(backend):
    return str(backend).lower() == "gloo"


def is_torchelastic_launched():
    import os
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def is_initialized():
    return world.default_pg is not None


def _as_timedelta(timeout):
    if timeout is None:
        return default_pg_timeout
    if isinstance(timeout, datetime.timedelta):
        return timeout
    raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got "
                    f"{type(timeout).__name__}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Joins this process to the default group of world_size ranks as `rank`; returns once
    every rank has joined and each pair of ranks is connected."""
    if world.default_pg is not None:
        raise ValueError("trying to initialize the default process group twice!")
    Backend("gloo" if backend is None else backend)  # raises for nccl / mpi / unknown
    timeout = _as_timedelta(timeout)
    if store is not None:
        if init_method is not None:
            raise AssertionError("Cannot specify both init_method and store.")
        if world_size is None or world_size <= 0:
            raise AssertionError("world_size must be positive if using store")
        if rank is None or rank < 0:
            raise AssertionError("rank must be non-negative if using store")
    else:
        store, rank, world_size = rendezvous(init_method or "env://", rank, world_size,
                                             timeout)
    if not 0 <= rank < world_size:
        raise ValueError(f"Invalid rank {rank} for world_size {world_size}")
    name = group_name or "0"
    pg = ProcessGroup(PrefixStore(f"default_pg_{name}", store), rank, world_size, timeout,
                      range(world_size), name)
    world.default_pg = pg
    world.store = store
    world.groups = [pg]
    world.groups_created = 0


def destroy_process_group(group=None):
    """Closes `group`'s connections, or (group=None) every group and the default one."""
    if group is None or group is world.default_pg:
        if world.default_pg is None:
            raise AssertionError("Process group cannot be None")
        for pg in world.groups:
            pg.shutdown()
        world.default_pg = None
        world.store = None
        world.groups = []
        world.groups_created = 0
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    if group not in world.groups:
        raise ValueError("Invalid process group specified")
    group.shutdown()
    world.groups.remove(group)


def get_rank(group=None):
    pg = _world.resolve(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None):
    pg = _world.resolve(group)
    return -1 if pg is None else pg.size()


def get_backend(group=None):
    pg = _world.resolve(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    return Backend("gloo")


def get_global_rank(group, group_rank):
    return _world.global_rank(group, group_rank)


def get_group_rank(group, global_rank):
    return _world.group_rank(group, global_rank)


def get_process_group_ranks(group):
    return _world.resolve(group).global_ranks


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None,
              sort_ranks=True):
    """A group of the given global ranks. Every rank of the default group must call it (in
    the same order as its other new_group calls); ranks outside `ranks` get
    GroupMember.NON_GROUP_MEMBER."""
    default = _world.default_group()
    if backend is not None:
        Backend(backend)
    size = default.size()
    ranks = list(range(size)) if ranks is None else list(ranks)
    if sort_ranks:
        ranks = sorted(ranks)
    if len(ranks) > size:
        raise ValueError("the new group's world size should be less or equal to the world "
                         "size set by init_process_group")
    for r in ranks:
        if not 0 <= r < size:
            raise ValueError("The new group's rank should be within the world_size set by "
                             "init_process_group")
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks must be unique, got {ranks}")
    world.groups_created += 1
    name = str(world.groups_created)
    me = default.rank()
    if me not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(PrefixStore(f"group_{name}", world.store), ranks.index(me), len(ranks),
                      _as_timedelta(timeout) if timeout is not None else default.timeout,
                      ranks, group_desc or name)
    world.groups.append(pg)
    return pg


def barrier(group=None, async_op=False, device_ids=None, timeout=None):
    """Returns (or, async_op, completes its Work) once every rank of the group reached it."""
    pg = _world.resolve(group, "barrier")
    if pg is None:
        return None
    return pg.run(lambda tag: _algorithms.barrier(
        pg, tag, None if timeout is None else pg.deadline(timeout)), async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier that names the ranks that did not arrive: rank 0 waits up to `timeout` for
    every other rank, then releases them. With wait_all_ranks it reports all missing ranks,
    otherwise the first one."""
    pg = _world.resolve(group, "monitored_barrier")
    if pg is None:
        return None
    timeout = pg.timeout if timeout is None else timeout
    ms = round(timeout.total_seconds() * 1000)
    tag = pg.new_tag()
    deadline = pg.deadline(timeout)
    token = np.zeros(1, np.uint8)
    if pg.rank() != 0:
        pg.send(0, token, tag, CONTROL)
        try:
            pg.recv(0, tag, "monitored_barrier", CONTROL, deadline)
        except DistBackendError as e:
            raise RuntimeError(f"[Rank {pg.rank()}]: monitored_barrier: rank 0 did not "
                               f"release this rank within {ms} ms: {e}") from None
        return None
    missing = []
    for peer in range(1, pg.size()):
        try:
            pg.recv(peer, tag, "monitored_barrier", CONTROL, deadline)
        except DistBackendError:
            missing.append(peer)
            if not wait_all_ranks:
                break
    if missing:
        if len(missing) == 1:
            raise RuntimeError(f"[Rank 0]: Rank {missing[0]} failed to pass monitoredBarrier "
                               f"in {ms} ms")
        raise RuntimeError(f"[Rank 0]: Ranks {', '.join(map(str, missing))} failed to pass "
                           f"monitoredBarrier in {ms} ms")
    for peer in range(1, pg.size()):
        pg.send(peer, token, tag, CONTROL)
    return None
