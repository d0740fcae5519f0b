"""Measure, reconstruct, answer: the matrix mechanism at scale (HDMM §7.2, Table 1b; App. A.5).

* :func:`measure` — ``y = A x + noise``, i.i.d. noise calibrated to ``sens_p(A)`` by the
  privacy definition (Laplace for PureDP, Gaussian for ApproxDP/ZCDP); ``A x`` is an implicit
  product (Kronecker mat-vec, marginal sums), never a dense ``A``.
* :func:`reconstruct` — ``x̂ = A⁺ y`` (least squares, minimum norm) by the cheapest exact
  route the strategy's structure allows: Identity (``y``), Kronecker products (factor-wise
  pseudo-inverses, HDMM §7.2; a p-Identity factor has a closed-form ``A⁺``), weighted
  marginals (``𝔾(θ²)⁺ 𝕄ᵀ y`` in the spectral form of the marginals algebra), a lone
  p-Identity; anything else (e.g. OPT_+ unions) by LSMR on the implicit operator.
* :func:`answer` — ``W x̂``.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import lsmr

from .linalg import Identity, Kronecker, Marginals, Matrix, PIdentity, Weighted, as_matrix
from .privacy import Privacy
from .strategy import Strategy

__all__ = ["measure", "reconstruct", "answer"]

#: LSMR stopping tolerances (the authors use 1e-9, digest §9) and iteration cap.
LSMR_TOL = 1e-12
LSMR_MAXITER = 10_000


def _matrix(strategy) -> Matrix:
    if isinstance(strategy, Strategy):
        if strategy.inference != "least_squares":
            raise ValueError(
                "this strategy answers its own rows (inference='none'): its noisy answers are "
                "the workload answers, there is nothing to reconstruct"
            )
        return strategy.matrix
    if isinstance(strategy, (Matrix, np.ndarray)):
        return as_matrix(strategy)
    raise TypeError(f"strategy must be a Strategy or a Matrix, got {type(strategy).__name__}")


def measure(strategy, x, privacy: Privacy, rng: np.random.Generator) -> np.ndarray:
    """Noisy strategy answers ``A x + z``, ``z`` i.i.d. with scale
    ``privacy.noise_scale(sens_p(A))`` (HDMM Table 1b: Multiply + noise addition; Thm 7)."""
    if not isinstance(privacy, Privacy):
        raise TypeError(f"privacy must be a PureDP, ApproxDP or ZCDP instance, got {privacy!r}")
    A = as_matrix(strategy.matrix if isinstance(strategy, Strategy) else strategy)
    x = np.asarray(x, dtype=float).ravel()
    if x.size != A.shape[1]:
        raise ValueError(
            f"data vector has {x.size} cells but the strategy is defined on {A.shape[1]}"
        )
    sens = A.sensitivity(privacy.norm)
    return A @ x + privacy.sample(rng, A.shape[0], sens)


def _structured_pinv(A: Matrix) -> Matrix | None:
    if isinstance(A, Weighted):
        inner = _structured_pinv(A.base)
        return None if inner is None or A.weight == 0 else Weighted(1.0 / A.weight, inner)
    if isinstance(A, (Identity, PIdentity, Kronecker, Marginals)):
        return A.pinv()
    return None


def reconstruct(strategy, y, tol: float = LSMR_TOL, maxiter: int = LSMR_MAXITER) -> np.ndarray:
    """``x̂ = A⁺ y`` by structure (see the module docstring), LSMR otherwise (HDMM §7.2)."""
    A = _matrix(strategy)
    y = np.asarray(y, dtype=float).ravel()
    if y.size != A.shape[0]:
        raise ValueError(f"y has {y.size} answers but the strategy has {A.shape[0]} rows")
    P = _structured_pinv(A)
    if P is not None:
        return P @ y
    return lsmr(A.as_operator(), y, atol=tol, btol=tol, maxiter=maxiter)[0]


def answer(W, xhat) -> np.ndarray:
    """Workload answers ``W x̂`` (HDMM Table 1b, last step)."""
    W = as_matrix(W)
    xhat = np.asarray(xhat, dtype=float).ravel()
    if xhat.size != W.shape[1]:
        raise ValueError(f"x̂ has {xhat.size} cells but the workload is defined on {W.shape[1]}")
    return W @ xhat
