"""Jobs: one (row, column) cell of a config = one self-contained, picklable :class:`JobSpec`.

A job computes one quantity of one strategy on one workload with the shared evaluator
(:mod:`mmtoolkit.evaluate`); a ratio cell ``sqrt(Err(column) / Err(R))`` is
``evaluate.error_ratio`` (HDMM §8) of two independent jobs. :func:`expand_jobs` makes the
jobs of a config, :func:`execute` runs one, :func:`cell_keys` gives the job keys
(:data:`KEY_VERSION`) the report checks, :func:`derive_seed` the per-cell seeds.

User guide: docs/guide/configs.md.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import evaluate, privacy
from ..jsonsafe import jsonable, stable_text
from ..workload_specs import DomainSpec, WorkloadSpec
from .specs import accepts_seed, resolve_selector

__all__ = [
    "JobSpec",
    "cell_keys",
    "derive_seed",
    "compact_json",
    "execute",
    "expand_jobs",
    "split_timings",
]

#: Version of the job-key scheme (bump when the meaning of a stored value changes).
KEY_VERSION = 1


@dataclass
class JobSpec:
    """Everything a worker needs to compute one job (picklable, no live objects)."""

    key: str
    workload: WorkloadSpec | None  # None: a job whose data is not a workload (compare_data)
    privacy_spec: dict
    quantity: str  # rmse | total_error | max_variance
    selector: str | None  # registry name or "module:Class"; None for the SVD bound
    params: dict = field(default_factory=dict)  # effective parameters (incl. derived seed)
    objective: str = "sum"
    svd_bound: bool = False
    timeout: float | None = None  # seconds
    memory: int | None = None  # bytes (RLIMIT_AS of the worker process)
    search_path: tuple[str, ...] = ()  # prepended to sys.path for "module:Class" selectors
    cells: list[tuple[str, str]] = field(default_factory=list)  # (row, column) it serves
    code: str = ""  # code_fingerprint() of the code that computes it

    @property
    def limited(self) -> bool:
        """Whether the job has a timeout or a memory limit."""
        return self.timeout is not None or self.memory is not None

    def describe(self) -> str:
        """The cells the job serves, ``row × column, ...``."""
        return ", ".join(f"{r} × {c}" for r, c in self.cells)


# ----------------------------------------------------------------------------- seeds
def derive_seed(seed: int, row: str, column: str) -> int:
    """Per-job seed from the config seed and the cell's row and column names
    (docs/guide/configs.md, "Seeds"): the first word of ``np.random.SeedSequence(seed,
    spawn_key=(crc32(row), crc32(column)))``, so it depends on the names, not on the order of
    the rows and columns.

    Parameters
    ----------
    seed : int
        The config's ``seed`` (a non-negative integer).
    row, column : str
        The cell's row and column names.

    Returns
    -------
    int
        A seed in ``[0, 2**32)``.
    """
    ss = np.random.SeedSequence(
        int(seed), spawn_key=(zlib.crc32(row.encode()), zlib.crc32(column.encode()))
    )
    return int(ss.generate_state(1, dtype=np.uint32)[0])


# ----------------------------------------------------------------------------- code
#: Package parts that do not determine a job's value (the runner's own value logic is
#: versioned by KEY_VERSION), left out of the fingerprint.
_NOT_VALUE_CODE = ("runner", "cli.py", "__main__.py")


def package_fingerprint() -> str:
    """SHA-256 of the package's ``.py`` sources that compute values (everything but the
    runner and the command line; read now: a few milliseconds)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        if rel.parts[0] in _NOT_VALUE_CODE:
            continue
        h.update(str(rel).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def code_fingerprint(selector: str | None = None, search_path=(), package: str | None = None):
    """SHA-256 of the package's value-computing sources (and of a ``module:Class``
    selector's module).

    Stored with every job record: a record is reused only by the same code, so editing a
    selector (or the evaluator) recomputes instead of silently keeping old numbers.
    ``package`` is a precomputed :func:`package_fingerprint`.
    """
    package = package or package_fingerprint()
    if selector is None or ":" not in selector:
        return package
    h = hashlib.sha256(package.encode())
    try:
        source = inspect.getsourcefile(resolve_selector(selector, search_path))
        if source is not None:
            h.update(Path(source).read_bytes())
    except (TypeError, OSError):
        pass
    return h.hexdigest()


# ----------------------------------------------------------------------------- keys
#: A metadata key is a timing when one of its ``_``-separated words is one of these.
_TIMING_WORDS = frozenset({"seconds", "time"})


def _is_timing(key: str) -> bool:
    return not _TIMING_WORDS.isdisjoint(re.split(r"[_\W]+", key.lower()))


def split_timings(metadata: dict, _path: str = "") -> tuple[dict, dict]:
    """``(kept, timings)``: a strategy's metadata without its timing entries (at any depth,
    :data:`_TIMING_WORDS`), and those timings by dotted path, for the committed CSV and the
    sidecar. Strings in ``kept`` lose any memory address (:func:`stable_text`: records
    stored by older versions may hold one)."""
    kept: dict = {}
    timings: dict = {}
    for key, value in metadata.items():
        where = f"{_path}{key}"
        if _is_timing(str(key)):
            timings[where] = value
        elif isinstance(value, dict):
            kept[key], inner = split_timings(value, f"{where}.")
            timings.update(inner)
        else:
            kept[key] = _stable(value)
    return kept, timings


def _stable(value):
    if isinstance(value, str):
        return stable_text(value)
    if isinstance(value, list):
        return [_stable(v) for v in value]
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items()}
    return value


