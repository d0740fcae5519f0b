"""The evaluator's generic structured route: a strategy that is a union of weighted Kronecker
products (HDMM OPT_+ stacks, a lone large p-Identity product), whatever kinds its factors are.
It reads the strategy through ``kron_terms`` only, so it needs no strategy kind to declare it;
the evaluator tries it when the kind offers no route of its own (``Matrix.error_route``)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..linalg import Kronecker, Matrix, TooLargeError, VStack, as_matrix, check_dense_size, peel
from ..linalg import base as _linalg_base
from ..linalg.kronecker import StrategyFactor, kron_all
from ..linalg.route import common_sizes
from ..linalg.union import TwoProductBasis


class StackedKroneckerRoute:
    """Union of Kronecker products × a strategy ``[w_1 𝔸_1; w_2 𝔸_2]`` stacking two weighted
    Kronecker products (HDMM OPT_+, Def. 11), or one product (a bare matrix counts as a
    one-factor product) with a factor beyond the dense guard whose Gram inverse is
    ``diag − low rank`` (a p-Identity, HDMM Thm 4). Exact, no N x N array.

    Two blocks: with ``G_i``, ``H_i`` the factor Grams and every ``G_i`` positive definite,
    ``G_i = L_iL_iᵀ`` (Cholesky), ``L_i⁻¹H_iL_i⁻ᵀ = U_iΛ_iU_iᵀ`` and ``V_i = L_i⁻ᵀU_i``
    (:class:`~mmtoolkit.linalg.union.TwoProductBasis`, which the reconstruction shares) give
    ``AᵀA = w_1² ⊗G_i + w_2² ⊗H_i = (⊗V_i)⁻ᵀ (w_1² + w_2² ⊗Λ_i) (⊗V_i)⁻¹``: full rank (so every
    query is supported) and ``tr(⊗Y_i (AᵀA)⁻¹) = Σ_cells Π_i (V_iᵀY_iV_i)_jj / (w_1² + w_2² Π λ)``,
    summed over the N cells in chunks. Per-query variances are Kronecker mat-vecs of
    ``(W_iV_i)²`` with that N-vector (size-guarded).
    """

    CHUNK = 1 << 20
    #: Largest domain whose two-block trace is computed: the sum runs over all N cells
    #: (~N·K_1 flops, ~15 s of one core at N = 10^10), so beyond this it is refused.
    MAX_CELLS = 10**11

    @classmethod
    def build(cls, W: Matrix, A: Matrix):
        blocks = A.blocks if isinstance(A, VStack) else [A]
        if len(blocks) > 2:
            return None
        parsed = []
        for b in blocks:
            w, base = peel(b)
            parsed.append((w * w, list(base.factors) if isinstance(base, Kronecker) else [base]))
        sizes = [f.shape[1] for f in parsed[0][1]]
        if any([f.shape[1] for f in fs] != sizes for _, fs in parsed):
            return None
        terms = W.kron_terms()
        if common_sizes(terms) != sizes or any(c == 0.0 for c, _ in parsed):
            return None
        if len(parsed) == 1:
            return LoneProductRoute.build(terms, parsed[0])
        if any(n * n > _linalg_base.MAX_DENSE_ENTRIES for n in sizes):
            return None
        if math.prod(sizes) > cls.MAX_CELLS:
            raise TooLargeError(
                f"the exact error of a two-block union strategy on N = {math.prod(sizes):.3g} "
                f"cells sums over every cell (limit MAX_CELLS = {cls.MAX_CELLS:.3g})"
            )
        try:
            return cls(terms, parsed, sizes)
        except np.linalg.LinAlgError:
            return None

    def __init__(self, terms, parsed, sizes):
        self.terms, self.sizes = terms, sizes
        grams = [[f.gram().dense() for f in fs] for _, fs in parsed]
        basis = TwoProductBasis(grams, [c for c, _ in parsed])
        self.c1, self.c2, self.V, self.lam = basis.c1, basis.c2, basis.V, basis.lam
        self._q: dict[int, tuple[Matrix, np.ndarray]] = {}  # f kept with its value

    def check_support(self) -> None:
        return  # AᵀA is positive definite

    def _qvec(self, f: Matrix, i: int) -> np.ndarray:
        """Column norms² of f V_i, as diag(V_iᵀ (fᵀf) V_i): never the m x n product."""
        if id(f) not in self._q:
            V = self.V[i]
            self._q[id(f)] = (f, np.sum(V * f.gram().matvec(V), axis=0))
        return self._q[id(f)][1]

    def _distinct_q(self):
        """Per attribute, the distinct rows ``q`` of the terms' factors (one per distinct
        workload factor object) as a K_i x n_i array, and ``index[i, t]``, term t's row."""
        Q, index = [], np.empty((len(self.sizes), len(self.terms)), dtype=np.intp)
        for i in range(len(self.sizes)):
            rows: dict[int, tuple[int, Matrix]] = {}  # insertion order = row order
            for t, (_, fs) in enumerate(self.terms):
                hit = rows.get(id(fs[i]))
                if hit is None:
                    hit = rows[id(fs[i])] = (len(rows), fs[i])
                index[i, t] = hit[0]
            Q.append(np.array([self._qvec(f, i) for _, f in rows.values()]))
        return Q, index

    def trace(self) -> float:
        """``Σ_t c_t Σ_cells Π_i q_ti[j_i] / (c1 + c2 Π_i λ_i[j_i])`` for all terms at once:
        the N-cell array ``1/(c1 + c2 ⊗λ)`` (generated a slab of trailing attributes at a
        time) is contracted attribute by attribute with the K_i distinct ``q`` rows, so the
        cost is ~N·K_1 flops whatever the number of terms (a union of many products repeats
        very few factors per attribute)."""
        Q, index = self._distinct_q()
        d = len(self.sizes)
        width = [max(n, len(q)) for n, q in zip(self.sizes, Q)]
        split = d  # attributes split.. form one slab of cells per index of the head ones
        while split > 0 and math.prod(width[split - 1 :]) <= self.CHUNK:
            split -= 1
        tail_l: np.ndarray = np.ones(1)
        for lam in self.lam[split:]:
            tail_l = np.kron(tail_l, lam)
        tail_index = tuple(index[split:])
        per_term = np.zeros(len(self.terms))
        inv = np.empty_like(tail_l)
        for head in itertools.product(*(range(n) for n in self.sizes[:split])):
            lh = math.prod(float(self.lam[i][j]) for i, j in enumerate(head))
            np.multiply(tail_l, self.c2 * lh, out=inv)
            inv += self.c1
            np.reciprocal(inv, out=inv)
            # contract the cell axes in order: (K_s..K_{i-1}, n_i, rest) -> (K_s..K_i, rest)
            X: np.ndarray = inv.reshape(1, -1)
            for i in range(split, d):
                X = np.matmul(Q[i], X.reshape(X.shape[0], self.sizes[i], -1))
                X = X.reshape(X.shape[0] * X.shape[1], -1)
            X = X.reshape([len(Q[i]) for i in range(split, d)])
            weight = np.ones(len(self.terms))
            for i, j in enumerate(head):
                weight *= Q[i][index[i], j]
            per_term += weight * X[tail_index]
        return float(np.dot([c for c, _ in self.terms], per_term))

    def _inv_denominator(self) -> np.ndarray:
        N = math.prod(self.sizes)
        check_dense_size(N, 1, "per-query variances of a stacked Kronecker strategy")
        lam_all: np.ndarray = np.ones(1)
        for lam in self.lam:
            lam_all = np.kron(lam_all, lam)
        return 1.0 / (self.c1 + self.c2 * lam_all)

    def profile(self) -> np.ndarray:
        inv = self._inv_denominator()
        parts = []
        for c, fs in self.terms:
            for f in fs:
                rows, cols = f.shape
                check_dense_size(rows, cols, "a workload factor (per-query variance)")
            R = [as_matrix(f.matvec(self.V[i]) ** 2) for i, f in enumerate(fs)]
            parts.append(c * (Kronecker(R) @ inv))
        return np.concatenate(parts)

    def max_profile(self) -> float:
        return float(np.max(self.profile()))


