"""kiln.distributed (torch.distributed): process groups of CPU processes on one or more
hosts, with torch's API: init_process_group over env:// / tcp:// / file:// rendezvous or a
store, the stores (TCPStore, FileStore, HashStore, PrefixStore), collectives and
point-to-point on kiln CPU tensors, the *_object collectives, and barriers.

The one backend, "gloo", is kiln's own: one TCP connection per pair of ranks, set up through
the store (decision 0105)."""
from .backend import Backend
from .c10d import (barrier, default_pg_timeout, destroy_process_group, get_backend,
                   get_global_rank, get_group_rank, get_process_group_ranks, get_rank,
                   get_world_size, init_process_group, is_available, is_backend_available,
                   is_gloo_available, is_initialized, is_mpi_available, is_nccl_available,
                   is_torchelastic_launched, is_ucc_available, is_xccl_available,
                   monitored_barrier, new_group)
from .collectives import (all_gather, all_gather_into_tensor, all_reduce, all_to_all,
                          all_to_all_single, broadcast, gather, reduce, reduce_scatter,
                          reduce_scatter_tensor, scatter)
from .errors import DistBackendError, DistError, DistNetworkError, DistStoreError
from .file_store import FileStore
from .hash_store import HashStore
from .object_collectives import (all_gather_object, broadcast_object_list, gather_object,
                                 scatter_object_list)
from .p2p import irecv, isend, recv, send
from .prefix_store import PrefixStore
from .process_group import ProcessGroup
from .reduce_op import ReduceOp, reduce_op
from .store import Store
from .tcp_store import TCPStore
from .work import Future, Work
from ._world import GroupMember, group

__all__ = [
    "Backend", "barrier", "default_pg_timeout", "destroy_process_group", "get_backend",
    "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "init_process_group", "is_available", "is_backend_available",
    "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available",
    "is_torchelastic_launched", "is_ucc_available", "is_xccl_available", "monitored_barrier",
    "new_group", "all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all",
    "all_to_all_single", "broadcast", "gather", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "scatter", "DistBackendError", "DistError", "DistNetworkError",
    "DistStoreError", "FileStore", "HashStore", "all_gather_object", "broadcast_object_list",
    "gather_object", "scatter_object_list", "irecv", "isend", "recv", "send", "PrefixStore",
    "ProcessGroup", "ReduceOp", "reduce_op", "Store", "TCPStore", "Future", "Work",
    "GroupMember", "group"]
