"""The one place error is computed (DESIGN.md, "Privacy and error").

Expected total squared error of answering a workload ``W`` with strategy ``A`` by the
matrix mechanism (Li et al. 2010, Prop. 4.4; HDMM Def. 7):

    Err(W, A) = v(privacy) · sens_p(A)² · tr(WᵀW (AᵀA)⁺)

with p = 1 and v = 2/ε² for PureDP (Laplace) and p = 2, v = σ² per unit L2 sensitivity for
ApproxDP / ZCDP (Gaussian). ``A`` must support ``W`` (rowspace(W) ⊆ rowspace(A)); otherwise
:class:`UnsupportedWorkloadError` is raised, never a number.

The trace term is computed by dispatch on structure, dense only as a guarded fallback:

* union of weighted Kronecker products × Kronecker (or Identity) strategy: factor-wise,
  term by term (HDMM Thm 5, Thm 6);
* union of Kronecker products × weighted-marginals strategy: in the marginals algebra
  (HDMM §6.3, App. A.4), through its spectral form;
* anything else: dense, guarded by ``linalg.MAX_DENSE_ENTRIES``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .linalg import (
    Identity,
    Kronecker,
    Marginals,
    MarginalsGram,
    Matrix,
    Ones,
    TooLargeError,
    VStack,
    Weighted,
    check_dense_size,
    projected_traces,
)
from .privacy import Privacy
from .strategy import Strategy

#: Relative tolerance of the support test ||W(I − A⁺A)||_F² ≤ SUPPORT_RTOL · ||W||_F².
SUPPORT_RTOL = 1e-8
#: Eigenvalues below EIG_RTOL · λ_max are treated as zero.
EIG_RTOL = 1e-10
#: Largest number of per-query variances materialised by ``per_query_variance``.
MAX_QUERIES = 100_000_000


class UnsupportedWorkloadError(ValueError):
    """The strategy does not support the workload: some query is outside rowspace(A)."""


# ============================================================================ public API
def expected_error(W: Matrix, A, privacy: Privacy) -> float:
    """Expected total squared error of answering ``W`` with strategy ``A`` under ``privacy``.

    ``A`` is a :class:`~mmtoolkit.strategy.Strategy` or a strategy Matrix (least-squares
    inference). A Strategy with ``inference="none"`` answers its own rows directly
    (Laplace/Gaussian mechanism on W; HDMM §15 "LM"): Err = v · m · sens_p(W)².
    """
    matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    if inference == "none":
        return v * W.shape[0] * W.sensitivity(privacy.norm) ** 2
    return v * matrix.sensitivity(privacy.norm) ** 2 * trace_term(W, matrix)


def rmse(W: Matrix, A, privacy: Privacy) -> float:
    """Root mean squared error per query: sqrt(Err / m)."""
    return math.sqrt(expected_error(W, A, privacy) / W.shape[0])


def error_ratio(W: Matrix, A, B, privacy: Privacy) -> float:
    """HDMM's Ratio(W, A) = sqrt(Err(W, A) / Err(W, B)) (HDMM §8, ratios of RMSE)."""
    return math.sqrt(expected_error(W, A, privacy) / expected_error(W, B, privacy))


def per_query_variance(W: Matrix, A, privacy: Privacy) -> np.ndarray:
    """Variance of every workload answer: v · sens² · diag(W (AᵀA)⁺ Wᵀ) (Li et al. 2010, eq. 1)."""
    matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    m = W.shape[0]
    check_dense_size(m, 1, "per_query_variance")
    if m > MAX_QUERIES:
        raise TooLargeError(f"per_query_variance: {m} queries exceed MAX_QUERIES={MAX_QUERIES}")
    if inference == "none":
        return np.full(m, v * W.sensitivity(privacy.norm) ** 2)
    scale = v * matrix.sensitivity(privacy.norm) ** 2
    return scale * _query_profile(W, matrix)


