"""Records → data: read a records CSV, a pandas DataFrame or an Arrow table against a domain.

:func:`read_domain` parses a domain file (sizes, categories or bins per attribute) into a
:class:`DomainSpec`; :func:`read_csv` and :func:`from_frame` read records against it, check
every value (a :class:`RecordsError` naming file, line and column, or the row) and return
:class:`Records` (integer codes; the histogram :meth:`Records.vector` or marginal tables
:meth:`Records.marginal`). :func:`draft_domain` drafts a domain from a sample for editing (a
domain read from the data is not private); :func:`synthetic` generates seeded demo data.

User guide: docs/guide/records.md.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import jsonsafe
from .checks import check_float, check_int
from .domain import Domain
from .linalg import check_dense_size
from .linalg.base import check_fits_memory

__all__ = ["RecordsError", "RecordsWarning", "DomainSpec", "Records", "bin_labels", "format_edge",
           "parse_domain", "read_domain", "read_csv", "from_frame", "from_codes", "draft_domain",
           "synthetic"]

_NUM_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$", re.ASCII)


class RecordsError(ValueError):
    """Bad records or domain input; the message names the file, line and column."""


class RecordsWarning(UserWarning):
    """Records that can be released but probably are not what was meant (e.g. none)."""


class DomainSpec(NamedTuple):
    """A parsed domain file: the :class:`Domain` (with value labels), the bin edges of the
    binned attributes (``{name: edges}``) and the declared "other" categories
    (``{name: label}``)."""

    domain: Domain
    bins: dict
    other: dict


# ============================================================================ domain files
def format_edge(e: float) -> str:
    """A bin edge as labels show it: ``20`` for a whole number, else ``%g``."""
    return str(int(e)) if float(e).is_integer() and abs(e) < 1e15 else f"{e:g}"


def bin_labels(edges) -> tuple[str, ...]:
    """The interval labels ``"[b_j, b_{j+1})"`` of the bins with the given edges."""
    return tuple(f"[{format_edge(a)}, {format_edge(b)})" for a, b in zip(edges[:-1], edges[1:]))


def _parse_bins(edges, name: str, source: str) -> np.ndarray:
    if not isinstance(edges, list) or len(edges) < 2:
        raise RecordsError(
            f"{source}: bins of attribute {name!r} must be a list of at least 2 increasing edges"
        )
    try:
        for e in edges:
            check_float(e, f"{source}: bins of attribute {name!r}", finite=True)
    except ValueError as exc:
        raise RecordsError(str(exc)) from None
    arr = np.asarray(edges, dtype=float)
    if np.any(np.diff(arr) <= 0):
        raise RecordsError(f"{source}: bins of attribute {name!r} must be strictly increasing")
    return arr


def _parse_values(values, name: str, source: str) -> tuple[str, ...]:
    if not isinstance(values, list) or not values:
        raise RecordsError(
            f"{source}: values of attribute {name!r} must be a non-empty list of categories"
        )
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise RecordsError(
                f"{source}: values of attribute {name!r} must be strings or integers, got {v!r}"
            )
    out = tuple(str(v).strip() for v in values)
    seen = set()
    for v in out:
        if v in seen:
            raise RecordsError(f"{source}: attribute {name!r} lists the value {v!r} twice")
        if v == "":
            raise RecordsError(f"{source}: attribute {name!r} lists an empty value")
        if "\x00" in v:  # numpy's fixed-width text (the whole-column lookup) drops it
            raise RecordsError(f"{source}: attribute {name!r} lists {v!r}, with a NUL character")
        seen.add(v)
    return out


def parse_domain(spec: object, source: str = "domain") -> DomainSpec:
    """A :class:`DomainSpec` from a parsed domain file (docs/guide/records.md; anything else
    is refused)."""
    if not isinstance(spec, Mapping) or not spec:
        raise RecordsError(
            f"{source}: a domain must be a non-empty JSON object {{attribute: size}}, "
            f"got {type(spec).__name__}"
        )
    attrs, bins, other = [], {}, {}  # attrs: (name, size, numeric, labels) per attribute
    for name, entry in spec.items():
        if not isinstance(name, str) or not name:
            raise RecordsError(f"{source}: attribute names must be non-empty strings")
        num, lab = False, None
        if isinstance(entry, Mapping):
            unknown = sorted(set(entry) - {"size", "numeric", "bins", "values", "other"})
            if unknown:
                raise RecordsError(
                    f"{source}: attribute {name!r} has unknown field(s) {unknown} "
                    "(allowed: size, numeric, bins, values, other)"
                )
            if "bins" in entry and "values" in entry:
                raise RecordsError(
                    f"{source}: attribute {name!r} declares both bins and values; give one"
                )
            size = entry.get("size")
            declared = None
            if "bins" in entry:
                edges = _parse_bins(entry["bins"], name, source)
                bins[name], lab, num, declared = edges, bin_labels(edges), True, "bin edges"
            elif "values" in entry:
                lab, declared = _parse_values(entry["values"], name, source), "values"
            if lab is not None:
                if size is not None and size != len(lab):
                    count = len(lab) + (1 if declared == "bin edges" else 0)
                    raise RecordsError(
                        f"{source}: attribute {name!r} has size {size!r} but {count} "
                        f"{declared} ({len(lab)} {'bins' if declared == 'bin edges' else 'values'})"
                    )
                size = len(lab)
            if "other" in entry:
                o = entry["other"]
                if ("values" not in entry or not isinstance(o, (str, int)) or lab is None
                        or str(o) not in lab):  # fmt: skip
                    raise RecordsError(
                        f"{source}: other of attribute {name!r} must be one of its declared "
                        f"values, got {o!r}"
                    )
                other[name] = str(o)
            if "numeric" in entry:
                if not isinstance(entry["numeric"], bool):
                    raise RecordsError(
                        f"{source}: numeric of attribute {name!r} must be true or false"
                    )
                num = entry["numeric"]
        else:
            size = entry
        try:
            size = check_int(size, f"{source}: size of attribute {name!r}", minimum=1)
        except ValueError as exc:
            raise RecordsError(str(exc)) from None
        attrs.append((name, size, num, lab))
    return DomainSpec(Domain(*zip(*attrs, strict=True)), bins, other)


def read_domain(path) -> DomainSpec:
    """A :class:`DomainSpec` from a JSON domain file (docs/guide/records.md)."""
    path = Path(path)
    text = _read_text(path, "the domain file")
    spec = jsonsafe.loads(text, str(path), RecordsError)  # strict: no key twice, no NaN
    return parse_domain(spec, str(path))


def _read_text(path: Path, what: str) -> str:
    """The UTF-8 text of ``what`` (a leading byte-order mark is dropped); a byte that is not
    UTF-8 is reported with its line and column."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RecordsError(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RecordsError(
            f"{path}, line {line}: byte 0x{raw[exc.start]:02x} (column {col}) is not UTF-8; "
            f"{what} must be UTF-8 text (e.g. re-save a Latin-1 file as UTF-8)"
        ) from None


