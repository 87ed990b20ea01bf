"""Op-level profiler, shaped like torch.profiler for the common use:

    with kiln.profiler.profile() as prof:
        model(x)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))

Each op called from user code (not the ops an op's implementation calls internally) is timed
on the host and aggregated by op name and device. CPU kernels are synchronous, so the times
are kernel plus dispatch; on asynchronous devices they are the time to enqueue.

record_function("name") times a region of user code into the same table (a row named after
it, which includes the ops run inside it). schedule(wait=, warmup=, active=) with
profile(schedule=, on_trace_ready=) and prof.step() records only the active steps of each
cycle, as torch's: each saved window replaces the previous one in key_averages()."""
import contextlib
import enum
import threading
import time
import warnings

from . import _C

__all__ = ["profile", "FunctionEventAvg", "EventList", "record_function", "schedule",
           "ProfilerAction", "ProfilerActivity", "tensorboard_trace_handler"]


class ProfilerActivity(enum.IntEnum):
    """torch's activity kinds. kiln's profiler times the ops of every device from the host,
    so the activities given to profile() do not select anything."""
    CPU = 0
    XPU = 1
    CUDA = 2
    HPU = 3
    MTIA = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What a schedule asks for at a step."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
    DEVICE_STOPPED = 4


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """A step -> ProfilerAction function, as torch.profiler.schedule: after `skip_first`
    steps, cycles of `wait` idle steps, `warmup` steps and `active` recorded steps (the last
    one RECORD_AND_SAVE), `repeat` times (0: forever). skip_first_wait=1 drops the first
    cycle's wait."""
    if not (wait >= 0 and warmup >= 0 and active > 0 and repeat >= 0 and skip_first >= 0):
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), "
            f"warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} "
            f"(need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)
    cycle = wait + warmup + active

    def action(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait  # as if the first wait had passed
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def _always_record(step):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False,
                              use_python_export=False):
    raise NotImplementedError(
        "kiln.profiler.tensorboard_trace_handler: kiln's profiler aggregates op timings and "
        "keeps no event trace to write for TensorBoard; use on_trace_ready=lambda prof: "
        "print(prof.key_averages().table()) instead")


# User ranges (record_function) of the recording window in progress: name -> [count,
# total_us, max_us]. The C++ profiler times ops only; these rows are added in Python.
_ranges_lock = threading.Lock()
_ranges = {}
_window = 0  # increases at each start, so a range spanning a stop is not counted


def _start_recording():
    global _window
    with _ranges_lock:
        _ranges.clear()
        _window += 1
    _C._profiler_start()


def _stop_recording():
    _C._profiler_stop()
    with _ranges_lock:
        rows = [(name, "cpu", c, total, mx) for name, (c, total, mx) in _ranges.items()]
        _ranges.clear()
    return EventList(FunctionEventAvg(*row) for row in list(_C._profiler_stats()) + rows)


class record_function(contextlib.ContextDecorator):
    """Labels a region of user code: inside a recording profile, its wall time is counted
    under `name` in key_averages(); outside one it costs a flag check. Usable as a context
    manager or a decorator."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self._starts = []  # (window, t0) per entry in progress (a decorated function may recurse)

    def __enter__(self):
        on = _C._profiler_enabled()
        self._starts.append((_window if on else None, time.perf_counter() if on else 0.0))
        return self

    def __exit__(self, *exc):
        window, t0 = self._starts.pop()
        if window is not None and window == _window and _C._profiler_enabled():
            us = (time.perf_counter() - t0) * 1e6
            with _ranges_lock:
                row = _ranges.setdefault(self.name, [0, 0.0, 0.0])
                row[0] += 1
                row[1] += us
                row[2] = max(row[2], us)
        return False


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
    """Records op timings while the block runs; read them with key_averages().

    schedule (a step -> ProfilerAction function, see schedule()) decides which steps are
    recorded, counted by prof.step(); on_trace_ready(prof) is called each time a recorded
    window ends (at RECORD_AND_SAVE's step() or at the end of the block). Without a schedule
    every step is recorded and on_trace_ready is called once, at the end. The other torch
    options (record_shapes, profile_memory, with_stack, ...) are accepted and have no effect:
    kiln's profiler keeps per-op aggregates only."""

    def __init__(self, enabled=True, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False):
        for a in activities or ():
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"activities must be ProfilerActivity values, got {a!r}")
        self.enabled = enabled
        self.activities = set(activities) if activities else {ProfilerActivity.CPU}
        self.schedule = schedule if schedule is not None else _always_record
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._events = None
        self._recording = False

    def start(self):
        if not self.enabled:
            return
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self._transit(ProfilerAction.NONE, self.current_action)

    def stop(self):
        if not self.enabled:
            return
        self._transit(self.current_action, None)

    def step(self):
        """Marks the end of a step (an iteration): the schedule's next action takes over."""
        if not self.enabled:
            return
        before = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(before, self.current_action)

    def _transit(self, before, after):
        # WARMUP has nothing to prepare in kiln: a step is recorded iff its action is RECORD
        # or RECORD_AND_SAVE, and a window is saved when RECORD_AND_SAVE's step ends or the
        # profile stops while recording.
        recording = {ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE}
        if before == ProfilerAction.RECORD_AND_SAVE or (after is None and before in recording):
            self._save()
        elif before == ProfilerAction.RECORD and after not in recording:
            warnings.warn(f"Incorrect schedule: RECORD followed by {after.name}",
                          stacklevel=3)
            self._events = _stop_recording()
            self._recording = False
        if after in recording and not self._recording:
            _start_recording()
            self._recording = True

    def _save(self):
        self._events = _stop_recording()
        self._recording = False
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def key_averages(self):
        """The op and record_function aggregates of the last saved window."""
        if self._events is None:
            raise RuntimeError("key_averages() is available after the profiled block ends")
        return self._events
