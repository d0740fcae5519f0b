"""The one place error is computed (DESIGN.md, "Privacy and error").

Expected total squared error of answering a workload ``W`` with strategy ``A`` by the
matrix mechanism (Li et al. 2010, Prop. 4.4; HDMM Def. 7):

    Err(W, A) = v(privacy) · sens_p(A)² · tr(WᵀW (AᵀA)⁺)

with p = 1 and v = 2/ε² for PureDP (Laplace) and p = 2, v = σ² per unit L2 sensitivity for
ApproxDP / ZCDP (Gaussian). ``A`` must support ``W``: every query (row) w must lie in
rowspace(A), checked row by row as ||w (I − A⁺A)||² ≤ SUPPORT_RTOL · ||w||²; otherwise
:class:`UnsupportedWorkloadError` is raised, never a number.

Three routes compute tr(WᵀW (AᵀA)⁺), per-query variances and their maximum:

* ``_KroneckerRoute`` — a union of weighted Kronecker products against a Kronecker (or
  Identity) strategy, factor-wise and term by term (HDMM Thm 5, Thm 6), grouping factors
  when the two factorisations of the domain differ;
* ``_MarginalsRoute`` — against a weighted-marginals strategy, in the spectral form of the
  marginals algebra (HDMM §6.3, App. A.4): (AᵀA)⁺ is a scalar on each residual subspace;
* ``_TreeRoute`` — against a tree strategy (``gram()`` a ``TreeGram``: H_b, HB, Quadtree,
  GreedyH, Privelet), exactly by a Sherman–Morrison pass over the tree (``linalg/tree.py``);
* ``_OrthoBasisRoute`` — against a weighted orthonormal query set with column completion
  (``OrthoBasis``: Eigen-Design, SVD-bound strategies), exactly in that basis;
* ``_DenseRoute`` — anything else, dense and guarded by ``linalg.MAX_DENSE_ENTRIES``.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from .linalg import (
    Identity,
    Kronecker,
    Marginals,
    MarginalsGram,
    Matrix,
    Ones,
    OrthoBasis,
    TooLargeError,
    VStack,
    Weighted,
    as_matrix,
    check_dense_size,
    kron_terms,
    peel,
    projected_traces,
)
from .linalg import base as _linalg_base
from .linalg.tree import ReducedFactor, TreeGram, TreeGramInverse, TreeSolver
from .privacy import Privacy
from .strategy import Strategy

#: A query w is supported when ||w (I − A⁺A)||² ≤ SUPPORT_RTOL · ||w||².
SUPPORT_RTOL = 1e-8
#: Gram eigenvalues below RANK_RTOL · n · eps · λ_max count as zero (numpy's rank rule).
RANK_RTOL = 10.0


class UnsupportedWorkloadError(ValueError):
    """The strategy does not support the workload: some query is outside rowspace(A)."""


# ============================================================================ public API
def expected_error(W, A, privacy: Privacy) -> float:
    """Expected total squared error of answering ``W`` with strategy ``A`` under ``privacy``.

    ``A`` is a :class:`~mmtoolkit.strategy.Strategy` or a strategy Matrix (least-squares
    inference). A Strategy with ``inference="none"`` answers its own rows directly
    (Laplace/Gaussian mechanism on W; HDMM §15 "LM"): Err = v · m · sens_p(W)².
    """
    W, matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    if inference == "none":
        return v * W.shape[0] * W.sensitivity(privacy.norm) ** 2
    return v * matrix.sensitivity(privacy.norm) ** 2 * trace_term(W, matrix)


def rmse(W, A, privacy: Privacy) -> float:
    """Root mean squared error per query: sqrt(Err / m)."""
    W = as_matrix(W)
    return math.sqrt(expected_error(W, A, privacy) / W.shape[0])


def error_ratio(W, A, B, privacy: Privacy) -> float:
    """HDMM's Ratio(W, A) = sqrt(Err(W, A) / Err(W, B)) (HDMM §8: a ratio of RMSEs)."""
    return math.sqrt(expected_error(W, A, privacy) / expected_error(W, B, privacy))


def per_query_variance(W, A, privacy: Privacy) -> np.ndarray:
    """Variance of every workload answer, in W's row order: v · sens² · diag(W (AᵀA)⁺ Wᵀ)
    (Li et al. 2010, eq. 1)."""
    W, matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    m = W.shape[0]
    check_dense_size(m, 1, "per_query_variance")
    if inference == "none":
        return np.full(m, v * W.sensitivity(privacy.norm) ** 2)
    route = _route(W, matrix)
    route.check_support()
    return v * matrix.sensitivity(privacy.norm) ** 2 * route.scale * route.profile()


def max_variance(W, A, privacy: Privacy) -> float:
    """Largest per-query variance (the max-variance objective of ResidualPlanner §4.1),
    without materialising the per-query vector where the structure allows."""
    W, matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    if inference == "none":
        return v * W.sensitivity(privacy.norm) ** 2
    route = _route(W, matrix)
    route.check_support()
    return v * matrix.sensitivity(privacy.norm) ** 2 * route.scale * route.max_profile()


def supports(W, A) -> bool:
    """Whether every query of ``W`` lies in the row space of the strategy ``A``."""
    W = as_matrix(W)
    matrix = as_matrix(A.matrix if isinstance(A, Strategy) else A)
    _check_domains(W, matrix)
    try:
        _route(W, matrix).check_support()
    except UnsupportedWorkloadError:
        return False
    return True


def trace_term(W, A) -> float:
    """tr(WᵀW (AᵀA)⁺) with a support check, dispatched on structure (no privacy factor)."""
    W, A = as_matrix(W), as_matrix(A)
    _check_domains(W, A)
    route = _route(W, A)
    route.check_support()
    return route.scale * route.trace()


def frobenius_sq(W) -> float:
    """||W||_F² = tr(WᵀW), the Identity strategy's trace term, without materialising W."""
    W = as_matrix(W)
    if isinstance(W, Weighted):
        return W.weight**2 * frobenius_sq(W.base)
    if isinstance(W, VStack):
        return float(sum(frobenius_sq(b) for b in W.blocks))
    if isinstance(W, Marginals):  # each marginal has exactly one 1 per column
        return float(sum(t * t for t in W.weights.values())) * float(W.shape[1])
    if isinstance(W, Kronecker):
        return float(math.prod(frobenius_sq(f) for f in W.factors))
    return float(W.gram().trace())