# ============================================================================ records
@dataclass(frozen=True)
class Records:
    """Integer-coded records over a :class:`Domain` (``codes[r, i]`` ∈ ``0 … n_i − 1``), with
    the bin edges of binned attributes (``{name: edges}``) that label released tables."""

    domain: Domain
    codes: np.ndarray
    bins: dict = field(default_factory=dict)

    def __post_init__(self):
        d = len(self.domain)
        c = self.codes
        if not isinstance(c, np.ndarray) or c.ndim != 2 or c.shape[1] != d:
            raise RecordsError(f"codes must be an int array of shape (records, {d})")
        if not np.issubdtype(c.dtype, np.integer):
            raise RecordsError(f"codes must be integers, got dtype {c.dtype}")

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def vector(self, dtype=np.int64) -> np.ndarray:
        """The C-order histogram ``x`` (length ``domain.size``, int64 or float64; refused for
        large domains)."""
        return self.domain.vectorize(self.codes, dtype)

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


def _check_unique(header, source: str) -> dict:
    """``{column: position}`` of a header; a column named twice is refused."""
    seen = {}
    for j, col in enumerate(header):
        if col in seen:
            raise RecordsError(f"{source}: column {col!r} appears twice in the header")
        seen[col] = j
    return seen


def _check_columns(header, domain: Domain, source: str) -> list[int]:
    seen = _check_unique(header, source)
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


def _shown(values, limit: int = 8) -> str:
    shown = ", ".join(map(repr, values[:limit]))
    return shown + (f", ... ({len(values)} values)" if len(values) > limit else "")


