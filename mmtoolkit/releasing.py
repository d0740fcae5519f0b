"""``mmtoolkit.release``: records in, labelled noisy tables out.

:func:`release` reads the data against a declared domain, builds the workload, selects a
strategy, charges an optional :class:`~mmtoolkit.ledger.Ledger` before any noise is drawn,
draws the noise (the matrix mechanism, Li et al. 2010 §3, with the selected strategy) and
returns a :class:`ReleaseResult` (answers, standard errors, privacy spent, seeds, strategy,
measurements, labelled tables, a JSON-ready summary). :func:`select_plan` selects without
releasing; :func:`workload_tables` groups a marginal-type workload's rows into tables.

Two modes: without a seed, a *private release* draws its noise and its selection's randomness
from a cryptographic generator keyed by the operating system (:func:`secure_generator`),
exact integer noise by default, and writes no seed, key or state; with one, a *reproducible
experiment*: the one seed gives the selection seed (:func:`split_seed`) and the noise, keyed
by everything that defines the release (:func:`release_key`, :func:`noise_generator`), so
releases that differ in anything draw independent noise (but whoever holds the seed can
remove the noise).

User guide: docs/guide/release.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import pickle
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import numpy as np

from . import evaluate, intervals, mechanism, records, selectors
from .checks import check_choice, check_int, check_option, check_probability
from .domain import Domain
from .jsonsafe import jsonable, stable_text
from .ledger import Ledger
from .linalg import Dense, Matrix, NotSupportedByKindError, TooLargeError, normal_form
from .measurement import Measurement, marginal_measurements
from .noise import array_path
from .plan import NoisePlan
from .privacy import ZCDP, Privacy, PureDP, check_privacy
from .saved_plans import SavedPlan, load_plan
from .selectors.base import accepts_seed, get_class
from .strategy import Strategy
from .workload_specs import SpecError, build_spec, parse_workload

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["Measurement", "ReleaseResult", "TableSpec", "data_digest", "matrix_digest",
           "noise_generator", "release", "release_key", "secure_generator", "seed_fingerprint",
           "select_plan", "split_seed", "workload_matrix", "workload_tables"]

#: What an axis of a labelled table holds, by the kind of the workload factor on that
#: attribute (:data:`~mmtoolkit.linalg.FACTOR_KINDS`); a total factor is no axis.
AXES = {"identity": "value", "prefix": "prefix", "all_range": "range"}


# ============================================================================ tables
@dataclass(frozen=True)
class TableSpec:
    """Rows ``start:stop`` of a workload: a table over ``attrs``, cells in C order.

    Parameters
    ----------
    attrs : tuple of int
        The table's attributes (domain indices, domain order).
    axes : tuple of str
        Per attribute, its axis: ``"value"``, ``"prefix"`` (``[0, i]``) or ``"range"``
        (``[i, j]``, lexicographic).
    start, stop : int
        The table's rows in the workload.
    shape : tuple of int
        The table's shape (the length of each axis).
    weight : float
        The term's signed, unsquared weight (answers are ``weight`` × counts).
    """

    attrs: tuple[int, ...]
    axes: tuple[str, ...]
    start: int
    stop: int
    shape: tuple[int, ...]
    weight: float


def workload_tables(W: Matrix, domain: Domain) -> list[TableSpec] | None:
    """The tables of a marginal-type workload over ``domain`` (docs/guide/release.md).

    Parameters
    ----------
    W : Matrix
        The workload, on ``domain``'s cells.
    domain : Domain
        Its domain.

    Returns
    -------
    list of TableSpec or None
        One per Kronecker term, in row order; None when ``W`` is not a union of
        value / prefix / range marginals on ``domain``'s attributes (its answers are then
        labelled by row).
    """
    nf = normal_form(W)
    if nf.sizes != domain.sizes:
        return None
    out = []
    for t in nf.terms:
        if any(k != "total" and k not in AXES for k in t.kinds):
            return None
        shape = tuple(int(t.factors[i].shape[0]) for i in t.attrs)
        axes = tuple(AXES[t.kinds[i]] for i in t.attrs)
        out.append(TableSpec(t.attrs, axes, t.start, t.stop, shape, t.weight))
    return out


def _span(domain: Domain, bins: Mapping, i: int, lo: int, hi: int) -> str:
    """The label of codes ``lo..hi`` of attribute ``i``: an interval for binned attributes."""
    name = domain.names[i]
    if name in bins:
        e = bins[name]
        return f"[{records.format_edge(e[lo])}, {records.format_edge(e[hi + 1])})"
    labels = domain.value_labels(i)
    return labels[lo] if lo == hi else f"{labels[lo]}..{labels[hi]}"


def axis_labels(domain: Domain, bins: Mapping, i: int, kind: str) -> list[str]:
    """The row labels of one axis (attribute ``i``, kind as in :class:`TableSpec`)."""
    n = domain.sizes[i]
    if kind == "value":
        return list(domain.value_labels(i))
    if kind == "prefix":
        return [_span(domain, bins, i, 0, r) for r in range(n)]
    return [_span(domain, bins, i, lo, hi) for lo in range(n) for hi in range(lo, n)]


# ============================================================================ result
@dataclass
class ReleaseResult:
    """The result of :func:`release`: the noisy answers with their standard errors and
    intervals, what was released and how, and labelled tables (:meth:`table`). Each field is
    described in docs/guide/release.md ("From Python").

    Parameters
    ----------
    answers : numpy.ndarray
        The noisy workload answers in workload row order: shape ``(m,)``, or ``(m, R)`` for
        ``R > 1`` releases (one column per release).
    stderr : numpy.ndarray or None
        Shape ``(m,)``: each answer's analytic standard error; None when the evaluator
        cannot give per-query variances on this domain.
    workload : Matrix
        The workload answered, ``m x N``.
    domain : Domain
        The data's domain, with its value labels.
    bins : dict
        The bin edges of the binned attributes, by name.
    privacy : Privacy
        The guarantee of *each* release.
    spent : dict
        What all releases together charge (:func:`mmtoolkit.ledger.charge_of`).
    seed : int or None
        The one seed of a reproducible experiment; None in a private release.
    selection_seed : int or None
        The seed the selector used (None if it takes none, and in a private release).
    strategy : Strategy
        The selected strategy (matrix, selector name, every parameter, metadata).
    measurements : list
        Per release, a list of its noisy measurements
        (:class:`~mmtoolkit.measurement.Measurement`, with their noise scale: what
        Private-PGM estimates from).
    summary : dict
        JSON-ready account of all of the above but the arrays (what ``mmtoolkit release``
        writes).
    ledger_entry : int, optional
        The ledger entry's id when a ledger was charged; default None.
    tables_spec : list of TableSpec, optional
        The workload's labelled tables (:func:`workload_tables`); None (default) computes
        them, and stays None when the workload is not marginal-type.
    lower, upper : numpy.ndarray, optional
        Each answer's (1 − alpha) interval, shaped like ``answers``; None without
        ``stderr``.
    interval_methods : numpy.ndarray, optional
        Shape ``(m,)``: each answer's interval method (a key of
        :data:`mmtoolkit.intervals.METHODS`); None without intervals.
    """

    answers: np.ndarray
    stderr: np.ndarray | None
    workload: Matrix
    domain: Domain
    bins: dict
    privacy: Privacy
    spent: dict
    seed: int | None
    selection_seed: int | None
    strategy: Strategy
    measurements: list
    summary: dict
    ledger_entry: int | None = None
    tables_spec: list | None = field(default=None)
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    interval_methods: np.ndarray | None = None

    def __post_init__(self):
        if self.tables_spec is None:
            self.tables_spec = workload_tables(self.workload, self.domain)

    @property
    def releases(self) -> int:
        """The number of releases ``R`` (the columns of a 2-D :attr:`answers`)."""
        return 1 if self.answers.ndim == 1 else int(self.answers.shape[1])

    def _answer_columns(self, rows: slice) -> dict:
        a = self.answers[rows]
        bounds: dict = {}
        if self.lower is not None and self.upper is not None:  # set together
            bounds = {"lower": self.lower[rows], "upper": self.upper[rows]}
        if a.ndim == 1:
            cols = {"answer": a} | bounds
        else:
            cols = {}
            for r in range(a.shape[1]):
                cols[f"answer_{r + 1}"] = a[:, r]
                cols.update({f"{k}_{r + 1}": v[:, r] for k, v in bounds.items()})
        if self.stderr is not None:
            cols["stderr"] = self.stderr[rows]
        return cols

    def _check_tables(self) -> list[TableSpec]:
        if self.tables_spec is None:
            raise ValueError(
                "the workload is not a union of marginal-type tables (marginals, range or "
                "prefix marginals): its answers have no table labels; use to_frame()"
            )
        return self.tables_spec

    def _labels(self, spec: TableSpec) -> list[list[str]]:
        """The row labels of each axis of a table."""
        pairs = zip(spec.attrs, spec.axes, strict=True)
        return [axis_labels(self.domain, self.bins, i, kind) for i, kind in pairs]

    def _frame(self, spec: TableSpec):
        import pandas as pd

        names = [self.domain.names[i] for i in spec.attrs]
        labels = self._labels(spec)
        cols = self._answer_columns(slice(spec.start, spec.stop))
        if not names:
            return pd.DataFrame(cols, index=pd.Index(["(total)"], name="marginal"))
        index = pd.MultiIndex.from_product(
            [pd.CategoricalIndex(lab, categories=lab, ordered=True) for lab in labels],
            names=names,
        )
        return pd.DataFrame(cols, index=index)

    def table(self, attrs: str | Iterable[str], release: int | None = None) -> pd.DataFrame:
        """The table on ``attrs`` as a DataFrame indexed by the attributes' labels
        (docs/guide/release.md).

        Parameters
        ----------
        attrs : str or iterable of str
            The table's attributes, by name in any order; ``()`` for the total.
        release : int, optional
            ``r`` with ``0 ≤ r < releases``: keep only release ``r``'s answers and intervals,
            as ``answer``, ``lower`` and ``upper``. Default (None): every release.

        Returns
        -------
        pandas.DataFrame
            One row per cell, indexed by a MultiIndex of the attributes in domain order (each
            level categorical, in the declared order; the total: one row ``(total)``);
            columns ``answer``, ``lower``, ``upper`` (the release's intervals,
            :mod:`mmtoolkit.intervals`; numbered ``answer_1 …`` for several releases) and
            ``stderr``, those present.

        Raises
        ------
        ValueError
            The workload is not a union of marginal-type tables, has no table on ``attrs``,
            or ``attrs`` names an unknown attribute; ``release`` out of range.
        """
        if isinstance(attrs, str):
            attrs = (attrs,)
        want = self.domain.indices(attrs) if attrs else ()
        specs = self._check_tables()
        found = [s for s in specs if s.attrs == want]
        if not found:
            have = ", ".join(
                "(" + ", ".join(self.domain.names[i] for i in s.attrs) + ")"
                for s in specs
            )
            raise ValueError(f"the workload has no table on {tuple(attrs)}; it has {have}")
        df = self._frame(found[0])
        if release is not None:
            r = check_int(release, "release", minimum=0)
            if r >= self.releases:
                raise ValueError(
                    f"release: {r} is out of range; there are {self.releases} release(s), "
                    f"numbered 0..{self.releases - 1}"
                )
            if self.answers.ndim == 1:
                return df
            own = {f"{k}_{r + 1}": k for k in ("answer", "lower", "upper")}
            df = df.rename(columns=own)
            return df.drop(columns=[c for c in df.columns
                                    if c.startswith(("answer_", "lower_", "upper_"))])
        return df

    def tables(self) -> dict:
        """Every table of the workload (as :meth:`table` gives them, every release).

        Returns
        -------
        dict
            ``{attribute-name tuple: DataFrame}`` in workload order (a product repeated in
            the workload keeps its first table).

        Raises
        ------
        ValueError
            The workload is not a union of marginal-type tables.
        """
        out: dict = {}
        for s in self._check_tables():
            key = tuple(self.domain.names[i] for i in s.attrs)
            out.setdefault(key, self._frame(s))
        return out

    def to_frame(self) -> pd.DataFrame:
        """Tidy answers, one row per query (the ``--out`` CSV of docs/guide/release.md).

        Returns
        -------
        pandas.DataFrame
            ``m`` rows in workload order: ``query`` (the row number), ``marginal`` (the
            table's attributes joined by ``;``), one label column per attribute (None where
            the table does not have it), the answer column(s) with their intervals
            (``lower``, ``upper``) and ``stderr``; ``query`` and the answers only when the
            workload is not marginal-type.

        Raises
        ------
        ValueError
            An attribute is named like one of the frame's columns.
        """
        import pandas as pd

        m = int(self.workload.shape[0])
        data = {"query": np.arange(m)}
        if self.tables_spec is not None:
            answer_cols = set(self._answer_columns(slice(0, 0)))
            clash = [n for n in self.domain.names if n in {"query", "marginal"} | answer_cols]
            if clash:
                raise ValueError(f"attribute name(s) {clash} clash with the frame's columns")
            marg = np.empty(m, dtype=object)
            cells = {n: np.full(m, None, dtype=object) for n in self.domain.names}
            for s in self.tables_spec:
                names = [self.domain.names[i] for i in s.attrs]
                marg[s.start : s.stop] = ";".join(names) or "(total)"
                labels = self._labels(s)
                if s.shape:  # the total has no label columns
                    grid = np.indices(s.shape).reshape(len(s.shape), -1)
                    for a, (name, lab) in enumerate(zip(names, labels, strict=True)):
                        cells[name][s.start : s.stop] = np.asarray(lab, dtype=object)[grid[a]]
            data["marginal"] = marg
            data.update(cells)
        data.update(self._answer_columns(slice(None)))
        return pd.DataFrame(data)


# ============================================================================ measurements
def _measurements(meas: Measurement | None, tables, domain, answers, stderr, distribution):
    """What one release measured, as Measurements named by the domain's attributes: a
    marginal-type strategy's noisy marginals, else the strategy's rows; for a kind with a
    mechanism of its own (``meas`` None), the workload's reconstructed value tables."""
    if meas is not None:
        if meas.query is None:  # no strategy to read marginals from
            return [meas]
        found = marginal_measurements(meas.query, meas.values, meas.std, meas.distribution,
                                      domain.sizes)  # fmt: skip
        if found is None:
            return [meas]
        return [replace(m, attrs=tuple(domain.names[i] for i in m.attrs)) for m in found]
    if tables is None or stderr is None:
        return []
    out = []
    for s in tables:
        if any(k != "value" for k in s.axes):
            continue
        rows = slice(s.start, s.stop)
        names = tuple(domain.names[i] for i in s.attrs)
        values, std = ((v[rows] / s.weight).reshape(s.shape) for v in (answers, stderr))
        out.append(Measurement("reconstructed", names, values, std, distribution))
    return out


