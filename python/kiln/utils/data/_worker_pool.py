"""DataLoader worker processes (num_workers > 0), as torch's multiprocessing loader.

Each worker is a process (forked on Linux by default, or the loader's multiprocessing_context)
with its own task queue; all send (epoch, index, batch) to one result queue, and the loader
yields batches in task order (torch's in_order loading). Tasks go round-robin to the workers
still producing: batch k of a map-style dataset is read by worker k % num_workers; an
IterableDataset is iterated by every worker (each shards itself through get_worker_info(), as
in torch's docs) and a worker that runs out answers its later tasks with an end marker.

In the worker: kiln runs single-threaded (the parent's OpenMP pool does not survive fork: a
forked child that enters a parallel region with more than one thread hangs in libgomp, and
one thread per worker is also what torch sets against oversubscription); Python's, numpy's
and kiln's CPU generators are seeded from base_seed + worker id, as torch; get_worker_info()
returns the worker's WorkerInfo. Batches leave the workers in shared memory (default_collate
stacks them there; kiln.multiprocessing's reductions send the memory file's descriptor, as
torch's): the main process maps them without a copy. An exception in a worker is re-raised in
the main process with the worker's traceback; a worker that dies is reported, not waited for.
"""
import itertools
import multiprocessing
import queue
import random
import sys
import traceback

from ... import _C
from . import _worker

_POLL_SECONDS = 5.0  # how often a waiting loader checks that its workers are alive


class _IterableEnd:
    """A worker's answer once its IterableDataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _WorkerError:
    """An exception raised in a worker, carried to the main process as type + text."""

    def __init__(self, worker_id, where):
        exc_type, exc, _ = sys.exc_info()
        self.exc_type = exc_type
        where = f" {where}" if where else ""
        self.text = (f"Caught {exc_type.__name__}{where} in DataLoader worker process "
                     f"{worker_id}.\nOriginal " + "".join(traceback.format_exc()))

    def reraise(self):
        try:
            err = self.exc_type(self.text)
        except Exception:  # an exception type that does not take one message
            err = RuntimeError(self.text)
        raise err


def _seed_worker(seed):
    random.seed(seed)
    # The CPU generator only: kiln.manual_seed also seeds every device's generator, and
    # counting xpu devices starts the OpenCL runtime (25 ms a worker); workers read data on the
    # host (as torch's, which cannot use CUDA after fork).
    _C.default_generator.manual_seed(seed)
    try:
        import numpy as np
        np.random.seed(seed % (2 ** 32))
    except ImportError:
        pass


def _worker_loop(spec, dataset, worker_id, num_workers, seed, tasks, results):
    _C.set_num_threads(1)
    _seed_worker(seed)
    _worker._current = _worker.WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed,
                                          dataset=dataset)
    init_error = None
    if spec.worker_init_fn is not None:
        try:
            spec.worker_init_fn(worker_id)
        except Exception:
            init_error = _WorkerError(worker_id, "in worker_init_fn")
    stream, stream_epoch, ended = None, None, False
    while True:
        try:
            task = tasks.get()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if task is None:
            return
        epoch, idx, index = task
        if init_error is not None:
            results.put((epoch, idx, init_error))
            continue
        try:
            if spec.is_iterable:
                if stream_epoch != epoch:  # a new epoch (persistent workers) restarts the data
                    stream, stream_epoch, ended = spec.iterable_batches(dataset), epoch, False
                if ended:
                    data = _IterableEnd(worker_id)
                else:
                    try:
                        data = next(stream)
                    except StopIteration:
                        ended, data = True, _IterableEnd(worker_id)
            else:
                data = spec.fetch(dataset, index)
        except Exception:
            data = _WorkerError(worker_id, "")
        try:
            results.put((epoch, idx, data))
        except Exception:  # the batch does not pickle
            data = _WorkerError(worker_id, "while sending a batch")
            results.put((epoch, idx, data))


class WorkerPool:
    """The worker processes of one DataLoader (one epoch, or all of them when persistent)."""

    def __init__(self, loader, base_seed):
        ctx = loader.multiprocessing_context
        if ctx is None:
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self.loader = loader
        self.n = loader.num_workers
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(self.n)]
        self.procs = []
        self.epoch = 0
        for wid in range(self.n):
            p = ctx.Process(target=_worker_loop, daemon=True,
                            args=(loader._fetch_spec(), loader.dataset, wid, self.n,
                                  base_seed + wid, self.tasks[wid], self.results))
            p.start()
            self.procs.append(p)
        self.closed = False

    def batches(self):
        """Yields one epoch's batches in order."""
        self.epoch += 1
        epoch, loader = self.epoch, self.loader
        active = [True] * self.n
        cycle = itertools.cycle(range(self.n))
        if loader._is_iterable:  # the workers iterate their own copies: no indices to send
            sources = itertools.repeat(None)
        else:
            sources = iter(loader.batch_sampler if loader.batch_sampler is not None
                           else loader.sampler)
        sent, next_idx, pending = 0, 0, {}

        def send_one():
            nonlocal sent
            if not any(active):
                return False
            try:
                index = next(sources)
            except StopIteration:
                return False
            wid = next(cycle)
            while not active[wid]:
                wid = next(cycle)
            self.tasks[wid].put((epoch, sent, index))
            sent += 1
            return True

        for _ in range(max(1, loader.prefetch_factor) * self.n):
            if not send_one():
                break
        while next_idx < sent:
            while next_idx not in pending:
                got_epoch, idx, data = self._get()
                if got_epoch == epoch:  # (results of an abandoned earlier epoch are dropped)
                    pending[idx] = data
            data = pending.pop(next_idx)
            next_idx += 1
            if isinstance(data, _IterableEnd):
                active[data.worker_id] = False
                send_one()
                continue
            if isinstance(data, _WorkerError):
                data.reraise()
            send_one()
            yield data

    def _get(self):
        timeout = self.loader.timeout
        waited = 0.0
        while True:
            step = min(timeout - waited, _POLL_SECONDS) if timeout > 0 else _POLL_SECONDS
            try:
                return self.results.get(timeout=step)
            except queue.Empty:
                waited += step
                dead = [p for p in self.procs if not p.is_alive()]
                if dead:
                    self.close()
                    pids = ", ".join(str(p.pid) for p in dead)
                    raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly "
                                       f"(exit code {dead[0].exitcode})")
                if timeout > 0 and waited >= timeout:
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds")

    def close(self):
        if self.closed:
            return
        self.closed = True
        for q in self.tasks:
            try:
                q.put(None)
            except Exception:
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join(timeout=1)
        for q in self.tasks + [self.results]:
            q.cancel_join_thread()  # never block interpreter exit on unsent data
            q.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
