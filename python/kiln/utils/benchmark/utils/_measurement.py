"""Measurement: the times of one timed statement and their summary statistics."""
import collections
import dataclasses
import math
from typing import Any

from . import _stats
from ._task_spec import TASKSPEC_FIELDS, TaskSpec
from ._units import select_unit

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # 25 ns: no timer resolves better than this

# The spread (IQR / median) above which a measurement carries a warning.
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(init=True, repr=False)
class Measurement:
    """raw_times[i] is the time of one block of number_per_run runs of the statement; the
    statistics (times, median, mean, iqr) are per run. TaskSpec fields (label, stmt,
    num_threads, ...) read through. Picklable; metadata is free for the user."""
    number_per_run: int
    raw_times: list[float]
    task_spec: TaskSpec
    metadata: dict[Any, Any] | None = None

    def __post_init__(self):
        # Filled on first use by _lazy_init (raw_times may be set after construction).
        self._sorted_times = ()
        self._warnings = ()
        self._median = self._mean = self._p25 = self._p75 = -1.0

    def __getattr__(self, name):
        # Only called when normal lookup fails: forward the TaskSpec fields.
        if name in TASKSPEC_FIELDS:
            return getattr(self.task_spec, name)
        return super().__getattribute__(name)

    @property
    def times(self):
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self):
        self._lazy_init()
        return self._median

    @property
    def mean(self):
        self._lazy_init()
        return self._mean

    @property
    def iqr(self):
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self):
        """How many leading digits of the median the spread of the middle half of the
        times supports (1 to 4): a rough 90% confidence interval of the median from the
        interquartile points (z = 1.645), compared with the median."""
        self._lazy_init()
        n = len(self._sorted_times)
        middle = self._sorted_times[n // 4:math.ceil(3 * n / 4)]
        std = _stats.population_std(middle)
        interval = max(1.645 * std / math.sqrt(len(middle)), _MIN_CONFIDENCE_INTERVAL)
        figures = int(math.floor(_stats.log10(self._median / interval)))
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self):
        self._lazy_init()
        return bool(self._warnings)

    def _lazy_init(self):
        if not self.raw_times or self._sorted_times:
            return
        self._sorted_times = tuple(sorted(self.times))
        self._median = _stats.quantile(self._sorted_times, 0.5)
        self._mean = _stats.mean(self._sorted_times)
        self._p25 = _stats.quantile(self._sorted_times, 0.25)
        self._p75 = _stats.quantile(self._sorted_times, 0.75)
        if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
            self._add_warning("This suggests significant environmental influence.")
        elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
            self._add_warning("This could indicate system fluctuation.")

    def _add_warning(self, msg):
        spread = self.iqr / self.median * 100
        self._warnings += (f"  WARNING: Interquartile range is {spread:.1f}% "
                           f"of the median measurement.\n           {msg}",)

    def meets_confidence(self, threshold=_IQR_WARN_THRESHOLD):
        return self.iqr / self.median < threshold

    @property
    def title(self):
        return self.task_spec.title

    @property
    def env(self):
        # None when unspecified (what torch's Measurement.env returns in practice).
        return self.task_spec.env

    @property
    def as_row_name(self):
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self):
        """<...Measurement object at 0x...>, the task summary, then for example
              Median: 5.73 us
              IQR:    2.25 us (4.01 to 6.26)
              372 measurements, 100 runs per measurement, 1 thread
        plus the spread warning, if any. The IQR line needs 4 or more measurements."""
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        lines = [object.__repr__(self), self.task_spec.summarize()]
        lines.append(f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}")
        if n >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} "
                         f"({self._p25 / scale:.2f} to {self._p75 / scale:.2f})")
        threads = self.num_threads
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} "
                     f"{threads} thread{'s' if threads > 1 else ''}")
        lines.append("\n".join(self._warnings))
        return "\n".join(lines).strip()

    @staticmethod
    def merge(measurements):
        """One Measurement per distinct TaskSpec, holding the per-run times of all its
        replicates (number_per_run=1; metadata is dropped, it may differ)."""
        groups = collections.defaultdict(list)
        for m in measurements:
            groups[m.task_spec].append(m)
        return [Measurement(number_per_run=1,
                            raw_times=[t for m in group for t in m.times],
                            task_spec=task_spec, metadata=None)
                for task_spec, group in groups.items()]
