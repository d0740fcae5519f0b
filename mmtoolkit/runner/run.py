"""Run an experiment config: rows × columns → cells → ``<results>/<paper>/<table>.{csv,md}``.

Every (row, column) pair is one job. A selector column runs
``selectors.get(name, **params[, seed=...]).select(W, privacy)`` (timed) and scores the
strategy with :mod:`mmtoolkit.evaluate`; an ``svd_bound`` column calls
``evaluate.svd_bound_rmse`` / ``evaluate.svd_bound_error``; the ratio metric calls
``evaluate.error_ratio`` against the strategy of the reference column. Each workload and
each strategy is computed once per run. The runner never computes error itself.

A job that raises is recorded as a failed cell (``ours`` empty, ``note`` = error type and
text) and the run continues. Both output files are written atomically.

CSV columns: ``row, column, ours, paper, rel_diff, within_tol, seconds, note``; numbers at
full precision, empty where absent. ``rel_diff = (ours - paper) / |paper|``; ``seconds`` is
the selection time of a selector column (evaluation excluded) and the computation time of
an ``svd_bound`` column.
"""

from __future__ import annotations

import csv
import inspect
import io
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mmtoolkit import evaluate, selectors

from .config import Column, Config, Row, load_config

__all__ = ["CSV_COLUMNS", "Cell", "RunResult", "run_config"]

#: Header of the CSV file, in order.
CSV_COLUMNS = ("row", "column", "ours", "paper", "rel_diff", "within_tol", "seconds", "note")


@dataclass
class Cell:
    """One table cell: our value beside the paper's."""

    row: str
    column: str
    ours: float | None = None
    paper: float | None = None
    rel_diff: float | None = None
    within_tol: bool | None = None
    seconds: float = 0.0
    note: str = ""
    error: str | None = None  # "Type: message" when the job failed
    metadata: dict[str, Any] = field(default_factory=dict)  # the strategy's metadata, if any

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class RunResult:
    config: Config
    cells: list[Cell]
    csv_path: Path
    md_path: Path

    @property
    def failed(self) -> list[Cell]:
        return [c for c in self.cells if c.failed]

    @property
    def ok(self) -> bool:
        return not self.failed

    def cell(self, row: str, column: str) -> Cell:
        for c in self.cells:
            if c.row == row and c.column == column:
                return c
        raise KeyError((row, column))


class _Failed:
    """A cached failure (of a workload build or a strategy selection)."""

    def __init__(self, message: str):
        self.message = message


def _describe_error(exc: BaseException) -> str:
    text = str(exc).strip() or repr(exc)
    return f"{type(exc).__name__}: {' '.join(text.split())}"


class _Job:
    """Holds the per-run caches (workloads and strategies)."""

    def __init__(self, config: Config):
        self.config = config
        self.workloads: dict[str, Any] = {}
        self.strategies: dict[tuple[str, str], Any] = {}

    def workload(self, row: Row):
        if row.name not in self.workloads:
            try:
                self.workloads[row.name] = row.workload.build()
            except Exception as exc:  # noqa: BLE001 - recorded in the cell
                self.workloads[row.name] = _Failed(f"building the workload: {_describe_error(exc)}")
        w = self.workloads[row.name]
        if isinstance(w, _Failed):
            raise _CellError(w.message)
        return w

    def selector(self, column: Column):
        params = dict(column.params)
        seed = self.config.seed
        sel = selectors.get(column.selector, **params)
        if seed is not None and "seed" not in params and _accepts_seed(sel):
            sel = selectors.get(column.selector, **params, seed=seed)
        return sel

    def strategy(self, row: Row, column: Column):
        """(strategy, selection seconds), computed once per (row, column)."""
        key = (row.name, column.name)
        if key not in self.strategies:
            W = self.workload(row)
            start = time.perf_counter()
            try:
                strategy = self.selector(column).select(W, self.config.privacy)
            except Exception as exc:  # noqa: BLE001 - recorded in the cell
                self.strategies[key] = _Failed(f"selection: {_describe_error(exc)}")
            else:
                self.strategies[key] = (strategy, time.perf_counter() - start)
        s = self.strategies[key]
        if isinstance(s, _Failed):
            raise _CellError(s.message)
        return s

    def value(self, row: Row, column: Column) -> tuple[float, float, dict]:
        """(metric value, seconds, strategy metadata) for one cell."""
        privacy = self.config.privacy
        metric = self.config.metric
        W = self.workload(row)
        if column.svd_bound:
            start = time.perf_counter()
            if metric.kind == "rmse":
                v = evaluate.svd_bound_rmse(W, privacy)
            else:
                v = evaluate.svd_bound_error(W, privacy)
            return float(v), time.perf_counter() - start, {}
        strategy, seconds = self.strategy(row, column)
        meta = dict(getattr(strategy, "metadata", {}) or {})
        if metric.kind == "rmse":
            v = evaluate.rmse(W, strategy, privacy)
        elif metric.kind == "total_error":
            v = evaluate.expected_error(W, strategy, privacy)
        elif metric.kind == "max_variance":
            v = evaluate.max_variance(W, strategy, privacy)
        else:
            ref_col = self.config.column(metric.ratio_to)
            try:
                ref, _ = self.strategy(row, ref_col)
            except _CellError as exc:
                raise _CellError(f"reference column {ref_col.name!r}: {exc}") from None
            v = evaluate.error_ratio(W, strategy, ref, privacy)
        return float(v), seconds, meta


class _CellError(Exception):
    """A failure already described (cached workload/strategy failure)."""


def _accepts_seed(sel) -> bool:
    try:
        return "seed" in inspect.signature(type(sel).__init__).parameters
    except (TypeError, ValueError):
        return False


