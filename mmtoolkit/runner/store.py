"""The per-table job store: ``<results>/<paper>/.jobs/<table>.jsonl``, one JSON line per job.

:class:`JobStore` appends every finished job durably (flushed and fsynced, so a killed run
loses at most the jobs that were running), loads records skipping a line cut short (the
last line of a key wins) and rewrites exactly the current jobs at the end of a run;
:func:`reusable` says which records a rerun keeps. The git-ignored timings sidecar
``<table>.timings.csv`` (:func:`render_timings`, :func:`read_timings`) holds the timings
the committed tables leave out.

User guide: docs/guide/configs.md.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from .jobs import compact_json, split_timings

__all__ = [
    "TIMINGS_COLUMNS",
    "JobStore",
    "read_timings",
    "render_timings",
    "reusable",
    "store_path",
    "timings_path",
]

#: Header of the timings sidecar, in order.
TIMINGS_COLUMNS = ("row", "column", "status", "seconds", "timings")


def store_path(results, paper: str, table: str) -> Path:
    """The job store of a table: ``<results>/<paper>/.jobs/<table>.jsonl``."""
    return Path(results) / paper / ".jobs" / f"{table}.jsonl"


def timings_path(results, paper: str, table: str) -> Path:
    """The timings sidecar of a table: ``<results>/<paper>/.jobs/<table>.timings.csv``."""
    return Path(results) / paper / ".jobs" / f"{table}.timings.csv"


def render_timings(cells) -> str:
    """The sidecar text of ``cells`` (objects with ``row``, ``column``, ``state``,
    ``seconds``, ``metadata``): one line per cell with its selection seconds (full
    precision) and its metadata's timing entries as JSON (:func:`~.jobs.split_timings`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TIMINGS_COLUMNS)
    for c in cells:
        timings = compact_json(split_timings(c.metadata)[1])
        w.writerow([c.row, c.column, c.state, repr(float(c.seconds)), timings])
    return buf.getvalue()


def read_timings(path: str | os.PathLike) -> dict[tuple[str, str], float]:
    """Selection seconds by (row, column) from a timings sidecar; empty if there is none."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return {(r["row"], r["column"]): float(r["seconds"]) for r in csv.DictReader(f)}
    except FileNotFoundError:
        return {}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a timings sidecar ({type(exc).__name__}: {exc})") from None


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
    # keyed by the stored status: any JSON value, looked up as it is
    limits: dict[Any, tuple[str, float | None]] = {"timeout": ("timeout", timeout),
                                                   "out of memory": ("memory", memory)}
    limit = limits.get(status)
    if limit is None:  # failed: retried on every run
        return False
    old = (record.get("limits") or {}).get(limit[0])
    return limit[1] is not None and old is not None and limit[1] <= old