# ============================================================================ seeds
#: Seconds between the progress lines of a release of several ``releases``.
PROGRESS_SECONDS = 2.0

#: A Matrix with at most this many entries is fingerprinted by its exact dense entries.
DIGEST_DENSE_ENTRIES = 10**6


def split_seed(seed) -> tuple[int, int]:
    """``(seed, selection seed)`` from the one seed (docs/guide/release.md, "One seed").

    Parameters
    ----------
    seed : int or None
        The one seed, ≥ 0; None draws fresh entropy and returns it, so the release can be
        repeated.

    Returns
    -------
    tuple of int
        The seed, and the selection seed: the first 32-bit word of
        ``SeedSequence(seed).spawn(2)[0]``.

    Raises
    ------
    ValueError
        ``seed`` is not an integer ≥ 0.
    """
    if seed is None:
        # numpy's stub types entropy as given (int, a sequence or None); drawn fresh, an int
        seed = int(cast(int, np.random.SeedSequence().entropy))
    else:
        seed = check_int(seed, "seed", minimum=0)
    select = np.random.SeedSequence(seed).spawn(2)[0]
    return seed, int(select.generate_state(1, np.uint32)[0])


def _seed_key(seed: int) -> bytes:
    """The secret key of everything keyed by ``seed``: 256 bits of ``SeedSequence(seed,
    spawn_key=(2,))`` (a child stream that neither the selection nor the noise uses)."""
    return np.random.SeedSequence(seed, spawn_key=(2,)).generate_state(8, np.uint32).tobytes()


