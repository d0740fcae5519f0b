"""Workloads as ResidualPlanner sees them (§4.1, §7.1): :class:`ResidualWorkload` (attribute
sets over per-attribute bases, a weight on each set's squared error), :class:`SubsetTable`
(every pair ``(Ã, A' ⊆ Ã)`` and the downward closure, §4.2) and :func:`parse_workload`.
User guide: docs/algorithms/residual-planner.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ...checks import check_int
from ...linalg import Matrix, as_matrix, normal_form
from ..base import NotApplicableError
from .basis import AttributeBasis, general_basis, marginal_basis


class ResidualWorkload:
    """Attribute ``sets`` (empty: the 0-way total) over ``bases`` (one :class:`AttributeBasis`
    each), ``weights`` on each set's squared error (default 1); bad input: a ``ValueError``."""

    def __init__(self, bases: Sequence[AttributeBasis], sets, weights=None):
        self.bases = list(bases)
        if not self.bases:
            raise ValueError("a residual workload needs at least one attribute")
        for b in self.bases:
            if not isinstance(b, AttributeBasis):
                raise TypeError(f"bases must be AttributeBasis objects, got {type(b).__name__}")
        d = len(self.bases)
        if isinstance(sets, (str, bytes)) or not isinstance(sets, Iterable):
            raise ValueError(f"sets must be a list of attribute sets, got {sets!r}")
        clean = []
        for j, s in enumerate(sets):
            if isinstance(s, (str, bytes)) or not isinstance(s, Iterable):
                raise ValueError(f"set {j} must be a collection of attribute indices, got {s!r}")
            items = list(s)
            for a in items:
                if not 0 <= check_int(a, f"sets[{j}]") < d:
                    raise ValueError(
                        f"set {j}: attribute {a} is outside the domain (attributes 0..{d - 1})"
                    )
            t = tuple(sorted(int(a) for a in items))
            if len(set(t)) != len(t):
                raise ValueError(f"set {j} names an attribute twice: {items}")
            clean.append(t)
        if not clean:
            raise ValueError("a residual workload needs at least one attribute set")
        self.sets = clean
        if weights is None:
            w = np.ones(len(clean))
        else:
            w = np.asarray(list(weights), dtype=float)
            if w.shape != (len(clean),):
                raise ValueError(f"got {w.size} weights for {len(clean)} attribute sets")
            if not np.all(np.isfinite(w)) or np.any(w <= 0):
                raise ValueError("set weights must be positive and finite")
        self.weights = w

    @property
    def d(self) -> int:
        return len(self.bases)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(b.n for b in self.bases)

    @property
    def all_marginal(self) -> bool:
        return all(b.marginal for b in self.bases)

    def set_rows(self) -> np.ndarray:
        """Number of queries of each set: ``Π_{i∈Ã} rows(W_i)``."""
        r = np.array([b.rows for b in self.bases], dtype=float)
        return np.array([math.prod(r[list(s)]) if s else 1.0 for s in self.sets])

    def num_queries(self) -> int:
        rows = [b.rows for b in self.bases]
        return int(sum(math.prod(rows[i] for i in s) for s in self.sets))

    @functools.cached_property
    def table(self) -> SubsetTable:
        """The :class:`SubsetTable` of the sets (computed once)."""
        return SubsetTable(self.sets, self.sizes)


