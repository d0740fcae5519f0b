"""The error route of the ResidualPlanner(+) strategy kind (He et al., §4–5, Thm 4.4, 7.2), any
number of attributes: what :meth:`ResidualStrategyMatrix.error_route` returns to the evaluator
(the strategy-kind protocol, :mod:`mmtoolkit.linalg.route`).
User guide: docs/algorithms/residual-planner.md.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from ...linalg import (
    SUPPORT_RTOL,
    Identity,
    Marginals,
    Matrix,
    UnsupportedWorkloadError,
    check_dense_size,
    kron_terms,
    peel,
)
from ...linalg.marginals import is_total
from ...linalg.route import common_sizes


class ResidualTerms(Protocol):
    """What the route reads from a ResidualPlanner strategy (``ResidualStrategyMatrix``, whose
    module imports this one): the terms of its pseudo-inverse's Gram."""

    def residual_pinv_terms(self) -> tuple[Any, list[np.ndarray], Any, np.ndarray]: ...

#: One product of the workload: ``(c, support, factors)``, ``c`` its squared weight, ``support``
#: the attributes it does not total over, ``factors`` its factors on them (None: identities).
Term = tuple[float, tuple[int, ...], list[Matrix] | None]


def subsets(support):
    """``(pattern, subset)`` for every subset of ``support`` (bit j of the pattern keeps
    ``support[j]``)."""
    k = len(support)
    for pat in range(1 << k):
        yield pat, tuple(support[j] for j in range(k) if (pat >> j) & 1)


def product_variances(coef: dict, support, rows) -> np.ndarray:
    """Per-query variances of ``⊗_{i∈support} W_i`` (He et al. Thm 4.4, 7.2):
    ``Σ_{B⊆support} c_B ⊗_i (h_i if i ∈ B else s_i)``; ``coef``: ``{B: σ²_B}``; ``rows[j]``:
    ``(h, s)`` with ``h_i = diag(W_i H_i W_iᵀ)``, ``s_i = (W_i 1)²/n_i²``."""
    cells = math.prod(len(h) for h, _ in rows)
    check_dense_size(cells, 1, "a per-query vector")
    out = np.zeros(cells)
    for pat, B in subsets(support):
        cb = coef.get(B)
        if cb is None:
            continue
        vec = np.array([cb])
        for j, (h, s) in enumerate(rows):
            vec = np.kron(vec, h if (pat >> j) & 1 else s)
        out += vec
    return out


def dominant_profiles(h, s) -> np.ndarray:
    """Indices of the rows ``(h_r, s_r)`` that can be a worst case (He et al. Thm 7.2, §4.4):
    the vertices of the upper-right convex hull of the points (why: guide page)."""
    h = np.asarray(h, dtype=float)
    s = np.asarray(s, dtype=float)
    order = np.lexsort((-s, -h))  # h descending, then s descending
    front: list[int] = []  # Pareto front: h strictly decreasing, s strictly increasing
    for r in order:
        if not front or s[r] > s[front[-1]]:
            front.append(int(r))
    hull: list[int] = []  # upper hull of the front (monotone chain, h increasing)
    for r in reversed(front):
        while len(hull) >= 2:
            o, a = hull[-2], hull[-1]
            cross = (h[a] - h[o]) * (s[r] - s[o]) - (s[a] - s[o]) * (h[r] - h[o])
            if cross < 0:
                break
            hull.pop()  # a lies on or below the segment o -> r
        hull.append(r)
    return np.array(sorted(hull), dtype=np.int64)