def data_digest(recs: records.Records, seed: int) -> str:
    """A keyed digest (HMAC-SHA256 under the seed's key, :func:`_seed_key`) of the domain's
    names and sizes and the multiset of records (rows sorted: the release depends only on
    the histogram). Without the seed it reveals nothing about the data.

    Parameters
    ----------
    recs : Records
        The records.
    seed : int
        The release's seed.

    Returns
    -------
    str
        64 hex digits.
    """
    h = hmac.new(_seed_key(seed), digestmod=hashlib.sha256)
    dom = recs.domain
    h.update(json.dumps([list(dom.names), list(dom.sizes)]).encode())
    codes = np.ascontiguousarray(recs.codes, dtype=np.int64)
    if codes.shape[0] and dom.size < 2**63:
        rows = np.sort(np.ravel_multi_index(tuple(codes.T), dom.sizes))
    else:  # one int64 key per record would overflow: sort the rows themselves
        rows = codes[np.lexsort(codes.T[::-1])] if codes.shape[0] else codes
    h.update(np.ascontiguousarray(rows).tobytes())
    return h.hexdigest()


def matrix_digest(M: Matrix) -> str:
    """A fingerprint of a Matrix's entries (SHA-256): its shape and exact dense entries when
    it is :class:`~mmtoolkit.linalg.Dense` or has at most ``DIGEST_DENSE_ENTRIES``, else those
    of its Kronecker terms (weights and factors, :meth:`~mmtoolkit.linalg.Matrix.kron_terms`),
    else its text. Two workloads with the same entries get the same fingerprint (a SPEC and the
    Matrix it builds); different entries, different ones, except two large matrices with no
    Kronecker structure whose text is the same.

    Parameters
    ----------
    M : Matrix
        The matrix.

    Returns
    -------
    str
        64 hex digits.
    """
    h = hashlib.sha256()

    def walk(A: Matrix) -> None:
        h.update(f"{tuple(int(s) for s in A.shape)}".encode())
        if isinstance(A, Dense) or A.shape[0] * A.shape[1] <= DIGEST_DENSE_ENTRIES:
            h.update(np.ascontiguousarray(A.dense() + 0.0, dtype=np.float64).tobytes())  # no -0
            return
        terms = A.kron_terms()
        if len(terms) == 1 and len(terms[0][1]) == 1 and terms[0][1][0] is A:
            h.update(stable_text(repr(A)).encode())
            return
        for c, factors in terms:
            h.update(b"term" + np.float64(c).tobytes())
            for f in factors:
                walk(f)

    walk(M)
    return h.hexdigest()


