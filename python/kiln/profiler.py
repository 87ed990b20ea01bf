"""Op-level profiler, shaped like torch.profiler for the common use:

    with kiln.profiler.profile(record_shapes=True, with_flops=True) as prof:
        model(x)
    print(prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total"))
    prof.export_chrome_trace("trace.json")

Each op called from user code (not the ops an op's implementation calls internally) is timed
on the host and kept as an event (kiln._profiler_events); key_averages() aggregates them by
op name and device. CPU kernels are synchronous, so the times are kernel plus dispatch; on
asynchronous devices they are the time to enqueue.

record_function("name") times a region of user code into the same events (a row named after
it, which includes the ops run inside it; a "user_annotation" span enclosing them in traces).
schedule(wait=, warmup=, active=) with profile(schedule=, on_trace_ready=) and prof.step()
records only the active steps of each cycle, as torch's: each saved window replaces the
previous one. FLOP counting outside a profile: kiln.utils.flop_counter.FlopCounterMode."""
import contextlib
import enum
import json
import threading
import time
import warnings

from . import _C
from ._profiler_events import EventList, FunctionEvent, FunctionEventAvg, build_events
from ._profiler_trace import tensorboard_trace_handler, write_chrome_trace

__all__ = ["profile", "FunctionEvent", "FunctionEventAvg", "EventList", "record_function",
           "schedule", "ProfilerAction", "ProfilerActivity", "tensorboard_trace_handler"]


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


# The record_function ranges of the recording window in progress, as (name, start_ns, end_ns,
# python thread ident): the C++ profiler times ops only, so ranges are timed here with the
# same clock. _active_window is None unless a kiln.profiler.profile is recording (a
# FlopCounterMode also runs the C++ profiler but keeps no ranges).
_ranges_lock = threading.Lock()
_ranges = []
_active_window = None
_max_events = 0
_dropped_ranges = 0


class _Window:
    """One recording window: its start and options (events are read when it stops)."""

    def __init__(self, record_shapes, with_flops, max_events):
        self.record_shapes = record_shapes
        self.with_flops = with_flops
        self.max_events = max_events
        self.start_ns = 0


def _start_recording(window):
    global _active_window, _max_events, _dropped_ranges
    if _C._profiler_enabled():
        raise RuntimeError(
            "kiln.profiler.profile: the kiln profiler is already recording (another profile "
            "or a kiln.utils.flop_counter.FlopCounterMode is active); kiln runs one profiler "
            "at a time: end the other one first (profile(with_flops=True) counts FLOPs too)")
    with _ranges_lock:
        _ranges.clear()
        _max_events, _dropped_ranges = window.max_events, 0
    # the window's time origin: taken first, so that no event starts before it
    window.start_ns = time.monotonic_ns()
    # Shapes are needed for FLOP counts as well (torch also records them with with_flops).
    _C._profiler_start(trace=True, record_shapes=window.record_shapes or window.with_flops,
                       max_events=window.max_events)
    _active_window = window


def _stop_recording(window):
    """Stops the C++ profiler and returns the window's events (an EventList of FunctionEvent)
    and how many op calls and ranges did not fit under max_events."""
    global _active_window
    _active_window = None
    _C._profiler_stop()
    with _ranges_lock:
        ranges = list(_ranges)
        _ranges.clear()
        dropped = _C._profiler_dropped_events() + _dropped_ranges
    if dropped:
        warnings.warn(f"kiln.profiler: {dropped} events beyond max_events={window.max_events} "
                      "were not kept: events(), key_averages() and traces cover the first "
                      f"{window.max_events}", stacklevel=4)
    events = build_events(_C._profiler_events(), ranges, window.start_ns,
                          with_flops=window.with_flops,
                          with_shapes=window.record_shapes or window.with_flops)
    return events, dropped


