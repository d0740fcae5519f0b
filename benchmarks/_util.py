"""Shared helpers of the benchmark scripts: timing, and the JSON record of a run.

A script makes one :class:`Run` at its start, adds its tables with :meth:`Run.table` (each
row is printed as it is measured, as a Markdown row) and, when given ``--json [FILE]``
(:func:`add_json_option`), calls :meth:`Run.write`: the tables, the machine (CPU model,
cores, memory), the 1-minute load average at the start and end, the package version and git
commit, the start and end time (UTC) and the exact command line go to ``FILE`` (default
``benchmarks/results/<script>.json``). ``benchmarks/render.py`` writes ``benchmarks/README.md``
from those files.
"""

import argparse
import datetime
import importlib.util
import json
import math
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: Where ``--json`` writes by default, one file per script (``<script stem>.json``).
RESULTS = Path(__file__).resolve().parent / "results"
#: Environment variables that change what a benchmark measures; those set are recorded as
#: part of the command line.
ENV_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "MMTOOLKIT_THREADS",
    "MMTOOLKIT_NUMBA",
)
#: Shown for a cell that was not measured (``None``).
MISSING = "—"


def median_seconds(fn, repeats=5):
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs, and the last result."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def peak_rss_mb():
    """Peak resident set size of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def score_residual_case(out, case, d, W, strategy, privacy):
    """The measured part of a ResidualPlanner(+) scalability case, added to ``out``:
    ``"sum"`` — the RMSE; ``"max"`` — the max variance; otherwise measure 10,000 random d-attribute
    records of the plan and reconstruct every workload answer (wall and CPU seconds of each;
    value = the number of answers; the answers are streamed, each batch dropped once counted,
    so the peak holds the measurements but not all answers at once). Records ``peak_mb``;
    returns ``out``."""
    import numpy as np

    from mmtoolkit import evaluate
    from mmtoolkit.selectors.residual_planner.measurements import iter_reconstruct, measure

    if case == "sum":
        out["value"] = evaluate.rmse(W, strategy, privacy)
    elif case == "max":
        out["value"] = evaluate.max_variance(W, strategy, privacy)
    else:
        plan = strategy.metadata["plan"]
        records = np.random.default_rng(0).integers(0, 10, size=(10_000, d))
        start, cpu = time.perf_counter(), time.process_time()
        m = measure(plan, records, privacy, np.random.default_rng(1))
        out["measure_s"] = time.perf_counter() - start
        out["measure_cpu_s"] = time.process_time() - cpu
        start, cpu = time.perf_counter(), time.process_time()
        count = sum(a.size for _, a in iter_reconstruct(m, plan.workload.sets))
        out["recon_s"] = time.perf_counter() - start
        out["recon_cpu_s"] = time.process_time() - cpu
        out["value"] = float(count)
    out["peak_mb"] = peak_rss_mb()
    return out


def child_cases(script, run_case, cases, description=None):
    """Run each ``(case, d)`` of a benchmark in its own child process (fresh memory, so the
    peak RSS is the case's own).

    Call from ``main()``. In a child (``--case C --d D``) prints ``run_case(C, D)`` as JSON and
    returns ``(args, None)``; in the parent (no ``--d``: every case, or only ``--case C``'s
    default sizes, those up to ``--max-d`` if given) returns ``(args, results)`` where
    ``results`` yields ``(case, d, record)`` — ``record`` the child's JSON dict, or a string
    with the last line of its stderr when it failed. ``args.write`` asks the script to write
    its results, ``args.json`` its JSON record (:func:`add_json_option`).
    """
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", choices=sorted({c for c, _ in cases}))
    parser.add_argument("--d", type=int)
    parser.add_argument("--max-d", type=int, help="only the default sizes with d <= MAX_D")
    parser.add_argument("--write", action="store_true")
    args = add_json_option(parser).parse_args()
    if args.case and args.d is not None:
        print(json.dumps(run_case(args.case, args.d)))
        return args, None
    if args.d is not None:
        parser.error("--d needs --case")
    cases = [
        (c, d)
        for c, d in cases
        if args.case in (None, c) and (args.max_d is None or d <= args.max_d)
    ]
    here = Path(script).resolve().parent

    def results():
        for case, d in cases:
            proc = subprocess.run(
                [sys.executable, str(Path(script).resolve()), "--case", case, "--d", str(d)],
                capture_output=True,
                text=True,
                cwd=here,
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parent), *sys.path])},
            )
            if proc.returncode:
                yield case, d, proc.stderr.strip().splitlines()[-1]
            else:
                yield case, d, json.loads(proc.stdout.strip().splitlines()[-1])

    return args, results()


def format_cell(value, spec="", missing=MISSING):
    """One table cell as text: ``None`` (not measured) as ``missing``, a string as it is, a
    number by the format ``spec`` (e.g. ``".3f"``, ``","``)."""
    if value is None:
        return missing
    if isinstance(value, str):
        return value
    return format(value, spec)


def markdown_rows(columns, rows, formats=None, missing=MISSING):
    """The lines of a Markdown table: header, alignment (numbers right-aligned), rows."""
    formats = formats or [""] * len(columns)
    numeric = [
        all(r[i] is None or not isinstance(r[i], str) for r in rows) and bool(rows)
        for i in range(len(columns))
    ]
    lines = ["| " + " | ".join(columns) + " |"]
    lines.append("|" + "".join("---:|" if n else "---|" for n in numeric))
    for r in rows:
        cells = (format_cell(v, f, missing) for v, f in zip(r, formats))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


class Table:
    """A table of measurements: ``columns`` (header texts), ``formats`` (one format spec per
    column for numbers, ``""`` for text), rows of numbers, strings or ``None`` (not
    measured). :meth:`add` prints each row as it is measured."""

    def __init__(self, title, columns, formats=None, note=None, echo=True):
        self.title, self.columns, self.note = title, list(columns), note
        self.formats = list(formats) if formats is not None else [""] * len(self.columns)
        if len(self.formats) != len(self.columns):
            raise ValueError(f"table {title!r}: {len(self.formats)} formats for "
                             f"{len(self.columns)} columns")  # fmt: skip
        self.rows, self.echo = [], echo
        if echo:
            print(f"\n{title}\n" + "\n".join(markdown_rows(self.columns, [])), flush=True)

    def add(self, *cells):
        """Append one row (and print it); returns the row."""
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.title!r}: a row of {len(cells)} cells for "
                             f"{len(self.columns)} columns")  # fmt: skip
        row = [_plain(c) for c in cells]
        self.rows.append(row)
        if self.echo:
            print(markdown_rows(self.columns, [row], self.formats)[-1], flush=True)
        return row

    def markdown(self, missing=MISSING):
        """The table as Markdown lines."""
        return markdown_rows(self.columns, self.rows, self.formats, missing)

    def to_json(self):
        """The table as a JSON-ready dict."""
        return {"title": self.title, "columns": self.columns, "formats": self.formats,
                "rows": self.rows, "note": self.note}  # fmt: skip


def _plain(value):
    """A cell as a JSON value: numpy scalars become Python numbers."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if hasattr(value, "item"):  # a numpy scalar
        return value.item()
    raise TypeError(f"table cell of type {type(value).__name__}: expected a number or text")


def add_json_option(parser):
    """``--json [FILE]``: write the run's record (default ``benchmarks/results/<script>.json``)."""
    parser.add_argument(
        "--json",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="also write the measurements as JSON (default FILE: benchmarks/results/"
        "<script>.json), for benchmarks/render.py",
    )
    return parser


def machine():
    """The machine a run is on: CPU model, logical cores (and those this process may use),
    memory in GB, operating system and Python."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = re.findall(r"^model name\s*:\s*(.+)$", f.read(), re.M)
        cpu = names[0].strip() if names else cpu
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": usable,
            "memory_gb": round(memory, 1), "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}  # fmt: skip


def package(root=None):
    """The measured package: its version (read from ``mmtoolkit/__init__.py``) and the git
    commit of its checkout, ``dirty`` when the package or the benchmark scripts (tracked files
    under ``mmtoolkit/`` and ``benchmarks/``, not the results or the page) differ from it.
    ``root``: the checkout (default: where ``import mmtoolkit`` finds it)."""
    if root is None:
        spec = importlib.util.find_spec("mmtoolkit")
        root = Path(spec.origin).resolve().parents[1]
    root = Path(root)
    init = (root / "mmtoolkit" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r"^__version__\s*=\s*[\"']([^\"']+)", init, re.M)

    def git(*args):
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "mmtoolkit", "benchmarks",
                ":(exclude)benchmarks/results", ":(exclude)benchmarks/README.md")  # fmt: skip
    return {"version": found.group(1) if found else None, "commit": commit,
            "dirty": bool(dirty) if commit else None}  # fmt: skip


def command_line(script, argv):
    """The command as typed from the repository's root: the environment variables of
    :data:`ENV_VARS` that are set, then ``python benchmarks/<script> <argv>``."""
    env = [f"{k}={shlex.quote(os.environ[k])}" for k in ENV_VARS if k in os.environ]
    return " ".join([*env, "python", f"benchmarks/{Path(script).name}", *map(shlex.quote, argv)])


def _load():
    """The 1-, 5- and 15-minute load averages, to two decimals."""
    return [round(v, 2) for v in os.getloadavg()]


def _utc_now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


class Run:
    """One run of a benchmark script: when, where and how it was started, and its tables.

    ``Run(__file__)`` at the start of ``main()`` notes the time, the load average and the
    command line; :meth:`table` makes a :class:`Table` that goes into the record;
    :meth:`write` adds the end time and load and writes the JSON."""

    def __init__(self, script, argv=None, root=None):
        self.script = Path(script).name
        self.command = command_line(script, sys.argv[1:] if argv is None else argv)
        self.package = package(root)  # the code that runs, as it is at the start
        self.started = _utc_now()
        self.load_start = _load()
        self.tables = []

    def table(self, title, columns, formats=None, note=None):
        """A new :class:`Table` of this run (printed as measured)."""
        t = Table(title, columns, formats, note)
        self.tables.append(t)
        return t

    def record(self, **extra):
        """The run as a JSON-ready dict (``extra``: more fields, e.g. raw measurements)."""
        return {
            "script": self.script,
            "command": self.command,
            "started": self.started.isoformat().replace("+00:00", "Z"),
            "finished": _utc_now().isoformat().replace("+00:00", "Z"),
            "load_average": {"start": self.load_start, "end": _load()},
            "machine": machine(),
            "package": self.package,
            "tables": [t.to_json() for t in self.tables],
            **extra,
        }

    def write(self, path, **extra):
        """Write :meth:`record` as strict JSON to ``path`` (``""``: the default location;
        ``None``: nothing). A non-finite number anywhere is refused (``ValueError`` naming
        where it is): a value not measured is ``None``. Returns the path written."""
        if path is None:
            return None
        from mmtoolkit.atomic import write_atomic

        path = Path(path) if path else RESULTS / f"{Path(self.script).stem}.json"
        data = self.record(**extra)
        _check_finite(data, Path(self.script).stem)
        write_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {path}", file=sys.stderr)
        return path


def _check_finite(value, where):
    """Raise ``ValueError`` naming the place of the first NaN or infinity in ``value``."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value} is not a finite number (use None for not measured)")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite(v, f"{where}[{i}]")