# ============================================================================ subset table
class SubsetTable:
    """Every pair ``(Ã, A' ⊆ Ã)`` of a list of sets and the downward closure (§4.2): ``closure``
    (padded ``(K, kmax)``, -1 = empty), ``blocks`` ``(pattern, set_idx, closure_idx)``."""

    def __init__(self, sets: list[tuple[int, ...]], sizes: Sequence[int], *, codes: bool = True):
        self.sizes = np.asarray(sizes, dtype=np.int64)
        d = len(self.sizes)
        m = len(sets)
        self.kmax = kmax = max((len(s) for s in sets), default=0)
        P = np.full((m, kmax), -1, dtype=np.int64)
        lens = np.array([len(s) for s in sets], dtype=np.int64)
        for j, s in enumerate(sets):
            P[j, : len(s)] = s
        self.padded = P
        self.lens = lens
        base = d + 1
        use_codes = codes and kmax * math.log2(base) < 62  # else np.unique over rows
        raw = []  # (pattern, rows, subset array)
        codes_all: list[np.ndarray] = []  # per pattern: codes (use_codes) or padded rows
        unit = np.zeros(d + 1, dtype=bool)  # attribute of size 1 (index d = pad)
        unit[:d] = self.sizes == 1
        for pat in range(1 << kmax):
            pos = [j for j in range(kmax) if (pat >> j) & 1]
            rows = np.nonzero(lens > (pos[-1] if pos else -1))[0]
            sub = (
                P[np.ix_(rows, np.asarray(pos, dtype=np.intp))]
                if pos
                else np.zeros((len(rows), 0), dtype=np.int64)
            )
            if pos and unit.any():
                ok = ~unit[sub].any(axis=1)
                rows, sub = rows[ok], sub[ok]
            raw.append((pat, rows, sub))
            if use_codes:
                code = np.zeros(len(rows), dtype=np.int64)
                for j in range(len(pos)):
                    code += (sub[:, j] + 1) * base**j
                codes_all.append(code)
            else:
                full = np.full((len(rows), kmax), -1, dtype=np.int64)
                full[:, : len(pos)] = sub
                codes_all.append(full)
        clo: np.ndarray  # the closure sets, -1 padded
        inv: np.ndarray  # per (pattern, row) its closure set
        if use_codes:
            allc = np.concatenate(codes_all)
            uniq, inv = np.unique(allc, return_inverse=True)
            clo = np.full((len(uniq), kmax), -1, dtype=np.int64)
            rem = uniq.copy()
            for j in range(kmax):
                clo[:, j] = rem % base - 1
                rem //= base
        else:
            allc = np.vstack(codes_all)
            clo, inv = np.unique(allc, axis=0, return_inverse=True)
        inv = inv.ravel()
        # canonical order: size, then lexicographic
        size = (clo >= 0).sum(axis=1)
        order = np.lexsort(tuple(clo[:, j] for j in reversed(range(kmax))) + (size,))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        self.closure = clo[order]
        self.closure_size = size[order]
        self.blocks = []
        off = 0
        for pat, rows, _sub in raw:
            k = len(rows)
            self.blocks.append((pat, rows, rank[inv[off : off + k]]))
            off += k

    @property
    def num_closure(self) -> int:
        return len(self.closure)

    @property
    def num_pairs(self) -> int:
        return int(sum(len(r) for _, r, _ in self.blocks))

    def closure_sets(self) -> list[tuple[int, ...]]:
        return [tuple(int(a) for a in row if a >= 0) for row in self.closure]

    def closure_product(self, per_attr: ArrayLike) -> np.ndarray:
        """``Π_{i∈A} per_attr[i]`` for every closure set ``A``."""
        ext = np.append(np.asarray(per_attr, dtype=float), 1.0)
        return ext[self.closure].prod(axis=1) if self.kmax else np.ones(len(self.closure))

    def pair_coefficients(self, inside: np.ndarray, outside: np.ndarray, set_factor=None):
        """For every pair ``(Ã, A')``: ``Π_{i∈A'} inside[i] · Π_{i∈Ã\\A'} outside[i]``
        (times ``set_factor[Ã]``). Yields ``(set_idx, closure_idx, coefficient)`` blocks."""
        ins = np.append(np.asarray(inside, dtype=float), 1.0)
        outs = np.append(np.asarray(outside, dtype=float), 1.0)
        P = self.padded
        for pat, rows, cidx in self.blocks:
            coef = np.ones(len(rows))
            for j in range(self.kmax):
                col = P[rows, j]
                coef *= ins[col] if (pat >> j) & 1 else outs[col]
            if set_factor is not None:
                coef = coef * set_factor[rows]
            yield rows, cidx, coef

    def accumulate(self, inside, outside, set_factor=None) -> np.ndarray:
        """``v[A'] = Σ_{Ã ⊇ A'} set_factor[Ã] Π_{i∈A'} inside_i Π_{i∈Ã\\A'} outside_i``."""
        v = np.zeros(len(self.closure))
        for _rows, cidx, coef in self.pair_coefficients(inside, outside, set_factor):
            v += np.bincount(cidx, weights=coef, minlength=len(v))
        return v

    def per_set(self, inside, outside, closure_values) -> np.ndarray:
        """``out[Ã] = Σ_{A'⊆Ã} closure_values[A'] Π_{i∈A'} inside_i Π_{i∈Ã\\A'} outside_i``."""
        out = np.zeros(len(self.lens))
        for rows, cidx, coef in self.pair_coefficients(inside, outside):
            out += np.bincount(rows, weights=coef * closure_values[cidx], minlength=len(out))
        return out

    def sparse_matrix(self, inside, outside, set_factor=None):
        """The (sets x closure) scipy CSR matrix of the pair coefficients."""
        import scipy.sparse as sp

        blocks = self.pair_coefficients(inside, outside, set_factor)  # pattern 0: never empty
        r, c, v = (np.concatenate(parts) for parts in zip(*blocks))
        return sp.csr_matrix((v, (r, c)), shape=(len(self.lens), len(self.closure)))