def svd_bound(W) -> float:
    """The singular value bound (Σ_j sqrt(λ_j(WᵀW)))² / N (Li & Miklau 2012, Thm 2).

    A lower bound on sens₂(A)² · tr(WᵀW (AᵀA)⁺) over every strategy A, hence (since
    sens₁ ≥ sens₂) on the PureDP units too. Exact routes: weighted marginals and unions of
    Kronecker products whose factor Grams lie in span{I, J} (the marginals closed form);
    a single Kronecker product (product of factor bounds); unions whose per-attribute Grams
    are jointly diagonalisable (needs N ≤ MAX_DENSE_ENTRIES); else dense eigenvalues.
    """
    W = as_matrix(W)
    if isinstance(W, Weighted):
        return W.weight**2 * svd_bound(W.base)
    if isinstance(W, Marginals):
        return _marginal_svdb(W.sizes, {a: t * t for a, t in W.weights.items()})
    terms = kron_terms(W)
    sizes = _common_sizes(terms)
    if sizes is not None:
        coeffs = _span_ij_coefficients(terms)
        if coeffs is not None:
            return _marginal_svdb(sizes, coeffs)
        if len(terms) == 1:
            c, factors = terms[0]
            total = c
            for f in factors:
                lam = _eigvals_psd(f.gram())
                total *= np.sum(np.sqrt(lam)) ** 2 / f.shape[1]
            return float(total)
        lam = _joint_eigenvalues(terms, sizes)
        if lam is not None:
            return float(np.sum(np.sqrt(lam)) ** 2 / W.shape[1])
    N = W.shape[1]
    if N * N > _linalg_base.MAX_DENSE_ENTRIES:
        raise TooLargeError(
            f"svd_bound: no exact structured method applies to this workload "
            f"({type(W).__name__}, N = {N}) and a dense eigendecomposition of the N x N Gram "
            "is too large"
        )
    lam = _eigvals_psd(W.gram())
    return float(np.sum(np.sqrt(lam)) ** 2 / N)


def svd_bound_error(W, privacy: Privacy) -> float:
    """Lower bound on the expected total squared error of any strategy: v · svd_bound(W)."""
    _check_privacy(privacy)
    return privacy.noise_variance(1.0) * svd_bound(W)


def svd_bound_rmse(W, privacy: Privacy) -> float:
    """Lower bound on the RMSE of any strategy: sqrt(v · svd_bound(W) / m)."""
    W = as_matrix(W)
    return math.sqrt(svd_bound_error(W, privacy) / W.shape[0])


# ====================================================================== input handling
def _check_privacy(privacy) -> None:
    if not isinstance(privacy, Privacy):
        raise TypeError(f"privacy must be a PureDP, ApproxDP or ZCDP instance, got {privacy!r}")


def _check_domains(W: Matrix, A: Matrix) -> None:
    if W.shape[1] != A.shape[1]:
        raise ValueError(
            f"workload and strategy disagree on the domain size: W has {W.shape[1]} columns, "
            f"the strategy has {A.shape[1]}"
        )


def _unpack(W, A, privacy: Privacy) -> tuple[Matrix, Matrix, str]:
    _check_privacy(privacy)
    W = as_matrix(W)
    if isinstance(A, Strategy):
        matrix, inference = A.matrix, A.inference
    else:
        matrix, inference = as_matrix(A), "least_squares"
    _check_domains(W, matrix)
    if inference == "none" and matrix is not W:
        same = matrix.shape == W.shape
        if same:
            try:
                same = np.array_equal(matrix.dense(), W.dense())
            except TooLargeError as err:
                raise ValueError(
                    "a strategy with inference='none' answers its own rows, so it must be the "
                    "workload object it was selected for"
                ) from err
        if not same:
            raise ValueError(
                "a strategy with inference='none' answers its own rows; it was selected for a "
                "different workload"
            )
    return W, matrix, inference


def _route(W: Matrix, A: Matrix):
    weight, A0 = peel(A)
    if weight == 0.0:
        raise UnsupportedWorkloadError("the strategy is the zero matrix; it supports no query")
    route, gram = None, None
    if isinstance(A0, (Identity, Kronecker)):
        route = _KroneckerRoute(W, A0)
    elif isinstance(A0, OrthoBasis):  # Eigen-Design / SVD-bound strategies
        route = _OrthoBasisRoute(W, A0)
    elif hasattr(A0, "residual_pinv_terms"):  # ResidualPlanner(+) strategies, any d
        route = _ResidualRoute.build(W, A0)
    if route is None:
        try:
            gram = A0.gram()
        except TooLargeError:  # e.g. marginals beyond the dense 2^d algebra
            gram = None
        if isinstance(gram, MarginalsGram):
            route = _MarginalsRoute.build(W, gram)
        elif isinstance(gram, TreeGram):
            route = _TreeRoute.build(W, gram)
    if route is None:  # HDMM OPT_+ stacks; a lone large p-Identity
        route = _StackedKroneckerRoute.build(W, A0)
    if route is None:
        route = _DenseRoute(W, A0, gram)
    route.scale = 1.0 / weight**2
    return route


# ============================================================ union-of-Kronecker structure
def _common_sizes(terms) -> list[int] | None:
    sizes = [f.shape[1] for f in terms[0][1]]
    for _, factors in terms[1:]:
        if [f.shape[1] for f in factors] != sizes:
            return None
    return sizes


def _align(sizes_w: list[int], sizes_a: list[int]) -> list[tuple[slice, slice]]:
    """Coarsest common refinement of two factorisations of N into consecutive groups."""
    groups, i, j, gi, gj, pw, pa = [], 0, 0, 0, 0, 1, 1
    while i < len(sizes_w) or j < len(sizes_a):
        if j >= len(sizes_a) or (i < len(sizes_w) and pw <= pa):
            pw *= sizes_w[i]
            i += 1
        else:
            pa *= sizes_a[j]
            j += 1
        if pw == pa and i > gi and j > gj:
            groups.append((slice(gi, i), slice(gj, j)))
            gi, gj, pw, pa = i, j, 1, 1
    if gi < len(sizes_w) or gj < len(sizes_a):  # trailing size-1 factors
        last_w, last_a = groups.pop()
        groups.append((slice(last_w.start, len(sizes_w)), slice(last_a.start, len(sizes_a))))
    return groups


def _group(factors: list[Matrix]) -> Matrix:
    return factors[0] if len(factors) == 1 else Kronecker(factors)


def _as_vector(r, m: int) -> np.ndarray:
    return np.full(m, float(r)) if np.isscalar(r) else np.asarray(r, dtype=float)


def _kron_all(parts, sizes) -> np.ndarray:
    """Kronecker product of per-group vectors or scalars (scalars expand to their size)."""
    check_dense_size(math.prod(sizes), 1, "a per-query vector")
    out = np.ones(1)
    for r, m in zip(parts, sizes):
        out = np.kron(out, _as_vector(r, m))
    return out


