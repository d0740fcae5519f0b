"""The exact L2-optimal strategy: Program 5.2 of Li et al. (PODS 2010) by its Lagrange dual.

:func:`solve_program_5_2` maximises the concave dual over a diagonal ``D`` by an inexact
Newton method (after Yuan, Yang, Zhang, Hao & Winslett, KDD 2016), turning every dual point
into a primal feasible strategy, so each iterate certifies its relative duality gap; it starts
at the SVD bound (Li et al. Thm 5.25) and splits persymmetric Grams (ranges, prefixes) into
two half-size eigendecompositions.

User guide: docs/algorithms/eigen-design.md ("The exact L2 optimum").
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from ...checks import check_bool, check_float, check_int
from .gram import ZERO_RTOL

#: Default relative duality gap at which the solver stops (gaps of ~1e-11 are reachable on
#: ranges and prefixes; the dual is then flat at the rounding level of ``Σ √λ``).
GAP_TOL = 1e-9


@dataclass
class OptimumSolution:
    """Program 5.2's solution: ``factor`` ``F`` with ``FᵀF = X`` (primal feasible,
    ``max_j X_jj = 1``), its value ``tr(G X⁺)``, the dual value (a lower bound on the
    optimum), the relative gap ``(value − dual) / dual`` and the dual point ``d``."""

    factor: np.ndarray
    value: float
    dual: float
    gap: float
    d: np.ndarray
    iterations: int
    seconds: float
    persymmetric: bool

    @property
    def X(self) -> np.ndarray:
        """The primal strategy Gram ``AᵀA`` (``diag ≤ 1``)."""
        return self.factor.T @ self.factor


def _is_persymmetric(G: np.ndarray) -> bool:
    return bool(np.allclose(G, G[::-1, ::-1], rtol=0, atol=1e-13 * np.abs(G).max()))


def _eigh(M: np.ndarray, persymmetric: bool):
    """Eigenpairs of symmetric ``M``; for a persymmetric one through the two half-size blocks
    ``M₁₁ ± M₁₂ J`` of the symmetric / antisymmetric vectors ``(x, ±Jx)/√2``."""
    n = M.shape[0]
    if not persymmetric or n < 4:
        return np.linalg.eigh(M)
    h, odd = n // 2, n % 2
    A, B = M[:h, :h], M[:h, n - h :][:, ::-1]  # B = M₁₂ J
    lam2, V2 = np.linalg.eigh(A - B)
    if odd:  # the middle cell joins the symmetric block: vectors (x, √2 z, Jx)/√2
        c = M[:h, h] * np.sqrt(2.0)
        P = np.block([[A + B, c[:, None]], [c[None, :], M[h : h + 1, h : h + 1]]])
    else:
        P = A + B
    lam1, V1 = np.linalg.eigh(P)
    U = np.zeros((n, n))
    r = np.sqrt(0.5)
    U[:h, : h + odd] = r * V1[:h]
    U[n - h :, : h + odd] = r * V1[:h][::-1]
    if odd:
        U[h, : h + odd] = V1[h]
    U[:h, h + odd :] = r * V2
    U[n - h :, h + odd :] = -r * V2[::-1]
    return np.concatenate([lam1, lam2]), U


class _Dual:
    """The dual function at one point ``d``: value, gradient, Hessian products."""

    def __init__(self, G, d: np.ndarray, persymmetric: bool, rank: int, eig=None):
        s = np.sqrt(d)
        lam, U = eig if eig is not None else _eigh(s[:, None] * G * s[None, :], persymmetric)
        self.d, self.U = d, U
        # rank(S G S) = rank(G): the n − rank smallest eigenvalues are zeros in rounding
        lam[np.argsort(lam)[: lam.size - rank]] = 0.0
        self.root = np.sqrt(np.clip(lam, 0.0, None))
        self.trace = float(self.root.sum())
        self.value = 2.0 * self.trace - float(d.sum())
        self.diag = ((U * self.root) * U).sum(axis=1) / d  # diag X(d)
        self.grad = self.diag - 1.0
        r = self.root
        den = r[:, None] + r[None, :]
        self.kernel = np.divide(r[:, None] * r[None, :], den, out=np.zeros_like(den), where=den > 0)

    def hess_diag(self) -> np.ndarray:
        """The Hessian's diagonal ``−((U∘U) K (U∘U)ᵀ)_jj / d_j²`` (one matrix product)."""
        U2 = self.U * self.U
        return -((U2 @ self.kernel) * U2).sum(axis=1) / self.d**2

    def hess_vec(self, v: np.ndarray) -> np.ndarray:
        """The Hessian times ``v`` (two matrix products)."""
        U = self.U
        Z = -(U.T @ (U * (v / self.d)[:, None])) * self.kernel
        return ((U @ Z) * U).sum(axis=1) / self.d

    def primal(self) -> tuple[float, np.ndarray]:
        """The scaled feasible point's value and factor ``F`` (``FᵀF = X(d) / max_j X_jj``)."""
        scale = float(self.diag.max())
        keep = self.root > 0
        F = (np.sqrt(self.root[keep])[:, None] * self.U[:, keep].T) / np.sqrt(self.d * scale)
        return scale * self.trace, F


