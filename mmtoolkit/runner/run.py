"""Run an experiment config: rows × columns → cells → ``<results>/<paper>/<table>.{csv,md}``.

:func:`run_config` turns every (row, column) pair into a job (:mod:`.jobs`), runs the
missing ones through :mod:`.executors`, appending each to the job store (:mod:`.store`) as
it finishes, and writes the CSV and Markdown atomically from the store's records. The
committed outputs hold only what the config and the code determine, so reruns rewrite no
byte (timings go to the store's sidecar); a quick run writes under :data:`QUICK_DIR`.

User guide: docs/guide/configs.md.
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .. import jsonsafe
from ..atomic import write_atomic
from .config import Config, load_config, quick_config
from .executors import check_executor, run_jobs
from .jobs import cell_keys as config_cell_keys
from .jobs import compact_json, expand_jobs, split_timings
from .plots import csv_number, render_figures
from .schema import ConfigError
from .store import JobStore, render_timings, reusable, store_path, timings_path

__all__ = [
    "CSV_COLUMNS",
    "QUICK_DIR",
    "Cell",
    "RunResult",
    "compare_with_paper",
    "relative_path",
    "render_csv",
    "render_markdown",
    "rerender_config",
    "run_config",
]

#: Header of the CSV file, in order.
CSV_COLUMNS = (
    "row",
    "column",
    "ours",
    "paper",
    "rel_diff",
    "within_tol",
    "note",
    "status",
    "metadata",
    "job",
)

#: Where quick runs write, under the results directory (git-ignored).
QUICK_DIR = "quick"


@dataclass
class Cell:
    """One table cell: our value beside the paper's (a line of the CSV).

    Parameters
    ----------
    row, column : str
        The cell's row and column names.
    ours : float or None, optional
        Our value of the config's metric; None when the job did not finish (failed, timed
        out, out of memory) or, for the ratio metric, its reference column's job did not.
    paper : float or None, optional
        The paper's value; None when the config gives none.
    rel_diff : float or None, optional
        ``(ours - paper) / |paper|`` (0 when both are 0); None without both values or when
        only the paper's is 0.
    within_tol : bool or None, optional
        Whether ``ours`` agrees with ``paper`` within the config's tolerance; None without
        both values or a tolerance.
    seconds : float, optional
        Selection time in seconds: it goes to the timings sidecar, not the CSV.
    note : str, optional
        The config's note for the cell, then the failure, if any (``"; "``-separated).
    error : str or None, optional
        ``"Type: message"`` when the job failed (then :attr:`failed` is True).
    metadata : dict, optional
        The strategy's metadata, if any (the CSV keeps it without timings).
    status : str, optional
        ``"ok"``, ``"failed"``, ``"timeout"`` or ``"out of memory"``.
    job : str, optional
        The key of the job that computed the cell (empty in a script's table).
    """

    row: str
    column: str
    ours: float | None = None
    paper: float | None = None
    rel_diff: float | None = None
    within_tol: bool | None = None
    seconds: float = 0.0
    note: str = ""
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"
    job: str = ""

    @property
    def failed(self) -> bool:
        """Whether the cell's job failed."""
        return self.error is not None

    @property
    def state(self) -> str:
        """``status``, except that a cell built with an ``error`` reads ``failed``."""
        return "failed" if self.error is not None and self.status == "ok" else self.status


@dataclass
class RunResult:
    """The cells of a run and the files it wrote.

    Parameters
    ----------
    config : Config
        The config that was run (for a quick run, its :func:`~.config.quick_config`
        variant).
    cells : list of Cell
        One per (row, column) of ``config``, row by row in the config's order.
    csv_path, md_path : Path
        The table written: ``<results>/<paper>/<table>.csv`` and ``.md`` (a quick run's
        under ``<results>/quick/``).
    """

    config: Config
    cells: list[Cell]
    csv_path: Path
    md_path: Path

    @property
    def failed(self) -> list[Cell]:
        """The failed cells."""
        return [c for c in self.cells if c.failed]

    @property
    def ok(self) -> bool:
        """Whether no cell failed."""
        return not self.failed

    def cell(self, row: str, column: str) -> Cell:
        """The cell of (row, column).

        Parameters
        ----------
        row, column : str
            The row's and the column's names.

        Returns
        -------
        Cell
            That cell.

        Raises
        ------
        KeyError
            The run has no such cell.
        """
        for c in self.cells:
            if c.row == row and c.column == column:
                return c
        raise KeyError((row, column))


def compare_with_paper(cell: Cell, config: Config) -> None:
    """Set ``cell.rel_diff`` and ``cell.within_tol`` (the config's tolerance) when the
    cell has both our value and the paper's."""
    if cell.paper is None or cell.ours is None:
        return
    ours, paper = cell.ours, cell.paper
    if paper != 0:
        cell.rel_diff = (ours - paper) / abs(paper)
    elif ours == 0:
        cell.rel_diff = 0.0
    if config.tolerance is not None:
        cell.within_tol = config.tolerance.within(ours, paper)


def _eta(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _status_note(rec: dict) -> str:
    """The note of a cell whose job did not finish normally."""
    status = rec.get("status")
    if status == "timeout":
        t = (rec.get("limits") or {}).get("timeout")
        return f"timeout (> {t:g} s)" if t is not None else "timeout"
    if status == "out of memory":
        m = (rec.get("limits") or {}).get("memory")
        limit = f"limit {m / 1e9:g} GB" if m is not None else "no limit set"
        return f"out of memory ({limit}; {rec.get('error')})"
    return f"failed: {rec.get('error')}"


def _assemble(config: Config, cell_keys: dict, records: dict[str, dict]) -> list[Cell]:
    """Cells from job records: the ratio metric divides two evaluator outputs."""
    metric = config.metric
    cells: list[Cell] = []
    for row in config.rows:
        for column in config.columns:
            rec = records[cell_keys[(row.name, column.name)]]
            cell = Cell(row=row.name, column=column.name, paper=row.paper.get(column.name))
            cell.job = cell_keys[(row.name, column.name)]
            notes = [row.notes[column.name]] if column.name in row.notes else []
            cell.seconds = float(rec.get("seconds") or 0.0)
            cell.metadata = dict(rec.get("metadata") or {})
            cell.status = rec.get("status", "failed")
            if cell.status == "ok" and metric.kind == "ratio":
                ref = records[cell_keys[(row.name, metric.ratio_to)]]
                if ref.get("status") != "ok":
                    cell.status = ref.get("status", "failed")
                    text = _status_note(ref)
                    if cell.status == "failed":
                        text = text[len("failed: ") :]
                    rec = {
                        "status": cell.status,
                        "error": f"reference column {metric.ratio_to!r}: {text}",
                        "limits": ref.get("limits"),
                    }
                elif not ref["value"] > 0:
                    cell.status = "failed"
                    rec = {"error": f"reference column {metric.ratio_to!r} has zero error"}
                else:
                    # HDMM's Ratio(W, A) = sqrt(Err(W, A) / Err(W, B)) of two
                    # evaluate.expected_error outputs: exactly evaluate.error_ratio
                    cell.ours = math.sqrt(rec["value"] / ref["value"])
            elif cell.status == "ok":
                cell.ours = float(rec["value"])
            if cell.status == "failed":
                cell.error = rec.get("error") or "unknown error"
                notes.append(f"failed: {cell.error}")
            elif cell.status != "ok":
                if "reference column" in str(rec.get("error")):
                    notes.append(f"{cell.status}: {rec['error']}")
                else:
                    notes.append(_status_note(rec))
            cell.note = "; ".join(notes)
            compare_with_paper(cell, config)
            cells.append(cell)
    return cells


def _check_results_dir(results: str | os.PathLike) -> None:
    """Raise :class:`~.schema.ConfigError` naming the path when ``results`` exists and is not
    a directory, or lies under a file (it is created when missing)."""
    path = Path(results)
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                where = "" if part == path else f" ({str(part)!r} is a file)"
                raise ConfigError(
                    f"results directory {str(path)!r} is not a directory{where}; give --results "
                    "a directory (created if missing)"
                )
            return


def run_config(
    config: Config | str | os.PathLike,
    results: str | os.PathLike = "results",
    *,
    progress: TextIO | None = None,
    fresh: bool = False,
    reuse_stale: bool = False,
    jobs: int = 1,
    executor: str = "local",
    scheduler: str | None = None,
    quick: bool = False,
) -> RunResult:
    """Run every (row, column) job of ``config`` and write ``<results>/<paper>/<table>.*``.

    Jobs already in the job store (:mod:`.store`) are not recomputed; each finished job is
    appended to it at once, so a killed run resumes where it stopped. The CSV, the Markdown,
    the timings sidecar and the config's figures are written at the end. One progress line
    per finished job (with an ETA) goes to ``progress``.

    Parameters
    ----------
    config : Config or str or os.PathLike
        A :class:`Config`, or the path of a YAML config (read by :func:`~.config.load_config`).
    results : str or os.PathLike, optional
        The results directory (created if missing).
    progress : TextIO or None, optional
        Where the progress lines go; None: ``sys.stderr``.
    fresh : bool, optional
        Empty the job store first (recompute every job).
    reuse_stale : bool, optional
        Also reuse records computed by other package code — for edits that do not change
        values, e.g. a new workload builder; the count is reported.
    jobs : int, optional
        How many jobs the local executor runs at once (``>= 1``).
    executor : str, optional
        ``"local"`` or ``"dask"`` (:mod:`.executors`).
    scheduler : str or None, optional
        The Dask scheduler's address (``tcp://host:8786``), required by ``"dask"``.
    quick : bool, optional
        Run the config's quick variant (:func:`~.config.quick_config`) under
        ``<results>/`` :data:`QUICK_DIR`.

    Returns
    -------
    RunResult
        The cells and the paths of the CSV and the Markdown written.

    Raises
    ------
    ConfigError
        Before any job runs: ``results`` is (or lies under) a file, or the config file is
        invalid (naming the file and the field).
    ExecutorError
        Before any job runs: a bad ``jobs``, ``executor`` or ``scheduler``, or the Dask
        executor without dask.distributed; when running: an unreachable scheduler.
    """
    check_executor(jobs, executor, scheduler)
    _check_results_dir(results)
    if not isinstance(config, Config):
        config = load_config(config)
    root = Path(results).parent  # the Markdown shows the config's path relative to it
    if quick:
        config = quick_config(config)
        results = Path(results) / QUICK_DIR
    out = progress if progress is not None else sys.stderr
    specs, cell_keys = expand_jobs(config)
    store = JobStore(store_path(results, config.paper, config.table))
    if fresh:
        store.rewrite([])
    stored = store.load()
    records: dict[str, dict] = {}
    todo = []
    stale = 0
    for spec in specs:
        rec = stored.get(spec.key)
        if rec is not None and reusable(
            rec, spec.timeout, spec.memory, None if reuse_stale else spec.code
        ):
            records[spec.key] = rec
            stale += rec.get("code") != spec.code
        else:
            todo.append(spec)
    if records:
        print(
            f"resuming: {len(records)} of {len(specs)} jobs already in {store.path}"
            + (f" ({stale} computed by other code, reused: --reuse-stale)" if stale else ""),
            file=out,
            flush=True,
        )

    total = len(todo)
    done = 0
    start = time.perf_counter()

    def on_result(spec, rec):
        nonlocal done
        store.append(rec)
        records[spec.key] = rec
        done += 1
        elapsed = time.perf_counter() - start
        eta = elapsed / done * (total - done)
        if rec["status"] == "ok":
            shown = _fmt(rec["value"])
        elif rec["status"] == "failed":
            shown = f"FAILED {rec['error']}"
        else:
            note = _status_note(rec)  # "timeout (> 60 s)" -> "TIMEOUT (> 60 s)"
            shown = rec["status"].upper() + note[len(rec["status"]) :]
        print(
            f"[{done}/{total}] {spec.describe()}: {shown} ({rec['seconds']:.2f} s"
            + (f", ETA {_eta(eta)})" if done < total else ")"),
            file=out,
            flush=True,
        )

    run_jobs(todo, on_result, jobs=jobs, executor=executor, scheduler=scheduler)

    cells = _assemble(config, cell_keys, records)
    directory = Path(results) / config.paper
    csv_path = directory / f"{config.table}.csv"
    md_path = directory / f"{config.table}.md"
    write_atomic(csv_path, render_csv(cells))
    write_atomic(md_path, render_markdown(config, cells, root=root))
    store.rewrite([records[s.key] for s in specs])
    write_atomic(timings_path(results, config.paper, config.table), render_timings(cells))
    for png in render_figures(config, cells, directory):  # the config's figures, if any
        print(f"figure: {png}", file=out, flush=True)
    return RunResult(config=config, cells=cells, csv_path=csv_path, md_path=md_path)


def rerender_config(
    config: Config | str | os.PathLike[str], results: str | os.PathLike[str] = "results"
) -> RunResult:
    """Rewrite ``<results>/<paper>/<table>.{csv,md}`` from the committed CSV and the config,
    computing nothing: for config edits that change no job (a note, a paper value, the
    title). Every cell keeps its number, status, metadata and job key from the CSV; its
    note, paper value and agreement flag come from the config, as in a run. Figures and the
    timings sidecar are left as they are (``mmtoolkit plot CONFIG`` redraws the figures).

    Parameters
    ----------
    config : Config or str or os.PathLike
        A :class:`Config`, or the path of a YAML config (read without building its
        workloads).
    results : str or os.PathLike, optional
        The results directory holding ``<paper>/<table>.csv``.

    Returns
    -------
    RunResult
        The cells as re-rendered and the paths of the CSV and the Markdown rewritten.

    Raises
    ------
    ConfigError
        Naming the file and the cell, before anything is written: there is no CSV, a config
        cell is missing from it, its job key is not the one the config now defines (the
        table must be re-run), a cell without a number has a note that does not start with
        the config's (its failure text is only in the job store), or a cell's metadata is
        not JSON; also an invalid config file, or a ``results`` path that is (or lies under)
        a file.
    """
    _check_results_dir(results)
    if not isinstance(config, Config):
        config = load_config(config, build_workloads=False)
    directory = Path(results) / config.paper
    csv_path = directory / f"{config.table}.csv"
    md_path = directory / f"{config.table}.md"
    try:
        with open(csv_path, newline="", encoding="utf-8") as f:
            lines = {(r.get("row"), r.get("column")): r for r in csv.DictReader(f)}
    except OSError as exc:
        raise ConfigError(
            f"{csv_path}: cannot re-render {config.path}: {exc.strerror or exc} (run it first)"
        ) from None
    keys = config_cell_keys(config)
    cells: list[Cell] = []
    for row in config.rows:
        for column in config.columns:
            where = f"{csv_path}: cell {row.name!r} × {column.name!r}"
            line = lines.get((row.name, column.name))
            if line is None:
                raise ConfigError(f"{where}: not in the CSV; run {config.path}")
            key = keys[(row.name, column.name)]
            if line.get("job") != key:
                raise ConfigError(
                    f"{where}: computed by job {(line.get('job') or '(no key)')[:12]}, the config "
                    f"now defines job {key[:12]}; run {config.path} to recompute it"
                )
            want = row.notes.get(column.name, "")
            cell = Cell(row=row.name, column=column.name, paper=row.paper.get(column.name))
            cell.job = key
            cell.status = line.get("status") or "ok"
            if line.get("metadata"):
                cell.metadata = jsonsafe.loads(line["metadata"], f"{where}: metadata", ConfigError)
            ours = csv_number(line.get("ours") or "")
            if ours is not None:
                cell.ours = ours
                cell.note = want
            elif line.get("note", "").startswith(want):
                cell.note = line["note"]  # the config's note and the job's failure text
            else:
                raise ConfigError(
                    f"{where}: has no number and its note does not start with the config's "
                    f"note; run {config.path} to rewrite it"
                )
            if cell.status == "failed":
                cell.error = cell.note
            compare_with_paper(cell, config)
            cells.append(cell)
    root = Path(results).parent
    write_atomic(csv_path, render_csv(cells))
    write_atomic(md_path, render_markdown(config, cells, root=root))
    return RunResult(config=config, cells=cells, csv_path=csv_path, md_path=md_path)


# ----------------------------------------------------------------------------- output
def _num(x: float | None) -> str:
    """Full precision for the CSV (round-trips through float())."""
    return "" if x is None else repr(float(x))


def render_csv(cells: list[Cell]) -> str:
    """The CSV text of ``cells`` (columns :data:`CSV_COLUMNS`)."""
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
                c.note,
                c.state,
                compact_json(split_timings(c.metadata)[0]),
                c.job,
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


def relative_path(path, start) -> str:
    """``path`` relative to ``start`` in POSIX form (both resolved first), or ``path`` as
    given when they do not share a drive."""
    try:
        return Path(os.path.relpath(Path(path).resolve(), Path(start).resolve())).as_posix()
    except ValueError:
        return Path(path).as_posix()


def render_markdown(config: Config, cells: list[Cell], *, root=None) -> str:
    """The Markdown table of ``cells`` beside the paper's values, with the notes.

    ``root``: the config's path is shown relative to it (the runner passes the directory
    holding the results directory, so the text does not depend on how the path was given).
    """
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
    shown = Path(config.path).as_posix() if root is None else relative_path(config.path, root)
    lines.append(f"- **Config:** `{shown}`")
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
            ours = _fmt(c.ours) if c.state == "ok" else c.state
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