def release_key(seed: int, definition: Mapping) -> str:
    """The key of one release (HMAC-SHA256 under the seed's key) of everything that defines
    it (``definition``: privacy, noise, releases, selector and parameters, strategy kind,
    workloads, data digest), so releases that differ in any draw independent noise.

    Parameters
    ----------
    seed : int
        The release's seed.
    definition : Mapping
        What defines the release, JSON-able (:func:`~mmtoolkit.jsonsafe.jsonable`).

    Returns
    -------
    str
        64 hex digits.
    """
    text = json.dumps(jsonable(definition), sort_keys=True, ensure_ascii=True)
    return hmac.new(_seed_key(seed), text.encode(), hashlib.sha256).hexdigest()


def seed_fingerprint(seed: int) -> str:
    """What a ledger records of a seed (a hash of its key, not the seed), to refuse a second,
    different release with it (:meth:`Ledger.charge`; docs/guide/ledger.md).

    Parameters
    ----------
    seed : int
        The seed.

    Returns
    -------
    str
        32 hex digits.
    """
    return hashlib.sha256(b"mmtoolkit seed fingerprint" + _seed_key(seed)).hexdigest()[:32]


def secure_generator() -> np.random.Generator:
    """A fresh cryptographically secure generator: ``numpy.random.Generator`` over randomgen's
    ``ChaCha`` bit generator with 20 rounds (ChaCha20, Bernstein 2008, the stream cipher of
    RFC 8439 and of the Linux kernel's random number generator), keyed by 256 bits from
    ``os.urandom`` (the operating system's secure source).

    Why this one: PCG64 (numpy's default) is not cryptographic — its state can be recovered
    from its output — and a seed written anywhere lets its reader recompute the noise.
    ChaCha20's output is indistinguishable from random without the key, the key is drawn
    from the OS and held only by this object (never written), and it is a numpy
    ``BitGenerator``, so every user of ``rng`` (the plan's streams, ``integers``,
    ``standard_normal``, ``laplace``, the exact samplers of :mod:`mmtoolkit.noise`) draws
    from it unchanged. (randomgen's ChaCha has no ``jumped()``: the Dask route, which needs
    it, is not used by :func:`release`.)

    Returns
    -------
    numpy.random.Generator
        A new generator with a new key.
    """
    from randomgen import ChaCha

    return np.random.Generator(ChaCha(key=int.from_bytes(os.urandom(32), "little"), rounds=20))


def noise_generator(seed: int, key: str) -> np.random.Generator:
    """The noise generator of the release with key ``key`` (:func:`release_key`):
    ``SeedSequence(seed, spawn_key=(1, *the key's 32-bit words))``. Keyed by the release, a
    seed reused with another budget draws other noise, not the same noise scaled (which two
    releases would cancel: docs/guide/release.md, "One seed").

    Parameters
    ----------
    seed : int
        The release's seed.
    key : str
        The release key, hex (:func:`release_key`).

    Returns
    -------
    numpy.random.Generator
        PCG64 seeded as above.
    """
    words = np.frombuffer(bytes.fromhex(key), dtype=">u4").astype(np.uint64).tolist()
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, *words)))


# ============================================================================ release
def _mode_text(private: bool, distribution: str) -> str:
    """The release's mode in words (the summary's ``mode``)."""
    if not private:
        return (
            "reproducible experiment, not private against the seed holder: the noise is a "
            "function of the seed (numpy PCG64, keyed by the release), so whoever holds the "
            f"seed can recompute it and remove it from the answers ({distribution} noise); "
            "release real data without a seed"
        )
    text = (
        "private: the noise and the selection's randomness were drawn from a cryptographic "
        "generator (ChaCha20, randomgen) keyed by 256 bits from the operating system; no "
        "seed, key or generator state was written anywhere, so the noise cannot be "
        f"reproduced; {distribution} noise"
    )
    if distribution.startswith("discrete"):
        return text + ", exact integer noise (Canonne, Kamath & Steinke 2020)"
    return text + (
        ", floating-point noise chosen explicitly (noise continuous): floating-point "
        "samplers can leak through the low-order bits of their output (Mironov 2012)"
    )