def compact_json(data: dict) -> str:
    """``data`` as one line of JSON with sorted keys (results files), or ``""`` if empty."""
    return json.dumps(data, sort_keys=True, separators=(",", ":")) if data else ""


def spec_data(value):
    """Canonical plain data of a workload/domain spec (explicit matrices by content hash)."""
    if isinstance(value, WorkloadSpec) and value.kind == "matrix":
        arr = np.ascontiguousarray(value.build().dense(), dtype=float)
        return {
            "kind": "matrix",
            "shape": list(arr.shape),
            "sha256": hashlib.sha256(arr.tobytes()).hexdigest(),
        }
    if isinstance(value, WorkloadSpec):
        return {"kind": value.kind, **{k: spec_data(v) for k, v in value.args.items()}}
    if isinstance(value, DomainSpec):
        return {
            "preset": value.preset,
            "params": spec_data(value.params),
            "sizes": value.sizes,
            "names": value.names,
            "numeric": jsonable(value.numeric),
        }
    if isinstance(value, dict):
        return {str(k): spec_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [spec_data(v) for v in value]
    return jsonable(value)


def _key(data: dict) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def quantity_of(metric) -> str:
    """The quantity each job computes for a config metric (docs/guide/configs.md)."""
    return "total_error" if metric.kind == "ratio" else metric.kind


def _cell_job(config, row, col, wdata, quantity: str) -> tuple[str, dict, str]:
    """(job key, effective parameters, objective) of one cell (guide: "Job keys")."""
    objective = col.objective or "sum"
    params: dict = {} if col.svd_bound else dict(col.params)
    if not col.svd_bound and config.seed is not None and "seed" not in params:
        if accepts_seed(col.selector_class(config.search_path)):
            params["seed"] = derive_seed(config.seed, row.name, col.name)
    strategy = (
        {"svd_bound": True}
        if col.svd_bound
        else {"selector": col.selector, "params": jsonable(params), "objective": objective}
    )
    data = {
        "v": KEY_VERSION,
        "workload": wdata,
        "privacy": jsonable(config.privacy_spec),
        "quantity": quantity,
        "strategy": strategy,
    }
    return _key(data), params, objective


def cell_keys(config) -> dict[tuple[str, str], str]:
    """The job key of every (row, column) cell of ``config``, without building any job: the
    key the runner writes beside each cell and the scoreboard checks (:mod:`.report`)."""
    quantity = quantity_of(config.metric)
    return {
        (row.name, col.name): _cell_job(config, row, col, spec_data(row.workload), quantity)[0]
        for row in config.rows
        for col in config.columns
    }


def expand_jobs(config) -> tuple[list[JobSpec], dict[tuple[str, str], str]]:
    """The unique jobs of ``config`` and the map (row, column) -> job key.

    Cells whose jobs are identical (same workload, selector, parameters, seed, ...) share
    one job, computed once under the loosest of their limits.
    """
    quantity = quantity_of(config.metric)
    package = package_fingerprint()
    search_path = tuple(config.search_path)
    jobs: dict[str, JobSpec] = {}
    keys: dict[tuple[str, str], str] = {}
    for row in config.rows:
        wdata = spec_data(row.workload)
        for col in config.columns:
            timeout = config.timeout if col.timeout is None else col.timeout
            memory = config.memory if col.memory is None else col.memory
            key, params, objective = _cell_job(config, row, col, wdata, quantity)
            keys[(row.name, col.name)] = key
            if key in jobs:
                spec = jobs[key]
                # the loosest limits of the cells sharing the job apply (the value is
                # the same for all of them; None = no limit)
                spec.timeout = _loosest(spec.timeout, timeout)
                spec.memory = _loosest(spec.memory, memory)
                spec.cells.append((row.name, col.name))
                continue
            jobs[key] = JobSpec(
                key=key,
                workload=row.workload,
                privacy_spec=dict(config.privacy_spec),
                quantity=quantity,
                selector=None if col.svd_bound else col.selector,
                params=params,
                objective=objective,
                svd_bound=col.svd_bound,
                timeout=timeout,
                memory=memory,
                search_path=search_path,
                cells=[(row.name, col.name)],
                code=code_fingerprint(
                    None if col.svd_bound else col.selector, search_path, package
                ),
            )
    return list(jobs.values()), keys


def _loosest(a, b):
    return None if a is None or b is None else max(a, b)


# ----------------------------------------------------------------------------- execution
def describe_error(exc: BaseException) -> str:
    """``Type: message`` of an exception, on one line."""
    text = str(exc).strip() or repr(exc)
    return f"{type(exc).__name__}: {' '.join(text.split())}"


class _Stage(Exception):
    """An error tagged with the stage it happened in (workload build / selection)."""

    def __init__(self, prefix: str, exc: BaseException):
        super().__init__(f"{prefix}{describe_error(exc)}")


#: The evaluator function of each quantity, for a strategy and for the SVD bound.
_QUANTITIES = {
    "rmse": evaluate.rmse,
    "total_error": evaluate.expected_error,
    "max_variance": evaluate.max_variance,
}
_BOUNDS = {"rmse": evaluate.svd_bound_rmse, "total_error": evaluate.svd_bound_error}


def _compute(spec: JobSpec) -> tuple[float, float, dict]:
    priv = privacy.from_spec(dict(spec.privacy_spec))
    try:
        if spec.workload is None:
            raise ValueError("the job has no workload")
        W = spec.workload.build()
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - recorded in the cell
        raise _Stage("building the workload: ", exc) from None
    if spec.svd_bound:
        if spec.quantity not in _BOUNDS:
            raise ValueError(f"the SVD bound has no {spec.quantity}")
        start = time.perf_counter()
        v = _BOUNDS[spec.quantity](W, priv)
        return float(v), time.perf_counter() - start, {}
    try:
        if spec.selector is None:
            raise ValueError("the job names no selector and is not the SVD bound")
        cls = resolve_selector(spec.selector, spec.search_path)
        sel = cls(**spec.params)
        start = time.perf_counter()
        strategy = sel.select(W, priv, spec.objective)
        seconds = time.perf_counter() - start
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - recorded in the cell
        raise _Stage("selection: ", exc) from None
    meta = jsonable(dict(getattr(strategy, "metadata", {}) or {}))
    if spec.quantity not in _QUANTITIES:
        raise ValueError(f"unknown quantity {spec.quantity!r}")
    return float(_QUANTITIES[spec.quantity](W, strategy, priv)), seconds, meta


def job_record(spec: JobSpec, status: str = "ok", error: str | None = None, wall=0.0) -> dict:
    """The record of a job without a value: its ``seconds`` and ``wall`` are ``wall``."""
    return {
        "key": spec.key,
        "status": status,
        "value": None,
        "seconds": float(wall),
        "wall": float(wall),
        "error": error,
        "metadata": {},
        "selector": spec.selector,
        "params": jsonable(spec.params),
        "limits": {"timeout": spec.timeout, "memory": spec.memory},
        "code": spec.code,
    }


def execute(spec: JobSpec) -> dict:
    """Run one job in this process; returns its record (never raises for a job failure;
    the fields: :func:`job_record`, docs/guide/configs.md, "The job store")."""
    start = time.perf_counter()
    rec = job_record(spec)
    try:
        value, seconds, meta = _compute(spec)
        rec.update(value=value, seconds=seconds, metadata=meta)
    except MemoryError as exc:
        rec.update(status="out of memory", error=describe_error(exc))
    except _Stage as exc:
        rec.update(status="failed", error=str(exc))
    except Exception as exc:  # noqa: BLE001 - a failed job must not stop the run
        rec.update(status="failed", error=describe_error(exc))
    rec["wall"] = time.perf_counter() - start
    if rec["status"] != "ok":
        rec["seconds"] = rec["wall"]
    return rec
