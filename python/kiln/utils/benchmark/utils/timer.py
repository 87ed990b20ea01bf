"""Timer: timeit.Timer made aware of kiln (thread count, device synchronization), with
replicate-based measurement (blocked_autorange, adaptive_autorange)."""
import enum
import statistics
import textwrap
import timeit

import kiln

from . import common

__all__ = ["Timer", "timer", "Language"]


def timer():
    """timeit.default_timer, after waiting for queued xpu work when an xpu device exists
    (kiln's asynchronous device, as torch syncs its accelerator)."""
    if kiln.xpu.is_available():
        kiln.xpu.synchronize()
    return timeit.default_timer()


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


def _tidy(code):
    """Dedented, without the leading newline of a block string, right-stripped: the same
    code, but an IndentationError-free and repr-friendly one."""
    code = textwrap.dedent(code)
    return (code[1:] if code and code[0] == "\n" else code).rstrip()


class Timer:
    """Times the Python statement `stmt` (after running `setup` once) with `globals`
    (a copy; `kiln` is added when missing) and `num_threads` intra-op threads (default 1,
    restored afterwards). label, sub_label, description and env only describe the
    measurement (they drive Measurement's repr and Compare's table). `timer` is the clock.
    C++ statements (language="cpp") are not supported: kiln has no C++ JIT for them."""

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=timer, globals=None,
                 label=None, sub_label=None, description=None, env=None, num_threads=1,
                 language=Language.PYTHON):
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        # A copy, so that exec's additions (__builtins__) do not leak into the caller's dict.
        self._globals = dict(globals or {})
        if language in (Language.PYTHON, "py", "python"):
            self._globals.setdefault("kiln", kiln)
            self._language = Language.PYTHON
            if global_setup:
                raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most "
                                 f"likely this code can simply be moved to `setup`.")
        elif language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError("kiln.utils.benchmark.Timer times Python statements "
                                      "only: C++ statements (language='cpp') need torch's "
                                      "C++ JIT, which kiln does not have.")
        else:
            raise ValueError(f"Invalid language `{language}`.")
        stmt, setup = _tidy(stmt), _tidy(setup)
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer,
                                   globals=self._globals)
        self._task_spec = common.TaskSpec(
            stmt=stmt, setup=setup, global_setup=global_setup, label=label,
            sub_label=sub_label, description=description, env=env, num_threads=num_threads)

    def _timeit(self, number):
        # Never 0: even an empty loop costs more than 1 ns, and callers divide by it.
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number=1000000):
        """One block of `number` runs (after a warmup of number // 100, at least 2), as
        timeit.Timer.timeit but returning a Measurement."""
        with common.set_torch_threads(self._task_spec.num_threads):
            self._timeit(number=max(int(number // 100), 2))
            return common.Measurement(number_per_run=number,
                                      raw_times=[self._timeit(number=number)],
                                      task_spec=self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _threaded_measurement_loop(self, number, time_hook, stop_hook, min_run_time,
                                   max_run_time=None, callback=None):
        """Blocks until min_run_time is spent and stop_hook agrees, or max_run_time is
        exceeded; callback(number, seconds) sees each block."""
        total_time, can_stop, times = 0.0, False, []
        with common.set_torch_threads(self._task_spec.num_threads):
            while total_time < min_run_time or not can_stop:
                time_spent = time_hook()
                times.append(time_spent)
                total_time += time_spent
                if callback:
                    callback(number, time_spent)
                can_stop = stop_hook(times)
                if max_run_time and total_time > max_run_time:
                    break
        return times

    def _estimate_block_size(self, min_run_time):
        """The runs per block: grown tenfold until the timer's own overhead is under 0.01%
        of a block and a block takes 0.1% of min_run_time (or a block alone exceeds
        min_run_time). Doubles as the warmup."""
        with common.set_torch_threads(self._task_spec.num_threads):
            overhead = statistics.median(self._timeit(0) for _ in range(5))
            number = 1
            while True:
                time_taken = self._timeit(number)
                if overhead / time_taken <= 1e-4 and time_taken >= min_run_time / 1000:
                    break
                if time_taken > min_run_time or number * 10 > 2147483647:
                    break
                number *= 10
        return number

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Blocks of an estimated size (see _estimate_block_size) until at least
        min_run_time seconds were measured; one time per block."""
        number = self._estimate_block_size(min_run_time)
        times = self._threaded_measurement_loop(
            number, lambda: self._timeit(number), lambda times: True,
            min_run_time=min_run_time, callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times,
                                  task_spec=self._task_spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0,
                           callback=None):
        """As blocked_autorange, but goes on (up to max_run_time) until there are more than
        3 blocks whose IQR / median is under `threshold`."""
        number = self._estimate_block_size(min_run_time=0.05)

        def stop_hook(times):
            return len(times) > 3 and common.Measurement(
                number_per_run=number, raw_times=times,
                task_spec=self._task_spec).meets_confidence(threshold=threshold)

        times = self._threaded_measurement_loop(
            number, lambda: self._timeit(number), stop_hook, min_run_time, max_run_time,
            callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times,
                                  task_spec=self._task_spec)

    def collect_callgrind(self, number=100, *, repeats=None, collect_baseline=True,
                          retain_out_file=False):
        """Not available: torch runs the statement under valgrind's Callgrind in a
        subprocess with its own instrumentation hooks; kiln has neither."""
        if repeats is not None and repeats < 1:
            raise ValueError("If specified, `repeats` must be >= 1")
        raise NotImplementedError("Timer.collect_callgrind is not supported by kiln: "
                                  "instruction counts need valgrind (Callgrind) and "
                                  "torch's valgrind bindings. Use blocked_autorange or "
                                  "adaptive_autorange for wall times, or run "
                                  "`valgrind --tool=callgrind` on a script yourself.")
