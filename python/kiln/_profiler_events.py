"""The events of one kiln.profiler recording window, shaped like torch.autograd.profiler_util:
FunctionEvent (one op call or one record_function range), FunctionEventAvg (their aggregate
per key) and EventList (a list of either, with key_averages() and table()).

Times are in microseconds; an event's time_range is measured from the window's start. Ops are
the calls the C++ profiler recorded (only top-level calls: an op an op's implementation calls
is part of its caller), ranges are timed in Python with the same clock (CLOCK_MONOTONIC)."""
import bisect
from collections import Counter

from . import _flop_formulas

__all__ = ["Interval", "FunctionEvent", "FunctionEventAvg", "EventList", "build_events"]


class Interval:
    def __init__(self, start, end):
        self.start = start
        self.end = end

    def elapsed_us(self):
        return self.end - self.start

    def __repr__(self):
        return f"Interval(start={self.start:.3f}, end={self.end:.3f})"


class FunctionEvent:
    """One op call (is_user_annotation False) or one record_function range (True)."""

    count = 1

    def __init__(self, id, name, thread, start_us, end_us, device_type="cpu", input_shapes=None,
                 input_dtypes=None, output_shapes=None, flops=0, sequence_nr=-1,
                 is_user_annotation=False):
        self.id = id
        self.name = name
        self.thread = thread
        self.time_range = Interval(start_us, end_us)
        self.device_type = device_type
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.input_dtypes = input_dtypes if input_dtypes is not None else []
        self.output_shapes = output_shapes if output_shapes is not None else []
        self.flops = flops
        self.sequence_nr = sequence_nr
        self.is_user_annotation = is_user_annotation
        self.cpu_parent = None
        self.cpu_children = []

    @property
    def key(self):
        return self.name

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    cpu_time = cpu_time_total
    cpu_time_max = cpu_time_total

    @property
    def self_cpu_time_total(self):
        """The time not spent in the events nested inside (ops inside a range)."""
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} "
                f"cpu_time={self.cpu_time_total:.3f}us start={self.time_range.start:.3f} "
                f"input_shapes={self.input_shapes} flops={self.flops}>")


class FunctionEventAvg:
    """The aggregate of the events of one key (op or range name) on one device, and with
    key_averages(group_by_input_shape=True) of one list of input shapes."""

    def __init__(self):
        self.key = None
        self.device_type = "cpu"
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_time_max = 0.0
        self.input_shapes = []
        self.flops = 0
        self.is_user_annotation = False

    def add(self, other):
        if self.key is None:
            self.key = other.key
            self.device_type = other.device_type
            self.input_shapes = other.input_shapes
            self.is_user_annotation = other.is_user_annotation
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.cpu_time_max = max(self.cpu_time_max, other.cpu_time_max)
        self.flops += other.flops
        return self

    __iadd__ = add

    @property
    def cpu_time(self):
        """Average time per call."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self):
        return self.self_cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} device={self.device_type} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.1f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.1f}us "
                f"input_shapes={self.input_shapes} flops={self.flops}>")


class EventList(list):
    """A list of FunctionEvent or FunctionEventAvg. with_flops: whether FLOPs were counted
    (table() then shows them)."""

    def __init__(self, events=(), with_flops=False):
        super().__init__(events)
        self._with_flops = with_flops

    def key_averages(self, group_by_input_shapes=False, group_by_stack_n=0):
        """The events aggregated per (key, device), and per input shapes too with
        group_by_input_shapes, slowest total first. kiln records no stacks, so
        group_by_stack_n groups nothing further."""
        stats = {}
        for e in self:
            k = (e.key, e.device_type, e.is_user_annotation)
            if group_by_input_shapes:
                k += (str(e.input_shapes),)
            stats.setdefault(k, FunctionEventAvg()).add(e)
        # slowest total first (kiln's order before events; table(sort_by=) ties keep it)
        out = EventList(sorted(stats.values(), key=lambda a: -a.cpu_time_total),
                        with_flops=self._with_flops)
        if not group_by_input_shapes:
            for avg in out:  # as torch: shapes belong to a grouping by shape only
                avg.input_shapes = []
        return out

    def total_average(self):
        total = FunctionEventAvg()
        for e in self:
            total.count += e.count
            total.cpu_time_total += e.cpu_time_total
            total.self_cpu_time_total += e.self_cpu_time_total
            total.flops += e.flops
        total.key = "Total"
        return total

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by="cpu_time_total", row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        """A text table, one row per entry: torch's columns (Self CPU %, Self CPU, CPU total %,
        CPU total, CPU time avg, # of Calls, then Input Shapes when the entries have shapes and
        Total FLOPs when FLOPs were counted), and a last row `total`. sort_by=None keeps the
        list's order."""
        from ._profiler_table import build_table
        return build_table(self, sort_by=sort_by, row_limit=row_limit,
                           max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width, header=header,
                           top_level_events_only=top_level_events_only, time_unit=time_unit,
                           with_flops=self._with_flops)

    def export_chrome_trace(self, path):
        from ._profiler_trace import write_chrome_trace
        write_chrome_trace(path, self)