def max_variance(W: Matrix, A, privacy: Privacy) -> float:
    """Largest per-query variance (the max-variance objective of ResidualPlanner §4.1)."""
    matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    if inference == "none":
        return v * W.sensitivity(privacy.norm) ** 2
    scale = v * matrix.sensitivity(privacy.norm) ** 2
    marg = _as_marginals_pair(W, matrix)
    if marg is not None:
        try:
            return scale * float(max(_marginal_cell_profiles(*marg).values()))
        except _NotConstant:
            pass
    return scale * float(np.max(_query_profile(W, matrix)))


def supports(W: Matrix, A) -> bool:
    """Whether every query of ``W`` lies in the row space of the strategy ``A``."""
    matrix = A.matrix if isinstance(A, Strategy) else A
    try:
        trace_term(W, matrix)
    except UnsupportedWorkloadError:
        return False
    return True


def trace_term(W: Matrix, A: Matrix) -> float:
    """tr(WᵀW (AᵀA)⁺) with a support check, dispatched on structure (no privacy factor)."""
    if W.shape[1] != A.shape[1]:
        raise ValueError(
            f"workload and strategy disagree on the domain size: W has {W.shape[1]} columns, "
            f"A has {A.shape[1]}"
        )
    weight, A = _peel(A)
    if weight == 0.0:
        raise UnsupportedWorkloadError("the strategy is the zero matrix; it supports no query")
    if isinstance(A, Identity):
        return frobenius_sq(W) / weight**2
    marg = _as_marginals_pair(W, A)
    if marg is not None:
        return _marginals_trace(*marg) / weight**2
    kron = _kronecker_trace(W, A)
    if kron is not None:
        return kron / weight**2
    return _dense_trace(W, A) / weight**2


def frobenius_sq(W: Matrix) -> float:
    """||W||_F² = tr(WᵀW), the Identity strategy's trace term, without materialising W."""
    if isinstance(W, Weighted):
        return W.weight**2 * frobenius_sq(W.base)
    if isinstance(W, VStack):
        return float(sum(frobenius_sq(b) for b in W.blocks))
    if isinstance(W, Marginals):  # each marginal has exactly one 1 per column
        return float(sum(t * t for t in W.weights.values())) * float(W.shape[1])
    if isinstance(W, Kronecker):
        return float(math.prod(frobenius_sq(f) for f in W.factors))
    return float(W.gram().trace())


def svd_bound(W: Matrix) -> float:
    """The singular value bound (Σ_j sqrt(λ_j(WᵀW)))² / N (Li & Miklau 2012, Thm 2).

    A lower bound on sens₂(A)² · tr(WᵀW (AᵀA)⁺) over every strategy A, hence (since
    sens₁ ≥ sens₂) on the PureDP units too. Exact routes: weighted marginals and unions of
    Kronecker products whose factor Grams lie in span{I, J} (the marginals closed form);
    a single Kronecker product (product of factor bounds); unions whose per-attribute Grams
    commute (joint eigenbasis, needs N ≤ MAX_DENSE_ENTRIES); else dense eigenvalues.
    """
    if isinstance(W, Weighted):
        return W.weight**2 * svd_bound(W.base)
    if isinstance(W, Marginals):
        return _marginal_svdb(W.sizes, {a: t * t for a, t in W.weights.items()})
    terms = _kron_terms(W)
    sizes = _common_sizes(terms)
    if sizes is not None:
        coeffs = _span_ij_coefficients(terms, sizes)
        if coeffs is not None:
            return _marginal_svdb(sizes, coeffs)
        if len(terms) == 1:
            c, factors = terms[0]
            total = c
            for f in factors:
                lam = _eigvals_psd(f.gram())
                total *= np.sum(np.sqrt(lam)) ** 2 / f.shape[1]
            return float(total)
        lam = _commuting_eigenvalues(terms, sizes)
        if lam is not None:
            return float(np.sum(np.sqrt(lam)) ** 2 / W.shape[1])
    N = W.shape[1]
    if N * N > check_dense_limit():
        raise TooLargeError(
            f"svd_bound: no exact structured method applies to this workload "
            f"({type(W).__name__}, N = {N}) and a dense eigendecomposition of an N x N Gram "
            "is too large"
        )
    lam = _eigvals_psd(W.gram())
    return float(np.sum(np.sqrt(lam)) ** 2 / N)