class record_function(contextlib.ContextDecorator):
    """Labels a region of user code: inside a recording profile, it becomes an event
    (category user_annotation in traces; a row named after it in key_averages(), whose total
    includes the ops run inside it). Outside one it costs an attribute check. Usable as a
    context manager or a decorator."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self._starts = []  # (window, t0) per entry in progress (a decorated function may recurse)

    def __enter__(self):
        window = _active_window
        self._starts.append((window, time.monotonic_ns() if window is not None else 0))
        return self

    def __exit__(self, *exc):
        global _dropped_ranges
        window, t0 = self._starts.pop()
        # a range that began before the window, or spans its stop, is not kept
        if window is not None and window is _active_window:
            t1 = time.monotonic_ns()
            with _ranges_lock:
                if _max_events and len(_ranges) >= _max_events:
                    _dropped_ranges += 1
                else:
                    _ranges.append((self.name, t0, t1, threading.get_ident()))
        return False


class profile:
    """Records op calls while the block runs; read them with key_averages(), events(),
    export_chrome_trace().

    schedule (a step -> ProfilerAction function, see schedule()) decides which steps are
    recorded, counted by prof.step(); on_trace_ready(prof) is called each time a recorded
    window ends (at RECORD_AND_SAVE's step() or at the end of the block). Without a schedule
    every step is recorded and on_trace_ready is called once, at the end.

    Every recording keeps each op call as an event (the C++ profiler's trace mode), since
    events(), export_chrome_trace() and tensorboard_trace_handler may be asked for on any
    profile, as in torch. record_shapes keeps the inputs' shapes and dtypes (and outputs'
    shapes) too; with_flops counts each matrix product's and convolution's FLOPs
    (kiln._flop_formulas, the formulas of kiln.utils.flop_counter) and implies record_shapes,
    as torch. max_events (kiln only; 0: no limit) caps the op events kept per window (and the
    record_function ranges, counted apart): the rest are dropped with a warning.
    profile_memory, with_stack and with_modules are accepted and have no effect (kiln records
    no allocations, stacks or module scopes). Only one profiler runs at a time: starting one
    while another profile or a FlopCounterMode records raises RuntimeError."""

    def __init__(self, enabled=True, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, max_events=0):
        for a in activities or ():
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"activities must be ProfilerActivity values, got {a!r}")
        if not isinstance(max_events, int) or max_events < 0:
            raise ValueError(f"max_events must be an int >= 0 (0: no limit), got {max_events!r}")
        self.enabled = enabled
        self.activities = set(activities) if activities else {ProfilerActivity.CPU}
        self.schedule = schedule if schedule is not None else _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes or with_flops
        self.with_flops = with_flops
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.max_events = max_events
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self.dropped_events = 0  # of the last saved window
        self._events = None      # EventList of FunctionEvent of the last saved window
        self._window = None      # the window being recorded
        self._metadata = {}

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
            self._finish_window()
        if after in recording and self._window is None:
            window = _Window(self.record_shapes, self.with_flops, self.max_events)
            _start_recording(window)
            self._window = window

    def _finish_window(self):
        window, self._window = self._window, None
        if window is not None:
            self._events, self.dropped_events = _stop_recording(window)

    def _save(self):
        self._finish_window()
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def _saved(self, what):
        if self._events is None:
            raise RuntimeError(f"{what}() is available after the profiled block ends (or, "
                               "with a schedule, once a recorded window is saved)")
        return self._events

    def events(self):
        """The op calls and record_function ranges of the last saved window, as
        FunctionEvents in start order (a range before the ops inside it)."""
        return self._saved("events")

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """The events of the last saved window aggregated per op (or range) name and device,
        and per list of input shapes too with group_by_input_shape (record_shapes=True).
        kiln records no stacks and ops have no overloads: the other groupings add nothing."""
        return self._saved("key_averages").key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path):
        """Writes the last saved window as a Chrome trace (JSON; gzip when path ends with
        .gz), for chrome://tracing, Perfetto or TensorBoard."""
        write_chrome_trace(path, self._saved("export_chrome_trace"),
                           dict(self._metadata, record_shapes=int(self.record_shapes),
                                with_flops=int(self.with_flops), traceName=str(path)))

    def export_stacks(self, path, metric="self_cpu_time_total"):
        raise NotImplementedError(
            "kiln.profiler.profile.export_stacks: kiln records no Python or C++ call stacks "
            "(with_stack has no effect), so there are no stacks to export; use "
            "export_chrome_trace() for a timeline or key_averages().table() for totals")

    def add_metadata(self, key, value):
        """Adds a top-level key: value (a string) to exported traces."""
        self._metadata[key] = value

    def add_metadata_json(self, key, value):
        """Adds a top-level key with a JSON value to exported traces."""
        self._metadata[key] = json.loads(value)