class _StrategyFactor:
    """(AᵀA)⁺ and an orthonormal basis of null(A) for one strategy factor (None: Identity)."""

    def __init__(self, A: Matrix | None, gram: Matrix | None = None):
        self.pinv_gram = self.null = self.half = None
        if A is None or isinstance(A, Identity):
            return
        n = A.shape[1]
        check_dense_size(n, n, "the Gram of a strategy factor")
        G = (A.gram() if gram is None else gram).dense()
        lam, V = np.linalg.eigh(0.5 * (G + G.T))
        keep = lam > RANK_RTOL * n * np.finfo(float).eps * max(lam.max(initial=0.0), 0.0)
        Vk = V[:, keep]
        self.half = Vk / np.sqrt(lam[keep])  # (AᵀA)⁺ = half · halfᵀ
        self.pinv_gram = self.half @ self.half.T
        if not keep.all():
            self.null = V[:, ~keep]

    @property
    def identity(self) -> bool:
        return self.pinv_gram is None

    def trace_with(self, wf: Matrix, gram_cache: dict) -> float:
        """tr(G_W (AᵀA)⁺) for the workload factor's Gram G_W."""
        if self.identity:
            return frobenius_sq(wf)
        G = gram_cache.get(id(wf))
        if G is None:
            n = wf.shape[1]
            check_dense_size(n, n, "the Gram of a workload factor")
            G = gram_cache[id(wf)] = (wf, wf.gram().dense())
        return float(np.sum(G[1] * self.pinv_gram))

    def worst_row_residual(self, wf: Matrix) -> tuple[float, float]:
        """(max row norm², max over rows of ||w (I − A⁺A)||² / ||w||²)."""
        norms = wf.rownorm_p(2)
        top = float(np.max(norms))
        if self.null is None or top == 0.0:
            return top, 0.0
        check_dense_size(wf.shape[0], self.null.shape[1], "the support check of a factor")
        residual = np.sum(wf.matvec(self.null) ** 2, axis=1)
        norms = _as_vector(norms, wf.shape[0])
        live = norms > 0
        return top, float(np.max(residual[live] / norms[live], initial=0.0))

    def row_profile(self, wf: Matrix):
        """diag(wf (AᵀA)⁺ wfᵀ) (a float when constant)."""
        if self.identity:
            return wf.rownorm_p(2)
        m, r = wf.shape[0], self.half.shape[1]
        check_dense_size(m, 1, "a per-query vector")
        width = max(1, min(r, _linalg_base.MAX_DENSE_ENTRIES // max(m, 1)))
        out = np.zeros(m)
        for s in range(0, r, width):
            out += np.sum(wf.matvec(self.half[:, s : s + width]) ** 2, axis=1)
        return out


class _KroneckerRoute:
    """Union of Kronecker products × Kronecker (or Identity) strategy (HDMM Thm 5, 6)."""

    def __init__(self, W: Matrix, A: Matrix):
        self.W = W
        self.a_factors = None if isinstance(A, Identity) else A.factors
        self._factors: dict[tuple[int, int], _StrategyFactor] = {}
        self._grams: dict = {}

    def _groups(self, factors):
        """[(workload factor group, strategy factor)] for one term."""
        if self.a_factors is None:
            return [(f, _StrategyFactor(None)) for f in factors]
        out = []
        for gw, ga in _align([f.shape[1] for f in factors], [f.shape[1] for f in self.a_factors]):
            key = (ga.start, ga.stop)
            if key not in self._factors:
                self._factors[key] = _StrategyFactor(_group(self.a_factors[ga]))
            out.append((_group(factors[gw]), self._factors[key]))
        return out

    @functools.cached_property
    def terms(self):
        return kron_terms(self.W)

    def _full_column_rank(self) -> bool:
        """A = ⊗A_i (or I) has full column rank, hence supports every workload."""
        if self.a_factors is None:
            return True
        return all(self._groups_for_factor(k).null is None for k in range(len(self.a_factors)))

    def _groups_for_factor(self, k: int) -> _StrategyFactor:
        key = (k, k + 1)
        if key not in self._factors:
            self._factors[key] = _StrategyFactor(self.a_factors[k])
        return self._factors[key]

    def check_support(self) -> None:
        if self._full_column_rank():
            return
        for c, factors in self.terms:
            if c == 0.0:
                continue
            checks = [sf.worst_row_residual(wf) for wf, sf in self._groups(factors)]
            if any(top == 0.0 for top, _ in checks):
                continue  # a zero factor: every query of this term is 0
            worst = max(res for _, res in checks)
            if worst > SUPPORT_RTOL:
                raise UnsupportedWorkloadError(
                    "the strategy does not support the workload: a query has a relative "
                    f"component {worst:.3g} outside the row space of a Kronecker factor of A"
                )

    def trace(self) -> float:
        if self.a_factors is None:
            return frobenius_sq(self.W)
        total = 0.0
        for c, factors in self.terms:
            if c == 0.0:
                continue
            value = c
            for wf, sf in self._groups(factors):
                value *= sf.trace_with(wf, self._grams)
            total += value
        return total

    def profile(self) -> np.ndarray:
        parts = []
        for c, factors in self.terms:
            groups = self._groups(factors)
            vec = _kron_all(
                [sf.row_profile(wf) for wf, sf in groups], [wf.shape[0] for wf, _ in groups]
            )
            parts.append(c * vec)
        return np.concatenate(parts)

    def max_profile(self) -> float:
        # every group's profile is non-negative, so the max of a Kronecker product of them is
        # the product of their maxima (no per-query vector needed)
        best = 0.0
        for c, factors in self.terms:
            value = c
            for wf, sf in self._groups(factors):
                value *= float(np.max(sf.row_profile(wf)))
            best = max(best, value)
        return best


# =================================================================== marginals algebra
def _is_total(f: Matrix) -> bool:
    return isinstance(f, Ones) and f.shape[0] == 1


def _marginal_key(factors) -> int | None:
    """The bitmask of a Kronecker product of Identity / Total factors, else None."""
    key = 0
    for i, f in enumerate(factors):
        if isinstance(f, Identity):
            key |= 1 << i
        elif not _is_total(f):
            return None
    return key


def _row_split(f: Matrix) -> tuple[np.ndarray, np.ndarray]:
    """Per row w of f: (||w − mean||², ||mean part||²) = (||w||² − (w·1)²/n, (w·1)²/n)."""
    n = f.shape[1]
    sums = f.matvec(np.ones(n))
    s = sums**2 / n
    t = np.clip(_as_vector(f.rownorm_p(2), f.shape[0]) - s, 0.0, None)
    return t, s


def _subset_products(a, b) -> np.ndarray:
    """The vector over B ⊆ attributes (bit i ↔ attribute i) of Π_{i∈B} a_i · Π_{i∉B} b_i."""
    v = np.ones(1)
    for ai, bi in zip(a, b):
        v = np.concatenate([v * bi, v * ai])
    return v


def _bit_reversed_order(d: int) -> np.ndarray:
    """Index map: C-order position (attribute 0 most significant) -> bitmask B."""
    idx = np.arange(1 << d)
    out = np.zeros_like(idx)
    for i in range(d):
        out |= ((idx >> (d - 1 - i)) & 1) << i
    return out


class _MarginalsRoute:
    """Union of Kronecker products × a strategy whose ``gram()`` is a MarginalsGram 𝔾 (e.g.
    weighted marginals 𝕄(θ), 𝔾 = 𝔾(θ²)): 𝔾⁺ is the scalar
    μ_B⁺ on each residual subspace S_B, so tr(WᵀW 𝔾⁺) = Σ_B μ_B⁺ tr(P_B WᵀW) and a query
    w = ⊗w_i has variance Σ_B μ_B⁺ Π_{i∈B} ||w_i − mean||² Π_{i∉B} ||mean part of w_i||²."""

    @classmethod
    def build(cls, W: Matrix, gram: MarginalsGram):
        terms = kron_terms(W)
        if _common_sizes(terms) != list(gram.sizes):
            return None
        return cls(terms, gram)

    def __init__(self, terms, gram: MarginalsGram):
        self.terms = terms
        self.sizes = list(gram.sizes)
        self.inv = gram.pinv_spectrum()
        self.dead = (self.inv == 0.0) & (gram.dims() > 0)
        self._splits: dict[int, tuple] = {}

    def _split(self, f: Matrix):
        if id(f) not in self._splits:
            self._splits[id(f)] = (f, _row_split(f))
        return self._splits[id(f)][1]

    def check_support(self) -> None:
        if not self.dead.any():
            return
        for c, factors in self.terms:
            if c == 0.0:
                continue
            splits = [self._split(f) for f in factors]
            fracs = []
            for t, s in splits:
                q = t + s
                live = q > 0
                if not live.any():
                    break  # a zero factor: the term is zero
                fracs.append(t[live] / q[live])
            else:
                # max over the term's rows of the fraction of ||w||² in a dead S_B factorises:
                # Π_{i∈B} max τ_i · Π_{i∉B} max (1 − τ_i)
                worst = _subset_products([f.max() for f in fracs], [1 - f.min() for f in fracs])
                if worst[self.dead].max() > SUPPORT_RTOL:
                    raise UnsupportedWorkloadError(
                        "the marginals strategy does not support the workload: a query has "
                        "weight on a residual subspace that no measured marginal covers"
                    )

    def trace(self) -> float:
        total = np.zeros(len(self.inv))
        coeffs = np.zeros(len(self.inv))
        for c, factors in self.terms:
            key = _marginal_key(factors)
            if key is not None:
                coeffs[key] += c
                continue
            splits = [self._split(f) for f in factors]
            traces = [float(np.sum(t + s)) for t, s in splits]
            sums = [float(np.sum(s)) * f.shape[1] for (t, s), f in zip(splits, factors)]
            total += c * projected_traces(self.sizes, traces, sums)
        if coeffs.any():  # Σ_a c_a tr(P_B ℂ(a)) = dim_B · μ_B of Σ_a c_a ℂ(a)
            gram = MarginalsGram(self.sizes, coeffs)
            total += gram.dims() * gram.spectrum()
        return float(np.dot(self.inv, total))

    def _term_profile(self, c, factors, unique: bool) -> np.ndarray:
        d = len(self.sizes)
        mu_c = self.inv[_bit_reversed_order(d)]
        mats = []
        for f in factors:
            t, s = self._split(f)
            M = np.column_stack([s, t])
            mats.append(np.unique(M, axis=0) if unique else M)
        rows = math.prod(M.shape[0] for M in mats)
        check_dense_size(rows, 1, "a per-query vector")
        return c * (Kronecker([as_matrix(M) for M in mats]) @ mu_c)

    def profile(self) -> np.ndarray:
        return np.concatenate([self._term_profile(c, f, unique=False) for c, f in self.terms])

    def max_profile(self) -> float:
        return max(float(np.max(self._term_profile(c, f, unique=True))) for c, f in self.terms)


# ====================================================== residual basis (ResidualPlanner)
class _ResidualRoute:
    """Union of Kronecker products (or weighted Marginals) × a strategy exposing
    ``residual_pinv_terms() -> (sizes, [H_i], closure sets, c)`` with
    (AᵀA)⁺ = Σ_B c_B ⊗_{i∈B} H_i ⊗_{i∉B} J/n_i², H_i 1 = 0, range(H_i) = 1⊥ (the
    ResidualPlanner(+) strategies; He et al. Thm 4.4, Thm 7.2). A query ⊗w_i has variance
    Σ_B c_B Π_{i∈B} w_i H_i w_iᵀ Π_{i∉B} (w_i·1)²/n_i², where only closure sets B inside the
    query's support (its non-total factors) contribute: nothing of size 2^d or N is built."""

    @classmethod
    def build(cls, W: Matrix, A: Matrix):
        sizes, H, sets, c = A.residual_pinv_terms()
        weight, core = peel(W)
        if isinstance(core, Marginals):  # fast path: supports from the bitmask keys
            if list(core.sizes) != list(sizes):
                return None
            terms = []
            for key, theta in core.weights.items():
                support, rest = [], key
                while rest:  # the set bits only (keys may have hundreds of bits)
                    low = rest & -rest
                    support.append(low.bit_length() - 1)
                    rest ^= low
                support = tuple(support)
                terms.append(((weight * theta) ** 2, support, None))
        else:
            raw = kron_terms(W)
            if _common_sizes(raw) != list(sizes):
                return None
            terms = []
            for t, factors in raw:
                support = tuple(i for i, f in enumerate(factors) if not _is_total(f))
                terms.append((t, support, [factors[i] for i in support]))
        return cls(sizes, H, sets, c, terms)

    def __init__(self, sizes, H, sets, c, terms):
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

    def _fast_products(self, inside, outside, pat, rows):
        F = self._fast_data
        P = F["P"][rows]
        out = np.ones(len(rows))
        for j in range(F["kmax"]):
            col = P[:, j]  # -1 (padding) picks the trailing 1.0
            out *= inside[col] if (pat >> j) & 1 else outside[col]
        return out

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
            acc[rows] += cb * self._fast_products(inside, outside, pat, rows)
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

    @staticmethod
    def _subsets(support):
        k = len(support)
        for pat in range(1 << k):
            yield pat, tuple(support[j] for j in range(k) if (pat >> j) & 1)

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
                for pat, B in self._subsets(support):
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
            sums = [
                (float(np.sum(h)), float(np.sum(s)))
                for h, s, _, _ in self._term_rows(support, factors)
            ]
            acc = 0.0
            for pat, B in self._subsets(support):
                cb = self.coef.get(B)
                if cb is None:
                    continue
                prod = cb
                for j, (hs, ss) in enumerate(sums):
                    prod *= hs if (pat >> j) & 1 else ss
                acc += prod
            total += c * acc
        return total

    def _term_profile(self, c, support, factors, unique: bool) -> np.ndarray:
        mats = []
        for h, s, _, _ in self._term_rows(support, factors):
            M = np.column_stack([h, s])
            mats.append(np.unique(M, axis=0) if unique else M)
        rows = math.prod(M.shape[0] for M in mats)
        check_dense_size(rows, 1, "a per-query vector")
        out = np.zeros(rows)
        for pat, B in self._subsets(support):
            cb = self.coef.get(B)
            if cb is None:
                continue
            vec = np.array([cb])
            for j, M in enumerate(mats):
                vec = np.kron(vec, M[:, 0] if (pat >> j) & 1 else M[:, 1])
            out += vec
        return c * out

    def profile(self) -> np.ndarray:
        F = self._fast()
        if F is not None and F["const"]:  # every cell of a marginal has the same variance
            per = self._fast_values(F["h"], 1.0 / F["n"] ** 2)
            cells = [math.prod(self.sizes[i] for i in s) for _, s, _ in self.terms]
            check_dense_size(sum(cells), 1, "a per-query vector")
            return np.repeat(per, cells)
        return np.concatenate([self._term_profile(c, s, f, unique=False) for c, s, f in self.terms])

    def max_profile(self) -> float:
        F = self._fast()
        if F is not None and F["const"]:
            return float(np.max(self._fast_values(F["h"], 1.0 / F["n"] ** 2)))
        return max(
            float(np.max(self._term_profile(c, s, f, unique=True))) for c, s, f in self.terms
        )


# ============================================================================= tree route
class _TreeRoute:
    """Union of Kronecker products × a tree strategy (``gram()`` is a ``TreeGram``: H_b, HB,
    HB-2D, Quadtree, GreedyH; ``linalg/tree.py``), exact without an N x N array.

    In the tree's reduced coordinates, the Sherman–Morrison pass ``M_Q⁻¹ = D⁻¹ − c_Q v_Q v_Qᵀ``
    gives ``tr(K̃ M̃⁻¹) = Σ_j K̃_jj / a_j − Σ_ℓ Σ_{Q ∈ ℓ} c_Q v_Qᵀ K̃[Q,Q] v_Q``; for a Kronecker
    term ``K̃[Q,Q] = ⊗_i Ỹ_i[S_i,S_i]``, so each level costs one block-diagonal product
    along each axis (``ReducedFactor``). A workload that is not constant on a finest node
    of a reduced tree is unsupported.
    """

    @classmethod
    def build(cls, W: Matrix, gram: TreeGram):
        tree = gram.tree
        if not tree.invertible:
            return None
        sizes = list(tree.sizes)
        terms = []
        for c, factors in kron_terms(W):
            groups = _align([f.shape[1] for f in factors], sizes)
            if any(ga.stop - ga.start != 1 for _, ga in groups):
                return None
            terms.append((c, [_group(factors[gw]) for gw, _ in groups]))
        return cls(W, tree, terms)

    def __init__(self, W: Matrix, tree, terms):
        self.W, self.tree, self.terms = W, tree, terms
        self.solver = TreeSolver(tree)
        self._factors: dict = {}

    def _reduced(self, i: int, f: Matrix) -> ReducedFactor:
        key = (i, id(f))
        if key not in self._factors:
            self._factors[key] = (f, ReducedFactor(f.gram(), self.tree.levels[-1][i]))
        return self._factors[key][1]

    def check_support(self) -> None:
        if not self.tree.reduced:
            return  # singleton leaves with non-zero weights: full column rank
        for c, factors in self.terms:
            if c == 0.0:
                continue
            fracs = []
            for i, f in enumerate(factors):
                counts = self.tree.fine_counts[i]
                if np.all(counts == 1):
                    continue
                fine = self.tree.levels[-1][i]
                n, g = f.shape[1], len(fine)
                check_dense_size(n, g, "the support check of a tree strategy")
                check_dense_size(f.shape[0], g, "the support check of a tree strategy")
                member = np.zeros((n, g))
                member[np.arange(n), np.repeat(np.arange(g), counts)] = 1.0
                kept = np.sum(f.matvec(member) ** 2 / counts, axis=1)
                norms = _as_vector(f.rownorm_p(2), f.shape[0])
                live = norms > 0
                if not live.any():
                    fracs = None  # a zero factor: every query of this term is 0
                    break
                fracs.append(float(np.min(kept[live] / norms[live])))
            if fracs is None:
                continue
            worst = 1.0 - math.prod(fracs)
            if worst > SUPPORT_RTOL:
                raise UnsupportedWorkloadError(
                    "the tree strategy does not support the workload: a query has a relative "
                    f"component {worst:.3g} that differs between cells of one finest tree node"
                )

    @staticmethod
    def _along(rf: ReducedFactor, starts, Z: np.ndarray, axis: int) -> np.ndarray:
        Zm = np.moveaxis(Z, axis, 0)
        shape = Zm.shape
        out = rf.block_products(starts, Zm.reshape(shape[0], -1)).reshape(shape)
        return np.moveaxis(out, 0, axis)

    def trace(self) -> float:
        s, total = self.solver, 0.0
        for c, factors in self.terms:
            if c == 0.0:
                continue
            facs = [self._reduced(i, f) for i, f in enumerate(factors)]
            leaf = 1.0 / s.a_fine
            for rf in facs:
                leaf = np.tensordot(rf.diag(), leaf, axes=([0], [0]))
            value = float(leaf)
            for li in range(self.tree.depth - 1):
                V = s.U[li + 1]
                Z = V
                for axis, rf in enumerate(facs):
                    Z = self._along(rf, s.red[li][axis], Z, axis)
                value -= float(np.sum(s.cell_c(li) * V * Z))
            total += c * value
        return total

    def profile(self) -> np.ndarray:
        m, N = self.W.shape
        check_dense_size(m, N, "per-query variances against a tree strategy")
        inverse = TreeGramInverse(self.tree)
        width = max(1, _linalg_base.MAX_DENSE_ENTRIES // (2 * max(m, N)))
        out = np.empty(m)
        for s0 in range(0, m, width):
            s1 = min(m, s0 + width)
            E = np.zeros((m, s1 - s0))
            E[np.arange(s0, s1), np.arange(s1 - s0)] = 1.0
            R = self.W.rmatvec(E)  # the rows s0..s1 of W, as columns
            out[s0:s1] = np.sum(R * inverse.matvec(R), axis=0)
        return out

    def max_profile(self) -> float:
        return float(np.max(self.profile()))


# ================================================================ stacked Kronecker route
class _StackedKroneckerRoute:
    """Union of Kronecker products × a strategy ``[w_1 𝔸_1; w_2 𝔸_2]`` stacking two weighted
    Kronecker products (HDMM OPT_+, Def. 11), or one product (a bare matrix counts as a
    one-factor product) with a factor beyond the dense guard whose Gram inverse is
    ``diag − low rank`` (a p-Identity, HDMM Thm 4). Exact, no N x N array.

    Two blocks: with ``G_i``, ``H_i`` the factor Grams and every ``G_i`` positive definite,
    ``G_i = L_iL_iᵀ`` (Cholesky), ``L_i⁻¹H_iL_i⁻ᵀ = U_iΛ_iU_iᵀ`` and ``V_i = L_i⁻ᵀU_i`` give
    ``AᵀA = w_1² ⊗G_i + w_2² ⊗H_i = (⊗V_i)⁻ᵀ (w_1² + w_2² ⊗Λ_i) (⊗V_i)⁻¹``: full rank (so every
    query is supported) and ``tr(⊗Y_i (AᵀA)⁻¹) = Σ_cells Π_i (V_iᵀY_iV_i)_jj / (w_1² + w_2² Π λ)``,
    summed over the N cells in chunks. Per-query variances are Kronecker mat-vecs of
    ``(W_iV_i)²`` with that N-vector (size-guarded).
    """

    CHUNK = 1 << 20

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
        terms = kron_terms(W)
        if _common_sizes(terms) != sizes or any(c == 0.0 for c, _ in parsed):
            return None
        if len(parsed) == 1:
            return _LoneProductRoute.build(terms, parsed[0])
        if any(n * n > _linalg_base.MAX_DENSE_ENTRIES for n in sizes):
            return None
        try:
            return cls(terms, parsed, sizes)
        except np.linalg.LinAlgError:
            return None

    def __init__(self, terms, parsed, sizes):
        self.terms, self.sizes = terms, sizes
        grams = [[f.gram().dense() for f in fs] for _, fs in parsed]
        order = [0, 1]
        try:
            chol = [np.linalg.cholesky(0.5 * (G + G.T)) for G in grams[0]]
        except np.linalg.LinAlgError:
            chol = [np.linalg.cholesky(0.5 * (G + G.T)) for G in grams[1]]
            order = [1, 0]
        self.c1, self.c2 = parsed[order[0]][0], parsed[order[1]][0]
        self.V, self.lam = [], []
        for L, H in zip(chol, grams[order[1]]):
            Li = np.linalg.solve(L, np.eye(L.shape[0]))
            lam, U = np.linalg.eigh(Li @ (0.5 * (H + H.T)) @ Li.T)
            self.V.append(Li.T @ U)
            self.lam.append(np.clip(lam, 0.0, None))
        self._q: dict[int, np.ndarray] = {}

    def check_support(self) -> None:
        return  # AᵀA is positive definite

    def _qvec(self, f: Matrix, i: int) -> np.ndarray:
        """Column norms² of f V_i, as diag(V_iᵀ (fᵀf) V_i): never the m x n product."""
        if id(f) not in self._q:
            V = self.V[i]
            self._q[id(f)] = (f, np.sum(V * f.gram().matvec(V), axis=0))
        return self._q[id(f)][1]

    def _grid_sum(self, Q: np.ndarray, lams: list[np.ndarray]) -> np.ndarray:
        """Σ over cells of (⊗ rows of Q-factors) / (c1 + c2 ⊗λ) for several terms at once."""
        d = len(lams)
        split = d
        while split > 0 and math.prod(len(x) for x in lams[split - 1 :]) <= self.CHUNK:
            split -= 1
        tail_l = functools.reduce(np.kron, lams[split:], np.ones(1))
        tail_q = [functools.reduce(np.kron, qs[split:], np.ones(1)) for qs in Q]
        total = np.zeros(len(Q))
        heads = [range(len(x)) for x in lams[:split]]
        for idx in itertools.product(*heads):
            lh = math.prod(float(lams[i][j]) for i, j in enumerate(idx))
            inv = 1.0 / (self.c1 + self.c2 * lh * tail_l)
            for t, qs in enumerate(Q):
                qh = math.prod(float(qs[i][j]) for i, j in enumerate(idx))
                if qh != 0.0:
                    total[t] += qh * float(tail_q[t] @ inv)
        return total

    def trace(self) -> float:
        Q = [[self._qvec(f, i) for i, f in enumerate(fs)] for _, fs in self.terms]
        per_term = self._grid_sum(Q, self.lam)
        return float(sum(c * v for (c, _), v in zip(self.terms, per_term)))

    def _inv_denominator(self) -> np.ndarray:
        N = math.prod(self.sizes)
        check_dense_size(N, 1, "per-query variances of a stacked Kronecker strategy")
        return 1.0 / (self.c1 + self.c2 * functools.reduce(np.kron, self.lam, np.ones(1)))

    def profile(self) -> np.ndarray:
        inv = self._inv_denominator()
        parts = []
        for c, fs in self.terms:
            for f in fs:
                check_dense_size(*f.shape, "a workload factor (per-query variance)")
            R = [as_matrix(f.matvec(self.V[i]) ** 2) for i, f in enumerate(fs)]
            parts.append(c * (Kronecker(R) @ inv))
        return np.concatenate(parts)

    def max_profile(self) -> float:
        return float(np.max(self.profile()))


class _LowRankFactor:
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


class _LoneProductRoute:
    """One weighted Kronecker product whose large factors have ``diag − low rank`` Gram
    inverses (p-Identity) and whose small factors go through dense eigenvalues; full rank."""

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
                parts.append(_LowRankFactor(inv))
            else:
                sf = _StrategyFactor(f)
                if sf.null is not None:
                    return None
                parts.append(sf)
        route = cls()
        route.terms, route.parts, route.c = terms, parts, block[0]
        route._grams = {}
        return route

    def check_support(self) -> None:
        return  # every factor has full column rank

    def _factor_value(self, part, wf):
        if isinstance(part, _LowRankFactor):
            return part.trace_with(wf)
        return part.trace_with(wf, self._grams)

    def trace(self) -> float:
        total = 0.0
        for c, fs in self.terms:
            value = c
            for part, wf in zip(self.parts, fs):
                value *= self._factor_value(part, wf)
            total += value
        return total / self.c

    def profile(self) -> np.ndarray:
        out = []
        for c, fs in self.terms:
            vecs = [part.row_profile(wf) for part, wf in zip(self.parts, fs)]
            out.append(c * _kron_all(vecs, [wf.shape[0] for wf in fs]) / self.c)
        return np.concatenate(out)

    def max_profile(self) -> float:
        return float(np.max(self.profile()))


# ========================================================== orthonormal-basis route
class _OrthoBasisRoute:
    """Any workload × ``A = [diag(w) Q; D_J]`` (:class:`~mmtoolkit.linalg.OrthoBasis`, rows
    of Q orthonormal; Li & Miklau 2012 Program 2), exact, using only the implicit Gram
    ``G = WᵀW`` and arrays no larger than Q's own ``n x n`` scale.

    No completion: ``(AᵀA)⁺ = Q₊ᵀ diag(w₊⁻²) Q₊`` over the rows with ``w ≠ 0``, so
    ``tr(G (AᵀA)⁺) = Σ_i q_i G q_iᵀ / w_i²`` and query ``x`` has variance
    ``||diag(1/w₊) Q₊ x||²``. With completion: ``T = [Q; N]`` (N an orthonormal basis of
    null(Q)) gives ``AᵀA = Tᵀ K T``, ``K = diag(w², 0) + T D² Tᵀ``, so
    ``(AᵀA)⁺ = Tᵀ K⁺ T`` and ``tr = tr(K⁺ T G Tᵀ)`` (Cholesky when ``K ≻ 0``, else eigh).
    Support: every query ``x`` must satisfy ``||x − Πx||² ≤ SUPPORT_RTOL · ||x||²``, Π the
    projector on rowspace(A), checked query by query unless A has full column rank.
    """

    #: Largest m · (null-space or basis dimension) for the per-query products W @ block.
    MAX_QUERY_WORK = 50 * _linalg_base.MAX_DENSE_ENTRIES

    def __init__(self, W: Matrix, A: OrthoBasis):
        from .linalg.orthobasis import ORTHO_MAX_N

        self.W, self.A = W, A
        k, n = A.Q.shape
        if A.cells.size == 0:  # no completion: everything in the span of the live rows
            live = A.weights != 0
            self.basis = A.Q if live.all() else A.Q[live]
            self.s = A.weights[live] ** 2
            self.completed = False
            return
        if n > ORTHO_MAX_N:
            raise TooLargeError(
                f"the completed OrthoBasis route builds {n} x {n} arrays; n exceeds "
                f"ORTHO_MAX_N = {ORTHO_MAX_N}"
            )
        self.completed = True
        if k < n:
            import scipy.linalg

            Qc = scipy.linalg.qr(A.Q.T, mode="full")[0]
            self.basis = np.vstack([A.Q, Qc[:, k:].T])
        else:
            self.basis = A.Q
        T, s = self.basis, np.concatenate([A.weights**2, np.zeros(n - k)])
        K = (T * A.completion**2) @ T.T
        K[np.diag_indices(n)] += s
        self.K = 0.5 * (K + K.T)
        self.L = None
        try:
            self.L = np.linalg.cholesky(self.K)
        except np.linalg.LinAlgError:
            lam, V = np.linalg.eigh(self.K)
            keep = lam > RANK_RTOL * n * np.finfo(float).eps * max(lam.max(initial=0.0), 0.0)
            self.lam, self.V, self.null = lam[keep], V[:, keep], T.T @ V[:, ~keep]
        if self.L is not None:
            self.null = None

    def _row_blocks(self, B: np.ndarray):
        """Yield ``W @ B[:, s:e]`` (B is n x r) in column blocks that fit the dense guard."""
        m, r = self.W.shape[0], B.shape[1]
        check_dense_size(m, 1, "a per-query vector (OrthoBasis route)")
        if m * r > self.MAX_QUERY_WORK:
            raise TooLargeError(
                f"per-query products of a {m}-query workload with {r} basis vectors exceed "
                f"{self.MAX_QUERY_WORK:.3g} entries (OrthoBasis route)"
            )
        width = max(1, min(r, _linalg_base.MAX_DENSE_ENTRIES // max(m, 1)))
        for s in range(0, r, width):
            yield self.W.matvec(np.ascontiguousarray(B[:, s : s + width]))

    def _row_norms(self) -> np.ndarray:
        return _as_vector(self.W.rownorm_p(2), self.W.shape[0])

    def check_support(self) -> None:
        n = self.A.shape[1]
        if self.completed:
            if self.null is None:
                return  # K ≻ 0: A has full column rank
            resid = np.zeros(self.W.shape[0])
            for Y in self._row_blocks(self.null):
                resid += np.sum(Y * Y, axis=1)
        else:
            if self.basis.shape[0] == n:
                return  # n orthonormal live rows: full column rank
            proj = np.zeros(self.W.shape[0])
            for Y in self._row_blocks(self.basis.T):
                proj += np.sum(Y * Y, axis=1)
            resid = self._row_norms() - proj
        norms = self._row_norms()
        live = norms > 0
        worst = float(np.max(resid[live] / norms[live], initial=0.0))
        if worst > SUPPORT_RTOL:
            raise UnsupportedWorkloadError(
                "the strategy does not support the workload: a query has a relative component "
                f"{worst:.3g} outside the row space of the weighted orthonormal query set"
            )

    def _gram_in_basis(self, rows: np.ndarray) -> np.ndarray:
        """``rows · G · basisᵀ`` for the implicit Gram G of W, in column blocks."""
        G = self.W.gram()
        r = self.basis.shape[0]
        out = np.empty((rows.shape[0], r))
        for s in range(0, r, 512):
            out[:, s : s + 512] = rows @ G.matvec(np.ascontiguousarray(self.basis[s : s + 512].T))
        return out

    def trace(self) -> float:
        G = self.W.gram()
        if not self.completed:
            total = 0.0
            for s in range(0, self.basis.shape[0], 512):
                B = self.basis[s : s + 512]
                c = np.einsum("ij,ji->i", B, G.matvec(np.ascontiguousarray(B.T)))
                total += float(np.sum(c / self.s[s : s + 512]))
            return total
        C = self._gram_in_basis(self.basis)  # T G Tᵀ
        if self.L is not None:
            import scipy.linalg

            X = scipy.linalg.cho_solve((self.L, True), C)
            return float(np.trace(X))
        VC = self.V.T @ C @ self.V
        return float(np.sum(np.diag(VC) / self.lam))

    def _half(self) -> np.ndarray:
        """``H`` (n x r) with ``(AᵀA)⁺ = H Hᵀ``."""
        if not self.completed:
            return self.basis.T / np.sqrt(self.s)
        if self.L is not None:
            import scipy.linalg

            return scipy.linalg.solve_triangular(self.L, self.basis, lower=True).T
        return self.basis.T @ (self.V / np.sqrt(self.lam))

    def profile(self) -> np.ndarray:
        out = np.zeros(self.W.shape[0])
        for Y in self._row_blocks(self._half()):
            out += np.sum(Y * Y, axis=1)
        return out

    def max_profile(self) -> float:
        return float(np.max(self.profile()))


# ============================================================================ dense route
class _DenseRoute:
    """Any workload and strategy, through dense n x n Grams (size-guarded)."""

    def __init__(self, W: Matrix, A: Matrix, gram: Matrix | None = None):
        n = W.shape[1]
        check_dense_size(n, n, f"the trace term for a {type(A).__name__} strategy (dense route)")
        self.W = W
        self.sf = _StrategyFactor(A, gram)

    def check_support(self) -> None:
        top, worst = self.sf.worst_row_residual(self.W)
        if top > 0 and worst > SUPPORT_RTOL:
            raise UnsupportedWorkloadError(
                "the strategy does not support the workload: a query has a relative component "
                f"{worst:.3g} outside rowspace(A)"
            )

    def trace(self) -> float:
        return self.sf.trace_with(self.W, {})

    def profile(self) -> np.ndarray:
        return _as_vector(self.sf.row_profile(self.W), self.W.shape[0])

    def max_profile(self) -> float:
        return float(np.max(self.sf.row_profile(self.W)))


# ======================================================================== SVD bound
def _eigvals_psd(G: Matrix) -> np.ndarray:
    n = G.shape[0]
    check_dense_size(n, n, "eigenvalues of a Gram matrix")
    D = G.dense()
    return _zero_small(np.linalg.eigvalsh(0.5 * (D + D.T)))


def _zero_small(lam: np.ndarray) -> np.ndarray:
    """Clip rounding noise: eigenvalues below the rank cutoff become exactly 0."""
    lam = np.clip(lam, 0.0, None)
    cutoff = RANK_RTOL * len(lam) * np.finfo(float).eps * lam.max(initial=0.0)
    lam[lam < cutoff] = 0.0
    return lam


def _alpha_beta(f: Matrix) -> tuple[float, float] | None:
    """(α, β) with fᵀf = αI + βJ, or None."""
    if isinstance(f, Identity):
        return 1.0, 0.0
    if isinstance(f, Ones):
        return 0.0, float(f.shape[0])
    n = f.shape[1]
    if n == 1:
        return float(f.gram().trace()), 0.0
    if n * n > 4_000_000:
        return None
    G = f.gram().dense()
    beta = G[0, 1]
    alpha = G[0, 0] - beta
    scale = max(np.abs(G).max(), 1e-300)
    if np.abs(G - alpha * np.eye(n) - beta).max() > 1e-12 * scale:
        return None
    return float(alpha), float(beta)


def _span_ij_coefficients(terms) -> dict[int, float] | None:
    """Write Σ_t c_t ⊗_i G_{t,i} as Σ_a v_a ℂ(a) when every G_{t,i} = α I + β J, else None."""
    coeffs: dict[int, float] = {}
    for c, factors in terms:
        parts = []
        for f in factors:
            ab = _alpha_beta(f)
            if ab is None:
                return None
            parts.append(ab)
        partial = {0: c}
        for i, (alpha, beta) in enumerate(parts):
            nxt: dict[int, float] = {}
            for key, val in partial.items():
                if alpha != 0.0:
                    nxt[key | (1 << i)] = nxt.get(key | (1 << i), 0.0) + val * alpha
                if beta != 0.0:
                    nxt[key] = nxt.get(key, 0.0) + val * beta
            partial = nxt
        for key, val in partial.items():
            coeffs[key] = coeffs.get(key, 0.0) + val
    return coeffs


def _marginal_svdb(sizes, coeffs: dict[int, float]) -> float:
    """SVD bound of WᵀW = Σ_a v_a ℂ(a): eigenvalue λ_B = Σ_{a ⊇ B} v_a Π_{i∉a} n_i on a space
    of dimension Π_{i∈B}(n_i − 1); bound = (Σ_B dim_B sqrt(λ_B))² / N. Computed with λ_B / N
    (= Σ_{a⊇B} v_a / Π_{i∈a} n_i) so that N = 10^100 never appears; O(Σ_a 2^|a|) work.
    """
    d = len(sizes)
    lam_over_n: dict[int, float] = {}
    budget = 0
    for a, v in coeffs.items():
        if v == 0.0:
            continue
        bits = [i for i in range(d) if (a >> i) & 1]
        budget += 1 << len(bits)
        if budget > 50_000_000:
            raise TooLargeError("svd_bound: the marginals closed form needs > 5e7 subset terms")
        share = v / math.prod(sizes[i] for i in bits)
        sub = a
        while True:  # every submask B of a
            lam_over_n[sub] = lam_over_n.get(sub, 0.0) + share
            if sub == 0:
                break
            sub = (sub - 1) & a
    total = 0.0
    for b, lam in lam_over_n.items():
        dim = 1
        bb = b
        while bb:
            low = bb & -bb
            dim *= sizes[low.bit_length() - 1] - 1
            bb ^= low
        if dim and lam > 0:
            total += dim * math.sqrt(lam)
    return total * total


def _joint_eigenvalues(terms, sizes) -> np.ndarray | None:
    """All N eigenvalues of Σ_t c_t ⊗_i G_{t,i} when, per attribute, the Grams of the terms
    have a common eigenbasis (verified), else None."""
    if math.prod(sizes) > _linalg_base.MAX_DENSE_ENTRIES:
        return None
    per_attr = []
    rng = np.random.default_rng(12345)
    for i, n in enumerate(sizes):
        check_dense_size(n, n, "a factor Gram")
        grams = []
        for _, factors in terms:
            G = factors[i].gram().dense()
            grams.append(0.5 * (G + G.T))
        # eigenvectors of a generic combination; then verify each Gram is diagonal in them
        combo = sum(g * rng.uniform(1.0, 2.0) / max(np.abs(g).max(), 1e-300) for g in grams)
        _, V = np.linalg.eigh(combo)
        lams = []
        for g in grams:
            D = V.T @ g @ V
            off = D - np.diag(np.diag(D))
            if np.abs(off).max() > 1e-9 * max(np.abs(g).max(), 1e-300) * n:
                return None
            lams.append(np.diag(D))
        per_attr.append(lams)
    lam = np.zeros(math.prod(sizes))
    for t, (c, _) in enumerate(terms):
        vec = np.array([c])
        for i in range(len(sizes)):
            vec = np.kron(vec, per_attr[i][t])
        lam += vec
    return _zero_small(lam)