class LowRankFactor:
    """A full-rank strategy factor whose Gram inverse exposes ``low_rank_form()``
    (``diag(a) − U Vᵀ``): tr(G_W (AᵀA)⁻¹) = Σ a ∘ diag(G_W) − Σ (G_W U) ∘ V."""

    def __init__(self, inv):
        self.a, self.U, self.V = inv.low_rank_form()

    def trace_with(self, wf: Matrix) -> float:
        G = wf.gram()
        return float(np.dot(self.a, G.diag()) - np.sum(G.matvec(self.U) * self.V))

    def row_profile(self, wf: Matrix):
        m, n = wf.shape
        check_dense_size(m, n, "per-query variances against a large p-Identity factor")
        D = wf.dense()
        return np.sum(D * D * self.a, axis=1) - np.sum((D @ self.U) * (D @ self.V), axis=1)


class LoneProductRoute:
    """One weighted Kronecker product whose large factors have ``diag − low rank`` Gram
    inverses (p-Identity) and whose small factors go through dense eigenvalues; full rank."""

    terms: list  # the workload's (weight, factors) terms
    parts: list  # per attribute, a LowRankFactor or a StrategyFactor
    c: float  # the product's squared weight
    _grams: dict

    @classmethod
    def build(cls, terms, block):
        _, factors = block
        big = [f.shape[1] ** 2 > _linalg_base.MAX_DENSE_ENTRIES for f in factors]
        if not any(big):
            return None
        parts = []
        for f, large in zip(factors, big):
            if large:
                try:
                    inv = f.gram().pinv()
                except TooLargeError:
                    return None
                if not hasattr(inv, "low_rank_form") or f.shape[0] < f.shape[1]:
                    return None
                parts.append(LowRankFactor(inv))
            else:
                sf = StrategyFactor(f)
                if sf.null is not None:
                    return None
                parts.append(sf)
        route = cls()
        route.terms, route.parts, route.c = terms, parts, block[0]
        route._grams = {}
        return route

    def check_support(self) -> None:
        return  # every factor has full column rank

    def trace(self) -> float:
        total = 0.0
        for c, fs in self.terms:
            value = c
            for part, wf in zip(self.parts, fs):
                low_rank = isinstance(part, LowRankFactor)
                value *= part.trace_with(wf) if low_rank else part.trace_with(wf, self._grams)
            total += value
        return total / self.c

    def profile(self) -> np.ndarray:
        out = []
        for c, fs in self.terms:
            vecs = [part.row_profile(wf) for part, wf in zip(self.parts, fs)]
            out.append(c * kron_all(vecs, [wf.shape[0] for wf in fs]) / self.c)
        return np.concatenate(out)

    def max_profile(self) -> float:
        return float(np.max(self.profile()))
