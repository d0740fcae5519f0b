"""The Matrix Mechanism's optimal strategy as a semidefinite program (Li et al. 2010, §5).

:class:`MatrixMechanismSDP` (``mm_sdp``): under (ε, δ) / zCDP, Program 5.2 (convex) through
cvxpy for ``n ≤`` :data:`MAX_SDP_N` or the certified dual solver of :mod:`.optimum` up to
:data:`MAX_DUAL_N` (a column-permuted workload solved on its base); under ε-DP, the paper's
approximations to Program 5.1 (the L2 or SVD-bound profile, Program 5.3's rotation by convex
iteration, §5.3's column completion, Thm 5.27).

User guide: docs/algorithms/eigen-design.md ("The Matrix Mechanism's SDP").
"""

from __future__ import annotations

import time

import numpy as np

from ...checks import check_bool, check_int
from ...linalg import RANK_RTOL, Dense, Matrix, OrthoBasis, Permuted, SymTridiagonal, VStack
from ...linalg import base as _linalg_base
from ...linalg.spectral import canonical_eigenbasis
from ...privacy import Privacy, PureDP
from ...strategy import Strategy
from ..base import NotApplicableError, Selector, register
from .gram import eigen_queries, workload_gram
from .optimum import solve_program_5_2

#: Largest n Program 5.2 is attempted for by default: about the largest size solved within
#: minutes (``benchmarks/bench_mm_sdp.py``).
MAX_SDP_N = 64
SDP_SOLVERS = ("clarabel", "scs")
#: Every ``solver`` choice: the cvxpy ones and the dedicated dual solver (:mod:`.optimum`).
SOLVERS = SDP_SOLVERS + ("dual",)
#: Largest n the dual solver is used for (n = 4096 takes minutes, n = 8192 about half an hour
#: to an hour on one thread, see ``benchmarks/bench_mm_sdp.py``; its memory is a few n x n
#: arrays, 0.5 GB each at n = 8192).
MAX_DUAL_N = 8192
#: The dual route adds a column-completion row ``sqrt(1 − X_jj) e_j`` only above this norm.
COMPLETION_MIN = 1e-3
#: Relative accuracy of Program 5.2's solution X (the solvers stop at ~1e-7 or ~1e-8, so X's
#: repeated eigenvalues come back split): eigenvalues of X closer than this are one cluster.
SDP_ACCURACY = 1e-6
L1_METHODS = ("l2", "svd_bound")


def _sym_sqrt(X: np.ndarray) -> np.ndarray:
    lam, V = np.linalg.eigh(0.5 * (X + X.T))
    lam = np.clip(lam, 0.0, None)
    return (V * np.sqrt(lam)) @ V.T


def unpermute(workload: Matrix) -> tuple[Matrix, np.ndarray | None]:
    """``(W, perm)`` with ``workload = W P`` (``P = I[:, perm]``, nested :class:`Permuted`
    composed) and ``W`` not a :class:`Permuted`; ``perm`` is None for an unpermuted workload.
    The columns of ``workload`` are ``W[:, perm]``."""
    perm = None
    while isinstance(workload, Permuted):
        # (B P₁) P₂ has columns B[:, p₁[p₂[j]]]
        perm = workload.perm if perm is None else workload.perm[perm]
        workload = workload.base
    return workload, perm


def _eigenbasis_strategy(X: np.ndarray, completion: np.ndarray) -> OrthoBasis:
    """The strategy ``[A; diag(completion)]`` with ``AᵀA = X`` in its eigenbasis form
    ``[diag(√μ) Vᵀ; diag(completion)]`` (``X = V diag(μ) Vᵀ``, eigenvalues at rounding level
    dropped by the dense route's pseudo-inverse rule): the rows of ``A`` rotated, so the same
    Gram and the same L2 sensitivity, hence the same error under L2 privacy. An
    :class:`OrthoBasis`, scored by the evaluator's structured route where the dense route's
    ``n x n`` arrays exceed ``MAX_DENSE_ENTRIES`` (n = 8192)."""
    mu, V = np.linalg.eigh(X)
    keep = mu > RANK_RTOL * mu.size * np.finfo(float).eps * mu.max()
    return OrthoBasis(V[:, keep].T, np.sqrt(mu[keep]), completion if completion.any() else None)


