"""kiln.utils.benchmark: timing statements with kiln, as torch.utils.benchmark: Timer
(blocked_autorange, adaptive_autorange, timeit) returning Measurements, and Compare to
print many of them as a table. Callgrind instruction counts and the fuzzers are not
provided."""
from .utils.common import (Measurement, TaskSpec, ordered_unique, select_unit,
                           set_torch_threads, trim_sigfig, unit_to_english)
from .utils.compare import Colorize, Compare
from .utils.timer import Language, Timer, timer

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig",
           "ordered_unique", "set_torch_threads", "Timer", "timer", "Language", "Colorize",
           "Compare"]
