"""OPT_0: p-Identity strategies on one explicit domain (HDMM §5, Def. 9, Thm 4, App. A.2-A.3):
:func:`pidentity_objective` (HDMM eq. 3-4), :func:`optimize_pidentity` (from ``LARGE_N`` cells
with a multilevel start and :func:`projected_lbfgs`) and the ``opt0`` selector.
User guide: docs/algorithms/hdmm.md.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.linalg.blas import daxpy, dsyrk
from scipy.optimize import minimize
from threadpoolctl import ThreadpoolController

from ...checks import check_int, check_probability
from ...linalg import Matrix, PIdentity, check_dense_size
from ...linalg.pidentity import pidentity_scale
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import NotApplicableError, Selector, register
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
#: Domains with at least this many cells take the large-domain path (guide page).
LARGE_N = 2048
#: The multilevel start coarsens down to ``COARSEST_N`` cells and ``COARSEST_P`` rows of Θ
#: (with fewer rows, U[0,1) starts can fall into Θ = 0, a stationary point of the L1 problem).
COARSEST_N = 256
COARSEST_P = 8
#: L-BFGS memory (scipy's default ``maxcor``).
MEMORY = 10


@functools.cache
def _blas_controller() -> ThreadpoolController:
    # built once (it scans the loaded libraries) after this module's imports loaded both BLAS
    return ThreadpoolController()


def one_blas_thread():
    """A context in which numpy's and scipy's BLAS run on one thread (threadpoolctl): a threaded
    product rounds differently, which L-BFGS-B amplifies (guide page)."""
    return _blas_controller().limit(limits=1, user_api="blas")


def pidentity_objective(theta: np.ndarray, gram: GramOperator, norm: int = 1, lean=False):
    """``(C(Θ), ∂C/∂Θ)`` for ``A(Θ) = [I; Θ]D`` (HDMM eq. 3-4) on one BLAS thread (``lean``: the
    large-domain form); ``(inf, 0)`` when it cannot be evaluated (digest §16, pitfall 5)."""
    with one_blas_thread():
        return _objective(theta, gram, norm, lean)


def _objective(theta: np.ndarray, gram: GramOperator, norm: int, lean: bool):
    p, n = theta.shape
    s = pidentity_scale(theta, norm)
    Ts = theta * s  # Θ D_s
    # Y D_s Θᵀ, n x p, from a row-major block: a Gram's reductions (running sums, column
    # sums) then add in the same order whatever the kind
    B = gram.matmat(np.ascontiguousarray(Ts.T))
    if lean:
        P = dsyrk(1.0, theta.T, trans=1, lower=1)  # ΘΘᵀ, lower triangle
    else:
        P = theta @ theta.T
    P[np.diag_indices(p)] += 1.0
    try:
        M = cho_solve(cho_factor(P, lower=True), np.eye(p))
    except LinAlgError:
        return np.inf, np.zeros_like(theta)
    if lean:
        C = M @ B.T  # M Bᵀ = (B M)ᵀ, p x n
        loss = float(np.dot(s * s, gram.diag) - np.sum(Ts * C))  # tr(M Q) = Σ Ts ∘ C
    else:
        Q = Ts @ B
        Q = 0.5 * (Q + Q.T)
        loss = float(np.dot(s * s, gram.diag) - np.sum(M * Q))
    if not np.isfinite(loss) or loss <= 0.0:
        return np.inf, np.zeros_like(theta)
    if lean:
        g_s = 2.0 * (s * gram.diag - np.einsum("kj,kj->j", C, theta))
        grad = (M @ (Ts @ C.T)) @ theta  # M Q M Θ with Q M = Ts B M = Ts Cᵀ
        C *= s
        grad -= C
        grad *= 2.0
    else:
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
    grad += g_s[None, :] if norm == 1 else theta * (g_s / s)[None, :]
    return loss, grad


def best_of_restarts(seed, restarts: int, run):
    """The result of least loss (``result[1]``; the first on ties) of ``run(rng)`` over the
    generators of :func:`seed_sequences`."""
    best = None
    for ss in seed_sequences(seed, restarts):
        result = run(np.random.default_rng(ss))
        if best is None or result[1] < best[1]:
            best = result
    return best


def projected_lbfgs(fun, x0, lower=None, ftol=FTOL, maxiter=MAXITER, memory=MEMORY):
    """Minimise ``fun`` (returning ``(f, ∇f)``) subject to ``x >= lower`` (None: no bound) by
    projected L-BFGS (Nocedal & Wright, Alg. 7.4; guide page); returns ``(x, f(x), iterations)``."""
    x = np.array(x0, dtype=float)
    if lower is not None:
        np.maximum(x, lower, out=x)
    f, g = fun(x)
    S, Y, rho = [], [], []
    it = 0
    while it < maxiter:
        free = None if lower is None else (x > lower) | (g < 0)
        q = g.copy() if free is None else np.where(free, g, 0.0)
        alphas = []
        for s_, y_, r_ in zip(reversed(S), reversed(Y), reversed(rho)):
            a = r_ * np.dot(s_, q)
            daxpy(y_, q, a=-a)  # q -= a y (in place)
            alphas.append(a)
        if S:
            q *= np.dot(S[-1], Y[-1]) / np.dot(Y[-1], Y[-1])
        for s_, y_, r_, a in zip(S, Y, rho, reversed(alphas)):
            daxpy(s_, q, a=a - r_ * np.dot(y_, q))
        d = np.negative(q, out=q)
        if free is not None:
            d[~free] = 0.0
        slope = np.dot(g, d)
        if not slope < 0:  # not a descent direction: forget the curvature pairs
            S, Y, rho = [], [], []
            d = -g if free is None else np.where(free, -g, 0.0)
            slope = np.dot(g, d)
            if not slope < 0:
                break  # projected gradient zero: a stationary point
        t = 1.0 if S else 1.0 / max(np.linalg.norm(d), 1e-300)
        for _ in range(60):
            step = d * t
            x_new = x + step
            if lower is not None:
                np.maximum(x_new, lower, out=x_new)
                np.subtract(x_new, x, out=step)
            f_new, g_new = fun(x_new)
            if f_new <= f + 1e-4 * np.dot(g, step):
                break
            t *= 0.5
        else:
            break  # no decrease along the projected path
        if f_new > f:  # the projection clipped the step uphill: keep the better point
            break
        it += 1
        y_ = np.subtract(g_new, g, out=g)
        sy = np.dot(step, y_)
        if sy > 1e-10 * np.dot(y_, y_):
            S.append(step)
            Y.append(y_)
            rho.append(1.0 / sy)
            if len(S) > memory:
                del S[0], Y[0], rho[0]
        reduction = (f - f_new) / max(abs(f), abs(f_new), 1.0)
        x, f, g = x_new, f_new, g_new
        if reduction <= ftol:
            break
    return x, f, it


def optimize_pidentity(
    gram,
    p: int,
    norm: int = 1,
    rng: np.random.Generator | None = None,
    theta0: np.ndarray | None = None,
    ftol: float = FTOL,
    maxiter: int = MAXITER,
) -> tuple[np.ndarray, float]:
    """OPT_0 (HDMM §5): minimise ``C(Θ)`` from ``theta0``, else a start drawn from ``rng``;
    ``gram``: ``WᵀW`` (Matrix, array or :class:`GramOperator`). Returns ``(Θ, C(Θ))``."""
    G = gram if isinstance(gram, GramOperator) else GramOperator(gram)
    n = G.n
    p = check_int(p, "p", minimum=1)
    # Θ, its gradient and the optimiser's correction vectors are all p x n
    check_dense_size(p, n, f"OPT_0's parameter Θ (p = {p}, n = {n})")
    if theta0 is None:
        if rng is None:
            raise ValueError("optimize_pidentity needs an rng or an initial theta0")
        theta0 = (
            rng.random((p, n)) if n < LARGE_N else _multilevel_start(G, p, norm, rng, ftol, maxiter)
        )
    theta0 = np.asarray(theta0, dtype=float)
    if theta0.shape != (p, n):
        raise ValueError(f"theta0 must have shape ({p}, {n}), got {theta0.shape}")
    theta = _optimize(G, theta0, norm, ftol, maxiter)
    loss, _ = pidentity_objective(theta, G, norm, lean=n >= LARGE_N)
    return theta, float(loss)


def _optimize(G: GramOperator, theta0: np.ndarray, norm: int, ftol: float, maxiter: int):
    """``Θ`` from ``theta0`` (L-BFGS-B, or from ``LARGE_N`` cells projected L-BFGS on the lean
    objective), the objective normalised by ``tr(Y)/n`` (digest §5)."""
    p, n = theta0.shape
    scale = G.trace / n if G.trace > 0 else 1.0
    large = n >= LARGE_N

    def fun(x):
        loss, grad = pidentity_objective(x.reshape(p, n), G, norm, lean=large)
        return loss / scale, grad.ravel() / scale

    with one_blas_thread():  # the optimiser's own vector operations too
        if large:
            x, _, _ = projected_lbfgs(
                fun, theta0.ravel(), 0.0 if norm == 1 else None, ftol, maxiter
            )
        else:
            bounds = [(0.0, None)] * (p * n) if norm == 1 else None
            x = minimize(
                fun,
                theta0.ravel(),
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={"ftol": ftol, "gtol": 1e-12, "maxiter": maxiter},
            ).x
    theta = x.reshape(p, n)
    return np.maximum(theta, 0.0) if norm == 1 else theta


def _multilevel_start(G: GramOperator, p: int, norm: int, rng, ftol: float, maxiter: int):
    """The multilevel start of the large-domain path (guide page): the block-diagonal doubling
    of the solution one level of pairwise coarsening below ``n``."""
    if G.unpermute is not None:
        make, perm = G.unpermute
        return _multilevel_start(make(), p, norm, rng, ftol, maxiter)[:, perm]
    grams, ps = [G], [p]
    while (
        grams[-1].n % 2 == 0
        and ps[-1] % 2 == 0
        and grams[-1].n // 2 >= COARSEST_N
        and ps[-1] // 2 >= COARSEST_P
    ):
        grams.append(grams[-1].coarsened(implicit=grams[-1].n // 2 >= LARGE_N))
        ps.append(ps[-1] // 2)
    theta = rng.random((ps[-1], grams[-1].n))
    for level in range(len(grams) - 1, 0, -1):
        theta = _optimize(grams[level], theta, norm, ftol, maxiter)
        zero = np.zeros_like(theta)
        theta = np.block([[theta, zero], [zero, theta]])
    return theta


@register
class Opt0Selector(Selector):
    """OPT_0 (HDMM §5): the best p-Identity strategy ``[I; Θ]D`` on one explicit domain. Parameters:
    ``p`` (default ``max(1, n // 16)``, §5.3), ``restarts``, ``seed``, ``ftol``, ``maxiter``."""

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
            "ftol": check_probability(ftol, "ftol"),  # a relative reduction: 0 < ftol < 1
            "maxiter": check_int(maxiter, "maxiter", minimum=1),
        }

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        return select_opt0(workload.gram(), privacy, **self.params)


def select_opt0(gram, privacy: Privacy, p=None, restarts=1, seed=None, ftol=FTOL, maxiter=MAXITER):
    """OPT_0 from the workload Gram ``WᵀW`` alone (a Matrix or an array); returns a Strategy."""
    G = gram if isinstance(gram, GramOperator) else GramOperator(gram)
    norm = norm_of(privacy)
    p = max(1, G.n // 16) if p is None else check_int(p, "p", minimum=1)
    if p > G.n:
        # [I; Θ]D with p > n rows of Θ: p = n already spans every unit-diagonal Gram (L2),
        # and HDMM App. C.1 (Fig. 2) finds p >= n only adds poor local minima
        raise NotApplicableError(
            f"opt0: p = {p} exceeds the domain size n = {G.n}; a p-Identity strategy needs "
            f"at most n extra rows (give p <= {G.n}; default n // 16, HDMM §5.3)"
        )
    theta, loss = best_of_restarts(
        seed, restarts, lambda rng: optimize_pidentity(G, p, norm, rng, ftol=ftol, maxiter=maxiter)
    )
    return Strategy(
        matrix=PIdentity(theta, norm=norm),
        selector="opt0",
        loss=loss,
        metadata={"operator": "OPT_0", "p": p, "norm": norm},
    )
