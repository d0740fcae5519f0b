"""Executors: where jobs run (ARCHITECTURE.md, "Layers").

:func:`run_jobs` runs every :class:`~mmtoolkit.runner.jobs.JobSpec` in process, in forked
local workers (one per job, with its ``RLIMIT_AS`` memory limit and deadline: a killed job
leaves no state behind) or on a Dask cluster, and calls ``on_result(spec, record)`` in the
calling process as each finishes; :func:`check_executor` validates the options. Forking
needs a Unix system; elsewhere limits are not available and ``jobs > 1`` runs one job at a
time in process.

User guide: docs/guide/configs.md.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import time
from collections.abc import Callable, Sequence

from ..checks import check_choice, check_int
from .jobs import JobSpec, describe_error, execute, job_record

__all__ = [
    "EXECUTORS",
    "ExecutorError",
    "check_executor",
    "execute_isolated",
    "run_jobs",
]

EXECUTORS = ("local", "dask")

#: Longest single wait (seconds) of the local executor for a worker's result.
MAX_WAIT = 3600.0

#: How long the dask executor waits for the scheduler before giving up.
CONNECT_TIMEOUT = "10s"


class ExecutorError(RuntimeError):
    """The executor could not be used: a bad ``jobs``, ``executor`` or ``scheduler``
    (:func:`check_executor`), dask.distributed missing, or the scheduler unreachable."""


def _can_fork() -> bool:
    return hasattr(os, "fork")


def forks(specs: Sequence[JobSpec], jobs: int) -> bool:
    """Whether the local executor runs ``specs`` in forked worker processes (more than one
    job at once, or a job with a time or memory limit, where the platform can fork) rather
    than in the calling process.

    Parameters
    ----------
    specs : sequence of JobSpec
        The jobs to run.
    jobs : int
        Jobs at once.

    Returns
    -------
    bool
        True when :func:`run_jobs` would fork a worker per job.
    """
    return _can_fork() and (jobs > 1 or any(s.limited for s in specs))


# --------------------------------------------------------------------------- fork worker
class _Worker:
    """One forked process computing one job; its record comes back through a pipe."""

    def __init__(self, spec: JobSpec, work: Callable[[JobSpec], dict] = execute):
        self.spec = spec
        self.started = time.monotonic()
        self.deadline = None if spec.timeout is None else self.started + spec.timeout
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            code = 0
            try:
                os.close(r)
                try:
                    if spec.memory is not None:
                        import resource

                        resource.setrlimit(resource.RLIMIT_AS, (spec.memory, spec.memory))
                    rec = work(spec)
                except Exception as exc:  # noqa: BLE001 - e.g. setrlimit refused
                    rec = job_record(spec, "failed", f"worker: {describe_error(exc)}", 0.0)
                view = memoryview(pickle.dumps(rec))
                while view:
                    n = os.write(w, view)
                    view = view[n:]
            except BaseException:  # noqa: BLE001 - nothing may escape a forked child
                code = 70
            finally:
                os._exit(code)
        os.close(w)
        self.pid = pid
        self.fd = r
        self.chunks: list[bytes] = []

    def read(self) -> bool:
        """Read what is available; True at end of file."""
        data = os.read(self.fd, 1 << 16)
        if data:
            self.chunks.append(data)
            return False
        return True

    def finish(self) -> dict:
        """Reap the child and return its record (or a failure record)."""
        os.close(self.fd)
        _, status = os.waitpid(self.pid, 0)
        wall = time.monotonic() - self.started
        try:
            rec = pickle.loads(b"".join(self.chunks))
            if isinstance(rec, dict):
                return rec
        except Exception:  # noqa: BLE001 - a truncated record is a crashed worker
            pass
        if os.WIFSIGNALED(status):
            how = f"killed by signal {os.WTERMSIG(status)}"
        else:
            how = f"exit code {os.WEXITSTATUS(status)}"
        if self.spec.memory is not None:
            return job_record(self.spec, "out of memory", f"worker died ({how})", wall)
        return job_record(self.spec, "failed", f"worker died without a result ({how})", wall)

    def kill(self) -> dict:
        """Kill the child at its deadline; a timeout record."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(self.fd)
        os.waitpid(self.pid, 0)
        return job_record(
            self.spec, "timeout", f"timeout (> {self.spec.timeout:g} s)", self.spec.timeout
        )

    def abandon(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.close(self.fd)
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def _run_forked(
    specs: Sequence[JobSpec],
    on_result: Callable[[JobSpec, dict], None],
    jobs: int,
    work: Callable[[JobSpec], dict] = execute,
) -> None:
    pending = list(specs)
    running: dict[int, _Worker] = {}  # fd -> worker
    try:
        while pending or running:
            while pending and len(running) < jobs:
                w = _Worker(pending.pop(0), work)
                running[w.fd] = w
            now = time.monotonic()
            deadlines = [w.deadline for w in running.values() if w.deadline is not None]
            # at most MAX_WAIT at a time: select() overflows on a far deadline (a timeout
            # of 1e12 s); the loop simply waits again
            wait = min(max(0.0, min(deadlines) - now), MAX_WAIT) if deadlines else None
            ready, _, _ = select.select(list(running), [], [], wait)
            for fd in ready:
                w = running[fd]
                if w.read():
                    del running[fd]
                    on_result(w.spec, w.finish())
            now = time.monotonic()
            for fd, w in list(running.items()):
                if w.deadline is not None and now >= w.deadline and fd not in ready:
                    del running[fd]
                    on_result(w.spec, w.kill())
    finally:
        for w in running.values():
            w.abandon()


def execute_isolated(spec: JobSpec) -> dict:
    """Run one job: in a forked child when it has limits (and fork exists), else inline."""
    if spec.limited and _can_fork():
        out: list[dict] = []
        _run_forked([spec], lambda s, rec: out.append(rec), 1)
        return out[0]
    return execute(spec)


# --------------------------------------------------------------------------- dask
def _run_dask(specs, on_result, scheduler: str) -> None:
    """Run ``specs`` on the Dask cluster at ``scheduler`` (:func:`check_executor` passed)."""
    from distributed import Client, as_completed

    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - unreachable scheduler: a clear error
        raise ExecutorError(
            f"cannot connect to the Dask scheduler {scheduler!r}: {describe_error(exc)}"
        ) from None
    try:
        futures = {client.submit(execute_isolated, s, pure=False): s for s in specs}
        for fut in as_completed(list(futures)):
            spec = futures[fut]
            try:
                rec = fut.result()
            except Exception as exc:  # noqa: BLE001 - e.g. the worker died
                rec = job_record(spec, "failed", f"dask: {describe_error(exc)}", 0.0)
            on_result(spec, rec)
    finally:
        client.close()


# --------------------------------------------------------------------------- entry point
def check_executor(jobs: int, executor: str, scheduler: str | None) -> None:
    """Raise :class:`ExecutorError` for an unusable (jobs, executor, scheduler) choice."""
    try:
        check_choice(executor, "", EXECUTORS, what="executor")
        check_int(jobs, "jobs", minimum=1)
    except (TypeError, ValueError) as exc:
        raise ExecutorError(str(exc)) from None
    if executor == "dask":
        if not scheduler:
            raise ExecutorError(
                "the dask executor needs --scheduler ADDRESS (e.g. tcp://host:8786)"
            )
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise ExecutorError(
                "the dask executor needs dask.distributed: pip install 'mmtoolkit[dask]'"
            ) from None


def run_jobs(
    specs: Sequence[JobSpec],
    on_result: Callable[[JobSpec, dict], None],
    *,
    jobs: int = 1,
    executor: str = "local",
    scheduler: str | None = None,
    work: Callable[[JobSpec], dict] = execute,
) -> None:
    """Run ``specs`` and report each record ``work(spec)`` through ``on_result``, in the
    calling process in completion order (docs/guide/configs.md, "Executors"); ``work``
    (default :func:`~mmtoolkit.runner.jobs.execute`) never raises and returns a picklable
    dict. A custom ``work`` runs on the local executor only."""
    check_executor(jobs, executor, scheduler)
    if not specs:
        return
    if executor == "dask":
        if work is not execute:
            raise ExecutorError("a custom work function runs on the local executor only")
        assert scheduler is not None  # check_executor refused the dask executor without one
        _run_dask(specs, on_result, scheduler)
        return
    if not forks(specs, jobs):
        for spec in specs:
            on_result(spec, work(spec))
        return
    _run_forked(specs, on_result, jobs, work)