def _compare(cell: Cell, config: Config) -> None:
    if cell.paper is None or cell.ours is None:
        return
    ours, paper = cell.ours, cell.paper
    if paper != 0:
        cell.rel_diff = (ours - paper) / abs(paper)
    elif ours == 0:
        cell.rel_diff = 0.0
    if config.tolerance is not None:
        cell.within_tol = config.tolerance.within(ours, paper)


def run_config(
    config: Config | str | os.PathLike,
    results: str | os.PathLike = "results",
    *,
    progress: TextIO | None = None,
) -> RunResult:
    """Run every (row, column) job of ``config`` and write ``<results>/<paper>/<table>.*``.

    ``config`` is a :class:`Config` or a path to a YAML file (loaded with
    :func:`load_config`). Progress lines go to ``progress`` (default ``sys.stderr``).
    Returns a :class:`RunResult`; failed cells have ``.failed`` true and a ``note``.
    """
    if not isinstance(config, Config):
        config = load_config(config)
    out = progress if progress is not None else sys.stderr
    job = _Job(config)
    total = len(config.rows) * len(config.columns)
    cells: list[Cell] = []
    k = 0
    for row in config.rows:
        for column in config.columns:
            k += 1
            cell = Cell(row=row.name, column=column.name, paper=row.paper.get(column.name))
            notes = [row.notes[column.name]] if column.name in row.notes else []
            start = time.perf_counter()
            try:
                cell.ours, cell.seconds, cell.metadata = job.value(row, column)
            except _CellError as exc:
                cell.error = str(exc)
                cell.seconds = time.perf_counter() - start
            except Exception as exc:  # noqa: BLE001 - a failed job must not stop the run
                cell.error = _describe_error(exc)
                cell.seconds = time.perf_counter() - start
            if cell.error is not None:
                notes.append(f"failed: {cell.error}")
            cell.note = "; ".join(notes)
            _compare(cell, config)
            cells.append(cell)
            shown = f"FAILED {cell.error}" if cell.failed else _fmt(cell.ours)
            print(
                f"[{k}/{total}] {row.name} × {column.name}: {shown} ({cell.seconds:.2f} s)",
                file=out,
                flush=True,
            )

    directory = Path(results) / config.paper
    csv_path = directory / f"{config.table}.csv"
    md_path = directory / f"{config.table}.md"
    _write_atomic(csv_path, render_csv(cells))
    _write_atomic(md_path, render_markdown(config, cells))
    return RunResult(config=config, cells=cells, csv_path=csv_path, md_path=md_path)


# ----------------------------------------------------------------------------- output
def _num(x: float | None) -> str:
    """Full precision for the CSV (round-trips through float())."""
    return "" if x is None else repr(float(x))


def render_csv(cells: list[Cell]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for c in cells:
        w.writerow(
            [
                c.row,
                c.column,
                _num(c.ours),
                _num(c.paper),
                _num(c.rel_diff),
                "" if c.within_tol is None else str(c.within_tol).lower(),
                f"{c.seconds:.6f}",
                c.note,
            ]
        )
    return buf.getvalue()


def _fmt(x: float | None) -> str:
    """Human-readable number for progress lines and Markdown."""
    if x is None:
        return "—"
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e5:
        return f"{x:.3f}" if abs(x) >= 1 else f"{x:.4g}"
    return f"{x:.4g}"


def _fmt_paper(x: float) -> str:
    """Paper values as printed (shortest repr; integers without '.0'); values derived in a
    config (e.g. a quotient of two printed numbers) are cut to 6 significant digits."""
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    text = repr(float(x))
    return text if len(text.lstrip("-").replace(".", "")) <= 10 else f"{x:.6g}"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(config: Config, cells: list[Cell]) -> str:
    by_key = {(c.row, c.column): c for c in cells}
    lines = [f"# {config.title}", ""]
    if config.source:
        lines.append(f"- **Source:** {config.source}")
    lines.append(f"- **Privacy:** {config.privacy.describe()}")
    lines.append(f"- **Metric:** {config.metric.describe()}")
    if config.tolerance is not None:
        lines.append(f"- **Agreement (✓/✗):** {config.tolerance.describe()}")
    if config.seed is not None:
        lines.append(f"- **Seed:** {config.seed}")
    lines.append(f"- **Config:** `{config.path}`")
    lines.append("")

    # a "paper" sub-column only for columns the paper reports
    published = {c.column for c in cells if c.paper is not None}
    header = ["Workload"]
    for col in config.columns:
        header += [f"{col.name} ours"] + ([f"{col.name} paper"] if col.name in published else [])
    lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
    lines.append("|" + "---|" + "---:|" * (len(header) - 1))

    notes: list[str] = []
    for row in config.rows:
        line = [_md_escape(row.name)]
        for col in config.columns:
            c = by_key[(row.name, col.name)]
            mark = ""
            if c.note:
                notes.append(f"{row.name} × {col.name}: {c.note}")
                mark = f" [{len(notes)}]"
            ours = "failed" if c.failed else _fmt(c.ours)
            if c.paper is None:
                paper = ""
            else:
                paper = _fmt_paper(c.paper)
                if c.within_tol is not None:
                    paper += " ✓" if c.within_tol else " ✗"
            line += [ours + mark] + ([paper] if col.name in published else [])
        lines.append("| " + " | ".join(_md_escape(x) for x in line) + " |")
    lines.append("")

    col_notes = [f"{c.name}: {c.notes}" for c in config.columns if c.notes]
    if notes or col_notes or config.notes:
        lines += ["## Notes", ""]
        if config.notes:
            lines += [config.notes.strip(), ""]
        lines += [f"- {n}" for n in col_notes]
        lines += [f"{i}. {n}" for i, n in enumerate(notes, 1)]
        lines.append("")
    return "\n".join(lines)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same directory + os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