def _number(text: str) -> Decimal | None:
    """The exact value of ``text`` if it is a number in ASCII decimal notation (``12``,
    ``-0.5``, ``1e3``; the rule of docs/guide/records.md), else None."""
    if not _NUM_RE.match(text):
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


_NUM_CHAR = np.zeros(128, bool)  # the characters of a number in ASCII decimal notation
_NUM_CHAR[[ord(c) for c in "0123456789+-.eE"]] = True


def _codepoints(vals: np.ndarray):
    """``(cp, length)``: the code points of a ``str`` array, one zero-padded row per value, and
    the values' lengths; None for an empty array."""
    a = np.ascontiguousarray(vals, dtype=str)
    if len(a) == 0 or a.dtype.itemsize == 0:
        return None
    return a.view(np.uint32).reshape(len(a), -1), np.char.str_len(a)


def _plain_integers(vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ok, value)``: which values of a ``str`` array are an optional sign and 1 to 18 ASCII
    digits, and their values (exact in int64; 0 elsewhere) — :func:`_number` of the most
    common numbers, a whole column at once."""
    n = len(vals)
    got = _codepoints(vals)
    if got is None:
        return np.zeros(n, bool), np.zeros(n, np.int64)
    cp, length = got
    signed = (cp[:, 0] == ord("+")) | (cp[:, 0] == ord("-"))
    ok = (length - signed >= 1) & (length - signed <= 18)
    value = np.zeros(n, np.int64)
    for k in range(min(cp.shape[1], 19)):  # Horner's rule over the digit positions
        digit = cp[:, k].astype(np.int64) - ord("0")
        here = (k < length) & ~(signed & (k == 0))
        ok &= ~here | ((digit >= 0) & (digit <= 9))
        value = np.where(here & ok, value * 10 + digit, value)
    value[~ok] = 0
    return ok, np.where(cp[:, 0] == ord("-"), -value, value)


def _fast_numbers(vals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_number` of a whole ``str`` array at once, as floats: ``(ok, x, maybe)`` —
    ``ok`` the ASCII decimal numbers with an exponent of at most 6 characters, ``x`` their
    correctly rounded values (NaN elsewhere), ``maybe`` the values made only of a number's
    characters; one in ``maybe`` but not ``ok`` (a longer exponent) is coded alone."""
    ok, value = _plain_integers(vals)
    x = np.where(ok, value, np.nan)
    got = _codepoints(vals)
    if got is None:
        return ok, x, ok.copy()
    cp, length = got
    inside = np.arange(cp.shape[1]) < length[:, None]
    maybe = (_NUM_CHAR[np.minimum(cp, 127)] | ~inside).all(axis=1) & (length > 0)
    is_e = ((cp == ord("e")) | (cp == ord("E"))) & inside
    n_e = is_e.sum(axis=1)
    after_e = length - np.argmax(is_e, axis=1) - 1  # the exponent's sign and digits
    other = maybe & ~ok & ((n_e == 0) | ((n_e == 1) & (after_e <= 6)))
    a = np.ascontiguousarray(vals, dtype=str)
    with np.errstate(over="ignore"):  # "6e314" is inf, as float() gives, without a warning
        try:
            x[other] = a[other].astype(float)
        except ValueError:  # a malformed one among them ("1-2", "1e"): check each, regex
            other[other] = [bool(_NUM_RE.match(v)) for v in a[other].tolist()]
            x[other] = a[other].astype(float)
    return ok | other, x, maybe