def _state(rng: np.random.Generator) -> bytes:
    """The generator's state as bytes, to compare (a ChaCha state holds arrays); in memory
    only, never written."""
    return pickle.dumps(rng.bit_generator.state)


def _noise_plan(strategy, privacy, noise, defaulted, W, recs, releases) -> NoisePlan:
    """The release's :class:`NoisePlan`; when exact integer noise is only the private
    release's default (``defaulted``), a strategy or definition that admits none is refused
    naming ``noise="continuous"`` as the explicit opt-in — never a silent fallback."""
    opt_in = (
        "a private release draws exact integer noise by default and never falls back "
        "silently to floating-point noise, whose low-order bits can leak the true value "
        "(Mironov 2012); give --noise continuous (noise='continuous') to opt in explicitly; "
        "nothing was charged or released"
    )
    if defaulted and not isinstance(privacy, (PureDP, ZCDP)):
        raise NotSupportedByKindError(
            f"privacy {privacy}: exact integer noise is available under pure DP (--epsilon) "
            f"and zCDP (--rho), not {type(privacy).__name__}; {opt_in}"
        )
    try:
        return NoisePlan(strategy, privacy, noise, workload=W, data=recs, releases=releases)
    except NotSupportedByKindError as exc:
        if not defaulted:
            raise
        raise NotSupportedByKindError(
            f"strategy {type(strategy.matrix).__name__} (selector {strategy.selector}): its "
            f"rows are not integer up to a scale, so exact integer noise is not available "
            f"({exc}); {opt_in}"
        ) from None


#: How the intervals' statement is made simultaneous (appended to the method in the summary).
BONFERRONI = {
    "none": "; per answer",
    "table": "; simultaneous over each table (Bonferroni: alpha / the table's answers each)",
    "workload": "; simultaneous over the workload (Bonferroni: alpha / its answers each)",
}


def _intervals(stderr, plan: NoisePlan, alpha, simultaneous, tables):
    """The answers' :class:`~mmtoolkit.intervals.Intervals` (half-widths and methods,
    :func:`mmtoolkit.intervals.release_intervals`) for their ``stderr`` (None: no
    intervals), checked before anything is charged."""
    check_option(simultaneous, "simultaneous", intervals.SIMULTANEOUS)
    check_probability(alpha, "alpha")
    if simultaneous == "table" and tables is None:
        raise ValueError(
            "simultaneous: 'table' needs a workload of marginal-type tables; this workload has "
            "none, use 'workload' or 'none'"
        )
    if stderr is None:
        return None
    count = {"none": 1, "workload": stderr.size}.get(simultaneous)
    if count is None:
        count = intervals.table_counts([(t.start, t.stop) for t in tables], stderr.size)
    return intervals.release_intervals(plan, stderr, alpha, count)


def _load(data, domain, other) -> records.Records:
    if isinstance(data, records.Records):
        if domain is not None:
            raise ValueError(
                "domain: the Records already carry their domain; give one or the other"
            )
        return data
    if domain is None:
        raise ValueError(
            "domain: a release needs the declared domain of the data (a domain file, a mapping "
            "or a Domain); it is never inferred from the data (records.draft_domain drafts one "
            "for editing, and explains why a domain read from the data is not private)"
        )
    if isinstance(data, (str, Path)):
        return records.read_csv(data, domain, other=other)
    if isinstance(data, np.ndarray) or hasattr(data, "columns") or hasattr(data, "to_pandas"):
        return records.from_frame(data, domain, other=other)
    raise ValueError(
        f"data must be Records, a CSV path, a pandas DataFrame or a pyarrow Table, got "
        f"{type(data).__name__}"
    )


def workload_matrix(
    workload, dom: Domain, where: str = "workload", domain_source: str = "the data"
) -> Matrix:
    """The workload Matrix of a SPEC (:mod:`mmtoolkit.workload_specs`) or a Matrix over
    ``dom``'s cells; a ``ValueError`` naming ``where`` for a SPEC that does not parse, does
    not build, or is not on ``dom``'s cells.

    Parameters
    ----------
    workload : str or Matrix
        A SPEC, or a Matrix on ``dom``'s cells.
    dom : Domain
        The domain.
    where : str, optional
        The argument's name in messages (default ``"workload"``).
    domain_source : str, optional
        What the domain is in messages (default ``"the data"``).

    Returns
    -------
    Matrix
        The workload, ``m x dom.size``, every entry finite.

    Raises
    ------
    ValueError
        A SPEC that does not parse or build, ``binary_marginals`` (a workload on the binary
        encoding), a workload on another number of cells, or a non-finite entry.
    """
    if isinstance(workload, Matrix):
        if workload.shape[1] != dom.size:
            raise ValueError(
                f"{where}: defined on {workload.shape[1]} cells, the domain has {dom.size}"
            )
        mechanism.check_finite(workload)
        return workload
    if not isinstance(workload, str) or not workload.strip():
        raise ValueError(f"{where}: give a SPEC such as 'marginals:k=2' (or a linalg Matrix)")
    label = f"{where} {workload!r}"
    try:
        parsed = parse_workload(workload, where, domain=dom, domain_source=domain_source)
    except SpecError as exc:
        raise ValueError(str(exc)) from None
    if parsed.kind == "binary_marginals":
        raise ValueError(
            f"{label}: binary_marginals asks queries on the binary encoding of the domain, "
            "not on the records' domain: release cannot answer it"
        )
    try:
        W = build_spec(parsed, label)
    except SpecError as exc:
        raise ValueError(str(exc)) from None
    if int(W.shape[1]) != dom.size:
        raise ValueError(
            f"{label}: the workload is on {W.shape[1]} cells but the domain has {dom.size} "
            f"({' x '.join(map(str, dom.sizes))}); give sizes matching the domain"
        )
    mechanism.check_finite(W)  # e.g. a `matrix` kind loaded from a .npy file
    return W


