"""The per-table job store: ``<results>/<paper>/.jobs/<table>.jsonl``, one JSON line per job.

Every finished job is appended as one line (``{"key": ..., "status": ..., "value": ...}``,
see :func:`mmtoolkit.runner.jobs.execute`), flushed and fsynced before the next result is
taken, so killing a run loses at most the jobs that were running. A line cut short by a
kill is skipped on reading; when a key appears twice the last line wins.

Which stored records a rerun reuses (:func:`reusable`) — only records computed by the same
code (the record's ``code``: a fingerprint of the package's value-computing sources and of
a custom selector's module; editing them recomputes rather than keeping old numbers), and
then:

* ``ok`` — always (the key covers everything that determines the value);
* ``timeout`` / ``out of memory`` — while the limit that stopped it is still in force
  (same or lower limit); raising or removing the limit recomputes the job;
* ``failed`` (an exception) — never: a failure is usually a bug that may have been fixed,
  so it is retried on every run.

At the end of a run the store is rewritten (atomically) with exactly the records of the
config's current jobs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..atomic import write_atomic

__all__ = ["JobStore", "reusable", "store_path"]


def store_path(results, paper: str, table: str) -> Path:
    """The job store of a table: ``<results>/<paper>/.jobs/<table>.jsonl``."""
    return Path(results) / paper / ".jobs" / f"{table}.jsonl"


class JobStore:
    """Append-only JSON-lines file of job records, keyed by job key."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def load(self) -> dict[str, dict]:
        """Records by key (last wins); unreadable lines (a kill mid-write) are skipped."""
        out: dict[str, dict] = {}
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return out
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("key"), str):
                out[rec["key"]] = rec
        return out

    def append(self, record: dict) -> None:
        """Append one record durably (write, flush, fsync)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, sort_keys=True, allow_nan=True) + "\n"
        with open(self.path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:  # a previous writer killed mid-line: start a fresh line
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())

    def rewrite(self, records: list[dict]) -> None:
        """Replace the store with ``records`` atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(r, sort_keys=True, allow_nan=True) + "\n" for r in records)
        write_atomic(self.path, text)


def reusable(
    record: dict | None, timeout: float | None, memory: int | None, code: str | None = None
) -> bool:
    """Whether a stored record can stand for a job run under the given limits by ``code``
    (a :func:`~mmtoolkit.runner.jobs.code_fingerprint`; None: do not check)."""
    if not record:
        return False
    if code is not None and record.get("code") != code:
        return False
    status = record.get("status")
    if status == "ok":
        return True
    limits = record.get("limits") or {}
    if status == "timeout":
        old = limits.get("timeout")
        return timeout is not None and old is not None and timeout <= old
    if status == "out of memory":
        old = limits.get("memory")
        return memory is not None and old is not None and memory <= old
    return False