def _value_coder(labels, other):
    """``(code, fast)`` for an attribute declared with ``values``: ``code(text)`` is one
    value's code or the problem with it; ``fast(vals)`` codes a column at once where it can
    (exact text, and with an ``other`` values that are neither text nor number of a
    declared value), ``-1`` for the rest."""
    text = np.array(labels, dtype=str)
    order = np.argsort(text)
    ordered = text[order]

    @functools.cache
    def declared():  # built on first need: a column matched by text never needs it
        index = {v: j for j, v in enumerate(labels)}
        by_number: dict = {}
        for j, v in enumerate(labels):
            x = _number(v)
            if x is not None:
                by_number.setdefault(x, []).append(j)
        # equal numbers have equal floats: a float no declared number has is no declared number
        return index, by_number, np.array([float(x) for x in by_number], dtype=float)

    def code(v: str):
        index, by_number, _ = declared()
        if v in index:
            return index[v]
        x = _number(v)
        hits = by_number.get(x, []) if x is not None else []
        if len(hits) == 1:
            return hits[0]
        if hits:
            return (
                f"value {v!r} equals several declared values as a number "
                f"({_shown([labels[j] for j in hits])}); write it as one of them"
            )
        if other is not None:
            return index[other]
        return (
            f"value {v!r} is not one of the attribute's declared values ({_shown(labels)}); "
            'add it to the domain, or declare an "other" value to map unlisted values to'
        )

    def fast(vals: np.ndarray) -> np.ndarray:
        pos = np.minimum(np.searchsorted(ordered, vals), len(ordered) - 1)
        codes = np.where(ordered[pos] == vals, order[pos], -1)
        rest = np.flatnonzero(codes < 0)
        if other is not None and len(rest):  # unlisted: not text, not number of a declared value
            index, by_number, floats = declared()
            unlisted = vals[rest] != ""
            if by_number:
                ok, x, maybe = _fast_numbers(vals[rest])
                unlisted &= ~maybe | (ok & ~np.isin(x, floats))
            codes[rest[unlisted]] = index[other]
        return codes

    return code, fast


def _code_coder(size: int):
    """``(code, fast)`` for integer codes ``0 … size − 1``: ``code(text)`` takes any notation
    of a whole number (``2``, ``2.0``, ``+2``); ``fast(vals)`` codes the plain ASCII integers
    of a column at once (``-1`` for the rest)."""

    def code(v: str):
        x = _number(v)
        if x is None:
            return f"a non-numeric value {v!r}"
        if x != x.to_integral_value():
            return f"a non-integer value {v!r} (declare bins for raw numeric values)"
        if not 0 <= x < size:
            return f"value {v} is outside the attribute's domain 0..{size - 1} (size {size})"
        return int(x)

    def fast(vals: np.ndarray) -> np.ndarray:
        ok, value = _plain_integers(vals)
        return np.where(ok & (value >= 0) & (value < size), value, -1)

    return code, fast


def _bin_coder(edges: np.ndarray):
    """``(code, fast)`` for raw numbers in bins ``[b_j, b_{j+1})``: ``code(text)`` codes one
    value or names its problem, ``fast(vals)`` a whole column (``-1`` where it cannot)."""

    def bin_of(x):
        return np.searchsorted(edges, x, side="right") - 1

    def code(v: str):
        x = _number(v)
        if x is None:
            return f"a non-numeric value {v!r}"
        f = float(x)
        if not edges[0] <= f < edges[-1]:
            return f"value {v} is outside the bins [{edges[0]:g}, {edges[-1]:g})"
        return int(bin_of(f))

    def fast(vals: np.ndarray) -> np.ndarray:
        ok, x, _ = _fast_numbers(vals)
        ok &= (edges[0] <= x) & (x < edges[-1])  # NaN compares False
        return np.where(ok, bin_of(np.where(ok, x, edges[0])), -1).astype(np.int64)

    return code, fast


def _encode_column(vals: np.ndarray, name: str, coder, where) -> np.ndarray:
    """Codes of one column of stripped strings: ``coder = (code, fast)``, ``fast`` coding the
    column at once where it can (``-1`` elsewhere) and ``code`` each remaining distinct value
    once; the first record (in data order) with a problem is reported, ``where(r)`` naming
    its location."""
    code, fast = coder
    codes = fast(vals) if len(vals) else np.zeros(0, np.int64)
    rest = np.flatnonzero(codes < 0)
    if not len(rest):
        return codes
    uniq, inverse = np.unique(vals[rest], return_inverse=True)
    inverse = inverse.ravel()
    codes_u = np.zeros(len(uniq), np.int64)
    problems = {}
    for k, u in enumerate(uniq.tolist()):
        c = "an empty value" if u == "" else code(u)
        if isinstance(c, str):
            problems[k] = c
        else:
            codes_u[k] = c
    if problems:
        bad = np.zeros(len(uniq), bool)
        bad[list(problems)] = True
        first = int(np.argmax(bad[inverse]))
        raise RecordsError(
            f"{where(int(rest[first]))}, column {name!r}: {problems[int(inverse[first])]}"
        )
    codes[rest] = codes_u[inverse]
    return codes