def _selector(selector, params: Mapping | None, derived_seed: int):
    """``(Selector, whether its seed was derived)``: a registered name with ``params``, given
    the derived selection seed when it takes one that ``params`` does not give, or an
    instance."""
    params = dict(params or {})
    if isinstance(selector, selectors.Selector):
        if params:
            raise ValueError("params: give them to the Selector instance, not to release()")
        return selector, False
    cls = get_class(selector)
    derived = accepts_seed(cls) and "seed" not in params
    return cls(**params, **({"seed": derived_seed} if derived else {})), derived


def select_plan(
    workload: str | Matrix,
    privacy: Privacy,
    selector: str | selectors.Selector = "residual_planner",
    *,
    domain: str | os.PathLike[str] | Mapping[str, Any] | records.DomainSpec | Domain,
    params: Mapping | None = None,
    seed: int | None = None,
    noise: str | None = None,
    select_for: str | Matrix | None = None,
) -> SavedPlan:
    """The strategy :func:`release` would select for these arguments (the same selection
    seed), as a :class:`~mmtoolkit.saved_plans.SavedPlan`, to save and release from later
    (``release(data, plan=...)``).

    Parameters
    ----------
    workload : str or Matrix
        The workload to release: a SPEC (:mod:`mmtoolkit.workload_specs`) or a Matrix on
        the domain's cells.
    privacy : Privacy
        The guarantee of each release.
    selector : str or Selector, optional
        A registered selector name (with ``params``) or a Selector instance; default
        ``"residual_planner"``.
    domain : str, os.PathLike, Mapping, DomainSpec or Domain
        The declared domain of the data (a domain file, its parsed mapping, a DomainSpec or
        a Domain); required.
    params : Mapping, optional
        The selector's parameters, with a selector name only.
    seed : int, optional
        The one seed of the release (:func:`split_seed` gives the selection seed from it);
        None (default): fresh entropy.
    noise : str, optional
        ``"continuous"`` or ``"discrete"``, saved with the plan; None (default): the
        release's default.
    select_for : str or Matrix, optional
        The workload to select for, when it is not ``workload``.

    Returns
    -------
    SavedPlan
        The strategy and these settings (not yet saved: :func:`~mmtoolkit.save_plan`).

    Raises
    ------
    TypeError
        ``privacy`` is not a PureDP, ApproxDP or ZCDP.
    ValueError
        An unknown ``noise``; a workload that does not parse, build or fit the domain's
        cells; ``params`` with a Selector instance; a bad ``seed``.
    RecordsError
        A domain that cannot be read.
    UnknownSelectorError
        An unknown selector name (a ``KeyError``); a parameter it does not take raises
        ``UnknownParameterError``.
    NotApplicableError
        The selector refuses the workload or privacy (also ``TooLargeError``,
        ``UnsupportedWorkloadError``: :data:`mmtoolkit.selectors.REFUSALS`).
    """
    check_privacy(privacy)
    noise is None or check_choice(noise, "noise", mechanism.NOISES)
    spec = records._spec(domain, None, None)
    sel = _selector(selector, params, split_seed(seed)[1])[0]
    W = workload_matrix(workload, spec.domain)  # a workload that does not build: refused now
    W_sel = W if select_for is None else workload_matrix(select_for, spec.domain, "select_for")
    return SavedPlan(sel.select(W_sel, privacy), workload, spec, privacy, noise, select_for)