def svd_bound_error(W: Matrix, privacy: Privacy) -> float:
    """Lower bound on the expected total squared error of any strategy: v · svd_bound(W)."""
    _check_privacy(privacy)
    return privacy.noise_variance(1.0) * svd_bound(W)


def svd_bound_rmse(W: Matrix, privacy: Privacy) -> float:
    """Lower bound on the RMSE of any strategy: sqrt(v · svd_bound(W) / m)."""
    return math.sqrt(svd_bound_error(W, privacy) / W.shape[0])


# ====================================================================== input handling
def check_dense_limit() -> int:
    from . import linalg

    return linalg.MAX_DENSE_ENTRIES


def _check_privacy(privacy) -> None:
    if not isinstance(privacy, Privacy):
        raise TypeError(f"privacy must be a PureDP, ApproxDP or ZCDP instance, got {privacy!r}")


def _unpack(W: Matrix, A, privacy: Privacy) -> tuple[Matrix, str]:
    _check_privacy(privacy)
    if not isinstance(W, Matrix):
        raise TypeError(f"workload must be a linalg.Matrix, got {type(W).__name__}")
    if isinstance(A, Strategy):
        matrix, inference = A.matrix, A.inference
    elif isinstance(A, Matrix):
        matrix, inference = A, "least_squares"
    else:
        raise TypeError(f"strategy must be a Strategy or a linalg.Matrix, got {type(A).__name__}")
    if matrix.shape[1] != W.shape[1]:
        raise ValueError(
            f"workload and strategy disagree on the domain size: W has {W.shape[1]} columns, "
            f"the strategy has {matrix.shape[1]}"
        )
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
    return matrix, inference


def _peel(A: Matrix) -> tuple[float, Matrix]:
    weight = 1.0
    while isinstance(A, Weighted):
        weight *= A.weight
        A = A.base
    return weight, A


# ============================================================ union-of-Kronecker structure
def _kron_terms(W: Matrix) -> list[tuple[float, list[Matrix]]]:
    """W as a union Σ_t of c_t-weighted Kronecker products: [(c_t, factors)], c_t = weight²."""
    if isinstance(W, Weighted):
        return [(W.weight**2 * c, f) for c, f in _kron_terms(W.base)]
    if isinstance(W, VStack):
        return [t for b in W.blocks for t in _kron_terms(b)]
    if isinstance(W, Marginals):
        return [(theta**2, list(block.factors)) for theta, block in W.blocks()]
    if isinstance(W, Kronecker):
        c, factors = 1.0, []
        for f in W.factors:
            w, base = _peel(f)
            c *= w * w
            factors.append(base)
        return [(c, factors)]
    return [(1.0, [W])]


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


class _FactorCache:
    """Per-call cache of dense factor Grams and strategy-factor pseudo-inverses."""

    def __init__(self):
        self._gram: dict[int, tuple[Matrix, np.ndarray]] = {}

    def gram(self, M: Matrix) -> np.ndarray:
        hit = self._gram.get(id(M))
        if hit is None:
            n = M.shape[1]
            check_dense_size(n, n, "the Gram of a workload factor")
            hit = (M, _sym(M.gram().dense()))
            self._gram[id(M)] = hit
        return hit[1]


