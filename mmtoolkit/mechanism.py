"""Measure, reconstruct, answer: the matrix mechanism at scale (HDMM §7.2, Table 1b; App. A.5).

* :func:`measure` — ``y = A x + z``, ``z`` i.i.d. noise calibrated to ``sens_p(A)`` by the
  privacy definition (Laplace for PureDP, Gaussian for ApproxDP/ZCDP); ``A x`` is an implicit
  product (Kronecker mat-vec, marginal sums), never a dense ``A``. ``noise="discrete"``
  draws exact integer noise instead (discrete Laplace for PureDP, discrete Gaussian for zCDP;
  Canonne, Kamath & Steinke 2020, :mod:`mmtoolkit.noise`), see :func:`discrete_calibration`.
  ``releases=R`` draws R independent releases at once (an ``m x R`` array).
* :func:`reconstruct` — ``x̂ = A⁺ y`` (least squares, minimum norm) by the cheapest exact
  route the strategy's structure allows: Identity (``y``), Kronecker products (factor-wise
  pseudo-inverses, HDMM §7.2; a p-Identity factor has a closed-form ``A⁺``), weighted
  marginals (``𝔾(θ²)⁺ 𝕄ᵀ y`` in the spectral form of the marginals algebra), a lone
  p-Identity, trees, Haar, ResidualPlanner strategies (closed-form Gram inverse); anything
  else by a dense pseudo-inverse when small and LSMR on the implicit operator otherwise.
* :func:`answer` — ``W x̂``. :func:`answer_marginals` — ``W A⁺ y`` for a marginals workload
  and a weighted-marginals strategy straight from the noisy marginal tables, in the
  ``2^d`` spectral algebra (no ``N``-cell vector; what makes HDMM's OPT_M usable on Adult).
* :func:`release` — records or a data vector → noisy workload answers, choosing the route
  by strategy kind (residual strategies go through :mod:`mmtoolkit.residual.mechanism`,
  marginals strategies through the marginal tables, everything else through ``x``).
  :func:`standard_errors` gives each answer's analytic standard error (the shared
  evaluator's per-query variance); :func:`clip_nonnegative` and :func:`round_to_integers`
  are optional post-processing steps (they keep privacy but bias the answers).
* :func:`monte_carlo` — the validation harness: R releases on fixed data, the empirical total
  squared error with its confidence interval and per-query variances, beside the shared
  evaluator's analytic values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

import numpy as np
from scipy.sparse.linalg import lsmr

from .linalg import (
    AllRange,
    Haar,
    Identity,
    Kronecker,
    Marginal,
    Marginals,
    MarginalsGram,
    Matrix,
    PIdentity,
    Prefix,
    Total,
    Tree,
    VStack,
    Weighted,
    WidthRange,
    as_matrix,
    check_dense_size,
    peel,
)
from .linalg.ranges import Ones
from .noise import discrete_gaussian, discrete_laplace
from .privacy import ZCDP, Privacy, PureDP
from .strategy import Strategy

__all__ = [
    "NOISES",
    "measure",
    "reconstruct",
    "answer",
    "answer_marginals",
    "release",
    "standard_errors",
    "clip_nonnegative",
    "round_to_integers",
    "discrete_calibration",
    "DiscreteCalibration",
    "monte_carlo",
    "MonteCarloResult",
]

#: LSMR stopping tolerances (the authors use 1e-9, digest §9) and iteration cap.
LSMR_TOL = 1e-12
LSMR_MAXITER = 10_000
#: Noise kinds accepted by :func:`measure` and :func:`release`.
NOISES = ("continuous", "discrete")
#: Strategies up to this many entries are reconstructed by a dense pseudo-inverse when no
#: structured route exists and several releases are reconstructed at once.
DENSE_PINV_ENTRIES = 4_000_000
#: Denominator precision of the rational noise parameters of the discrete samplers: each is
#: rounded (towards more noise) to a relative precision of about 1/PRECISION.
PRECISION = 10**6


# ============================================================================ helpers
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


def _check_privacy(privacy) -> None:
    if not isinstance(privacy, Privacy):
        raise TypeError(f"privacy must be a PureDP, ApproxDP or ZCDP instance, got {privacy!r}")


def _check_rng(rng) -> None:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            "rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )


def _check_noise(noise) -> None:
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")


def _check_releases(releases):
    if releases is None:
        return None
    if isinstance(releases, bool) or not isinstance(releases, int) or releases < 1:
        raise ValueError(f"releases must be a positive int or None, got {releases!r}")
    return releases


def _is_records(data) -> bool:
    from .records import Records

    return isinstance(data, Records)


def _marginal_blocks(A: Matrix):
    """``(scale, key)`` blocks if ``A`` is (a weighted) :class:`Marginals`, else None."""
    w, base = peel(A)
    if isinstance(base, Marginals):
        return base, [(w * theta, key) for key, theta in base.weights.items()]
    return None, None


def _key_attrs(key: int, d: int) -> tuple[int, ...]:
    return tuple(i for i in range(d) if (key >> i) & 1)


def _true_answers(A: Matrix, data) -> np.ndarray:
    """``A x`` from a data vector, or from records (marginal tables for marginals strategies,
    else the histogram, which is refused for a large domain)."""
    if _is_records(data):
        base, blocks = _marginal_blocks(A)
        if blocks is not None:
            if tuple(base.sizes) != tuple(data.domain.sizes):
                raise ValueError(
                    f"the strategy is defined on attribute sizes {list(base.sizes)}, the records "
                    f"on {list(data.domain.sizes)}"
                )
            d = len(base.sizes)
            return np.concatenate(
                [s * data.marginal(_key_attrs(k, d)).ravel().astype(float) for s, k in blocks]
            )
        if A.shape[1] != data.domain.size:
            raise ValueError(
                f"the records' domain has {data.domain.size} cells but the strategy is defined "
                f"on {A.shape[1]}"
            )
        data = data.vector()
    x = np.asarray(data, dtype=float).ravel()
    if x.size != A.shape[1]:
        raise ValueError(
            f"data vector has {x.size} cells but the strategy is defined on {A.shape[1]}"
        )
    return A @ x


# ============================================================================ discrete noise
_INTEGER_KINDS = (Identity, Total, Ones, Prefix, AllRange, WidthRange, Marginal)


def _dense_row_scales(A: Matrix) -> np.ndarray | None:
    """Per-row ``d_r > 0`` with ``A_r / d_r`` integer (``d_r`` = the row's smallest nonzero
    ``|a_rj|``), from the dense matrix of a small strategy; None if some row is not."""
    check_dense_size(*A.shape, "the integer-row check of a strategy (discrete noise)")
    M = A.dense()
    absM = np.abs(M)
    d = np.where(absM > 0, absM, np.inf).min(axis=1)
    d[~np.isfinite(d)] = 1.0
    B = M / d[:, None]
    if not np.allclose(B, np.round(B), rtol=0, atol=1e-9 * max(1.0, float(np.abs(B).max()))):
        return None
    return d


def _row_scales(A: Matrix) -> np.ndarray | None:
    """``d`` (one positive scale per row) such that ``diag(d)⁻¹ A`` has integer entries, by
    structure where possible; None if no such scaling is found."""
    if isinstance(A, Weighted):
        inner = _row_scales(A.base)
        return None if inner is None or A.weight == 0 else abs(A.weight) * inner
    if isinstance(A, VStack):
        parts = [_row_scales(b) for b in A.blocks]
        return None if any(p is None for p in parts) else np.concatenate(parts)
    if isinstance(A, Marginals):
        check_dense_size(A.shape[0], 1, "the row scales of a marginals strategy")
        return np.concatenate(
            [np.full(r, abs(t)) for t, r in zip(A.weights.values(), A._rows, strict=True)]
        )
    if isinstance(A, _INTEGER_KINDS):
        check_dense_size(A.shape[0], 1, "the row scales of a strategy")
        return np.ones(A.shape[0])
    if isinstance(A, Kronecker):
        check_dense_size(A.shape[0], 1, "the row scales of a strategy")
        out = np.ones(1)
        for f in A.factors:
            s = _row_scales(f)
            if s is None:
                return None
            out = np.kron(out, s)
        return out
    if isinstance(A, Tree):
        check_dense_size(A.shape[0], 1, "the row scales of a tree strategy")
        parts = []
        for w, g in zip(A.weights, A.grid, strict=True):
            parts.append(np.abs(np.broadcast_to(np.asarray(w, dtype=float), g)).ravel())
        d = np.concatenate(parts)
        return None if np.any(d == 0) else d
    if A.shape[0] * A.shape[1] <= DENSE_PINV_ENTRIES:
        return _dense_row_scales(A)
    return None


@dataclass(frozen=True)
class DiscreteCalibration:
    """Exact integer noise for a strategy: row ``r`` of ``A = diag(d) B`` (``B`` integer) is
    released as ``d_r (B_r x + z_r)`` with ``z_r`` discrete Laplace ``Lap_Z(t_r/s_r)``
    (PureDP) or discrete Gaussian ``N_Z(0, σ̄_r²)`` (zCDP).

    Privacy (continuous ↔ discrete): the continuous mechanism adds noise of scale ``b`` to
    ``A x``, i.e. scale ``b/d_r`` to ``B_r x``; its privacy loss is ``Σ_r |B_r δ| d_r/b`` (L1) or
    ``Σ_r (B_r δ)² d_r²/(2b²)`` (zCDP), bounded by ε or ρ through ``sens_p(A)``. Each discrete
    row uses a *rounded-up* noise parameter (``t_r/s_r ≥ b/d_r``, ``σ̄_r ≥ b/d_r``), so every
    per-row term, hence the total, can only shrink: the release is ε-DP (discrete Laplace,
    CKS Prop. on ``Lap_Z``: (Δ s/t)-DP for an integer query of L1 sensitivity Δ) or ρ-zCDP
    (CKS Thm 4). ``spent`` is the exact bound ``budget · max_r(rate'_r / rate_r)`` (≤ budget).
    """

    kind: str  # "laplace" | "gaussian"
    scales: np.ndarray  # d_r
    params: list  # per distinct scale: (d, s, t) for laplace, (d, sigma2 Fraction) gaussian
    row_param: np.ndarray  # index into params for each row
    variances: np.ndarray  # exact variance of each released row (continuous units of A)
    budget: float
    spent: float


def _discrete_laplace_variance(s: int, t: int) -> float:
    q = math.exp(-s / t)
    return 2.0 * q / (1.0 - q) ** 2


def _discrete_gaussian_variance(sigma2: float) -> float:
    s2 = float(sigma2)
    span = int(math.ceil(40 * math.sqrt(s2))) + 2
    k = np.arange(-span, span + 1, dtype=float)
    p = np.exp(-(k * k) / (2 * s2))
    return float(np.sum(k * k * p) / np.sum(p))


def discrete_calibration(strategy, privacy: Privacy) -> DiscreteCalibration:
    """The exact integer noise for ``strategy`` under ``privacy`` (PureDP or ZCDP), see
    :class:`DiscreteCalibration`. Raises when a row of the strategy is not an integer vector
    up to a positive scale (discrete noise needs integer queries)."""
    _check_privacy(privacy)
    if not isinstance(privacy, (PureDP, ZCDP)):
        raise ValueError(
            "discrete noise is available for PureDP (discrete Laplace) and ZCDP (discrete "
            f"Gaussian), not {type(privacy).__name__}; use noise='continuous'"
        )
    A = _matrix(strategy) if not isinstance(strategy, Strategy) else strategy.matrix
    scales = _row_scales(A)
    if scales is None:
        raise ValueError(
            f"discrete noise needs a strategy whose rows are integer vectors up to a positive "
            f"scale (counting queries); {type(A).__name__} is not (use noise='continuous')"
        )
    sens = A.sensitivity(privacy.norm)
    uniq, inverse = np.unique(scales, return_inverse=True)
    params, var, ratios = [], np.empty(len(uniq)), np.empty(len(uniq))
    for k, dr in enumerate(uniq):
        b = privacy.noise_scale(sens) / dr  # continuous scale (Laplace b or Gaussian σ) on B_r x
        if isinstance(privacy, PureDP):
            rate = 1.0 / b  # privacy loss per unit of |B_r δ|
            t = 1 << max(0, math.ceil(math.log2(PRECISION / rate)))
            s = math.floor(rate * t * (1 - 1e-9))
            if s < 1:
                raise ValueError(f"discrete Laplace scale {b:.3g} is too large to represent")
            params.append((float(dr), s, t))
            var[k] = _discrete_laplace_variance(s, t)
            ratios[k] = (s / t) / rate
        else:
            # σ̄² ≥ σ² on a dyadic grid of relative step ≤ 1/PRECISION (small denominators
            # keep the vectorised exact sampler in int64)
            den = 1 << max(0, math.ceil(math.log2(PRECISION / (b * b))))
            sigma2 = Fraction(math.ceil(b * b * (1 + 1e-9) * den), den)
            params.append((float(dr), sigma2))
            var[k] = _discrete_gaussian_variance(sigma2)
            ratios[k] = (b * b) / float(sigma2)
    budget = privacy.epsilon if isinstance(privacy, PureDP) else privacy.rho
    return DiscreteCalibration(
        kind="laplace" if isinstance(privacy, PureDP) else "gaussian",
        scales=scales,
        params=params,
        row_param=inverse.ravel(),
        variances=(uniq**2 * var)[inverse.ravel()],
        budget=float(budget),
        spent=float(budget * ratios.max()),
    )


def _integer_answers(Ax: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``B x = A x / d`` as exact int64 (the data and ``B`` are integer)."""
    Bx = Ax / scales
    r = np.rint(Bx)
    if not np.allclose(Bx, r, rtol=0, atol=1e-6) or np.any(np.abs(r) >= 2**52):
        raise ValueError(
            "discrete noise needs integer counts: the data vector (or records) gives a "
            "non-integer strategy answer (use noise='continuous' for fractional data)"
        )
    return r.astype(np.int64)


def _discrete_noise(cal: DiscreteCalibration, rng, shape) -> np.ndarray:
    """Integer noise ``z`` (int64) of ``shape`` (rows first), exact samplers only."""
    z = np.zeros(shape, dtype=np.int64)
    for k, p in enumerate(cal.params):
        rows = np.flatnonzero(cal.row_param == k)
        sub = (len(rows),) + tuple(shape[1:])
        if cal.kind == "laplace":
            z[rows] = discrete_laplace(p[1], p[2], rng, size=sub)
        else:
            z[rows] = discrete_gaussian(p[1], sub, rng)
    return z


# ============================================================================ measure
def measure(
    strategy, x, privacy: Privacy, rng: np.random.Generator, noise: str = "continuous",
    releases: int | None = None,
) -> np.ndarray:  # fmt: skip
    """Noisy strategy answers ``A x + z`` (HDMM Table 1b: Multiply + noise addition; Thm 7).

    ``x``: the data vector, or :class:`~mmtoolkit.records.Records` (marginals strategies are
    then answered from marginal tables, others from the histogram). ``noise="continuous"``:
    ``z`` i.i.d. with scale ``privacy.noise_scale(sens_p(A))``; ``"discrete"``: exact integer
    noise (:func:`discrete_calibration`; integer data and counting-query rows needed).
    ``releases=R`` returns an ``m x R`` array of independent releases.
    """
    _check_privacy(privacy)
    _check_noise(noise)
    R = _check_releases(releases)
    A = as_matrix(strategy.matrix if isinstance(strategy, Strategy) else strategy)
    Ax = _true_answers(A, x)
    shape = (A.shape[0],) if R is None else (A.shape[0], R)
    if noise == "continuous":
        _check_rng(rng)
        z = privacy.sample(rng, shape, A.sensitivity(privacy.norm))
        return (Ax if R is None else Ax[:, None]) + z
    _check_rng(rng)
    cal = discrete_calibration(A, privacy)
    Bx = _integer_answers(Ax, cal.scales)
    noisy = (Bx if R is None else Bx[:, None]) + _discrete_noise(cal, rng, shape)
    # exact integers above; the scaling back to A's rows is post-processing
    return noisy * (cal.scales if R is None else cal.scales[:, None])


# ============================================================================ reconstruct
def _structured_pinv(A: Matrix) -> Matrix | None:
    if isinstance(A, Weighted):
        inner = _structured_pinv(A.base)
        return None if inner is None or A.weight == 0 else Weighted(1.0 / A.weight, inner)
    if isinstance(A, (Identity, PIdentity, Kronecker, Marginals, Haar)):
        return A.pinv()
    if isinstance(A, Tree) and A.invertible:
        return A.pinv()
    from .residual.matrix import ResidualStrategyMatrix

    if isinstance(A, ResidualStrategyMatrix):
        return A.pinv()
    return None


def reconstruct(strategy, y, tol: float = LSMR_TOL, maxiter: int = LSMR_MAXITER) -> np.ndarray:
    """``x̂ = A⁺ y`` by structure (see the module docstring), a dense pseudo-inverse for a small
    strategy and several releases, LSMR otherwise (HDMM §7.2). ``y``: one release (vector) or
    several (``m x R``, one column per release)."""
    A = _matrix(strategy)
    y = np.asarray(y, dtype=float)
    if y.ndim not in (1, 2) or y.shape[0] != A.shape[0]:
        raise ValueError(
            f"y has {y.shape[0] if y.ndim else 1} answers but the strategy has {A.shape[0]} rows"
        )
    P = _structured_pinv(A)
    if P is not None:
        return P @ y
    if y.ndim == 2 and A.shape[0] * A.shape[1] <= DENSE_PINV_ENTRIES:
        return np.linalg.lstsq(A.dense(), y, rcond=None)[0]
    if y.ndim == 2:
        return np.stack([reconstruct(A, y[:, j], tol, maxiter) for j in range(y.shape[1])], 1)
    return lsmr(A.as_operator(), y, atol=tol, btol=tol, maxiter=maxiter)[0]


def answer(W, xhat) -> np.ndarray:
    """Workload answers ``W x̂`` (HDMM Table 1b, last step); ``x̂`` a vector or ``N x R``."""
    W = as_matrix(W)
    xhat = np.asarray(xhat, dtype=float)
    if xhat.ndim not in (1, 2) or xhat.shape[0] != W.shape[1]:
        raise ValueError(
            f"x̂ has {xhat.shape[0] if xhat.ndim else 1} cells but the workload is defined on "
            f"{W.shape[1]}"
        )
    return W @ xhat


def answer_marginals(W, strategy, y) -> np.ndarray:
    """``W A⁺ y`` for a marginals workload ``W`` and a weighted-marginals strategy ``A``
    without the ``N``-cell ``x̂`` (HDMM §6.3, App. A.4 spectral form).

    With ``(AᵀA)⁺ = Σ_B μ_B⁺ P_B`` and ``Q_T P_B Q_Sᵀ = 0`` unless ``B ⊆ S ∩ T``, the answer on
    the marginal ``T`` is ``(Π_{i∉T} n_i) Σ_{B⊆T} μ_B⁺ ⊗_{i∈B} P⊥_i z_B`` broadcast over
    ``T \\ B``, where ``z_B = Σ_{S⊇B} θ_S · mean_{S\\B}(y_S)`` (the noisy tables averaged down
    to ``B``). ``y``: one release or ``m_A x R``.
    """
    A = _matrix(strategy)
    abase, ablocks = _marginal_blocks(A)
    wbase, wblocks = _marginal_blocks(as_matrix(W))
    if ablocks is None or wblocks is None:
        raise ValueError("answer_marginals needs a marginals workload and a marginals strategy")
    sizes = tuple(abase.sizes)
    if tuple(wbase.sizes) != sizes:
        raise ValueError(
            f"workload attribute sizes {list(wbase.sizes)} differ from the strategy's {list(sizes)}"
        )
    d = len(sizes)
    y = np.asarray(y, dtype=float)
    vec = y.ndim == 1
    Y = y[:, None] if vec else y
    if Y.ndim != 2 or Y.shape[0] != A.shape[0]:
        raise ValueError(f"y has {Y.shape[0]} answers but the strategy has {A.shape[0]} rows")
    R = Y.shape[1]
    tables, off = {}, 0
    for theta, key in ablocks:
        shape = tuple(sizes[i] for i in _key_attrs(key, d))
        r = math.prod(shape)
        tables[key] = (theta, Y[off : off + r].reshape(shape + (R,)))
        off += r
    v = np.zeros(1 << d)
    for theta, key in ablocks:
        v[key] = theta * theta
    mu_pinv = MarginalsGram(sizes, v).pinv_spectrum()  # (AᵀA)⁺ on each residual subspace
    z_cache: dict[int, np.ndarray] = {}

    def z_of(B: int) -> np.ndarray:
        if B not in z_cache:
            shape = tuple(sizes[i] for i in _key_attrs(B, d)) + (R,)
            z = np.zeros(shape)
            for S, (theta, t) in tables.items():
                if S & B != B:
                    continue
                S_attrs = _key_attrs(S, d)
                drop = tuple(j for j, i in enumerate(S_attrs) if not (B >> i) & 1)
                z = z + theta * (t.mean(axis=drop) if drop else t)
            for j in range(len(shape) - 1):  # ⊗_{i∈B} P⊥_i: centre every kept axis
                z = z - z.mean(axis=j, keepdims=True)
            z_cache[B] = z
        return z_cache[B]

    out = []
    for omega, T in wblocks:
        T_attrs = _key_attrs(T, d)
        out_scale = float(math.prod(n for i, n in enumerate(sizes) if not (T >> i) & 1))
        shape = tuple(sizes[i] for i in T_attrs) + (R,)
        ans = np.zeros(shape)
        sub = T
        while True:  # every B ⊆ T
            if mu_pinv[sub] != 0.0:
                zb = z_of(sub)
                bshape = tuple(sizes[i] if (sub >> i) & 1 else 1 for i in T_attrs) + (R,)
                ans = ans + mu_pinv[sub] * zb.reshape(bshape)
            if sub == 0:
                break
            sub = (sub - 1) & T
        out.append((omega * out_scale * ans).reshape(-1, R))
    res = np.concatenate(out, axis=0)
    return res[:, 0] if vec else res


# ============================================================================ release
def _residual_plan(strategy):
    from .residual.matrix import ResidualStrategyMatrix

    A = strategy.matrix if isinstance(strategy, Strategy) else strategy
    return A.plan if isinstance(A, ResidualStrategyMatrix) else None


def _residual_targets(W: Matrix, plan) -> list[tuple[float, tuple[int, ...], int]]:
    """``(weight, attrs, rows)`` per product of ``W`` in row order, checked against the plan's
    per-attribute workload matrices (the residual reconstruction applies those)."""
    from .linalg import kron_terms

    base, blocks = _marginal_blocks(W)
    d = len(plan.bases)
    if blocks is not None:
        out = []
        for theta, key in blocks:
            attrs = _key_attrs(key, d)
            out.append((theta, attrs, math.prod(plan.bases[i].n for i in attrs)))
        return out
    out = []
    for c, factors in kron_terms(W):
        if len(factors) != d:
            raise ValueError("the workload's products do not match the residual strategy's domain")
        attrs = tuple(i for i, f in enumerate(factors) if not isinstance(f, Total))
        for i in attrs:
            wf, bw = factors[i], plan.bases[i].workload
            if wf.shape != bw.shape or not np.allclose(wf.dense(), bw.dense()):
                raise ValueError(
                    f"attribute {i}: the workload's query matrix differs from the one the "
                    "residual strategy was selected for; select the strategy on this workload"
                )
        out.append((math.sqrt(c), attrs, math.prod(plan.bases[i].rows for i in attrs)))
    return out


def release(
    W, strategy, data, privacy: Privacy, rng: np.random.Generator, noise: str = "continuous"
) -> np.ndarray:
    """Noisy answers to the workload ``W`` (a numpy array in ``W``'s row order).

    ``data``: :class:`~mmtoolkit.records.Records` or a data vector. Routes: a strategy with
    ``inference="none"`` releases ``W x + z``; a ResidualPlanner strategy measures and
    reconstructs from marginal tables (He et al. Alg. 1/2, discrete: Alg. 3); a marginals
    strategy with a marginals workload uses :func:`answer_marginals`; anything else
    :func:`measure` → :func:`reconstruct` → :func:`answer` on the data vector.
    """
    _check_privacy(privacy)
    _check_noise(noise)
    _check_rng(rng)
    W = as_matrix(W)
    if isinstance(strategy, Strategy) and strategy.inference == "none":
        return measure(W, data, privacy, rng, noise)
    A = _matrix(strategy)
    if A.shape[1] != W.shape[1]:
        raise ValueError(
            f"the workload is defined on {W.shape[1]} cells, the strategy on {A.shape[1]}"
        )
    plan = _residual_plan(strategy)
    if plan is not None:
        from .residual import mechanism as rmech

        targets = _residual_targets(W, plan)
        src = data.codes if _is_records(data) else np.asarray(data).ravel()
        if noise == "discrete":
            if not isinstance(privacy, ZCDP):
                raise ValueError(
                    "ResidualPlanner's discrete mechanism (He et al. §5) needs ZCDP privacy"
                )
            meas = rmech.measure_discrete(plan, src, privacy.rho, rng)
        else:
            meas = rmech.measure(plan, src, privacy, rng)
        return np.concatenate([w * rmech.reconstruct(meas, attrs) for w, attrs, _ in targets])
    _, ablocks = _marginal_blocks(A)
    _, wblocks = _marginal_blocks(W)
    if ablocks is not None and wblocks is not None:
        return answer_marginals(W, A, measure(A, data, privacy, rng, noise))
    if _is_records(data):
        data = data.vector()
    return answer(W, reconstruct(A, measure(A, data, privacy, rng, noise)))


def standard_errors(W, strategy, privacy: Privacy) -> np.ndarray:
    """Analytic standard error of every answer of :func:`release` (continuous noise): the
    square root of the shared evaluator's per-query variance. Discrete noise has at most
    this variance (up to the ~1e-6 relative rounding of its parameters)."""
    from . import evaluate

    return np.sqrt(evaluate.per_query_variance(W, strategy, privacy))


def clip_nonnegative(answers) -> np.ndarray:
    """Post-processing: negative answers set to 0 (keeps privacy; biases the answers up)."""
    return np.maximum(np.asarray(answers, dtype=float), 0.0)


def round_to_integers(answers) -> np.ndarray:
    """Post-processing: answers rounded to the nearest integer (keeps privacy)."""
    return np.rint(np.asarray(answers, dtype=float)).astype(np.int64)


# ============================================================================ Monte Carlo
@dataclass(frozen=True)
class MonteCarloResult:
    """Empirical vs analytic error of ``releases`` noisy releases on fixed data.

    ``mean_total``: mean over releases of the total squared error ``Σ_i (ŷ_i − W_i x)²``;
    ``ci``: its two-sided confidence interval ``mean ± z_{(1+level)/2} · sd/√R`` (normal
    approximation of the mean of R i.i.d. totals, ``sd`` their empirical standard deviation);
    ``expected``: the shared evaluator's ``expected_error`` (for discrete noise, scaled by the
    exact ratio of discrete to continuous noise variance, which must then be the same for
    every row); ``query_var`` / ``expected_var``: per-query empirical variance about the truth
    and the evaluator's ``per_query_variance`` (same scaling).
    """

    releases: int
    mean_total: float
    sd_total: float
    ci: tuple[float, float]
    level: float
    expected: float
    query_var: np.ndarray
    expected_var: np.ndarray

    @property
    def within_ci(self) -> bool:
        return self.ci[0] <= self.expected <= self.ci[1]

    @property
    def relative_error(self) -> float:
        return self.mean_total / self.expected - 1.0


def monte_carlo(
    W, strategy, x, privacy: Privacy, releases: int = 1000, rng=None, level: float = 0.99,
    noise: str = "continuous", batch: int = 500,
) -> MonteCarloResult:  # fmt: skip
    """Run ``releases`` releases of ``W`` with ``strategy`` on the fixed data ``x`` (measure →
    reconstruct → answer, vectorised in batches of noise columns) and compare the empirical
    total squared error and per-query variances with the shared evaluator (see
    :class:`MonteCarloResult`)."""
    from . import evaluate

    _check_privacy(privacy)
    _check_noise(noise)
    _check_rng(rng)
    R = _check_releases(releases)
    if R < 2:
        raise ValueError("monte_carlo needs at least 2 releases")
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    W = as_matrix(W)
    truth = _true_answers(W, x)
    none = isinstance(strategy, Strategy) and strategy.inference == "none"
    A = W if none else _matrix(strategy)
    expected = evaluate.expected_error(W, strategy, privacy)
    expected_var = evaluate.per_query_variance(W, strategy, privacy)
    if noise == "discrete":
        cal = discrete_calibration(A, privacy)
        cont = privacy.noise_variance(A.sensitivity(privacy.norm))
        ratio = cal.variances / cont
        if not np.allclose(ratio, ratio[0], rtol=1e-9):
            raise ValueError(
                "monte_carlo with discrete noise needs rows of equal scale (one noise "
                "distribution); this strategy's rows have different weights"
            )
        expected *= float(ratio[0])
        expected_var = expected_var * float(ratio[0])
    totals = np.empty(R)
    sq = np.zeros(W.shape[0])
    done = 0
    while done < R:
        k = min(batch, R - done)
        Y = measure(A, x, privacy, rng, noise, releases=k)
        ans = Y if none else answer(W, reconstruct(A, Y))
        err = ans - truth[:, None]
        totals[done : done + k] = np.sum(err * err, axis=0)
        sq += np.sum(err * err, axis=1)
        done += k
    mean = float(totals.mean())
    sd = float(totals.std(ddof=1))
    zq = NormalDist().inv_cdf((1 + level) / 2)
    half = zq * sd / math.sqrt(R)
    return MonteCarloResult(
        releases=R,
        mean_total=mean,
        sd_total=sd,
        ci=(mean - half, mean + half),
        level=level,
        expected=float(expected),
        query_var=sq / R,
        expected_var=np.asarray(expected_var, dtype=float),
    )
