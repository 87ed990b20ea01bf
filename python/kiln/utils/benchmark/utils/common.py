"""Base shared classes and utilities of kiln.utils.benchmark, as
torch.utils.benchmark.utils.common."""
import collections

from ._measurement import Measurement
from ._task_spec import TaskSpec
from ._threads import set_torch_threads
from ._units import select_unit, trim_sigfig, unit_to_english

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig",
           "ordered_unique", "set_torch_threads"]

# Both classes are reached (and pickled) through this module, as torch's are.
Measurement.__module__ = TaskSpec.__module__ = __name__


def ordered_unique(elements):
    """The distinct elements, in order of first appearance."""
    return list(collections.OrderedDict(dict.fromkeys(elements)).keys())
