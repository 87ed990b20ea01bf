"""Work (torch.distributed.Work), what an operation with async_op=True returns, and the
Future that Work.get_future() hands out (torch.futures.Future's common methods)."""
import concurrent.futures

from .errors import DistBackendError

__all__ = ["Work", "Future"]


def _error_of(future):
    """The exception a finished concurrent future holds (None on success). A future that was
    cancelled (queued on the group's worker when destroy_process_group ran) has none of its
    own, and future.exception() would raise CancelledError: report it as a DistBackendError,
    as every other failure of an operation."""
    if future.cancelled():
        return DistBackendError("the operation was cancelled: its process group was destroyed "
                                "before it ran")
    return future.exception()


class Future:
    """A result that becomes available later: wait() / value() return it (or raise the
    operation's error), done() says whether it is there, then(fn) chains fn(self)."""

    def __init__(self, inner=None):
        self._inner = inner if inner is not None else concurrent.futures.Future()

    def done(self):
        return self._inner.done()

    def wait(self):
        return self._inner.result()

    def value(self):
        return self._inner.result()

    def set_result(self, result):
        self._inner.set_result(result)

    def set_exception(self, error):
        self._inner.set_exception(error)

    def add_done_callback(self, callback):
        self._inner.add_done_callback(lambda _: callback(self))

    def then(self, callback):
        chained = Future()

        def run(_):
            try:
                chained.set_result(callback(self))
            except Exception as e:  # the chained future carries the callback's error
                chained.set_exception(e)
        self._inner.add_done_callback(run)
        return chained


class Work:
    """A running (or finished) operation. `outputs` are the tensors the operation writes:
    get_future().wait() returns them, as torch's."""

    def __init__(self, future, outputs=()):
        self._future = future  # a concurrent.futures.Future
        self._outputs = list(outputs)

    @classmethod
    def completed(cls, outputs=()):
        f = concurrent.futures.Future()
        f.set_result(None)
        return cls(f, outputs)

    def wait(self, timeout=None):
        """Blocks until the operation finished; re-raises its error. True, as torch's."""
        seconds = None if timeout is None else (
            timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout)
        try:
            self._future.result(seconds)
        except concurrent.futures.CancelledError:
            raise _error_of(self._future) from None
        except concurrent.futures.TimeoutError:
            raise RuntimeError(f"Work.wait timed out after {seconds} s") from None
        return True

    def is_completed(self):
        return self._future.done()

    def is_success(self):
        return self._future.done() and _error_of(self._future) is None

    def exception(self):
        return _error_of(self._future) if self._future.done() else None

    def result(self):
        self.wait()
        return self._outputs

    def get_future(self):
        mapped = concurrent.futures.Future()

        def forward(f):
            error = _error_of(f)
            if error is not None:
                mapped.set_exception(error)
            else:
                mapped.set_result(self._outputs)
        self._future.add_done_callback(forward)
        return Future(mapped)

    def synchronize(self):
        self.wait()


class RecvWork(Work):
    """irecv's Work: the data is taken from the mailbox (and copied into the tensor) when
    the caller waits or polls, so a pending irecv occupies no thread."""

    def __init__(self, complete, try_complete, outputs):
        super().__init__(concurrent.futures.Future(), outputs)
        self._complete = complete  # blocking: returns the sender's rank
        self._try_complete = try_complete  # non-blocking: sender's rank or None
        self.source_rank = None

    def _finish(self, fn):
        if self._future.done():
            return
        try:
            src = fn()
        except Exception as e:
            self._future.set_exception(e)
            return
        if src is not None:
            self.source_rank = src
            self._future.set_result(None)

    def wait(self, timeout=None):
        self._finish(self._complete)
        return super().wait(timeout)

    def is_completed(self):
        self._finish(self._try_complete)
        return self._future.done()

    def get_future(self):
        self._finish(self._try_complete)
        return super().get_future()

    def _source_rank(self):
        self.wait()
        return self.source_rank
