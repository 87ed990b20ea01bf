"""The process-wide state of kiln.distributed: the default group, the groups made by
new_group, and the lookups every public function starts with (which group, is this rank in
it, global rank <-> group rank)."""
import warnings

__all__ = ["GroupMember", "group"]

_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to "
                    "call init_process_group.")


class World:
    def __init__(self):
        self.default_pg = None
        self.store = None  # the rendezvous store, shared by all groups under prefixes
        self.groups = []  # every ProcessGroup this rank belongs to, the default one first
        self.groups_created = 0  # new_group calls so far (the same count on every rank)


world = World()


class _WorldProperty(type):
    @property
    def WORLD(cls):  # noqa: N802  (torch's name)
        return world.default_pg


class GroupMember(metaclass=_WorldProperty):
    """GroupMember.WORLD is the default group; new_group returns NON_GROUP_MEMBER to ranks
    outside the new group."""
    NON_GROUP_MEMBER = -100


class group(metaclass=_WorldProperty):  # noqa: N801  (torch.distributed.group.WORLD)
    pass


def default_group():
    if world.default_pg is None:
        raise ValueError(_NOT_INITIALIZED)
    return world.default_pg


def is_member(pg):
    return pg is not GroupMember.NON_GROUP_MEMBER


def resolve(group, what=None):
    """The ProcessGroup to use, or None for a rank outside `group` (torch then skips the
    operation with a warning)."""
    if group is None:
        return default_group()
    default_group()  # torch checks initialisation first
    if group is GroupMember.NON_GROUP_MEMBER:
        if what is not None:
            warnings.warn(f"Running {what} on global rank {world.default_pg.rank()} which "
                          "does not belong to the given group.", stacklevel=3)
        return None
    return group


def group_rank(pg, global_rank):
    """The rank in `pg` of global rank `global_rank`."""
    ranks = pg.global_ranks
    if global_rank not in ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg}")
    return ranks.index(global_rank)


def global_rank(pg, rank_in_group):
    ranks = pg.global_ranks
    if not 0 <= rank_in_group < len(ranks):
        raise ValueError(f"Group rank {rank_in_group} is not part of group {pg}")
    return ranks[rank_in_group]


def peer_rank(pg, rank, group_rank_arg, name, what):
    """The group rank named by a global `rank` (src / dst) or a `group_rank_arg`
    (group_src / group_dst); exactly one may be given, and None for both means 0."""
    if rank is not None and group_rank_arg is not None:
        raise ValueError(f"Can not specify both {name} and group_{name}")
    if group_rank_arg is not None:
        r = group_rank_arg
    elif rank is None:
        r = 0
    elif pg is world.default_pg:
        r = rank
    else:
        r = group_rank(pg, rank)
    if not 0 <= r < pg.size():
        raise RuntimeError(f"ProcessGroupGloo::{what}: invalid root rank: {r}")
    return r
