"""Threads for the work of one large release: how many, and running tasks on them.

A release on one machine is a few passes over N-sized vectors, split into independent pieces
(slabs of a Kronecker product, blocks of noise); numpy and BLAS release the GIL while they
work on a piece, so a second thread runs a second piece on another core. Pieces are cut the
same way whatever the number of threads and each is computed by the same operations, so the
results do not depend on it (byte-identical with one thread or several). How many:
:func:`worker_threads` (``MMTOOLKIT_THREADS=1``: everything on the calling thread).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["MAX_THREADS", "Ahead", "InOrder", "Workers", "worker_threads"]

#: At most this many threads by default (the pieces are memory-bound beyond a few).
MAX_THREADS = 2


def worker_threads() -> int:
    """Threads one release may use: ``MMTOOLKIT_THREADS`` if set (a positive integer); else
    one when called from a thread other than the main one (a Dask worker, the caller's own
    pool: the cores are already shared out); else the CPUs this process may run on
    (``os.sched_getaffinity``), at most :data:`MAX_THREADS`."""
    value = os.environ.get("MMTOOLKIT_THREADS")
    if value is not None:
        try:
            k = int(value)
        except ValueError:
            k = 0
        if k < 1:
            raise ValueError(f"MMTOOLKIT_THREADS must be a positive integer, got {value!r}")
        return k
    if threading.current_thread() is not threading.main_thread():
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # platforms without affinity
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cpus))


class Workers:
    """``k`` threads for the pieces of one product: the calling thread and a pool of
    ``k − 1`` (none when ``k = 1``). A context manager: the pool's threads end on exit."""

    def __init__(self, k: int = 1):
        self.k = max(1, int(k))
        self._pool = ThreadPoolExecutor(max_workers=self.k - 1) if self.k > 1 else None

    def run(self, tasks) -> list:
        """Run the callables ``tasks`` — the first on the calling thread, the others on the
        pool — and return their results in order. Every task has finished when this returns
        or raises (the first exception is re-raised), so none still runs on memory the
        caller reuses."""
        tasks = list(tasks)
        if self._pool is None or len(tasks) == 1:
            return [task() for task in tasks]
        futures = [self._pool.submit(task) for task in tasks[1:]]
        try:
            first = tasks[0]()
        finally:
            for f in futures:
                f.exception()  # waits
        return [first] + [f.result() for f in futures]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class Ahead:
    """The results of ``task(0), task(1), ..., task(count − 1)``, taken in order by
    :meth:`next`, each one computed on a second thread while the caller works on the one
    before (a release's noise drawn beside its product). One thread runs every
    task, in order, so tasks may advance shared state such as a random generator: the
    results are those of calling the tasks in order on the calling thread, which is what
    happens when :func:`worker_threads` is 1. A task may write into the memory of the result
    two before it (two buffers): the caller has finished with result ``i`` when it takes
    result ``i + 1``. Nothing runs before :meth:`start` or the first :meth:`next`; the
    thread ends with the last result or :meth:`close`."""

    def __init__(self, task, count: int):
        self.task, self.count = task, int(count)
        self.taken = 0  # results handed out
        threaded = self.count > 1 and worker_threads() > 1
        self._pool = ThreadPoolExecutor(max_workers=1) if threaded else None
        self._pending: Future | None = None  # the future of result ``taken``
        self.closed = False

    def start(self) -> None:
        """Start computing the first result now (threaded; otherwise nothing): the caller
        commits to taking it, so shared state may move from here."""
        if self._pool is not None and self._pending is None and not self.taken:
            self._pending = self._pool.submit(self.task, 0)

    def next(self):
        """The next result (waiting for it), the one after it started on the thread."""
        i = self.taken
        if self.closed:
            raise ValueError("closed: no more results")
        if self._pool is None:
            result = self.task(i)
        else:
            self.start()
            result = self._pending.result()
            self._pending = self._pool.submit(self.task, i + 1) if i + 1 < self.count else None
        self.taken += 1
        if self.taken == self.count:
            self.close()
        return result

    def close(self) -> None:
        """No more results: the thread ends after the task it is running, if any."""
        self.closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._pending = None


class InOrder:
    """The results of ``count`` independent tasks, taken in order by :meth:`next`, up to
    ``threads`` of them computed at once on a pool (a stream's blocks of exact noise drawn
    on every core). ``make(i)`` runs on the calling thread, in order, and returns the task
    of result ``i`` (a callable of no argument): ``make`` may advance shared state such as
    a random generator, the tasks must not share any. So the results do not depend on
    ``threads``, nor on which thread runs a task: with ``threads`` 1 each task runs on the
    calling thread when its result is taken. At most ``threads`` results are computed or
    held beside the one taken; nothing runs before the first :meth:`next`; the pool ends
    with the last result or :meth:`close`."""

    def __init__(self, make, count: int, threads: int):
        self.make, self.count, self.k = make, int(count), max(1, int(threads))
        self.made = self.taken = 0  # tasks made, results handed out
        threaded = self.count > 1 and self.k > 1
        self._pool = ThreadPoolExecutor(max_workers=self.k) if threaded else None
        self._pending: deque[Future] = deque()  # the futures of results taken..made-1
        self.closed = False

    def next(self):
        """The next result (waiting for it); the tasks of the ``threads`` results after it
        are running or queued on the pool when it is returned."""
        if self.closed:
            raise ValueError("closed: no more results")
        if self._pool is None:
            result = self.make(self.taken)()
        else:
            while self.made < min(self.count, self.taken + 1 + self.k):
                self._pending.append(self._pool.submit(self.make(self.made)))
                self.made += 1
            result = self._pending.popleft().result()
        self.taken += 1
        if self.taken == self.count:
            self.close()
        return result

    def close(self) -> None:
        """No more results: queued tasks are dropped and the pool ends after the tasks it
        is running."""
        self.closed = True
        if self._pool is not None:
            for f in self._pending:
                f.cancel()
            self._pool.shutdown(wait=True)
            self._pool = None
        self._pending.clear()
