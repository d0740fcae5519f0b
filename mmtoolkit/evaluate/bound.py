"""The SVD lower bound (Li & Miklau 2012, Thm 2; ResidualPlanner Table 4): marginals closed form,
span{I, J} unions, single Kronecker, verified joint eigenbasis of commuting unions, dense."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ..linalg import Matrix, TooLargeError, as_matrix, normal_form, peel
from ..linalg import base as _linalg_base
from ..linalg.route import RANK_RTOL
from ..linalg.spectral import MAX_EIGEN_N, dense_for_eigen
from ..privacy import Privacy, check_privacy


def svd_bound(W: Matrix | ArrayLike) -> float:
    """The singular value bound (Σ_j sqrt(λ_j(WᵀW)))² / N (Li & Miklau 2012, Thm 2).

    A lower bound on sens₂(A)² · tr(WᵀW (AᵀA)⁺) over every strategy A, hence (since
    sens₁ ≥ sens₂) on the PureDP units too. Exact routes: weighted marginals and unions of
    Kronecker products whose factor Grams lie in span{I, J} (the marginals closed form);
    a single Kronecker product (product of factor bounds); unions whose per-attribute Grams
    are jointly diagonalisable (needs N ≤ MAX_DENSE_ENTRIES); else dense eigenvalues (N ≤
    MAX_EIGEN_N).

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``.

    Returns
    -------
    float
        The bound, in units of the trace term (no privacy factor): multiply by the noise
        variance per unit sensitivity for a total squared error (:func:`svd_bound_error`).

    Raises
    ------
    TypeError
        ``W`` is a string.
    TooLargeError
        A Gram to decompose densely (``W``'s, when no exact structured route applies, or a
        factor's) has more than ``linalg.spectral.MAX_EIGEN_N`` rows, or the marginals
        closed form would need more than 5e7 subset terms.

    References
    ----------
    Li & Miklau 2012, Eigen-Design, Section 3.4, Theorem 2; He et al., ResidualPlanner+,
    Table 4 (the bound for marginal workloads).
    """
    W = as_matrix(W)
    weight, base = peel(W)
    if base is not W:
        return weight**2 * svd_bound(base)
    nf = normal_form(W)
    sizes = nf.sizes
    if sizes is not None:
        coeffs = _span_ij_coefficients(nf.terms)
        if coeffs is not None:
            return _marginal_svdb(sizes, coeffs)
        terms = [(t.c, t.factors) for t in nf.terms]
        if len(terms) == 1:
            c, factors = terms[0]
            total = c
            for f in factors:
                lam = _eigvals_psd(f.gram())
                total *= np.sum(np.sqrt(lam)) ** 2 / f.shape[1]
            return float(total)
        joint = _joint_eigenvalues(terms, sizes)
        if joint is not None:
            return float(np.sum(np.sqrt(joint)) ** 2 / W.shape[1])
    N = W.shape[1]
    if N > MAX_EIGEN_N:
        raise TooLargeError(
            f"svd_bound: no exact structured method applies to this workload "
            f"({type(W).__name__}, N = {N}) and a dense eigendecomposition of the N x N Gram "
            f"is too large (N > MAX_EIGEN_N = {MAX_EIGEN_N})"
        )
    lam = _eigvals_psd(W.gram())
    return float(np.sum(np.sqrt(lam)) ** 2 / N)


def svd_bound_error(W: Matrix | ArrayLike, privacy: Privacy) -> float:
    """Lower bound on the expected total squared error of any strategy: v · svd_bound(W).

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``.
    privacy : Privacy
        ``PureDP``, ``ApproxDP`` or ``ZCDP``: ``v`` is its noise variance per unit
        sensitivity.

    Returns
    -------
    float
        The bound on :func:`~mmtoolkit.evaluate.expected_error`, in squared counts; finite.

    Raises
    ------
    TypeError
        ``privacy`` is not a Privacy, or ``W`` is a string.
    ValueError
        The bound overflows float64 under ``privacy``.
    TooLargeError
        As :func:`svd_bound`.

    References
    ----------
    Li & Miklau 2012, Eigen-Design, Section 3.4, Theorem 2.
    """
    check_privacy(privacy)
    return _finite(privacy.noise_variance(1.0) * svd_bound(W), "the SVD lower bound", privacy)


def svd_bound_rmse(W: Matrix | ArrayLike, privacy: Privacy) -> float:
    """Lower bound on the RMSE of any strategy: sqrt(v · svd_bound(W) / m).

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``.
    privacy : Privacy
        ``PureDP``, ``ApproxDP`` or ``ZCDP``.

    Returns
    -------
    float
        The bound on :func:`~mmtoolkit.evaluate.rmse`, in counts.

    Raises
    ------
    ValueError
        ``W`` has no rows; and as :func:`svd_bound_error`.
    TypeError, TooLargeError
        As :func:`svd_bound_error`.

    References
    ----------
    Li & Miklau 2012, Eigen-Design, Section 3.4, Theorem 2.
    """
    W = as_matrix(W)
    m = _queries(W)
    return math.sqrt(svd_bound_error(W, privacy) / m)


def _queries(W: Matrix) -> int:
    """The number of queries (rows) of ``W``; a ValueError for a workload with none (its
    RMSE, a mean over its queries, is undefined, and no error route takes it)."""
    m = int(W.shape[0])
    if m == 0:
        raise ValueError(
            f"the workload has no queries (0 rows, {W.shape[1]} cells): there is no error to "
            "evaluate"
        )
    return m


def _finite(value, what: str, privacy: Privacy):
    """``value`` when it is a finite number; else a ValueError saying what overflowed (an
    error is never reported as inf or NaN: strict JSON has neither, and neither is a
    number a caller can compare)."""
    if not math.isfinite(value):
        raise ValueError(
            f"{what} is {float(value)!r}, not a finite number, under {privacy.describe()}: "
            "the noise variance times the workload's error term overflows float64; use a "
            "larger privacy budget or rescale the workload"
        )
    return value


# ======================================================================== SVD bound
def _eigvals_psd(G: Matrix) -> np.ndarray:
    D = dense_for_eigen(G, "svd_bound (eigenvalues of a Gram matrix)")
    return _zero_small(np.linalg.eigvalsh(0.5 * (D + D.T)))


def _zero_small(lam: np.ndarray) -> np.ndarray:
    """Clip rounding noise: eigenvalues below the rank cutoff become exactly 0."""
    lam = np.clip(lam, 0.0, None)
    cutoff = RANK_RTOL * len(lam) * np.finfo(float).eps * lam.max(initial=0.0)
    lam[lam < cutoff] = 0.0
    return lam


def _alpha_beta(f: Matrix, kind: str) -> tuple[float, float] | None:
    """(α, β) with fᵀf = αI + βJ, or None (``kind``: the factor's kind in the workload's
    normal form)."""
    if kind == "identity":
        return 1.0, 0.0
    if kind in ("total", "ones"):
        return 0.0, float(f.shape[0])
    n = f.shape[1]
    if n == 1:
        return float(f.gram().trace()), 0.0
    if n * n > min(4_000_000, _linalg_base.MAX_DENSE_ENTRIES):
        return None
    G = f.gram().dense()
    beta = G[0, 1]
    alpha = G[0, 0] - beta
    scale = max(np.abs(G).max(), 1e-300)
    if np.abs(G - alpha * np.eye(n) - beta).max() > 1e-12 * scale:
        return None
    return float(alpha), float(beta)


def _span_ij_coefficients(terms) -> dict[int, float] | None:
    """Write Σ_t c_t ⊗_i G_{t,i} as Σ_a v_a ℂ(a) when every G_{t,i} = α I + β J, else None
    (``terms``: a normal form's; a marginal term is ``c_t ℂ(key)`` as it stands)."""
    coeffs: dict[int, float] = {}
    for t in terms:
        c = t.c
        if t.key is not None:
            coeffs[t.key] = coeffs.get(t.key, 0.0) + c
            continue
        parts = []
        for f, kind in zip(t.factors, t.kinds, strict=True):
            ab = _alpha_beta(f, kind)
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
        grams = []
        for _, factors in terms:
            G = dense_for_eigen(factors[i].gram(), "svd_bound (a factor Gram)")
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