# ============================================================================ parsing
def _same_basis(a: Matrix, b: Matrix) -> bool:
    if a is b:
        return True
    if type(a) is not type(b) or a.shape != b.shape:
        return False
    if a.factor_kind in ("identity", "prefix", "all_range"):  # fixed by its shape
        return True
    if a.shape[0] * a.shape[1] > 4_000_000:
        return False
    return bool(np.array_equal(a.dense(), b.dense()))


def parse_workload(W: Matrix, *, marginals_only: bool = False, bases=None, strategies=None):
    """A workload Matrix (its normal form, §7.1) as a :class:`ResidualWorkload`; ``marginals_only``:
    identities only; ``bases``: given basic matrices; ``strategies``: ``(i, W_i) -> basis``."""
    if not isinstance(W, Matrix):
        raise TypeError(f"workload must be a linalg.Matrix, got {type(W).__name__}")
    nf = normal_form(W)
    sizes = nf.terms[0].sizes
    d = len(sizes)
    if bases is None and nf.marginals:  # identities and totals only: read from the keys
        live = [t for t in nf.terms if t.c != 0.0]
        sets, weights = [t.attrs for t in live], [t.c for t in live]
        return ResidualWorkload([marginal_basis(n) for n in sizes], sets, weights)
    found: list[Matrix | None] = [None] * d
    if bases is not None:
        if len(bases) != d:
            raise ValueError(f"got {len(bases)} basic matrices for {d} attributes")
        for i, b in enumerate(bases):
            if b is not None:
                found[i] = as_matrix(b)
    sets, weights = [], []
    for t, term in enumerate(nf.terms):
        if term.sizes != sizes:
            raise NotApplicableError(
                "every term of the workload must be a Kronecker product over the same "
                f"attributes (sizes {list(sizes)}); term {t} has {list(term.sizes)}"
            )
        s = []
        for i, (f, kind) in enumerate(zip(term.factors, term.kinds, strict=True)):
            known = found[i]
            if kind == "total" and not (known is not None and known.factor_kind == "total"):
                continue
            if known is None:
                found[i] = f
            elif not _same_basis(known, f):
                raise NotApplicableError(
                    f"attribute {i} uses two different basic matrices ({known!r} and {f!r}); "
                    "ResidualPlanner+ needs one basic matrix per attribute (§7.1)"
                )
            s.append(i)
        if term.c == 0.0:
            continue
        sets.append(tuple(s))
        weights.append(term.c)
    out = []
    for i, n in enumerate(sizes):
        Wi = found[i]
        if Wi is None or Wi.factor_kind == "identity":
            out.append(marginal_basis(n))
        elif marginals_only:
            raise NotApplicableError(
                f"attribute {i} has basic matrix {Wi!r}, not the identity: ResidualPlanner "
                "answers marginals only; use residual_planner_plus for generalized marginals"
            )
        elif strategies is not None:
            out.append(strategies(i, Wi))
        else:
            out.append(general_basis(Wi))
    return ResidualWorkload(out, sets, weights)