def _encode(table: np.ndarray, spec: DomainSpec, where) -> np.ndarray:
    domain = spec.domain
    cols = []
    for j, name in enumerate(domain.names):
        vals = np.char.strip(table[:, j].astype(str)) if len(table) else np.zeros(0, dtype=str)
        if name in spec.bins:
            coder = _bin_coder(spec.bins[name])
        elif domain.labels[j] is not None:
            coder = _value_coder(domain.labels[j], spec.other.get(name))
        else:
            coder = _code_coder(domain.sizes[j])
        cols.append(_encode_column(vals, name, coder, where))
    return np.stack(cols, axis=1) if cols else np.zeros((table.shape[0], 0), np.int64)


def _read_rows(path: Path, check_header):
    """``(header, check_header(header), rows, lines)`` of a records CSV: the header's names
    stripped and checked before any record is read, then the records (blank lines skipped)
    with their line numbers; the file UTF-8 (a byte-order mark is dropped), every row as long
    as the header."""
    reader = csv.reader(io.StringIO(_read_text(path, "the data file"), newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise RecordsError(f"{path}: the file is empty (expected a header row)") from None
    checked = check_header(header)
    rows, lines = [], []
    for row in reader:
        if not row:  # blank line
            continue
        if len(row) != len(header):
            raise RecordsError(
                f"{path}, line {reader.line_num}: {len(row)} fields, the header has {len(header)}"
            )
        rows.append(row)
        lines.append(reader.line_num)
    return header, checked, rows, lines


def read_csv(path, domain, bins: dict | None = None, other: dict | None = None) -> Records:
    """Read a records CSV (UTF-8, a header of attribute names) against ``domain`` (a domain
    file, a parsed mapping, a DomainSpec or a Domain) with every check and the matching rule
    of docs/guide/records.md (:class:`RecordsError` names file, line and column; a header
    without records warns). ``bins`` adds bin edges; ``other`` ``{attribute: value}`` maps
    undeclared values to a declared one."""
    spec = _spec(domain, bins, other)
    path = Path(path)
    header, order, rows, lines = _read_rows(
        path, lambda names: _check_columns(names, spec.domain, str(path))
    )
    if not rows:
        warnings.warn(
            f"{path} has a header but no records: the release is of an empty dataset",
            RecordsWarning,
            stacklevel=2,
        )
    table = np.array(rows, dtype=str).reshape(len(rows), len(header))[:, order]
    codes = _encode(table, spec, lambda r: f"{path}, line {lines[r]}")
    return Records(spec.domain, codes, dict(spec.bins))


def _as_pandas(frame):
    """A pyarrow ``Table`` / ``RecordBatch`` as a pandas DataFrame (other frames unchanged)."""
    if type(frame).__module__.split(".")[0] == "pyarrow" and hasattr(frame, "to_pandas"):
        return frame.to_pandas()
    return frame


def _is_missing(v) -> bool:
    """A missing scalar: None, NaN (float or ``Decimal``), ``pd.NA`` or NaT (pandas' or
    numpy's ``datetime64`` / ``timedelta64``)."""
    if v is None:
        return True
    if isinstance(v, Decimal):
        return v.is_nan()
    pd = sys.modules.get("pandas")  # pd.NA can only come from a loaded pandas
    if pd is not None:
        r = pd.isna(v)
        return isinstance(r, (bool, np.bool_)) and bool(r)  # a list in a cell is a value
    try:
        return bool(v != v)  # NaN and NaT are the values unequal to themselves
    except (TypeError, ValueError):
        return False


def _column_text(col) -> np.ndarray:
    """The text of one frame column as the records' reader sees it (object array of ``str``):
    integers and strings as written, floats in their shortest form, a missing value
    (:func:`_is_missing`) as ``""``; a column without a dtype (a list) value by value, so a
    NaN in it is missing, not ``"nan"``."""
    c = np.asarray(col) if hasattr(col, "dtype") else np.asarray(list(col), dtype=object)
    if c.dtype.kind == "f":
        text = c.astype(str).astype(object)
        text[np.isnan(c)] = ""
    elif c.dtype.kind in "mM":
        text = c.astype(str).astype(object)
        text[np.isnat(c)] = ""
    elif c.dtype.kind == "O":
        c = c.ravel()
        missing = None
        pd = sys.modules.get("pandas")
        if pd is not None:
            try:
                missing = np.asarray(pd.isna(c), dtype=bool)  # one vectorised pass
            except ArithmeticError:  # a signalling Decimal('sNaN'): value by value
                pass
        if missing is None:
            missing = np.array([_is_missing(v) for v in c], dtype=bool)
        text = np.array([str(v) for v in c], dtype=object)
        text[missing] = ""
    else:
        text = c.astype(str).astype(object)
    return text.reshape(-1)


def _frame_columns(frame, source: str = "DataFrame") -> dict:
    """``{text: label}`` of a frame's columns, the text stripped as a CSV header's names are
    (the domain names columns by text; the frame is indexed by its own labels, e.g.
    integers); a column named twice is refused."""
    texts = [str(c).strip() for c in frame.columns]
    _check_unique(texts, source)
    return dict(zip(texts, frame.columns, strict=True))


def from_frame(frame, domain, bins: dict | None = None, other: dict | None = None) -> Records:
    """Records from a pandas DataFrame, a pyarrow ``Table`` or a frame-like object with
    ``.columns`` and ``frame[col]``: :func:`read_csv`'s checks, arguments and rule applied to
    each value's text (:func:`_column_text`), errors naming the row (docs/guide/records.md)."""
    spec = _spec(domain, bins, other)
    frame = _as_pandas(frame)
    if not hasattr(frame, "columns") or isinstance(frame, np.ndarray):
        raise RecordsError(
            f"expected a DataFrame (with .columns), got {type(frame).__name__}; integer codes "
            "in an array go through records.from_codes"
        )
    label = _frame_columns(frame)
    _check_columns(list(label), spec.domain, "DataFrame")
    names = spec.domain.names
    cols = [_column_text(frame[label[name]]) for name in names]
    n = len(cols[0]) if cols else 0
    index = getattr(frame, "index", range(n))
    table = np.stack(cols, axis=1).astype(str) if n else np.zeros((0, len(names)), dtype=str)
    codes = _encode(table, spec, lambda r: f"DataFrame, row {list(index[r : r + 1])[0]!r}")
    return Records(spec.domain, codes, dict(spec.bins))


def from_codes(codes, domain) -> Records:
    """Records from an int array of codes (one column per attribute, in domain order)."""
    spec = _spec(domain, None, None)
    domain = spec.domain
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
    return Records(domain, c, dict(spec.bins))


#: The warning :func:`draft_domain` prints: a domain read from the data is not private.
DRAFT_WARNING = (
    "WARNING: this domain was read from the data itself. The categories present, their "
    "number and the value ranges of the records are NOT protected by differential privacy: "
    "releasing with a domain drafted from the private data can reveal, e.g., that a rare "
    "value occurs. Edit the draft so that it holds only what is public (the schema, "
    "categories and ranges known without looking at the records), then pass it as --domain."
)


def draft_domain(source, *, max_values: int = 50, bins: int = 10, out=None) -> dict:
    """Draft a domain file (a dict; written to ``out`` as JSON when given) from a sample of
    records (a CSV path, a DataFrame or a pyarrow Table) and print :data:`DRAFT_WARNING`: a
    domain read from the private data is not private, only a starting point to edit. The
    drafting rules (``max_values``, ``bins``): docs/guide/records.md, "Drafting a domain".
    """
    import pandas as pd

    check_int(max_values, "max_values", minimum=1)
    check_int(bins, "bins", minimum=1)
    if isinstance(source, (str, Path)):  # read as read_csv reads it
        path = Path(source)
        header, _, rows, _ = _read_rows(path, lambda names: _check_unique(names, str(path)))
        table = np.array(rows, dtype=object).reshape(len(rows), len(header))
        frame = pd.DataFrame(table, columns=header)
    else:
        frame = _as_pandas(source)
    label = _frame_columns(frame)
    print(DRAFT_WARNING, file=sys.stderr)
    spec: dict = {}
    for name, col in label.items():
        text = [t.strip() for t in _column_text(frame[col])]
        present = list(dict.fromkeys(t for t in text if t))  # distinct, in order of appearance
        empty = sum(1 for t in text if not t)
        if empty:
            print(
                f"note: column {name!r} has {empty} empty or missing value(s); the draft "
                "leaves them out and a release refuses them",
                file=sys.stderr,
            )
        numbers: dict = {}  # left empty unless every value is a number
        for t in present:
            x = _number(t)
            if x is None:
                numbers = {}
                break
            numbers.setdefault(x, t)  # one text per value: its first occurrence
        if numbers and len(numbers) > max_values:
            lo, hi = float(min(numbers)), float(max(numbers))
            width = (hi - lo) / bins or 1.0
            last = max(hi + width / 1000, float(np.nextafter(hi, np.inf)))
            inner = [round(lo + k * width, 10) for k in range(1, bins)]
            if not all(a < b for a, b in zip([lo, *inner], [*inner, last])):
                inner = [lo + k * width for k in range(1, bins)]
            spec[name] = {"bins": [lo, *inner, last]}
        elif numbers:
            spec[name] = {"values": [numbers[x] for x in sorted(numbers)], "numeric": True}
        else:
            spec[name] = {"values": sorted(present)}
    if out is not None:
        from .atomic import write_atomic

        body = jsonsafe.dumps(spec, str(out), RecordsError, indent=2, ensure_ascii=False)
        write_atomic(out, body + "\n")
    return spec


#: Entries per block of the records x n_i comparison tables :func:`synthetic` draws with.
SYNTHETIC_BLOCK = 2**22


def synthetic(domain, records: int = 1000, seed: int = 0) -> Records:
    """A seeded synthetic dataset of ``records`` records: attribute 0 uniform, each later one
    from a random Dirichlet(1/2) conditional on the previous one (correlated marginals)."""
    spec = _spec(domain, None, None)
    domain = spec.domain
    records = check_int(records, "records", minimum=0)
    seed = check_int(seed, "seed")
    sizes = domain.sizes
    # the codes and one uniform per record; the comparisons below go in row blocks
    check_fits_memory(
        8.0 * records * (len(sizes) + 1),
        f"{records} synthetic records over {len(sizes)} attributes",
        "ask for fewer records",
    )
    rng = np.random.default_rng(seed)
    codes = np.zeros((records, len(sizes)), dtype=np.int64)
    codes[:, 0] = rng.integers(0, sizes[0], records)
    for i in range(1, len(sizes)):
        check_dense_size(sizes[i - 1], sizes[i], "synthetic records' conditional table")
        P = rng.dirichlet(np.full(sizes[i], 0.5), size=sizes[i - 1])
        cdf = np.cumsum(P, axis=1)
        u = rng.random(records)
        step = max(1, SYNTHETIC_BLOCK // sizes[i])  # rows per block of records x n_i tables
        for lo in range(0, records, step):
            rows = slice(lo, lo + step)
            prev = cdf[codes[rows, i - 1]]
            codes[rows, i] = np.minimum((u[rows, None] >= prev).sum(axis=1), sizes[i] - 1)
    return Records(domain, codes, dict(spec.bins))


def _spec(domain, bins, other) -> DomainSpec:
    """The :class:`DomainSpec` of a ``domain`` argument, with extra ``bins`` / ``other``."""
    if isinstance(domain, DomainSpec):
        spec = domain
    elif isinstance(domain, Domain):
        spec = DomainSpec(domain, {}, {})
    elif isinstance(domain, (str, Path)):
        spec = read_domain(domain)
    elif isinstance(domain, Mapping):
        spec = parse_domain(domain)
    else:
        raise RecordsError(
            f"domain must be a Domain, a domain-file path or a mapping, got {type(domain).__name__}"
        )
    dom, all_bins, all_other = spec.domain, dict(spec.bins), dict(spec.other)
    unknown = sorted(set(bins or {}) - set(dom.names))
    if unknown:
        raise RecordsError(f"bins given for unknown attribute(s) {unknown}")
    if bins:
        labels = list(dom.labels)
        for name, edges in bins.items():
            i = dom.index(name)
            edges = _parse_bins(list(edges), name, "bins")
            if len(edges) - 1 != dom.sizes[i]:
                raise RecordsError(
                    f"bins: attribute {name!r} has size {dom.sizes[i]} but {len(edges)} bin "
                    f"edges ({len(edges) - 1} bins)"
                )
            all_bins[name], labels[i] = edges, bin_labels(edges)
        dom = dom.with_labels(labels)
    for name, value in (other or {}).items():
        values = dom.labels[dom.index(name)] if name in dom else None
        if values is None or name in all_bins:
            raise RecordsError(
                f"other: attribute {name!r} is not a categorical attribute declared with values"
            )
        if str(value) not in values:
            raise RecordsError(
                f"other: {value!r} is not one of the declared values of attribute {name!r}"
            )
        all_other[name] = str(value)
    return DomainSpec(dom, all_bins, all_other)