@dataclass
class _StrategyFactor:
    """(AᵀA)⁺ and the row-space projector A⁺A of one strategy factor, or Identity."""

    identity: bool
    pinv_gram: np.ndarray | None = None
    projector: np.ndarray | None = None

    @classmethod
    def of(cls, A: Matrix) -> _StrategyFactor:
        if isinstance(A, Identity):
            return cls(True)
        n = A.shape[1]
        check_dense_size(n, n, "the Gram of a strategy factor")
        lam, V = np.linalg.eigh(_sym(A.gram().dense()))
        keep = lam > EIG_RTOL * max(lam.max(initial=0.0), 0.0)
        Vk = V[:, keep]
        return cls(False, (Vk / lam[keep]) @ Vk.T, Vk @ Vk.T)

    def trace_with(self, workload_factor: Matrix, cache: _FactorCache) -> tuple[float, ...]:
        """(tr(G_W (AᵀA)⁺), tr(G_W (I − A⁺A)), tr(G_W)) for the factor's workload Gram G_W."""
        if self.identity:
            tr = workload_factor.gram().trace()
            return tr, 0.0, tr
        G = cache.gram(workload_factor)
        tr = float(np.trace(G))
        return float(np.sum(G * self.pinv_gram)), tr - float(np.sum(G * self.projector)), tr


def _kronecker_trace(W: Matrix, A: Matrix) -> float | None:
    """Σ_t c_t Π_g tr(G_{t,g} (A_gᵀA_g)⁺) for Kronecker (or Identity) strategies (HDMM Thm 6)."""
    if isinstance(A, Identity):
        a_factors = None
    elif isinstance(A, Kronecker):
        a_factors = A.factors
    else:
        return None
    terms = _kron_terms(W)
    cache = _FactorCache()
    strategy_cache: dict[tuple, _StrategyFactor] = {}
    total = 0.0
    for c, factors in terms:
        sizes_w = [f.shape[1] for f in factors]
        if a_factors is None:
            groups = [(slice(k, k + 1), None) for k in range(len(factors))]
        else:
            groups = _align(sizes_w, [f.shape[1] for f in a_factors])
        value, unsupported, zero = c, False, False
        for gw, ga in groups:
            wf = _group(factors[gw])
            key = (None, wf.shape[1]) if ga is None else (ga.start, ga.stop)
            sf = strategy_cache.get(key)
            if sf is None:
                sf = (
                    _StrategyFactor(True)
                    if ga is None
                    else _StrategyFactor.of(_group(list(a_factors[ga])))
                )
                strategy_cache[key] = sf
            tr, residual, scale = sf.trace_with(wf, cache)
            if scale <= 0:
                zero = True
            elif residual > SUPPORT_RTOL * scale:
                unsupported = True
            value *= tr
        if zero:
            continue
        if unsupported:
            raise UnsupportedWorkloadError(
                "the strategy does not support the workload: a workload query lies outside the "
                "row space of the strategy (some Kronecker factor is not spanned)"
            )
        total += value
    return total


# =================================================================== marginals algebra
def _as_marginals_pair(W: Matrix, A: Matrix):
    """(spectrum of AᵀA, dims, W terms, sizes) when A is a weighted-marginals strategy."""
    weight, A = _peel(A)
    if not isinstance(A, Marginals):
        return None
    sizes = list(A.sizes)
    terms = _kron_terms(W)
    if _common_sizes(terms) != sizes:
        return None
    gram = A.gram()
    mu = gram.spectrum() * weight**2
    return mu, gram.dims(), terms, sizes


def _pseudo_reciprocal(mu: np.ndarray, dims: np.ndarray) -> np.ndarray:
    live = (dims > 0) & (np.abs(mu) > EIG_RTOL * np.max(np.abs(mu), initial=0.0))
    out = np.zeros_like(mu)
    out[live] = 1.0 / mu[live]
    return out


def _marginal_key(factors) -> int | None:
    """The bitmask of a Kronecker product of Identity / Total factors, else None."""
    key = 0
    for i, f in enumerate(factors):
        if isinstance(f, Identity):
            key |= 1 << i
        elif not _is_total(f):
            return None
    return key