class ResidualRoute:
    """Union of Kronecker products (or weighted Marginals) × a strategy with
    ``residual_pinv_terms()`` (Thm 4.4, 7.2): variances from the closure sets inside a support."""

    @classmethod
    def build(cls, W: Matrix, A: ResidualTerms) -> ResidualRoute | None:
        sizes, H, sets, c = A.residual_pinv_terms()
        weight, core = peel(W)
        terms: list[Term] = []
        if isinstance(core, Marginals):  # fast path: supports from the bitmask keys
            if list(core.sizes) != list(sizes):
                return None
            for key, theta in core.weights.items():
                bits: list[int] = []
                rest = key
                while rest:  # the set bits only (keys may have hundreds of bits)
                    low = rest & -rest
                    bits.append(low.bit_length() - 1)
                    rest ^= low
                terms.append(((weight * theta) ** 2, tuple(bits), None))
        else:
            raw = kron_terms(W)
            if common_sizes(raw) != list(sizes):
                return None
            for t, factors in raw:
                support = tuple(i for i, f in enumerate(factors) if not is_total(f))
                terms.append((t, support, [factors[i] for i in support]))
        return cls(sizes, H, sets, c, terms)

    def __init__(self, sizes, H, sets, c, terms: list[Term]):
        self.sizes = list(sizes)
        self.H = H
        self.coef = {tuple(s): float(v) for s, v in zip(sets, c)}
        self.terms = terms
        self._rows: dict = {}

    # ---- vectorised path for marginal workloads (every factor an identity): one numpy pass
    # per subset pattern instead of a Python loop over (marginal, subset) pairs
    def _fast(self):
        if hasattr(self, "_fast_data"):
            return self._fast_data
        self._fast_data = None
        if not self.terms or any(f is not None for _, _, f in self.terms):
            return None
        d = len(self.sizes)
        kmax = max(len(s) for _, s, _ in self.terms)
        kc = max((len(s) for s in self.coef), default=0)
        base = d + 1
        if max(kmax, kc) * math.log2(base) >= 62:
            return None
        m = len(self.terms)
        P = np.full((m, max(kmax, 1)), -1, dtype=np.int64)
        lens = np.empty(m, dtype=np.int64)
        wts = np.empty(m)
        for j, (c, s, _) in enumerate(self.terms):
            P[j, : len(s)] = s
            lens[j] = len(s)
            wts[j] = c
        powers = base ** np.arange(max(kmax, kc, 1), dtype=np.int64)
        codes = np.array(
            [sum((a + 1) * int(powers[j]) for j, a in enumerate(s)) for s in self.coef],
            dtype=np.int64,
        )
        vals = np.array(list(self.coef.values()), dtype=float)
        order = np.argsort(codes)
        diag = [np.diag(h) if h.size else np.zeros(0) for h in self.H]
        const = all(dg.size == 0 or np.ptp(dg) <= 1e-12 * max(1.0, np.abs(dg).max()) for dg in diag)
        self._fast_data = {
            "P": P,
            "lens": lens,
            "w": wts,
            "kmax": kmax,
            "codes": codes[order],
            "vals": vals[order],
            "powers": powers,
            "trH": np.append([float(np.sum(dg)) for dg in diag], 1.0),
            "h": np.append([float(dg[0]) if dg.size else 0.0 for dg in diag], 1.0),
            "n": np.append(np.asarray(self.sizes, dtype=float), 1.0),
            "unit": np.append(np.asarray(self.sizes) == 1, False),
            "const": const,
        }
        return self._fast_data

    def _fast_patterns(self):
        """Yield (pattern, term rows, found mask, c_B (0 if absent), attribute columns)."""
        F = self._fast_data
        P, lens, codes, vals = F["P"], F["lens"], F["codes"], F["vals"]
        for pat in range(1 << F["kmax"]):
            pos = [j for j in range(F["kmax"]) if (pat >> j) & 1]
            rows = np.nonzero(lens > (pos[-1] if pos else -1))[0]
            code = np.zeros(len(rows), dtype=np.int64)
            for j, p in enumerate(pos):
                code += (P[rows, p] + 1) * F["powers"][j]
            idx = np.clip(np.searchsorted(codes, code), 0, max(len(codes) - 1, 0))
            found = codes[idx] == code if len(codes) else np.zeros(len(rows), dtype=bool)
            cb = np.where(found, vals[idx] if len(vals) else 0.0, 0.0)
            yield pat, rows, found, cb

    def _fast_check(self) -> None:
        F = self._fast_data
        for pat, rows, found, _ in self._fast_patterns():
            miss = rows[~found]
            if not len(miss):
                continue
            P = F["P"][miss]
            sel = [j for j in range(F["kmax"]) if (pat >> j) & 1]
            dead = ~F["unit"][P[:, sel]].any(axis=1) if sel else np.ones(len(miss), bool)
            live = F["w"][miss] != 0.0
            if np.any(dead & live):
                j = int(miss[np.argmax(dead & live)])
                B = [int(a) for a in F["P"][j, sel]]
                raise UnsupportedWorkloadError(
                    "the residual strategy does not support the workload: a marginal has "
                    f"weight on the residual of attributes {B}, which no base mechanism measures"
                )

    def _fast_values(self, inside, outside) -> np.ndarray:
        F = self._fast_data
        acc = np.zeros(len(F["w"]))
        for pat, rows, _, cb in self._fast_patterns():
            prod = np.ones(len(rows))
            for j, col in enumerate(F["P"][rows, : F["kmax"]].T):  # -1 (padding): the last 1.0
                prod *= inside[col] if (pat >> j) & 1 else outside[col]
            acc[rows] += cb * prod
        return F["w"] * acc

    def _factor_rows(self, i: int, f: Matrix | None):
        """Per row w of factor f on attribute i: (w H_i wᵀ, (w·1)²/n², ||P⊥w||², (w·1)²/n)."""
        key = (i, id(f))
        if key not in self._rows:
            n = self.sizes[i]
            if f is None or isinstance(f, Identity):
                h = np.clip(np.diag(self.H[i]), 0.0, None)
                out = (h, np.full(n, 1.0 / n**2), np.full(n, 1.0 - 1.0 / n), np.full(n, 1.0 / n))
            else:
                check_dense_size(f.shape[0], n, "a workload factor (residual route)")
                F = f.dense()
                sums = F.sum(axis=1)
                h = np.clip(np.einsum("ij,jk,ik->i", F, self.H[i], F), 0.0, None)
                t = np.clip(np.einsum("ij,ij->i", F, F) - sums**2 / n, 0.0, None)
                out = (h, sums**2 / n**2, t, sums**2 / n)
            self._rows[key] = (f, out)
        return self._rows[key][1]

    def _term_rows(self, support, factors):
        return [
            self._factor_rows(i, None if factors is None else factors[j])
            for j, i in enumerate(support)
        ]

    def check_support(self) -> None:
        if self._fast() is not None:
            return self._fast_check()
        for c, support, factors in self.terms:
            if c == 0.0:
                continue
            rows = self._term_rows(support, factors)
            fracs = []
            for _, _, t, s in rows:
                q = t + s
                live = q > 0
                if not live.any():
                    break  # a zero factor: every query of the term is 0
                fracs.append(t[live] / q[live])
            else:
                for pat, B in subsets(support):
                    if B in self.coef or any(self.sizes[i] == 1 for i in B):
                        continue
                    worst = 1.0
                    for j, fr in enumerate(fracs):
                        worst *= fr.max() if (pat >> j) & 1 else 1.0 - fr.min()
                    if worst > SUPPORT_RTOL:
                        raise UnsupportedWorkloadError(
                            "the residual strategy does not support the workload: a query has "
                            f"weight on the residual of attributes {list(B)}, which no base "
                            "mechanism measures"
                        )

    def trace(self) -> float:
        F = self._fast()
        if F is not None:  # Σ over a marginal's cells: Σ_i h = tr(H_i), Σ_i s = 1/n_i
            return float(np.sum(self._fast_values(F["trH"], 1.0 / F["n"])))
        total = 0.0
        for c, support, factors in self.terms:
            if c == 0.0:
                continue
            rows = self._term_rows(support, factors)  # summed over the rows: one "query"
            sums = [(np.sum(h, keepdims=True), np.sum(s, keepdims=True)) for h, s, _, _ in rows]
            total += c * float(product_variances(self.coef, support, sums)[0])
        return total

    def _term_profile(self, c, support, factors, worst: bool) -> np.ndarray:
        """Per-query variances of a term; ``worst``: only the rows that can attain the
        term's maximum (:func:`dominant_profiles`)."""
        rows = []
        for h, s, _, _ in self._term_rows(support, factors):
            keep = dominant_profiles(h, s) if worst else slice(None)
            rows.append((h[keep], s[keep]))
        return c * product_variances(self.coef, support, rows)

    def profile(self) -> np.ndarray:
        F = self._fast()
        if F is not None and F["const"]:  # every cell of a marginal has the same variance
            per = self._fast_values(F["h"], 1.0 / F["n"] ** 2)
            cells = [math.prod(self.sizes[i] for i in s) for _, s, _ in self.terms]
            check_dense_size(sum(cells), 1, "a per-query vector")
            return np.repeat(per, cells)
        return np.concatenate([self._term_profile(c, s, f, worst=False) for c, s, f in self.terms])

    def max_profile(self) -> float:
        F = self._fast()
        if F is not None and F["const"]:
            return float(np.max(self._fast_values(F["h"], 1.0 / F["n"] ** 2)))
        return max(float(np.max(self._term_profile(c, s, f, worst=True))) for c, s, f in self.terms)
