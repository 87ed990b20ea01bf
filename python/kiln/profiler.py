"""Op-level profiler, shaped like torch.profiler for the common use:

    with kiln.profiler.profile() as prof:
        model(x)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))

Each op called from user code (not the ops an op's implementation calls internally) is timed
on the host and aggregated by op name and device. CPU kernels are synchronous, so the times
are kernel plus dispatch; on asynchronous devices they are the time to enqueue."""
from . import _C

__all__ = ["profile", "FunctionEventAvg", "EventList"]


class FunctionEventAvg:
    """The aggregate of one op on one device (times in microseconds)."""

    def __init__(self, key, device, count, total_us, max_us):
        self.key = key
        self.device_type = device
        self.count = count
        self.cpu_time_total = total_us
        self.cpu_time_max = max_us

    @property
    def cpu_time(self):
        """Average time per call."""
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} device={self.device_type} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.1f}us>")


class EventList(list):
    def table(self, sort_by="cpu_time_total", row_limit=100):
        keys = {"cpu_time_total": lambda e: e.cpu_time_total, "cpu_time": lambda e: e.cpu_time,
                "count": lambda e: e.count, "cpu_time_max": lambda e: e.cpu_time_max}
        if sort_by not in keys:
            raise ValueError(f"sort_by must be one of {sorted(keys)}, got {sort_by!r}")
        rows = sorted(self, key=keys[sort_by], reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total = sum(e.cpu_time_total for e in self)
        head = f"{'op':<32} {'device':<8} {'calls':>8} {'total us':>12} {'%':>7} {'avg us':>10} {'max us':>10}"
        lines = [head, "-" * len(head)]
        for e in rows:
            pct = 100.0 * e.cpu_time_total / total if total else 0.0
            lines.append(f"{e.key:<32} {e.device_type:<8} {e.count:>8} {e.cpu_time_total:>12.1f} "
                         f"{pct:>6.1f}% {e.cpu_time:>10.2f} {e.cpu_time_max:>10.1f}")
        lines.append(f"{'total':<32} {'':<8} {sum(e.count for e in self):>8} {total:>12.1f}")
        return "\n".join(lines)


class profile:
    """Records op timings while the block runs; read them with key_averages()."""

    def __init__(self, enabled=True):
        self.enabled = enabled
        self._events = None

    def __enter__(self):
        if self.enabled:
            _C._profiler_start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            _C._profiler_stop()
            self._events = EventList(FunctionEventAvg(*row) for row in _C._profiler_stats())
        return False

    def key_averages(self):
        if self._events is None:
            raise RuntimeError("key_averages() is available after the profiled block ends")
        return self._events
