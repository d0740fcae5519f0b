"""Records → data: read a records CSV (or a DataFrame) against a domain file.

A *domain file* is JSON mapping each attribute name to its size, in data-vector order (the
format of ``adult-domain.json``)::

    {"age": 85, "workclass": 9, ...}

An entry may also be an object ``{"size": n, "numeric": true, "bins": [b_0, ..., b_n]}``:
``numeric`` marks an ordered attribute (ranges and prefixes make sense on it) and ``bins``
declares a binning of raw numeric values — value ``v`` goes to bin ``j`` when
``b_j ≤ v < b_{j+1}`` (``n + 1`` increasing edges for ``n`` bins); values outside
``[b_0, b_n)`` are rejected. Without ``bins`` the column holds integer codes ``0 … n − 1``.

:func:`read_csv` checks everything before returning and names the problem: a column of the
domain missing from the CSV, a CSV column the domain does not declare, a row with the wrong
number of fields, an empty or non-numeric value, a value outside its attribute's size (line
numbers count the header as line 1). The result, :class:`Records`, holds the integer codes
(one row per record) and gives the data in the form a strategy needs: the dense histogram
``x`` (:meth:`Records.vector`, refused when the domain is too large) or marginal tables
straight from the records (:meth:`Records.marginal`, what HDMM's marginals strategies and
ResidualPlanner use, never an ``N``-cell vector). :func:`synthetic` generates a small seeded
dataset (for demos and the CLI's default).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .checks import check_float, check_int
from .domain import Domain
from .linalg import check_dense_size

__all__ = [
    "RecordsError",
    "Records",
    "parse_domain",
    "read_domain",
    "read_csv",
    "from_frame",
    "from_codes",
    "synthetic",
]

_NUM_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


class RecordsError(ValueError):
    """Bad records or domain input; the message names the file, line and column."""


# ============================================================================ domain files
def parse_domain(spec: Mapping, source: str = "domain") -> tuple[Domain, dict]:
    """``(Domain, bins)`` from a parsed domain file (see the module docstring).

    ``bins`` maps attribute names to their edge arrays (only binned attributes appear).
    """
    if not isinstance(spec, Mapping) or not spec:
        raise RecordsError(
            f"{source}: a domain must be a non-empty JSON object {{attribute: size}}, "
            f"got {type(spec).__name__}"
        )
    names, sizes, numeric, bins = [], [], [], {}
    for name, entry in spec.items():
        if not isinstance(name, str) or not name:
            raise RecordsError(f"{source}: attribute names must be non-empty strings")
        num = False
        if isinstance(entry, Mapping):
            unknown = sorted(set(entry) - {"size", "numeric", "bins"})
            if unknown:
                raise RecordsError(
                    f"{source}: attribute {name!r} has unknown field(s) {unknown} "
                    "(allowed: size, numeric, bins)"
                )
            edges = entry.get("bins")
            size = entry.get("size")
            if edges is not None:
                if not isinstance(edges, list) or len(edges) < 2:
                    raise RecordsError(
                        f"{source}: bins of attribute {name!r} must be a list of at least 2 "
                        "increasing edges"
                    )
                try:
                    for e in edges:
                        check_float(e, f"{source}: bins of attribute {name!r}", finite=True)
                except ValueError as exc:
                    raise RecordsError(str(exc)) from None
                arr = np.asarray(edges, dtype=float)
                if np.any(np.diff(arr) <= 0):
                    raise RecordsError(
                        f"{source}: bins of attribute {name!r} must be strictly increasing"
                    )
                if size is None:
                    size = len(edges) - 1
                elif size != len(edges) - 1:
                    raise RecordsError(
                        f"{source}: attribute {name!r} has size {size!r} but {len(edges)} bin "
                        f"edges ({len(edges) - 1} bins)"
                    )
                bins[name] = arr
                num = True
            num = bool(entry.get("numeric", num))
        else:
            size = entry
        try:
            size = check_int(size, f"{source}: size of attribute {name!r}", minimum=1)
        except ValueError as exc:
            raise RecordsError(str(exc)) from None
        names.append(name)
        sizes.append(size)
        numeric.append(num)
    return Domain(names, sizes, numeric), bins


def read_domain(path) -> tuple[Domain, dict]:
    """``(Domain, bins)`` from a JSON domain file (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise RecordsError(f"cannot read the domain file {path}: {exc.strerror}") from None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordsError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    return parse_domain(spec, str(path))


# ============================================================================ records
@dataclass(frozen=True)
class Records:
    """Integer-coded records over a :class:`Domain` (``codes[r, i]`` ∈ ``0 … n_i − 1``)."""

    domain: Domain
    codes: np.ndarray

    def __post_init__(self):
        d = len(self.domain)
        c = self.codes
        if not isinstance(c, np.ndarray) or c.ndim != 2 or c.shape[1] != d:
            raise RecordsError(f"codes must be an int array of shape (records, {d})")
        if not np.issubdtype(c.dtype, np.integer):
            raise RecordsError(f"codes must be integers, got dtype {c.dtype}")

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def vector(self) -> np.ndarray:
        """The C-order histogram ``x`` (length ``domain.size``; refused for large domains)."""
        return self.domain.vectorize(self.codes)

    def marginal(self, attrs) -> np.ndarray:
        """The contingency table ``Q_A x`` on ``attrs`` (names or indices), computed from the
        records (shape ``(n_i for i in A)``, attributes in domain order; ``()`` = count)."""
        idx = self.domain.indices(attrs)
        shape = tuple(self.domain.sizes[i] for i in idx)
        cells = math.prod(shape)
        check_dense_size(cells, 1, "a marginal table")
        if not idx:
            return np.array(len(self), dtype=np.int64)
        flat = np.ravel_multi_index(tuple(self.codes[:, i] for i in idx), shape)
        return np.bincount(flat, minlength=cells).astype(np.int64).reshape(shape)

    def marginal_fn(self):
        """``attrs (tuple of indices) -> marginal table``, for ``residual.MarginalSource``."""
        return lambda attrs: self.marginal(tuple(attrs))

    def __repr__(self):
        return f"Records({len(self)} records over {self.domain!r})"


def _check_columns(header, domain: Domain, source: str) -> list[int]:
    seen = {}
    for j, col in enumerate(header):
        if col in seen:
            raise RecordsError(f"{source}: column {col!r} appears twice in the header")
        seen[col] = j
    missing = [n for n in domain.names if n not in seen]
    if missing:
        raise RecordsError(
            f"{source}: column(s) {', '.join(map(repr, missing))} of the domain are missing "
            f"from the data (data columns: {', '.join(map(repr, header))})"
        )
    extra = [c for c in header if c not in domain]
    if extra:
        raise RecordsError(
            f"{source}: the domain does not declare column(s) {', '.join(map(repr, extra))} "
            "of the data; add them to the domain file or drop them from the data"
        )
    return [seen[n] for n in domain.names]


def _encode_column(values: np.ndarray, name: str, size: int, edges, where) -> np.ndarray:
    """Integer codes of one column of strings; ``where(r)`` names record ``r``'s location."""
    vals = np.char.strip(values.astype(str))
    if edges is None:  # optional sign, then digits (vectorised; the regex is its reference)
        digits = np.char.lstrip(vals, "+-")
        ok = np.char.isdigit(digits) & (np.char.str_len(vals) - np.char.str_len(digits) <= 1)
    else:
        ok = np.fromiter((bool(_NUM_RE.match(v)) for v in vals), bool, len(vals))
    if not ok.all():
        r = int(np.argmin(ok))
        v = str(vals[r])
        what = "an empty value" if v == "" else f"a non-numeric value {v!r}"
        if edges is None and v and _NUM_RE.match(v):
            what = f"a non-integer value {v!r} (declare bins for raw numeric values)"
        raise RecordsError(f"{where(r)}, column {name!r}: {what}")
    if edges is None:
        huge = np.char.str_len(np.char.lstrip(vals, "+-0")) > 18  # beyond int64
        if huge.any():
            r = int(np.argmax(huge))
            raise RecordsError(
                f"{where(r)}, column {name!r}: value {str(vals[r])} is outside the attribute's "
                f"domain 0..{size - 1} (size {size})"
            )
        codes = vals.astype(np.int64) if len(vals) else np.zeros(0, np.int64)
        bad = (codes < 0) | (codes >= size)
        if bad.any():
            r = int(np.argmax(bad))
            raise RecordsError(
                f"{where(r)}, column {name!r}: value {int(codes[r])} is outside the attribute's "
                f"domain 0..{size - 1} (size {size})"
            )
        return codes
    x = vals.astype(float)
    bad = (x < edges[0]) | (x >= edges[-1])
    if bad.any():
        r = int(np.argmax(bad))
        raise RecordsError(
            f"{where(r)}, column {name!r}: value {str(vals[r])} is outside the bins "
            f"[{edges[0]:g}, {edges[-1]:g})"
        )
    return (np.searchsorted(edges, x, side="right") - 1).astype(np.int64)


def _encode(table: np.ndarray, domain: Domain, bins: dict, where) -> np.ndarray:
    bins = bins or {}
    unknown = sorted(set(bins) - set(domain.names))
    if unknown:
        raise RecordsError(f"bins given for unknown attribute(s) {unknown}")
    cols = [
        _encode_column(table[:, j], name, n, bins.get(name), where)
        for j, (name, n) in enumerate(zip(domain.names, domain.sizes, strict=True))
    ]
    return np.stack(cols, axis=1) if cols else np.zeros((table.shape[0], 0), np.int64)


def read_csv(path, domain, bins: dict | None = None) -> Records:
    """Read a records CSV (header row of attribute names) against ``domain`` (a
    :class:`Domain`, a domain-file path, or a mapping); every check of the module docstring
    is made before anything is returned (:class:`RecordsError` names line and column)."""
    domain, bins = _domain_and_bins(domain, bins)
    path = Path(path)
    try:
        fh = open(path, newline="")
    except OSError as exc:
        raise RecordsError(f"cannot read the data file {path}: {exc.strerror}") from None
    with fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise RecordsError(f"{path}: the file is empty (expected a header row)") from None
        header = [h.strip() for h in header]
        order = _check_columns(header, domain, str(path))
        rows, lines = [], []
        for row in reader:
            if not row:  # blank line
                continue
            if len(row) != len(header):
                raise RecordsError(
                    f"{path}, line {reader.line_num}: {len(row)} fields, the header has "
                    f"{len(header)}"
                )
            rows.append(row)
            lines.append(reader.line_num)
    table = np.array(rows, dtype=str).reshape(len(rows), len(header))[:, order]
    codes = _encode(table, domain, bins, lambda r: f"{path}, line {lines[r]}")
    return Records(domain, codes)


def from_frame(frame, domain, bins: dict | None = None) -> Records:
    """Records from a pandas-like DataFrame (``.columns`` and ``frame[col]``); the same checks
    as :func:`read_csv`, naming the row label."""
    domain, bins = _domain_and_bins(domain, bins)
    if not hasattr(frame, "columns"):
        raise RecordsError(f"expected a DataFrame (with .columns), got {type(frame).__name__}")
    header = [str(c) for c in frame.columns]
    _check_columns(header, domain, "DataFrame")
    cols = [np.asarray(frame[n]) for n in domain.names]
    n = len(cols[0]) if cols else 0
    index = list(getattr(frame, "index", range(n)))
    table = np.stack([c.astype(str) for c in cols], axis=1) if cols else np.zeros((n, 0), dtype=str)
    # integer-valued floats from a DataFrame ("3.0") are codes too
    for j, c in enumerate(cols):
        if np.issubdtype(c.dtype, np.floating) and bins.get(domain.names[j]) is None:
            finite = np.isfinite(c)
            whole = finite & (c == np.round(c))
            table[whole, j] = c[whole].astype(np.int64).astype(str)
            table[~finite, j] = ""
    return Records(domain, _encode(table, domain, bins, lambda r: f"DataFrame, row {index[r]!r}"))


def from_codes(codes, domain) -> Records:
    """Records from an int array of codes (one column per attribute, in domain order)."""
    domain, _ = _domain_and_bins(domain, None)
    c = np.asarray(codes)
    if c.ndim != 2 or c.shape[1] != len(domain):
        raise RecordsError(
            f"codes must have shape (records, {len(domain)}) for this domain, got {c.shape}"
        )
    if c.size and not np.issubdtype(c.dtype, np.integer):
        raise RecordsError(f"codes must be integers, got dtype {c.dtype}")
    c = c.astype(np.int64)
    for i, (name, n) in enumerate(zip(domain.names, domain.sizes, strict=True)):
        bad = (c[:, i] < 0) | (c[:, i] >= n)
        if bad.any():
            r = int(np.argmax(bad))
            raise RecordsError(
                f"record {r}, column {name!r}: value {c[r, i]} is outside the attribute's "
                f"domain 0..{n - 1} (size {n})"
            )
    return Records(domain, c)


def synthetic(domain, records: int = 1000, seed: int = 0) -> Records:
    """A seeded synthetic dataset: each record draws attribute 0 uniformly and every later
    attribute from a random conditional distribution given the previous one (a Markov
    chain with Dirichlet(1/2) rows), so that marginals are non-uniform and correlated."""
    domain, _ = _domain_and_bins(domain, None)
    records = check_int(records, "records", minimum=0)
    seed = check_int(seed, "seed")
    rng = np.random.default_rng(seed)
    sizes = domain.sizes
    codes = np.zeros((records, len(sizes)), dtype=np.int64)
    codes[:, 0] = rng.integers(0, sizes[0], records)
    for i in range(1, len(sizes)):
        P = rng.dirichlet(np.full(sizes[i], 0.5), size=sizes[i - 1])
        cdf = np.cumsum(P, axis=1)
        u = rng.random(records)
        prev = cdf[codes[:, i - 1]]
        codes[:, i] = np.minimum((u[:, None] >= prev).sum(axis=1), sizes[i] - 1)
    return Records(domain, codes)


def _domain_and_bins(domain, bins) -> tuple[Domain, dict]:
    if isinstance(domain, Domain):
        return domain, dict(bins or {})
    if isinstance(domain, (str, Path)):
        dom, file_bins = read_domain(domain)
    elif isinstance(domain, Mapping):
        dom, file_bins = parse_domain(domain)
    else:
        raise RecordsError(
            f"domain must be a Domain, a domain-file path or a mapping, got {type(domain).__name__}"
        )
    file_bins.update(bins or {})
    return dom, file_bins