def release(
    data: records.Records | str | os.PathLike[str] | pd.DataFrame | pa.Table,
    workload: str | Matrix | None = None,
    privacy: Privacy | None = None,
    selector: str | selectors.Selector | None = None,
    *,
    domain: str | os.PathLike[str] | Mapping[str, Any] | records.DomainSpec | Domain | None = None,
    params: Mapping | None = None,
    seed: int | None = None,
    noise: str | None = None,
    releases: int = 1,
    ledger: Ledger | str | os.PathLike[str] | None = None,
    description: str = "",
    other: Mapping | None = None,
    select_for: str | Matrix | None = None,
    progress: bool | TextIO = True,
    plan: SavedPlan | str | os.PathLike[str] | None = None,
    alpha: float = 0.05,
    simultaneous: str = "none",
) -> ReleaseResult:
    """Release noisy answers to ``workload`` from ``data``: the matrix mechanism (Li et al.
    2010 §3) with the strategy chosen by ``selector`` (e.g. HDMM, McKenna et al. 2018, or
    ResidualPlanner, He et al. 2023). Every check (arguments, memory, exact noise,
    intervals) is made before the ledger is charged, and the ledger is charged before any
    noise is drawn. Each argument is described in docs/guide/release.md ("From Python").

    Parameters
    ----------
    data : Records, str, os.PathLike, pandas.DataFrame or pyarrow.Table
        The records: :class:`~mmtoolkit.records.Records`, or a CSV path / DataFrame / pyarrow
        Table read against ``domain``.
    workload : str or Matrix
        A SPEC (:mod:`mmtoolkit.workload_specs`) or a Matrix on the domain's cells; required
        unless ``plan`` gives it.
    privacy : Privacy
        The guarantee of each of ``releases``; required unless ``plan`` gives it.
    selector : str or Selector, optional
        A registered name (with ``params``) or a Selector instance; None (default):
        ``"residual_planner"``.
    domain : str, os.PathLike, Mapping, DomainSpec or Domain, optional
        The data's declared domain (never inferred from the data); required unless ``data``
        is Records, which carry theirs.
    params : Mapping, optional
        The selector's parameters, with a selector name only.
    seed : int, optional
        The one seed of a reproducible experiment (whoever holds it can remove the noise);
        None (default) for a private release (:func:`secure_generator`, nothing of it
        written).
    noise : str, optional
        ``"continuous"`` or ``"discrete"``; default ``"discrete"`` in a private release
        (refused, with ``noise="continuous"`` named as the explicit opt-in, before any
        charge when the strategy or privacy definition admits no exact integer noise) and
        ``"continuous"`` with a seed.
    releases : int, optional
        The number of independent releases ``R`` (default 1), each under ``privacy``.
    ledger : Ledger, str or os.PathLike, optional
        A :class:`~mmtoolkit.ledger.Ledger` or its file, charged (with ``description``)
        before any noise is drawn.
    description : str, optional
        The ledger entry's description; default: the workload and the selector.
    other : Mapping, optional
        ``{attribute: value}``: undeclared values of the attribute read as that declared
        one (:func:`mmtoolkit.records.read_csv`).
    select_for : str or Matrix, optional
        The workload to select the strategy for, when it is not ``workload`` (same
        domain).
    progress : bool or file, optional
        With several releases taking longer than ``PROGRESS_SECONDS``, a progress line every
        ``PROGRESS_SECONDS``: to stderr (True, default), to this file object, or none
        (False).
    plan : SavedPlan, str or os.PathLike, optional
        A plan (or its file) to release without selecting: it fixes ``workload``,
        ``privacy``, ``selector``, ``params``, ``noise`` and ``select_for``.
    alpha : float, optional
        The intervals' level: each statement holds with probability 1 − ``alpha``; in
        (0, 1), default 0.05.
    simultaneous : str, optional
        What each statement covers: each answer (``"none"``, default), each table
        (``"table"``) or the whole workload jointly (``"workload"``); Bonferroni
        (:mod:`mmtoolkit.intervals`). No intervals when the standard errors are too large to
        compute.

    Returns
    -------
    ReleaseResult
        The answers, standard errors, intervals, privacy spent, seeds, strategy,
        measurements and summary.

    Raises
    ------
    TypeError
        ``privacy`` is not a PureDP, ApproxDP or ZCDP (nor given by a ``plan``).
    ValueError
        A bad argument (``noise``, ``releases``, ``alpha``, ``simultaneous``, ``seed``,
        ``domain`` missing or given with Records, ``data`` of another type, ``params`` with
        a Selector instance); a workload that does not parse, build or fit the domain's
        cells; ``simultaneous="table"`` for a workload without tables.
    RecordsError
        Records or a domain that cannot be read (naming the file, line and column).
    UnknownSelectorError
        An unknown selector name (a ``KeyError``); a parameter it does not take raises
        ``UnknownParameterError``.
    NotApplicableError
        The selector refuses (also ``TooLargeError``, ``UnsupportedWorkloadError``:
        :data:`mmtoolkit.selectors.REFUSALS`); ``TooLargeError`` also when the release does
        not fit in memory.
    NotSupportedByKindError
        The noise asked for (exact integer noise by default in a private release) is not
        available for this strategy or privacy definition; nothing charged.
    PlanError
        A plan file refused, an argument the plan fixes, or data on another domain than
        the plan's.
    LedgerError
        The release does not fit in the ledger's budget left (nothing drawn), or the ledger
        cannot be read.

    References
    ----------
    Li et al. 2010, the Matrix Mechanism, Section 3, Proposition 3; McKenna et al. 2018,
    HDMM, Section 7.2 (measure and reconstruct); He et al., ResidualPlanner+ (the default
    selector); Canonne, Kamath & Steinke 2020 (the exact discrete noise).
    """
    t0 = time.perf_counter()
    if plan is not None:  # the settings saved with the strategy (mmtoolkit.saved_plans)
        plan = plan if isinstance(plan, SavedPlan) else load_plan(plan)
        plan.refuse(workload=workload, privacy=privacy, selector=selector, params=params,
                    noise=plan.noise and noise, select_for=select_for)  # fmt: skip
        workload, privacy, noise = plan.workload, plan.privacy, plan.noise or noise
        select_for = plan.select_for
    selector = "residual_planner" if selector is None else selector
    private = seed is None
    noise_given = noise is not None
    noise = noise if noise_given else "discrete" if private else "continuous"
    privacy = check_privacy(privacy)  # before the selection (the plan checks it again after)
    check_option(noise, "noise", mechanism.NOISES)
    releases = check_int(releases, "releases", minimum=1)
    recs = _load(data, domain, other)
    if plan is not None:
        plan.check_domain(recs)
    dom = recs.domain
    W = workload_matrix(workload, dom)
    workload_text = workload if isinstance(workload, str) else repr(workload)
    if private:  # the selection's randomness from the secure source too, never written
        derived_seed = int(secure_generator().integers(2**32))
    else:
        seed, derived_seed = split_seed(seed)
    t_load = time.perf_counter() - t0

    t1 = time.perf_counter()
    W_sel = W if select_for is None else workload_matrix(select_for, dom, "select_for")
    if plan is None:
        sel, derived = _selector(selector, params, derived_seed)
        strategy = sel.select(W_sel, privacy)
    else:  # the plan's seed stays in its params: "given" (a summary replay keeps it)
        strategy, derived = plan.strategy, False
    t_select = time.perf_counter() - t1
    # the seed the selector used (its own parameter), derived from `seed` or given
    takes_seed = "seed" in strategy.params
    selection_seed = strategy.params.get("seed") if takes_seed else None
    if private and derived:  # drawn from the secure source: kept only in the strategy
        selection_seed = None
    t2 = time.perf_counter()
    total = evaluate.expected_error(W, strategy, privacy)
    try:
        stderr = mechanism.standard_errors(W, strategy, privacy)
    except TooLargeError:
        stderr = None
    t_eval = time.perf_counter() - t2
    # every check of the measurement (memory, fit, discrete noise) before any charge
    mplan = _noise_plan(strategy, privacy, noise, private and not noise_given, W, recs, releases)
    found = _intervals(stderr, mplan, alpha, simultaneous, workload_tables(W, dom))
    half = None if found is None else found.half

    if seed is None:  # private (else split_seed gave the seed)
        digest = key = None
        rng = secure_generator()
    else:
        digest = data_digest(recs, seed)
        key = release_key(
            seed,
            {
                "privacy": privacy.to_spec(),
                "noise": noise,
                "releases": releases,
                "selector": strategy.selector,
                "params": strategy.params,
                "strategy": type(strategy.matrix).__name__,
                "workload": matrix_digest(W),  # the same for a SPEC and the Matrix it builds
                "select_for": None if select_for is None else matrix_digest(W_sel),
                "data": digest,
            },
        )
        rng = noise_generator(seed, key)
    charged: tuple[Ledger, int] | None = None  # the ledger and its pending entry
    if ledger is not None:
        book = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
        # N is private: not recorded
        text = description or f"{workload_text} by {strategy.selector}"
        seed_key = None if seed is None else seed_fingerprint(seed)  # only a seed is fingerprinted
        charged = book, book.charge(  # before any noise is drawn
            privacy, releases, text, seed_key=seed_key, release_key=key
        )
    entry = None if charged is None else charged[1]
    t3 = time.perf_counter()
    untouched = _state(rng)
    try:
        measured, shown = [], t3
        for r in range(releases):
            measured.append(mechanism.release_planned(mplan, recs, rng))
            now = time.perf_counter()
            if progress and now - shown >= PROGRESS_SECONDS and r + 1 < releases:
                out = sys.stderr if progress is True else progress
                print(f"release {r + 1}/{releases}, {now - t3:.1f} s", file=out, flush=True)
                shown = now
    except BaseException:
        if charged is not None and _state(rng) == untouched:
            charged[0].cancel(charged[1])  # failed before any noise was drawn: nothing spent
        raise  # else the entry stays pending: noise was drawn, the budget is spent
    answers = measured[0][0] if releases == 1 else np.stack([a for a, _ in measured], 1)
    h = None if half is None else (half if answers.ndim == 1 else half[:, None])
    t_release = time.perf_counter() - t3
    if charged is not None:
        charged[0].commit(charged[1])

    tables = workload_tables(W, dom)
    meas = [_measurements(m, tables, dom, a, stderr, mplan.distribution) for a, m in measured]
    spent = mplan.charge(releases)
    m = int(W.shape[0])
    summary = {
        "privacy": privacy.describe(),
        "privacy_spec": privacy.to_spec(),
        "releases": releases,
        "spent": spent,
        "composition": (
            f"each release spends the full budget; together they are {releases}-fold composition"
            if releases > 1
            else None
        ),
        "ledger": None if charged is None else {
            "path": str(charged[0].path),
            "entry": charged[1],
            "zcdp_spent": charged[0].zcdp_as_approx_dp(),  # the ledger's zCDP total, both (ε, δ)
        },
        "mode": _mode_text(private, mplan.distribution),
        "selector": strategy.selector,
        "params": jsonable(strategy.params),
        "strategy": type(strategy.matrix).__name__,
        "operator": (strategy.metadata or {}).get("operator"),
        "workload": workload_text,
        "workload_is_spec": isinstance(workload, str),  # else a Matrix's repr: not replayable
        "selected_for": None
        if select_for is None
        else {
            "workload": select_for if isinstance(select_for, str) else repr(select_for),
            "workload_is_spec": isinstance(select_for, str),
            "queries": int(W_sel.shape[0]),
            "expected_rmse": evaluate.rmse(W_sel, strategy, privacy),
        },
        "queries": m,
        "domain_cells": str(dom.size),
        "expected_total_squared_error": total,
        "expected_rmse": math.sqrt(total / m),
        "noise": noise,
        # which exact sampler drew the noise: the paths draw other values for one seed
        "exact_sampler": None if noise != "discrete" else {
            "path": array_path(),
            "note": "the compiled (numba) and numpy exact samplers draw the same law but not "
            "the same values for a seed: a seeded release is reproduced on the same path "
            "(MMTOOLKIT_NUMBA=1 compiled, 0 numpy)",
        },
        "intervals": None if half is None else {
            "alpha": alpha,
            "simultaneous": simultaneous,
            "method": found.describe() + BONFERRONI[simultaneous],
            "answers_by_method": found.counts(),
            "proxy_factor": mplan.proxy_factor,
        },
        "seed": seed,  # (the fields of the seed: removed below from a private release's)
        "selection_seed": selection_seed,
        "selection_seed_source": (
            None if not takes_seed else "derived from seed" if derived else "given in params"
        ),
        "seed_derivation": (
            "selection: numpy SeedSequence(seed).spawn(2)[0] (the selector's seed parameter "
            "unless given); noise: SeedSequence(seed, spawn_key=(1, release key)), the release "
            "key an HMAC under the seed of everything that defines the release (privacy, "
            "noise, releases, selector and parameters, strategy, workload, data digest), so "
            "releases that differ in anything draw independent noise"
        ),
        "data_digest": digest,
        "plan": None if plan is None else {"source": plan.source, "sha256": plan.sha256},
        "seconds": {"load": t_load, "select": t_select, "evaluate": t_eval, "release": t_release},
    }
    if private:  # no seed, key or state written anywhere
        for k in ("seed", "selection_seed", "selection_seed_source", "seed_derivation",
                  "data_digest"):  # fmt: skip
            del summary[k]
        if derived:  # the selection seed drawn from the secure source
            summary["params"].pop("seed", None)
    return ReleaseResult(answers=answers, stderr=stderr, workload=W, domain=dom,
                         bins=dict(recs.bins), privacy=privacy, spent=spent, seed=seed,
                         selection_seed=selection_seed, strategy=strategy, measurements=meas,
                         summary=summary, ledger_entry=entry, tables_spec=tables,
                         lower=None if h is None else answers - h,
                         upper=None if h is None else answers + h,
                         interval_methods=None if found is None else found.methods)
