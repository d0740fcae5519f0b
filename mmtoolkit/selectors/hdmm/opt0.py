"""OPT_0: p-Identity strategies on one explicit domain (HDMM §5, Def. 9, Thm 4, App. A.2-A.3).

Problem 2 of the paper: minimise ``C(Θ) = tr[(A(Θ)ᵀA(Θ))⁻¹ WᵀW]`` over ``Θ ≥ 0`` (p x n), where
``A(Θ) = [I; Θ]D`` has unit sensitivity by construction. With ``s`` the column scales
(``D = diag(1/s)``), ``M = (I_p + ΘΘᵀ)⁻¹`` (Cholesky) and ``Y = WᵀW``, Woodbury gives

    C = Σ_j s_j² Y_jj − tr(M Q),   Q = (Θ D_s) Y (Θ D_s)ᵀ,          (D_s = diag(s))

and, with ``B = Y (Θ D_s)ᵀ`` (``p`` products with ``Y``: O(pn²) dense, O(pn) for the
structured range Grams),

    ∂C/∂Θ |_s = 2 M Q M Θ − 2 M Θ D_s Y D_s,   ∂C/∂s = 2 (s ∘ diag Y − rowsum((B M) ∘ Θᵀ)),

then the chain rule through ``s`` (L1: ``∂s_j/∂Θ_kj = 1``; L2: ``Θ_kj / s_j``). Everything is
O(p²n) plus the ``p`` Gram products: never O(n³), never an n x n intermediate besides a dense
``Y`` itself.

Gaussian (L2) version: same family with ``s_j = sqrt(1 + Σ_k Θ_kj²)``, so ``X = AᵀA =
D(I + ΘᵀΘ)D`` has unit diagonal (``sens₂ = 1``) and ``Θ`` is unconstrained (signs do not
change an L2 column norm). With ``p = n`` this family reaches every positive-definite
unit-diagonal ``X`` (so its optimum is the L2 matrix-mechanism optimum of Li et al. 2015,
Program 5.2); the p x p solves use the Cholesky factor of ``I + ΘΘᵀ``.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.optimize import minimize
from threadpoolctl import ThreadpoolController

from ...checks import check_int, check_positive
from ...linalg import Matrix, PIdentity, check_dense_size
from ...linalg.pidentity import pidentity_scale
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register
from ._common import (
    GramOperator,
    check_p_param,
    norm_of,
    seed_sequences,
)

#: Default L-BFGS-B relative-reduction tolerance (scipy's ``ftol``; 1e-4 as in the authors'
#: implementation, digest §4.3) and iteration cap.
FTOL = 1e-4
MAXITER = 2000


@functools.cache
def _blas_controller() -> ThreadpoolController:
    # built once (it scans the loaded libraries: ~3 ms); numpy's and scipy's BLAS are loaded
    # by this module's imports, so both are found
    return ThreadpoolController()


def one_blas_thread():
    """A context in which numpy's and scipy's BLAS run on one thread (threadpoolctl).

    OPT_0's products are p x n by n x p (HDMM §5): at p = 64, n = 1024 each takes ~0.2 ms,
    where handing it to a second thread costs more than it saves (one objective and gradient:
    3.9 ms on one thread, 10-120 ms with two on a shared 2-core machine), and a threaded
    product rounds differently, which L-BFGS-B amplifies (RMSE 6.7855 vs 6.7789 for one
    restart on Prefix 1024): on one thread the result does not depend on the machine's thread
    count. Parallelism comes from running restarts or jobs side by side (``mmtoolkit run -j``).
    """
    return _blas_controller().limit(limits=1, user_api="blas")


def pidentity_objective(theta: np.ndarray, gram: GramOperator, norm: int = 1):
    """``(C(Θ), ∂C/∂Θ)`` for ``A(Θ) = [I; Θ]D`` (see the module docstring; HDMM eq. 3-4),
    computed with BLAS on one thread (:func:`one_blas_thread`).

    Returns ``(inf, 0)`` when the Woodbury core cannot be factorised or the loss comes out
    non-positive through rounding (HDMM digest §16, pitfall 5).
    """
    with one_blas_thread():
        return _objective(theta, gram, norm)


def _objective(theta: np.ndarray, gram: GramOperator, norm: int):
    p, n = theta.shape
    s = pidentity_scale(theta, norm)
    Ts = theta * s  # Θ D_s
    # Y D_s Θᵀ, n x p, from a row-major block: a Gram's reductions (running sums, column
    # sums) then add in the same order whatever the kind
    B = gram.matmat(np.ascontiguousarray(Ts.T))
    P = theta @ theta.T
    P[np.diag_indices(p)] += 1.0
    try:
        M = cho_solve(cho_factor(P, lower=True), np.eye(p))
    except LinAlgError:
        return np.inf, np.zeros_like(theta)
    Q = Ts @ B
    Q = 0.5 * (Q + Q.T)
    loss = float(np.dot(s * s, gram.diag) - np.sum(M * Q))
    if not np.isfinite(loss) or loss <= 0.0:
        return np.inf, np.zeros_like(theta)
    BM = B @ M
    g_s = 2.0 * (s * gram.diag - np.einsum("jk,kj->j", BM, theta))
    MT = M @ theta
    # 2 M Q M Θ - 2 (M Bᵀ) D_s, in place (the same roundings: scaling by 2 is exact)
    grad = (M @ Q) @ MT
    grad *= 2.0
    MBs = M @ B.T
    MBs *= 2.0
    MBs *= s
    grad -= MBs
    if norm == 1:
        grad += g_s[None, :]
    else:
        grad += theta * (g_s / s)[None, :]
    return loss, grad


def optimize_pidentity(
    gram,
    p: int,
    norm: int = 1,
    rng: np.random.Generator | None = None,
    theta0: np.ndarray | None = None,
    ftol: float = FTOL,
    maxiter: int = MAXITER,
) -> tuple[np.ndarray, float]:
    """OPT_0 (HDMM §5): L-BFGS-B on ``Θ`` (bounds ``Θ ≥ 0`` for L1, none for L2).

    ``gram`` is ``WᵀW`` (a Matrix, an array, or a prepared :class:`GramOperator`), so a
    workload may be given by its Gram alone. Initial ``Θ₀ ~ U[0,1)^{p x n}`` from ``rng``
    unless ``theta0`` is given. Returns ``(Θ, C(Θ))``.
    """
    G = gram if isinstance(gram, GramOperator) else GramOperator(gram)
    n = G.n
    p = check_int(p, "p", minimum=1)
    # Θ, its gradient and L-BFGS-B's 2·10 correction vectors are all p x n: fail before
    # allocating rather than with a MemoryError (n = 10⁶, p = n/16 asks for 6·10¹⁰ entries)
    check_dense_size(p, n, f"OPT_0's parameter Θ (p = {p}, n = {n})")
    if theta0 is None:
        if rng is None:
            raise ValueError("optimize_pidentity needs an rng or an initial theta0")
        theta0 = rng.random((p, n))
    theta0 = np.asarray(theta0, dtype=float)
    if theta0.shape != (p, n):
        raise ValueError(f"theta0 must have shape ({p}, {n}), got {theta0.shape}")
    # the objective is scale-free in Y: normalise for conditioning (digest §5, later ref)
    scale = G.trace / n if G.trace > 0 else 1.0

    def fun(x):
        loss, grad = pidentity_objective(x.reshape(p, n), G, norm)
        return loss / scale, grad.ravel() / scale

    bounds = [(0.0, None)] * (p * n) if norm == 1 else None
    with one_blas_thread():  # L-BFGS-B's own vector operations too
        res = minimize(
            fun,
            theta0.ravel(),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"ftol": ftol, "gtol": 1e-12, "maxiter": maxiter},
        )
    theta = res.x.reshape(p, n)
    if norm == 1:
        theta = np.maximum(theta, 0.0)
    loss, _ = pidentity_objective(theta, G, norm)
    return theta, float(loss)


@register
class Opt0Selector(Selector):
    """OPT_0 (HDMM §5): the best p-Identity strategy ``[I; Θ]D`` for a workload on one
    explicit domain of size n, over ``restarts`` random initialisations.

    Parameters: ``p`` (rows of Θ; default ``max(1, n // 16)``, HDMM §5.3), ``restarts``
    (default 1; App. C.2 finds OPT_0's local optima concentrated), ``seed``, ``ftol`` and
    ``maxiter`` (L-BFGS-B). PureDP: L1 version (Θ ≥ 0); ApproxDP/ZCDP: L2 version.
    ``loss`` is ``sens² · tr(WᵀW (AᵀA)⁻¹)`` with ``sens = 1``.
    """

    name = "opt0"
    method = "OPT_0 (p-Identity strategies)"
    paper = "McKenna, Miklau, Hay & Machanavajjhala, PVLDB 2018 (HDMM), §5"

    def __init__(self, p=None, restarts=1, seed=None, ftol=FTOL, maxiter=MAXITER):
        p = check_p_param(p)
        if isinstance(p, list):
            raise ValueError("opt0 optimises one explicit domain: p must be one int, not a list")
        self.params = {
            "p": p,
            "restarts": check_int(restarts, "restarts", minimum=1),
            "seed": None if seed is None else check_int(seed, "seed", minimum=0),
            "ftol": check_positive(ftol, "ftol"),
            "maxiter": check_int(maxiter, "maxiter", minimum=1),
        }

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        return select_opt0(workload.gram(), privacy, **self.params)


def select_opt0(gram, privacy: Privacy, p=None, restarts=1, seed=None, ftol=FTOL, maxiter=MAXITER):
    """OPT_0 from the workload Gram ``WᵀW`` alone (a Matrix or an array); returns a Strategy."""
    G = gram if isinstance(gram, GramOperator) else GramOperator(gram)
    norm = norm_of(privacy)
    p = max(1, G.n // 16) if p is None else check_int(p, "p", minimum=1)
    best = None
    for ss in seed_sequences(seed, restarts):
        theta, loss = optimize_pidentity(
            G, p, norm, np.random.default_rng(ss), ftol=ftol, maxiter=maxiter
        )
        if best is None or loss < best[1]:
            best = (theta, loss)
    theta, loss = best
    return Strategy(
        matrix=PIdentity(theta, norm=norm),
        selector="opt0",
        loss=loss,
        metadata={"operator": "OPT_0", "p": p, "norm": norm},
    )