def _workload_projections(terms, sizes) -> np.ndarray:
    """Σ_t c_t tr(P_B G_t) over all residual subspaces B (G_t = ⊗ factor Grams).

    Marginal terms go through the algebra (tr(P_B ℂ(a)) summed = dim_B · μ_B of Σ c_a ℂ(a));
    other terms through the factor traces and sums (``linalg.projected_traces``).
    """
    total = np.zeros(2 ** len(sizes))
    coeffs = np.zeros(2 ** len(sizes))
    for c, factors in terms:
        key = _marginal_key(factors)
        if key is not None:
            coeffs[key] += c
            continue
        traces = [f.gram().trace() for f in factors]
        sums = [float(np.sum(f.matvec(np.ones(f.shape[1])) ** 2)) for f in factors]
        total += c * projected_traces(sizes, traces, sums)
    if coeffs.any():
        gram = MarginalsGram(sizes, coeffs)
        total += gram.dims() * gram.spectrum()
    return total


def _marginals_trace(mu, dims, terms, sizes) -> float:
    """Σ_B μ_B⁺ tr(P_B WᵀW): (AᵀA)⁺ is diagonal on the residual subspaces P_B."""
    proj = _workload_projections(terms, sizes)
    inv = _pseudo_reciprocal(mu, dims)
    dead = inv == 0
    if np.sum(proj[dead]) > SUPPORT_RTOL * np.sum(proj):
        raise UnsupportedWorkloadError(
            "the marginals strategy does not support the workload: the workload has weight on a "
            "residual subspace that no measured marginal covers"
        )
    return float(np.dot(inv, proj))


def _marginal_cell_profiles(mu, dims, terms, sizes) -> dict[int, float]:
    """Per-term per-query profile diag(W_t (AᵀA)⁺ W_tᵀ) when it is constant within the term.

    A marginals strategy is invariant under per-attribute value renamings, so every cell of a
    workload marginal has the same variance (ResidualPlanner Thm 4.4): tr(·)/rows.
    Non-marginal workload terms fall back to the dense route via the caller.
    """
    inv = _pseudo_reciprocal(mu, dims)
    out = {}
    for k, (c, factors) in enumerate(terms):
        if _marginal_key(factors) is None:
            raise _NotConstant
        rows = math.prod(f.shape[0] for f in factors)
        proj = _workload_projections([(c, factors)], sizes)
        if np.sum(proj[inv == 0]) > SUPPORT_RTOL * np.sum(proj):
            raise UnsupportedWorkloadError("the marginals strategy does not support the workload")
        out[k] = float(np.dot(inv, proj)) / rows
    return out


class _NotConstant(Exception):
    pass


def _is_total(f: Matrix) -> bool:
    return isinstance(f, Ones) and f.shape[0] == 1


# ======================================================================== per-query
def _query_profile(W: Matrix, A: Matrix) -> np.ndarray:
    """diag(W (AᵀA)⁺ Wᵀ), structured where possible."""
    weight, A0 = _peel(A)
    marg = _as_marginals_pair(W, A)
    if marg is not None:
        try:
            per_term = _marginal_cell_profiles(*marg)
            terms = marg[2]
            return np.concatenate(
                [
                    np.full(math.prod(f.shape[0] for f in factors), per_term[k])
                    for k, (_, factors) in enumerate(terms)
                ]
            )
        except _NotConstant:
            pass
    if isinstance(A0, (Identity, Kronecker)):
        out = _kronecker_profile(W, A0)
        if out is not None:
            return out / weight**2
    trace_term(W, A)  # support check (raises) before the dense route
    m, n = W.shape
    check_dense_size(m, n, "per-query variance (dense route)")
    Wd = W.dense()
    P = A.gram().pinv().dense()
    return np.einsum("ij,jk,ik->i", Wd, P, Wd)