def _newton_direction(point: _Dual, free: np.ndarray, max_cg: int, forcing: float):
    """Preconditioned conjugate gradients on ``(−H) p = ∇g`` over the ``free`` coordinates
    (the others stay 0), stopped at relative residual ``forcing`` (the inexact-Newton forcing
    term) or after ``max_cg`` Hessian products."""
    b = np.where(free, point.grad, 0.0)
    pre = np.where(free, 1.0 / np.maximum(-point.hess_diag(), 1e-300), 0.0)
    p, r = np.zeros_like(b), b.copy()
    z = pre * r
    q, rz = z.copy(), r @ z
    target = forcing * np.linalg.norm(b)
    for _ in range(max_cg):
        Hq = -np.where(free, point.hess_vec(q), 0.0)
        curv = q @ Hq
        if curv <= 0:
            break
        a = rz / curv
        p += a * q
        r -= a * Hq
        if np.linalg.norm(r) <= target:
            break
        z = pre * r
        rz, rz_old = r @ z, rz
        q = z + (rz / rz_old) * q
    return p if p.any() else b


def _accept(point: _Dual, trial: _Dual, floor: float) -> bool:
    """Armijo's sufficient ascent; or, once the dual's change is at the rounding level of
    ``Σ √λ`` (near the optimum the dual is flat while the gap is still driven by the
    gradient), a smaller projected gradient at no loss beyond rounding."""
    if trial.value > point.value + 1e-4 * point.grad @ (trial.d - point.d):
        return True

    def pgrad(x: _Dual) -> float:
        return float(np.abs(np.where((x.d > floor * (1 + 1e-9)) | (x.grad > 0), x.grad, 0)).max())

    noise = 1e-12 * abs(point.value)
    return trial.value >= point.value - noise and pgrad(trial) < pgrad(point)


def solve_program_5_2(
    G,
    tol: float = GAP_TOL,
    max_iter: int = 500,
    max_cg: int = 50,
    verbose: bool = False,
    every: float = 5.0,
) -> OptimumSolution:
    """Solve Program 5.2 (Li et al. 2010) for the Gram ``G = WᵀW`` by its Lagrange dual.

    Stops when the certified relative duality gap is ``≤ tol``, after ``max_iter`` Newton
    steps, or when no step makes progress at machine precision (the returned gap says how far
    it got). ``verbose``: an iteration line (gap, dual,
    primal, seconds) to stderr at most every ``every`` seconds. Raises ValueError for a
    non-square, non-finite or all-zero ``G``.
    """
    tol = check_float(tol, "tol", minimum=0.0, finite=True)
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    max_cg = check_int(max_cg, "max_cg", minimum=1)
    verbose = check_bool(verbose, "verbose")
    G = np.asarray(G, dtype=float)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] == 0:
        raise ValueError(f"G: expected a non-empty square matrix, got shape {G.shape}")
    if not np.all(np.isfinite(G)):
        raise ValueError("G: has non-finite entries")
    n = G.shape[0]
    G = 0.5 * (G + G.T)
    active = np.diag(G) > 0
    if not active.any():
        raise ValueError("G: the workload is all zero (no cell is queried)")
    Ga = G[np.ix_(active, active)]
    sym = bool(active.all()) and _is_persymmetric(Ga)
    start = last = time.perf_counter()
    lam, U = _eigh(Ga, sym)
    keep = lam > ZERO_RTOL * lam.max()
    rank = int(keep.sum())
    # the best uniform d = c·1 (S G S = c G): the dual equals the SVD bound (tr G^{1/2})² / n
    c = (np.sqrt(lam[keep]).sum() / lam.size) ** 2
    point = _Dual(None, np.full(lam.size, c), sym, rank, eig=(c * lam, U))
    best_value, best_F = point.primal()
    # a cell whose constraint is slack at the optimum has d_j → 0 (rank-deficient G): d is kept
    # ≥ floor, which costs the dual at most floor · n ≤ 1e-12 of its value (projected Newton,
    # Bertsekas 1982: coordinates at the floor with an outward gradient are held fixed)
    floor = 1e-12 * point.d[0]
    steps = 0
    while steps < max_iter:
        gap = (best_value - point.value) / point.value
        if gap <= tol:
            break
        free = (point.d > floor * (1 + 1e-9)) | (point.grad > 0)
        p = _newton_direction(point, free, max_cg, min(0.5, np.sqrt(gap)))
        if sym:
            p = 0.5 * (p + p[::-1])
        neg = p < 0  # fraction to the boundary: no d_j shrinks by more than a factor 20 a step
        step = min(1.0, 0.95 * float(np.min(-point.d[neg] / p[neg]))) if neg.any() else 1.0
        while True:
            d = np.maximum(point.d + step * p, floor)
            trial = _Dual(Ga, d, sym, rank)
            if _accept(point, trial, floor) or step < 1e-12:
                break
            step *= 0.5
        if not _accept(point, trial, floor):  # no progress left at machine precision
            break
        point, steps = trial, steps + 1
        value, F = point.primal()
        if value < best_value:
            best_value, best_F = value, F
        if verbose and time.perf_counter() - last >= every:
            last = time.perf_counter()
            gap = (best_value - point.value) / point.value
            print(
                f"program 5.2 (n = {n}): iteration {steps}, gap {gap:.2e}, dual "
                f"{point.value:.10g}, primal {best_value:.10g}, {last - start:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    factor = np.zeros((best_F.shape[0] + (~active).sum(), n))
    factor[: best_F.shape[0], active] = best_F
    factor[best_F.shape[0] :, ~active] = np.eye(int((~active).sum()))
    d = np.zeros(n)
    d[active] = point.d
    return OptimumSolution(
        factor=factor,
        value=best_value,
        dual=point.value,
        gap=(best_value - point.value) / point.value,
        d=d,
        iterations=steps,
        seconds=time.perf_counter() - start,
        persymmetric=sym,
    )