def _polar(V: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(V)
    return U @ Vt


def program_5_2(F: np.ndarray, solver: str = "scs", eps: float | None = None):
    """Solve Program 5.2: ``min tr(F X⁻¹ Fᵀ)`` s.t. ``X ⪰ 0``, ``diag(X) ≤ 1``.

    ``F`` is any ``r x n`` factor of ``WᵀW``. Returns ``(X, value)``.
    """
    import cvxpy as cp

    if solver not in SDP_SOLVERS:
        raise ValueError(f"unknown SDP solver {solver!r} (valid: {', '.join(SDP_SOLVERS)})")
    n = F.shape[1]
    X = cp.Variable((n, n), PSD=True)
    prob = cp.Problem(cp.Minimize(cp.matrix_frac(F.T, X)), [cp.diag(X) <= 1])
    kwargs = {}
    if solver == "scs":
        kwargs = {"eps": eps or 1e-7, "max_iters": 200_000}
    try:
        prob.solve(solver=solver.upper(), **kwargs)
    except cp.error.SolverError as err:
        raise RuntimeError(f"Program 5.2: solver {solver} failed: {err}") from err
    if prob.status not in ("optimal", "optimal_inaccurate") or X.value is None:
        raise RuntimeError(f"Program 5.2: solver {solver} returned status {prob.status}")
    Xv = 0.5 * (X.value + X.value.T)
    return Xv, float(prob.value)


def l1_completion(A: np.ndarray) -> np.ndarray:
    """Completing deficient columns (Li et al. 2010 §5.3): ``[A; diag(Δ − ||a_j||₁)]``."""
    s = np.abs(A).sum(axis=0)
    d = s.max() - s
    d[d <= 1e-12 * s.max()] = 0.0
    rows = np.diag(d)[d > 0]
    return np.vstack([A, rows]) if rows.size else A


def min_sensitivity_rotation(
    C: np.ndarray,
    iterations: int = 30,
    weight: float | None = None,
    solver: str = "clarabel",
) -> tuple[np.ndarray, dict]:
    """Program 5.3: a square ``B`` with ``BᵀB = CᵀC`` and small L1 sensitivity.

    Convex iteration on ``B = V C`` (docs/algorithms/eigen-design.md); ``C`` is ``r x n`` with
    full row rank. Returns ``(B, info)``; ``B = U C`` with ``U`` orthogonal exactly, and
    ``sens₁(B) ≤ sens₁(C)`` (the start is kept if nothing better is found).
    """
    import cvxpy as cp

    r = C.shape[0]
    G = C.T @ C
    starts = [C]
    lam, Vg = np.linalg.eigh(0.5 * (G + G.T))
    if r == C.shape[1] and lam.min() > 1e-12 * lam.max():
        # the upper-triangular factor and the symmetric square root
        starts += [np.linalg.cholesky(G).T, (Vg * np.sqrt(lam)) @ Vg.T]
    best_B, best_s = C, float(np.abs(C).sum(axis=0).max())
    start_s = best_s
    V = cp.Variable((r, r))
    Cp = cp.Parameter(C.shape)
    D = cp.Parameter((r, r))  # w · U_k, the weighted direction matrix
    t = cp.Variable()
    prob = cp.Problem(
        cp.Minimize(t - cp.sum(cp.multiply(D, V))),
        [cp.sigma_max(V) <= 1, cp.sum(cp.abs(V @ Cp), axis=0) <= t],
    )
    history = []
    for C0 in starts:
        Cp.value = C0
        s0 = float(np.abs(C0).sum(axis=0).max())
        if s0 < best_s - 1e-12:
            best_B, best_s = C0, s0
        w = weight if weight is not None else s0 / r
        Uk = np.eye(r)
        for _ in range(iterations):
            D.value = w * Uk
            try:
                prob.solve(solver=solver.upper())
            except cp.error.SolverError:
                break
            Vk = V.value
            if Vk is None:
                break
            Uk = _polar(Vk)
            B = Uk @ C0
            s = float(np.abs(B).sum(axis=0).max())
            history.append(s)
            if s < best_s - 1e-12:
                best_B, best_s = B, s
            nuclear = float(np.linalg.svd(Vk, compute_uv=False).sum())
            if nuclear > r * (1 - 1e-7):  # V is (numerically) orthogonal: converged
                break
            w *= 1.5
    # exact profile equivalence: B = U C with U the polar factor of B C⁺
    U = _polar(best_B @ np.linalg.pinv(C))
    best_B = U @ C
    best_s = float(np.abs(best_B).sum(axis=0).max())
    return best_B, {"start": start_s, "sensitivity": best_s, "history": history}


@register
class MatrixMechanismSDP(Selector):
    """The matrix mechanism's SDP (Li et al. 2010, Programs 5.2 / 5.3, §5.2–5.4).

    Parameters
    ----------
    solver : "scs" (default; faster) or "clarabel" (more accurate, slower) through cvxpy, or
        "dual" (:func:`.optimum.solve_program_5_2`; L2 privacy, or the L1 route's profile).
    max_n : the largest domain for the chosen solver (default :data:`MAX_SDP_N`, for "dual"
        :data:`MAX_DUAL_N`); when it is not given, under L2 privacy a cvxpy solver hands
        larger domains, up to :data:`MAX_DUAL_N`, to "dual". A given ``max_n`` is a hard limit.
    progress : an iteration line to stderr every few seconds during a "dual" solve.
    l1_method : PureDP starting profile, "l2" (default) or "svd_bound".
    rotate : PureDP: apply Program 5.3's sensitivity-minimising rotation (default True).
    rotate_iterations : convex-iteration steps for Program 5.3.
    augment : PureDP: complete deficient columns (§5.3; default True).
    """

    name = "mm_sdp"
    method = "Matrix mechanism: the SDP over strategies (Programs 5.2 / 5.3)"
    paper = "Li, Hay, Rastogi, Miklau & McGregor, PODS 2010, §5.2-§5.4"

    def __init__(
        self,
        solver: str = "scs",
        max_n: int | None = None,
        l1_method: str = "l2",
        rotate: bool = True,
        rotate_iterations: int = 30,
        augment: bool = True,
        progress: bool = False,
    ):
        if solver not in SOLVERS:
            raise ValueError(f"unknown SDP solver {solver!r} (valid: {', '.join(SOLVERS)})")
        # the default cvxpy limit hands larger L2 domains to "dual"; an explicit one is a limit
        self._handoff = max_n is None and solver != "dual"
        if max_n is None:
            max_n = MAX_DUAL_N if solver == "dual" else MAX_SDP_N
        max_n = check_int(max_n, "max_n", minimum=1)
        if l1_method not in L1_METHODS:
            raise ValueError(f"unknown l1_method {l1_method!r} (valid: {', '.join(L1_METHODS)})")
        self.params = {
            "solver": solver,
            "max_n": max_n,
            "l1_method": l1_method,
            "rotate": check_bool(rotate, "rotate"),
            "rotate_iterations": check_int(rotate_iterations, "rotate_iterations", minimum=0),
            "augment": check_bool(augment, "augment"),
            "progress": check_bool(progress, "progress"),
        }

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        prm = self.params
        n = workload.shape[1]
        solver = prm["solver"]
        l2 = not isinstance(privacy, PureDP)
        if self._handoff and l2 and prm["max_n"] < n <= MAX_DUAL_N:
            solver = "dual"  # above the cvxpy size: the dedicated solver
        elif n > prm["max_n"]:
            raise NotApplicableError(
                f"mm_sdp: n = {n} cells exceeds the SDP size limit max_n = {prm['max_n']} "
                f"(Program 5.2 has an {n} x {n} PSD variable; n = 64 already takes ~8 min "
                f"with cvxpy here, the dual solver goes to n = {MAX_DUAL_N} under L2 "
                "privacy); use eigen_design instead"
            )
        if not l2 and prm["rotate"] and n > MAX_SDP_N:
            raise NotApplicableError(
                f"mm_sdp: n = {n} cells exceeds MAX_SDP_N = {MAX_SDP_N} for the ε / L1 route: its "
                "rotation (Program 5.3) is a cvxpy program (rotate=false skips it)"
            )
        if isinstance(privacy, PureDP):
            G = workload_gram(workload)
            sigma, Q = eigen_queries(G)
            return self._select_l1(G, sigma, Q, {"rank": int(sigma.size)})
        # the dual solver on W P solves W and permutes back (see docs/algorithms/eigen-design.md)
        base, perm = unpermute(workload) if solver == "dual" else (workload, None)
        start = time.perf_counter()
        X, A, value, meta = self._program_5_2(workload_gram(base), solver)
        meta["seconds_sdp"] = time.perf_counter() - start
        if perm is not None:
            X, A = X[np.ix_(perm, perm)], A[:, perm]
            meta["solved_unpermuted"] = True
        d = np.sqrt(np.clip(1.0 - np.diag(X), 0.0, None))
        # completion rows only for slack cells: the dual solver's X has X_jj = 1 − O(gap) on
        # tight cells, and rows of norm ~sqrt(gap) there would only make AᵀA ill-conditioned
        d[d < (COMPLETION_MIN if solver == "dual" else 1e-9)] = 0.0
        matrix: Matrix
        if n * n > _linalg_base.MAX_DENSE_ENTRIES:
            matrix = _eigenbasis_strategy(X, d)  # the evaluator's dense route refuses n x n
        elif d.any():
            matrix = VStack([Dense(A), SymTridiagonal(d, np.zeros(n - 1))])
        else:
            matrix = Dense(A)
        return Strategy(matrix=matrix, selector=self.name, metadata=meta, loss=value)

    def _program_5_2(self, G: np.ndarray, solver: str):
        """Program 5.2 for ``G = WᵀW`` by ``solver``: ``(X, A, value, metadata)`` with
        ``AᵀA = X``."""
        if solver == "dual":
            sol = solve_program_5_2(G, verbose=self.params["progress"])
            meta = {"solver": "dual", "dual_value": sol.dual}
            meta.update({"program_value": sol.value, "duality_gap": sol.gap})
            meta["iterations"] = sol.iterations
            return sol.X, sol.factor, sol.value, meta
        sigma, Q = eigen_queries(G)
        F = np.sqrt(sigma)[:, None] * Q  # FᵀF = WᵀW, r x n
        X, value = program_5_2(F, solver)
        return X, _sym_sqrt(X), value, {"rank": int(sigma.size), "program_value": value}

    def _select_l1(self, G, sigma, Q, meta) -> Strategy:
        prm = self.params
        if prm["l1_method"] == "svd_bound":
            C = sigma[:, None] ** 0.25 * Q  # Thm 5.25: D_W^{1/2} Q_W
        else:
            X, _, value, _ = self._program_5_2(G, prm["solver"])
            meta["program_value_l2"] = value
            lam, V = np.linalg.eigh(X)
            keep = lam > 1e-9 * lam.max()
            # the rotation search starts from C itself: a basis fixed by X, not by eigh, with
            # X's repeated eigenvalues grouped at the SDP solution's accuracy
            tol = SDP_ACCURACY * lam.max()
            lam, V = canonical_eigenbasis(lam[keep], V[:, keep], tol=tol)
            C = (V * np.sqrt(lam)).T  # CᵀC = X (to SDP_ACCURACY), full row rank
        if prm["rotate"]:
            C, info = min_sensitivity_rotation(C, prm["rotate_iterations"])
            meta["rotation"] = {"start": info["start"], "sensitivity": info["sensitivity"]}
        A = l1_completion(C) if prm["augment"] else C
        return Strategy(matrix=Dense(A), selector=self.name, metadata=meta)
