"""kiln.multiprocessing (torch.multiprocessing): Python's multiprocessing, with kiln tensors
sent between processes through shared memory instead of copies (reductions.py), and spawn()
to run a function in several processes. The one sharing strategy is "file_descriptor"."""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403

from .reductions import init_reductions
from .spawn import ProcessContext, ProcessExitedException, ProcessRaisedException, spawn, \
    start_processes  # noqa: F401

__all__ = list(multiprocessing.__all__) + [
    "get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies", "spawn",
    "start_processes", "ProcessContext", "ProcessRaisedException", "ProcessExitedException"]

_STRATEGIES = frozenset({"file_descriptor"})


def get_all_sharing_strategies():
    return set(_STRATEGIES)


def get_sharing_strategy():
    return "file_descriptor"


def set_sharing_strategy(new_strategy):
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"sharing strategy {new_strategy!r} is not supported by kiln: "
                         f"expected one of {sorted(_STRATEGIES)} (kiln passes memory-file "
                         "descriptors, torch's 'file_descriptor' strategy)")


init_reductions()