def _range_threads(ranges, ops):
    """The thread number of each Python thread that ran record_function ranges. The C++
    profiler numbers its threads itself, so a Python thread gets the number of the ops that
    ran inside its ranges (most of them), or an unused number if none did."""
    votes = {}
    starts = {}  # thread -> sorted op start times
    for op in ops:
        starts.setdefault(op[4], []).append(op[2])
    for s in starts.values():
        s.sort()
    for name, t0, t1, ident in ranges:
        c = votes.setdefault(ident, Counter())
        for thread, s in starts.items():
            c[thread] += bisect.bisect_right(s, t1) - bisect.bisect_left(s, t0)
    used = set(starts)
    numbers = {}
    for ident, c in votes.items():
        best = c.most_common(1)
        if best and best[0][1] > 0:
            numbers[ident] = best[0][0]
        else:
            n = max(used | set(numbers.values()), default=-1) + 1
            numbers[ident] = n
            used.add(n)
    return numbers


def _nest(events):
    """Sets cpu_parent / cpu_children: an event inside a range's time on the same thread is
    its child (ops never contain other events: the profiler records top-level calls only)."""
    stacks = {}
    for e in sorted(events, key=lambda e: (e.time_range.start, -e.time_range.end)):
        stack = stacks.setdefault(e.thread, [])
        while stack and not (e.time_range.start >= stack[-1].time_range.start and
                             e.time_range.end <= stack[-1].time_range.end):
            stack.pop()
        if stack:
            e.cpu_parent = stack[-1]
            stack[-1].cpu_children.append(e)
        if e.is_user_annotation:
            stack.append(e)


def build_events(ops, ranges, start_ns, with_flops=False, with_shapes=True):
    """FunctionEvents in start order (an enclosing range before what it encloses).
    ops: kiln._C._profiler_events() tuples; ranges: (name, start_ns, end_ns, python thread
    ident) of the record_function ranges; start_ns: the window's start."""
    threads = _range_threads(ranges, ops)
    events = []
    for name, device, t0, dur, thread, seq, in_shapes, in_dtypes, out_shapes in ops:
        flops = _flop_formulas.flops_of(name, in_shapes, out_shapes) if with_flops else 0
        shapes = [list(s) for s in in_shapes] if with_shapes else []
        events.append(FunctionEvent(
            0, name, thread, (t0 - start_ns) / 1e3, (t0 + dur - start_ns) / 1e3, device,
            shapes, list(in_dtypes) if with_shapes else [],
            [list(s) for s in out_shapes] if with_shapes else [], flops, seq))
    for name, t0, t1, ident in ranges:
        events.append(FunctionEvent(0, name, threads[ident], (t0 - start_ns) / 1e3,
                                    (t1 - start_ns) / 1e3, is_user_annotation=True))
    events.sort(key=lambda e: (e.time_range.start, -e.time_range.end, not e.is_user_annotation))
    for i, e in enumerate(events):
        e.id = i + 1
    _nest(events)
    return EventList(events, with_flops=with_flops)