def _kronecker_profile(W: Matrix, A: Matrix) -> np.ndarray | None:
    trace_term(W, A)  # support check
    a_factors = None if isinstance(A, Identity) else A.factors
    strategy_cache: dict[tuple[int, int], _StrategyFactor] = {}
    parts = []
    for c, factors in _kron_terms(W):
        sizes_w = [f.shape[1] for f in factors]
        groups = (
            [(slice(k, k + 1), None) for k in range(len(factors))]
            if a_factors is None
            else _align(sizes_w, [f.shape[1] for f in a_factors])
        )
        vec = np.array([c])
        for gw, ga in groups:
            wf = _group(factors[gw])
            m, n = wf.shape
            check_dense_size(m, n, "a workload factor (per-query variance)")
            Wd = wf.dense()
            if ga is None:
                d = np.sum(Wd * Wd, axis=1)
            else:
                key = (ga.start, ga.stop)
                if key not in strategy_cache:
                    strategy_cache[key] = _StrategyFactor.of(_group(list(a_factors[ga])))
                sf = strategy_cache[key]
                d = (
                    np.sum(Wd * Wd, axis=1)
                    if sf.identity
                    else np.einsum("ij,jk,ik->i", Wd, sf.pinv_gram, Wd)
                )
            vec = np.kron(vec, d)
            check_dense_size(len(vec), 1, "per-query variance vector")
        parts.append(vec)
    return np.concatenate(parts)


# ============================================================================ dense route
def _sym(M: np.ndarray) -> np.ndarray:
    return 0.5 * (M + M.T)


def _dense_trace(W: Matrix, A: Matrix) -> float:
    n = W.shape[1]
    check_dense_size(n, n, f"tr(WᵀW (AᵀA)⁺) for a {type(A).__name__} strategy (dense route)")
    sf = _StrategyFactor.of(A)
    if sf.identity:
        return W.gram().trace()
    G = _sym(W.gram().dense())
    scale = np.trace(G)
    residual = scale - np.sum(G * sf.projector)
    if residual > SUPPORT_RTOL * max(scale, 0.0):
        raise UnsupportedWorkloadError(
            "the strategy does not support the workload: ||W (I − A⁺A)||_F² = "
            f"{residual:.3g} (relative {residual / scale:.3g}); some query lies outside rowspace(A)"
        )
    return float(np.sum(G * sf.pinv_gram))


def _eigvals_psd(G: Matrix) -> np.ndarray:
    n = G.shape[0]
    check_dense_size(n, n, "eigenvalues of a Gram matrix")
    lam = np.linalg.eigvalsh(_sym(G.dense()))
    return _zero_small(lam)


def _zero_small(lam: np.ndarray) -> np.ndarray:
    """Clip rounding noise: eigenvalues below EIG_RTOL · λ_max become exactly 0."""
    lam = np.clip(lam, 0.0, None)
    lam[lam < EIG_RTOL * lam.max(initial=0.0)] = 0.0
    return lam


# ======================================================================== SVD bound
def _span_ij_coefficients(terms, sizes) -> dict[int, float] | None:
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


def _commuting_eigenvalues(terms, sizes) -> np.ndarray | None:
    """All N eigenvalues of Σ_t c_t ⊗_i G_{t,i} when, per attribute, the Grams commute."""
    N = math.prod(sizes)
    if N > check_dense_limit():
        return None
    per_attr = []
    for i, n in enumerate(sizes):
        check_dense_size(n, n, "a factor Gram")
        grams = [_sym(factors[i].gram().dense()) for _, factors in terms]
        for a in range(len(grams)):
            for b in range(a + 1, len(grams)):
                comm = grams[a] @ grams[b] - grams[b] @ grams[a]
                scale = np.abs(grams[a]).max() * np.abs(grams[b]).max() * n + 1e-300
                if np.abs(comm).max() > 1e-9 * scale:
                    return None
        rng = np.random.default_rng(12345)  # generic combination => joint eigenbasis
        combo = sum(g * rng.uniform(1.0, 2.0) / max(np.abs(g).max(), 1e-300) for g in grams)
        _, V = np.linalg.eigh(combo)
        per_attr.append([np.einsum("ji,jk,ki->i", V, g, V) for g in grams])
    lam = np.zeros(N)
    for t, (c, _) in enumerate(terms):
        vec = np.array([c])
        for i in range(len(sizes)):
            vec = np.kron(vec, per_attr[i][t])
        lam += vec
    return _zero_small(lam)
