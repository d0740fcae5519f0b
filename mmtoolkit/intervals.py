"""Confidence intervals on released answers, from the noise distribution of each answer.

A released answer is ``ŷ_i = W_i x + e_i`` with ``e_i = Σ_j c_ij z_j``: a fixed linear
combination (the rows of ``C = W A⁺``, or the identity for ``inference="none"``) of the
independent noise draws ``z_j`` added to the strategy's rows. Its variance
``v_i = Σ_j c_ij² Var z_j`` is the shared evaluator's per-query variance
(:func:`mmtoolkit.evaluate.per_query_variance`, the ``stderr`` of a release squared). The
interval is ``ŷ_i ± h_i``, ``h_i`` the smallest half-width this module can prove gives
``P(|e_i| ≤ h_i) ≥ 1 − α`` — exactly ``1 − α`` where the noise law allows it. What each
answer gets (:data:`METHODS`, the release summary's ``intervals.method``):

- **continuous Gaussian** (zCDP / (ε, δ)): ``e_i`` is exactly ``N(0, v_i)``, so
  ``h_i = z_{1−α/2} √v_i`` is exact (``"gaussian"``).
- **continuous Laplace** (pure DP): ``e_i = Σ_j a_ij L_j``, ``a_ij = |c_ij| b`` and ``L_j``
  standard Laplace, has the moment generating function ``M(λ) = Π_j 1/(1 − a_ij² λ²)``
  (``|λ| < 1 / max_j a_ij``; its characteristic function ``M(it)``). Its tail is inverted
  numerically (``"laplace sum"``, exact): ``P(e > h) = (1/2πi) ∫ M(λ) e^{−λh} dλ/λ`` on the
  vertical line ``Re λ = c`` (Gil-Pelaez's inversion, ``c → 0``, moved into the strip where
  ``M`` is analytic), with ``c`` the saddle point ``K'(c) = h`` of ``K = log M``, so the
  integrand is normalised by the Chernoff bound ``exp(K(c) − ch)`` and neither underflows
  nor cancels even at Bonferroni levels. Written as ``(1/π)∫_0^∞ (Re g(u) cos(hu) + Im g(u)
  sin(hu)) du`` with ``g`` smooth and decaying like ``u^{−2k−1}`` (``k`` draws), each part
  is a Fourier integral that QUADPACK's QAWF integrates to an error estimate ≤
  :data:`QUAD_TOL` on the normalised scale (relative to the integral where it exceeds 1;
  for small ``h``, whose slow oscillation QAWF handles badly, QAWO on ``[0, U]`` with the
  part beyond ``U`` bounded analytically by ``QUAD_TOL``; when QUADPACK does not reach its
  target, the answer gets the Chernoff bound below instead). The tail is therefore right
  to about 1e-12 times its Chernoff bound, itself within a factor ``≈ e h / max_j a_ij``
  (≤ ~100 at the levels of a release, α / k ≥ 1e-8) of the tail: the level of the
  half-width is right to ~1e-10 relative, far inside the 1e-6 asked; the tests check it
  against closed forms (one Laplace: ``h = b ln(1/α)``; sums of equal and of distinct
  Laplaces) to 1e-9 and by 10^6 draws. ``h`` is the root of ``2 P(e > h) = α``
  (Brent, relative 1e-12), bracketed around the saddle-point (Lugannani–Rice)
  approximation. Answers with the same multiset of ``a_ij`` up to scale (every method is
  homogeneous in the weights; the cells of a marginal table share one) are solved once, at
  ~0.05 s each; past :data:`MAX_INVERSIONS` distinct ones a release gets the Chernoff
  bound of the exact moment generating function (``"laplace chernoff"``).
- **discrete Laplace / discrete Gaussian** (exact integer noise): row ``j``'s noise is
  ``d_j Z_j``, ``Z_j`` integer, so a sum of several is atomic and exact 1 − α coverage is
  in general impossible. An answer whose weights ``a_ij = |c_ij| d_j`` are exact integer
  multiples of the smallest — one draw times a constant (``inference="none"``, the LM
  strategy), or the identity strategy's sums of cells — has an integer-lattice law, whose
  pmf is computed by convolution (:func:`lattice_half_width`; truncated mass and rounding
  counted against the interval): it gets the exact least half-width, the least ``k`` with
  ``P(|S| > k) ≤ α`` (``"lattice pmf"``), covering between ``1 − α`` and ``1 − α`` plus the
  mass of its boundary atoms (:attr:`Intervals.atoms`). Other answers get the smallest of
  provably conservative half-widths. (a) Their law on a fine grid (``"gridded pmf"``,
  :func:`grid_half_width`): each of the ``N`` draws' terms rounded to the grid of step
  ``δ = GRID_SLACK · sd / N`` moves by at most ``δ/2``, so the gridded law's half-width
  plus ``Nδ/2`` is valid and at most ``(N + 1) δ`` — 1.01% of a standard deviation — wider
  than the exact least one (while the grid fits :data:`MAX_LATTICE` points and the
  release's :data:`MAX_GRID_WORK`). Discrete Laplace also (b) the Chernoff bound of the
  exact moment generating function ``Π_j 1/(1 − 4β_j² sinh²(a_ij λ/2))`` (``Z = G₁ − G₂`` of two
  geometric variables, ``β² = q/(1−q)²``, ``q = e^{−s/t}``; ``"discrete laplace
  chernoff"``) and (c) the exact Laplace-sum half-width of ``Σ_j a_ij (t_j/s_j) L_j`` plus
  ``Σ_j a_ij`` (``"shifted laplace sum"``: ``G = ⌊E/τ⌋`` for ``E`` exponential of rate
  ``τ = s/t``, so ``Z = L + V`` with ``L`` continuous Laplace of scale ``t/s`` and
  ``|V| < 1``); discrete Gaussian also (b) the subgaussian bound ``√(2 σ̄_i² ln(2/α))`` with
  ``σ̄_i² = Σ_j a_ij² σ̄_j²`` (``"subgaussian"``: ``N_Z(0, σ̄²)`` is σ̄²-subgaussian,
  Canonne, Kamath & Steinke 2020, Cor. 9; its exact moment generating function is within
  ``e^{−2π²σ̄²}`` of that bound, nothing to gain).
- **without coefficients** (a kind with a mechanism of its own, ResidualPlanner; or
  ``C`` larger than the handlers' dense limit): from ``v_i`` alone. Continuous Laplace: the
  Chernoff bound of one Laplace of variance ``v_i`` (``"laplace variance chernoff"``):
  ``log M`` is a sum of terms ``−log(1 − a²λ²)``, convex in ``a²`` and 0 at 0, hence
  superadditive, so ``M(λ) ≤ 1/(1 − λ² v_i/2)`` for every weighted Laplace sum of
  variance ``v_i``. Discrete Laplace: the same argument with the coarsest lattice of the
  release (``β_min``; ``4β² sinh²(y/β)`` grows as ``β`` shrinks) gives
  ``M(λ) ≤ 1/(1 − 4β_min² sinh²(λ √v_i / (2√2 β_min)))`` (``"discrete laplace variance
  chernoff"``), ``v_i`` widened by the plan's ``proxy_factor``; discrete Gaussian the
  subgaussian bound with proxy ``v_i · proxy_factor``. Given only ``stderr``
  (:func:`half_widths`), discrete Laplace falls back to Chebyshev, ``√(v_i / α)``
  (``"chebyshev"``).

Every half-width computed from the coefficients is widened by :data:`ROUNDING_MARGIN`
(1e-9 relative), so the floating-point rounding of the released answers cannot move a
boundary atom of a lattice law out of its interval.

Simultaneous intervals over ``k`` answers (a table, or the whole workload) use Bonferroni:
each answer's interval at level ``α / k``, valid under any dependence between the answers
(the answers of one release share noise draws).

User guide: docs/guide/release.md ("Reading the intervals").
"""

from __future__ import annotations

import cmath
import math
import warnings
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy import integrate, optimize, sparse

from .checks import check_float, check_int, check_option, check_probability
from .noise import discrete_gaussian_pmf

__all__ = ["DISTRIBUTIONS", "SIMULTANEOUS", "METHODS", "MAX_INVERSIONS", "QUAD_TOL",
           "Intervals", "half_widths", "method", "release_intervals", "table_counts",
           "laplace_sum_tail", "laplace_sum_half_width", "discrete_atom", "lattice_half_width",
           "answer_half_width"]

#: The noise distributions an interval is derived for (:attr:`mmtoolkit.plan.Noise.distribution`).
DISTRIBUTIONS = ("gaussian", "discrete gaussian", "laplace", "discrete laplace")
#: What a (1 − α) statement covers: each answer, each table jointly, the whole workload jointly.
SIMULTANEOUS = ("none", "table", "workload")
#: Most distinct Laplace sums inverted numerically per release (each ~0.05 s: ~6 tail
#: integrals); the others get the Chernoff bound of their exact moment generating function.
MAX_INVERSIONS = 400
#: QAWF's absolute error target on the tail integral normalised by its Chernoff bound.
QUAD_TOL = 1e-12
#: Coefficients below this fraction of the largest of an answer are rounding zeros of
#: ``W A⁺`` (they are dropped when grouping answers of one continuous law).
ROUNDING_ZERO = 1e-12
#: Relative widening of every half-width computed from the coefficients: it covers the
#: floating-point rounding of the released answers (an atom of a lattice law computed at
#: ``h (1 + 1e-15)`` stays inside) and of grouping answers by weights rounded to 1e-12,
#: without reaching the next atom (``k + 1`` lattice steps, ``k`` ≤ :data:`MAX_LATTICE`)
#: or moving a continuous level by more than ~1e-9 of itself.
ROUNDING_MARGIN = 1e-9

#: Each method in words (module docstring).
METHODS = {
    "gaussian": "exact Gaussian (z quantile times the standard error)",
    "laplace sum": (
        "exact Laplace-sum quantile (the answer's characteristic function inverted "
        "numerically)"
    ),
    "laplace chernoff": (
        "conservative Chernoff bound of the answer's Laplace moment generating function"
    ),
    "laplace variance chernoff": (
        "conservative Chernoff bound of one Laplace of the answer's variance (it dominates "
        "the moment generating function of any weighted Laplace sum of that variance)"
    ),
    "lattice pmf": (
        "exact: the least half-width covering 1 - alpha of the answer's integer-lattice law "
        "(the pmf of its draws, convolved)"
    ),
    "gridded pmf": (
        "conservative: the answer's law computed on a fine grid (its draws' pmfs convolved), "
        "widened by the grid's largest rounding (half a percent of its standard deviation)"
    ),
    "discrete laplace chernoff": (
        "conservative Chernoff bound of the answer's discrete Laplace moment generating "
        "function"
    ),
    "shifted laplace sum": (
        "conservative: the exact quantile of the continuous Laplace sum each discrete "
        "Laplace rounds, plus the coefficients' L1 norm"
    ),
    "discrete laplace variance chernoff": (
        "conservative Chernoff bound of one discrete Laplace of the answer's variance on the "
        "release's coarsest lattice"
    ),
    "subgaussian": (
        "conservative subgaussian bound sqrt(2 v ln(2/alpha)) (the discrete Gaussian is "
        "sigma^2-subgaussian, Canonne, Kamath & Steinke 2020)"
    ),
    "chebyshev": "conservative Chebyshev bound sqrt(v / alpha)",
}

#: The method of each distribution when only the standard errors are known (:func:`method`).
_STDERR_METHOD = {"gaussian": "gaussian", "discrete gaussian": "subgaussian",
                  "laplace": "laplace variance chernoff", "discrete laplace": "chebyshev"}


def method(distribution: str) -> str:
    """In words, how :func:`half_widths` (standard errors only) bounds answers of noise
    ``distribution``."""
    return METHODS[_STDERR_METHOD[check_option(distribution, "distribution", DISTRIBUTIONS)]]


# ============================================================================ laws
def _laplace_K(a, n, lam):
    """``log M(λ)`` of ``Σ n_j a_j L_j`` (``L`` standard Laplace; complex ``λ`` allowed)."""
    return -np.sum(n * np.log(1.0 - (a * lam) ** 2))


def _laplace_Kp(a, n, lam):
    x = a * a * lam
    return float(np.sum(n * 2.0 * x / (1.0 - x * lam)))


def _dlaplace_K(a, n, b2, lam):
    """``log M(λ)`` of ``Σ n_j a_j Z_j``, ``Z_j`` discrete Laplace with ``β_j² = b2_j``."""
    return -float(np.sum(n * np.log1p(-4.0 * b2 * np.sinh(a * lam / 2.0) ** 2)))


def _dlaplace_Kp(a, n, b2, lam):
    s = np.sinh(a * lam / 2.0)
    return float(np.sum(n * 2.0 * b2 * a * np.sinh(a * lam) / (1.0 - 4.0 * b2 * s * s)))


def _chernoff(K, Kp, top: float, level: float) -> float:
    """The least ``h`` with ``2 inf_λ exp(K(λ) − λh) ≤ level`` for a cumulant generating
    function ``K`` (convex, ``K(0) = 0``, finite on ``[0, top)``): ``h(λ) = (K(λ) +
    log(2/level))/λ`` is least where ``λK'(λ) − K(λ) = log(2/level)`` (that left side
    increases: its derivative is ``λK''``)."""
    L = math.log(2.0 / level)
    hi = top * (1.0 - 1e-12)
    if hi * Kp(hi) - K(hi) <= L:  # pragma: no cover - K blows up at top for these laws
        lam = hi
    else:
        lam = optimize.brentq(lambda x: x * Kp(x) - K(x) - L, 0.0, hi, xtol=1e-15 * top,
                              rtol=1e-13)  # fmt: skip
    return (K(lam) + L) / lam


def _laplace_chernoff(a, n, level: float) -> float:
    return _chernoff(lambda x: float(_laplace_K(a, n, x).real), lambda x: _laplace_Kp(a, n, x),
                     1.0 / float(a.max()), level)  # fmt: skip


def _dlaplace_chernoff(a, n, b2, level: float) -> float:
    top = float(np.min(2.0 * np.arcsinh(1.0 / (2.0 * np.sqrt(b2))) / a))
    return _chernoff(lambda x: _dlaplace_K(a, n, b2, x), lambda x: _dlaplace_Kp(a, n, b2, x),
                     top, level)  # fmt: skip


def _laplace_terms(a, n=None):
    a = np.asarray(a, dtype=float).ravel()
    n = np.ones_like(a) if n is None else np.asarray(n, dtype=float).ravel()
    if a.size == 0 or a.size != n.size or not np.all(np.isfinite(a)) or a.min() <= 0:
        raise ValueError("a: the weights of a Laplace sum must be finite positive numbers "
                         "(one multiplicity n each)")  # fmt: skip
    if not (np.all(np.isfinite(n)) and n.min() >= 1):
        raise ValueError("n: every multiplicity must be a count of at least 1")
    return a, n


def laplace_sum_tail(a, h: float, n=None) -> float:
    """``P(Σ_j a_j L_j > h)`` (each weight ``a_j`` repeated ``n_j`` times; ``L_j``
    independent standard Laplace, density ``e^{−|x|}/2``), by the saddle-point contour
    integral of the module docstring; ``ArithmeticError`` when the quadrature does not
    reach its error target."""
    a, n = _laplace_terms(a, n)
    h = check_float(h, "h", minimum=0.0, finite=True)
    if h == 0:
        return 0.5  # a symmetric law without an atom
    top = 1.0 / float(a.max())
    sd = math.sqrt(2.0 * float(np.sum(n * a * a)))
    c = optimize.brentq(lambda x: _laplace_Kp(a, n, x) - h, 0.0, top * (1 - 1e-12),
                        xtol=1e-15 * top, rtol=1e-13)  # fmt: skip
    c = max(c, 1.0 / (8.0 * sd))  # any c in (0, top) is exact; away from the pole at 0
    base = float(_laplace_K(a, n, c).real) - c * h

    seen: dict = {}  # the two Fourier integrals evaluate g at (mostly) the same points

    def g(u):
        if u not in seen:
            lam = c + 1j * u
            with np.errstate(all="ignore"):
                value = complex(np.exp(_laplace_K(a, n, lam) - c * h - base) / lam)
            # (a λ)² overflows only where |g| ≤ Π (1 − a²c²)/(a u)² has underflowed to 0
            seen[u] = value if cmath.isfinite(value) else 0j
        return seen[u]

    # past U, |g(u)| ≤ Π_j (r_j/u²)^{n_j}/u with r_j = (1 − a_j²c²)/a_j², so the part of the
    # integral beyond U is at most Π_j r_j^{n_j} / (2 N U^{2N}) ≤ QUAD_TOL (N = Σ n_j): a
    # small h (many oscillations of the integrand's scale per cycle, which QAWF handles
    # badly) is integrated on [0, U] only (QAWO) with that bound added to the error
    log_r = np.log1p(-(a * c) ** 2) - 2.0 * np.log(a)
    count = float(np.sum(n))
    log_u = max(float(np.max(log_r)) / 2.0, (float(np.sum(n * log_r)) - math.log(
        2.0 * count * QUAD_TOL)) / (2.0 * count))  # fmt: skip
    upper = math.exp(log_u)
    if h * upper < 200 * math.pi:  # ≤ 100 periods: the plain integrand on decades of [0, U]
        edges = [0.0, *np.geomspace(min(1.0, upper) / float(a.max()), upper, 24)]
        pieces: list[tuple] = [(lambda u: (g(u) * cmath.exp(-1j * h * u)).real, lo, hi, {})
                  for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]  # fmt: skip
    else:  # QAWF: the cosine and sine parts on [0, ∞)
        pieces = [(lambda u: g(u).real, 0.0, np.inf, {"weight": "cos", "wvar": h}),
                  (lambda u: g(u).imag, 0.0, np.inf, {"weight": "sin", "wvar": h})]  # fmt: skip
    parts = []
    tol = QUAD_TOL / len(pieces)
    with warnings.catch_warnings():
        warnings.simplefilter("error", integrate.IntegrationWarning)
        for f, lo, hi, weight in pieces:
            try:
                value, err = integrate.quad(f, lo, hi, epsabs=tol, epsrel=QUAD_TOL, limit=500,
                                            limlst=200, **weight)  # fmt: skip
            except integrate.IntegrationWarning as exc:  # pragma: no cover - not met in tests
                raise ArithmeticError(f"the Laplace-sum tail integral: {exc}") from None
            if not err <= 10 * QUAD_TOL * max(1.0, abs(value)):  # pragma: no cover - met
                raise ArithmeticError(f"the Laplace-sum tail integral did not converge ({err})")
            parts.append(value)
    return min(0.5, max(0.0, math.exp(base) * sum(parts) / math.pi))


def _saddlepoint_tail(a, n, h: float) -> float:
    """The Lugannani–Rice approximation of ``P(Σ a_j L_j > h)`` (Butler 2007, §1.2; a
    starting point only: the exact tail is :func:`laplace_sum_tail`)."""
    top = 1.0 / float(a.max())
    s = optimize.brentq(lambda x: _laplace_Kp(a, n, x) - h, 0.0, top * (1 - 1e-12))
    x = (a * s) ** 2
    w = math.sqrt(max(0.0, 2.0 * (s * h - float(_laplace_K(a, n, s).real))))
    u = s * math.sqrt(float(np.sum(n * 2.0 * a * a * (1.0 + x) / (1.0 - x) ** 2)))
    normal = NormalDist()
    return 1.0 - normal.cdf(w) + normal.pdf(w) * (1.0 / u - 1.0 / w)


def laplace_sum_half_width(a, level: float, n=None) -> float:
    """The exact ``h`` with ``P(|Σ_j a_j L_j| > h) = level`` (weights as in
    :func:`laplace_sum_tail`): the root, to a relative 1e-12, of the exact tail, bracketed
    around the saddle-point approximation's root (within 1e-3 of it in practice) and below
    the Chernoff bound (above the root)."""
    a, n = _laplace_terms(a, n)
    level = check_probability(level, "level")
    hi = _laplace_chernoff(a, n, level)
    known: dict = {}  # brentq evaluates the bracket's ends again

    def f(h):
        if h not in known:
            known[h] = math.log(2.0 * laplace_sum_tail(a, h, n)) - math.log(level)
        return known[h]

    try:
        guess = optimize.brentq(lambda h: 2.0 * _saddlepoint_tail(a, n, h) - level,
                                hi / 8.0, hi, rtol=1e-6)  # fmt: skip
    except (ValueError, ZeroDivisionError):  # no sign change: bracket from the bound alone
        guess = hi / 2.0
    lo = up = guess
    step = 1e-3
    while f(lo) <= 0:  # the tail is at most the level: the root lies below (f(0) > 0)
        lo, step = lo * (1.0 - step), min(4.0 * step, 0.5)
    step = 1e-3
    while up < hi and f(up) >= 0:  # (f(hi) < 0: the Chernoff bound is above the root)
        up, step = min(hi, up * (1.0 + step)), 4.0 * step
    return optimize.brentq(f, lo, up, xtol=1e-14 * hi, rtol=1e-12)


def discrete_atom(pmf_tail, level: float) -> tuple[int, float]:
    """For an integer law symmetric about 0 with ``pmf_tail(k) = P(|Z| > k)``: the least
    ``k ≥ 0`` with ``P(|Z| > k) ≤ level`` and the mass ``P(|Z| = k)`` of its boundary atoms
    (the coverage ``P(|Z| ≤ k)`` lies in ``[1 − level, 1 − level + that mass)``)."""
    k = 0
    while pmf_tail(k) > level:
        k = 2 * k + 1
    lo = k // 2 if k else 0  # pmf_tail(lo - 1) > level
    while lo < k:
        mid = (lo + k) // 2
        if pmf_tail(mid) <= level:
            k = mid
        else:
            lo = mid + 1
    return k, (pmf_tail(k - 1) if k else 1.0) - pmf_tail(k)


#: Mass of a discrete Laplace cut off past its support in :func:`_integer_pmf`.
TRUNCATED_MASS = 1e-18
#: Largest support (in lattice points) of an answer's integer law convolved exactly.
MAX_LATTICE = 1 << 21
#: The grid of :func:`grid_half_width`: its rounding widens an interval by at most
#: ``GRID_SLACK / 2`` standard deviations of the answer.
GRID_SLACK = 0.01
#: Most grid work per release (points times convolutions, ~2·10⁷ a second; past it, the
#: bounds): at most ~20 s of a release, e.g. 80 answer laws of 20 distinct draws each.
MAX_GRID_WORK = 4 * 10**8


def _integer_pmf(distribution: str, param) -> tuple[np.ndarray, float]:
    """The pmf of one integer noise draw on ``-T..T`` and a bound on the mass beyond ``T``,
    at most :data:`TRUNCATED_MASS`: discrete Laplace ``Lap_Z(t/s)``, ``param = (d, s, t)``,
    ``P(|Z| > T) = 2q^{T+1}/(1 + q)``; discrete Gaussian ``N_Z(0, σ̄²)``, ``param = (d,
    σ̄²)`` (:func:`~mmtoolkit.noise.discrete_gaussian_pmf`), ``P(|Z| > T) ≤ 2
    exp(−(T + 1)²/(2σ̄²))`` (it is σ̄²-subgaussian, Canonne, Kamath & Steinke 2020)."""
    if distribution == "discrete laplace":
        q = math.exp(-param[1] / param[2])
        T = max(1, math.ceil(math.log(TRUNCATED_MASS * (1 + q) / 2) / math.log(q)))
        k = np.arange(-T, T + 1)
        return (1 - q) / (1 + q) * q ** np.abs(k), 2 * q ** (T + 1) / (1 + q)
    s2 = float(param[1])
    T = max(1, math.ceil(math.sqrt(2.0 * s2 * math.log(2.0 / TRUNCATED_MASS))))
    cut = 2.0 * math.exp(-((T + 1) ** 2) / (2.0 * s2))
    return discrete_gaussian_pmf(param[1], np.arange(-T, T + 1)), cut


def _convolve(p, q) -> tuple[np.ndarray, float]:
    """The full convolution of two pmfs and a bound on its absolute error: direct when
    one is short (rounding ~1e-16 relative, counted as 0), else by real FFTs (absolute
    error of order ``size · 2⁻⁵²``, which is returned)."""
    if min(p.size, q.size) <= 64:
        return np.convolve(p, q), 0.0
    size = p.size + q.size - 1
    n = 1 << (size - 1).bit_length()
    out = np.fft.irfft(np.fft.rfft(p, n) * np.fft.rfft(q, n), n)[:size]
    return out, size * float(np.finfo(float).eps)


def _grid_law(w, counts, laws, distribution: str, delta: float, budget=None):
    """The law of ``S_δ = Σ_j rint(w_j Z_j / δ)`` (each weight ``counts_j`` times, ``Z_j``
    integer draws of ``laws_j``; exact, ``S_δ = S/δ``, when every ``w_j/δ`` is an integer):
    ``(tail, cut)`` with ``tail[k] = P(|S_δ| > k)`` by convolving the draws' pmfs
    (repeated squaring), and ``cut`` the mass left out — truncated pmfs (:func:`_integer_pmf`)
    and an allowance for FFT rounding (``size · 2⁻⁵²`` per convolution, of the order of its
    absolute error) — to add to the tail so the bound stays valid; None when ``S_δ``'s
    support would exceed :data:`MAX_LATTICE` points or its work (support times the
    convolutions) the ``budget[1]`` left, which it decrements."""
    pmfs = {law: _integer_pmf(distribution, law) for law in set(laws)}
    spans = [int(np.rint(wj * ((pmfs[law][0].size - 1) // 2) / delta))
             for wj, law in zip(w, laws)]  # fmt: skip
    support = sum(2 * s * n for s, n in zip(spans, counts)) + 1
    work = support * sum(2 * int(n).bit_length() for n in counts)
    if support > MAX_LATTICE or (budget is not None and work > budget[1]):
        return None
    if budget is not None:
        budget[1] -= work
    pmf, cut = np.ones(1), 0.0
    for wj, n, law, span in zip(w, counts, laws, spans):
        p, c = pmfs[law]
        T = (p.size - 1) // 2
        at = np.rint(wj * np.arange(-T, T + 1) / delta).astype(np.int64) + span  # symmetric
        spread = np.bincount(at, weights=p, minlength=2 * span + 1)  # the pmf of rint(w Z/δ)
        cut += n * c
        while n:  # pmf ∗ spread^{∗n} by repeated squaring
            if n & 1:
                pmf, err = _convolve(pmf, spread)
                cut += err
            n >>= 1
            if n:
                spread, err = _convolve(spread, spread)
                cut += err
    pmf = np.maximum(pmf, 0.0)  # FFT rounding (absolute ~1e-17) below zero
    T = (pmf.size - 1) // 2
    sym = pmf[T + 1 :] + pmf[:T][::-1]  # sym[j] = P(|S| = j + 1)
    return np.append(np.cumsum(sym[::-1])[::-1], 0.0), cut  # tail[k], k = 0..T


def _tail_fn(law):
    tail, cut = law
    return lambda k: (float(tail[k]) if k < tail.size else 0.0) + cut


def lattice_half_width(multiples, counts, laws, distribution, level):
    """The exact least half-width, in lattice units, of ``S = Σ_j m_j Z_j`` (``m_j`` integer
    ``multiples``, each ``counts_j`` times, ``Z_j`` integer draws of ``laws_j``), with its
    boundary atoms' mass (:func:`discrete_atom` on the convolved pmf, :func:`_grid_law` with
    ``δ = 1``, the mass left out counted in the tail); None when ``S``'s support would
    exceed :data:`MAX_LATTICE` points."""
    law = _grid_law(multiples, counts, laws, distribution, 1.0)
    return None if law is None else discrete_atom(_tail_fn(law), level)


def grid_half_width(w, counts, laws, distribution: str, level: float,
                    budget=None) -> float | None:  # fmt: skip
    """A conservative half-width for ``S = Σ_j w_j Z_j`` (weights as in :func:`_grid_law`)
    whose weights are not one lattice: each term rounded to the grid of step ``δ`` (``N``
    draws, ``δ = GRID_SLACK · sd(S) / N``) moves by at most ``δ/2``, so ``|S − δ S_δ| ≤ N
    δ/2`` and ``P(|S| > kδ + Nδ/2) ≤ P(|S_δ| > k)``: ``h = kδ + Nδ/2`` for the least such
    ``k`` with that tail ≤ ``level`` — at most :data:`GRID_SLACK` / 2 standard deviations
    wider than needed. None when the grid's support would exceed :data:`MAX_LATTICE` or its
    work (the grid's points times its convolutions) the ``budget[1]`` left (decremented)."""
    pmfs = [_integer_pmf(distribution, law)[0] for law in laws]
    var = [float(np.sum(np.arange(-(p.size // 2), p.size // 2 + 1) ** 2 * p)) for p in pmfs]
    draws = float(np.sum(counts))
    delta = GRID_SLACK * math.sqrt(float(np.sum(np.asarray(counts) * w * w * var))) / draws
    law = _grid_law(w, [int(c) for c in counts], laws, distribution, delta, budget)
    if law is None:
        return None
    return delta * (discrete_atom(_tail_fn(law), level)[0] + draws / 2.0)


# ============================================================================ half-widths
def _levels(alpha, count, size):
    a = check_probability(alpha, "alpha")
    k = np.asarray(count, dtype=float)
    if k.size and (not np.all(np.isfinite(k)) or k.min() < 1):
        raise ValueError("count: every count must be a number of answers, at least 1")
    return np.broadcast_to(a / k, (size,))  # each answer's share of alpha


def _stderr(stderr, proxy_factor):
    f = check_float(proxy_factor, "proxy_factor", minimum=1.0, finite=True)
    se = np.asarray(stderr, dtype=float).ravel()
    if se.size and not (np.all(np.isfinite(se)) and se.min() >= 0):
        raise ValueError("stderr: every standard error must be a finite non-negative number")
    return se, f


def _from_variance(se, proxy, distribution, levels, beta2=None):
    """Half-widths and method from the standard errors alone (module docstring)."""
    out = np.zeros(se.size)
    if distribution == "gaussian":
        z = np.array([NormalDist().inv_cdf(1.0 - p / 2.0) for p in levels])
        return z * se, "gaussian"
    if distribution == "discrete gaussian":
        return se * math.sqrt(proxy) * np.sqrt(2.0 * np.log(2.0 / levels)), "subgaussian"
    if distribution == "discrete laplace" and beta2 is None:
        return se * math.sqrt(proxy) / np.sqrt(levels), "chebyshev"
    # one Laplace of variance se², or one discrete Laplace (β_min) of variance se² · proxy:
    # both bounds are the standard deviation times that of variance 1 (a scale family)
    one = np.ones(1)
    for level in np.unique(levels):
        at = levels == level
        if distribution == "laplace":
            unit = _laplace_chernoff(np.array([math.sqrt(0.5)]), one, float(level))
        else:
            scale = np.array([math.sqrt(1.0 / (2.0 * beta2))])
            unit = _dlaplace_chernoff(scale, one, np.array([beta2]), float(level)) * math.sqrt(
                proxy)  # fmt: skip
        out[at] = unit * se[at]
    key = "laplace variance chernoff" if distribution == "laplace" else (
        "discrete laplace variance chernoff")  # fmt: skip
    return out, key


def half_widths(stderr, distribution: str, alpha: float, count=1,
                proxy_factor: float = 1.0) -> np.ndarray:  # fmt: skip
    """Half-widths ``h`` of the intervals ``answer ± h`` from the standard errors alone
    (``stderr``; noise ``distribution``; :func:`method` says how — the module docstring's
    "without coefficients" case, Chebyshev for discrete Laplace), each at level
    ``alpha / count`` (Bonferroni: ``count`` is how many answers the (1 − ``alpha``)
    statement covers jointly; a scalar or one per answer). ``proxy_factor``:
    :attr:`mmtoolkit.plan.NoisePlan.proxy_factor`, the bound's variance (proxy) over
    ``stderr²`` for discrete noise whose parameters were rounded up. A release uses
    :func:`release_intervals`, which reads each answer's noise law from the plan."""
    check_option(distribution, "distribution", DISTRIBUTIONS)
    se, f = _stderr(stderr, proxy_factor)
    levels = _levels(alpha, count, se.size)
    return _from_variance(se, f, distribution, levels)[0]


@dataclass(frozen=True)
class Intervals:
    """The half-widths of a release's intervals, the :data:`METHODS` key of each answer and,
    for an answer of an exact integer-lattice law (``"lattice pmf"``), the mass of its
    boundary atoms ``P(|e| = h)`` (0 elsewhere): its coverage lies in ``[1 − level,
    1 − level + atom)``."""

    half: np.ndarray
    methods: np.ndarray
    atoms: np.ndarray

    def counts(self) -> dict:
        """``{method key: number of answers}``, in :data:`METHODS` order."""
        keys, n = np.unique(self.methods, return_counts=True)
        found = dict(zip(keys.tolist(), n.tolist()))
        return {k: found[k] for k in METHODS if k in found}

    def describe(self) -> str:
        """The methods in words, with how many answers each (one method: its text alone)."""
        counts = self.counts()
        if len(counts) == 1:
            return METHODS[next(iter(counts))]
        return "; ".join(f"{METHODS[k]} for {n} answer(s)" for k, n in counts.items())


def release_intervals(plan, stderr, alpha: float, count=1) -> Intervals:
    """The intervals of the answers of a release by ``plan`` (a
    :class:`~mmtoolkit.plan.NoisePlan` with a workload) whose standard errors are
    ``stderr``, each at level ``alpha / count`` (as :func:`half_widths`): each answer's own
    noise law from the plan's coefficients (:meth:`~mmtoolkit.plan.NoisePlan.coefficients`)
    and row noise, by the methods of the module docstring."""
    distribution = plan.distribution
    se, proxy = _stderr(stderr, plan.proxy_factor)
    levels = _levels(alpha, count, se.size)
    C = None if distribution == "gaussian" else plan.coefficients()
    if C is None:
        beta2 = None
        if distribution == "discrete laplace":
            beta2 = min(_beta2(s, t) for _, s, t in plan.row_scale_parts[3])
        half, key = _from_variance(se, proxy, distribution, levels, beta2)
        return Intervals(half, np.full(se.size, key, dtype=object), np.zeros(se.size))
    C = sparse.csr_matrix(C)
    if C.shape[0] != se.size:
        raise ValueError(f"stderr: {se.size} standard errors for {C.shape[0]} answers")
    unit, law = _row_laws(plan)
    return _by_answer(C, unit, law, distribution, levels)


def _beta2(s: int, t: int) -> float:
    q = math.exp(-s / t)
    return q / (1.0 - q) ** 2


def _row_laws(plan):
    """Per strategy row: the factor ``d_j`` of its noise ``d_j Z_j`` and the index of
    ``Z_j``'s law in ``laws`` (continuous Laplace: ``b`` and one standard Laplace)."""
    if plan.noise == "continuous":
        rows = plan.A.shape[0]
        return np.full(rows, plan.scale), (np.zeros(rows, dtype=np.intp), [None])
    cal = plan.calibration
    return cal.scales, (cal.row_param, cal.params)


def _by_answer(C, unit, law, distribution, levels) -> Intervals:
    """Each answer's half-width from its row of ``C``, answers of one law solved once."""
    row_law, params = law
    m = C.shape[0]
    half, methods, atoms = np.zeros(m), np.empty(m, dtype=object), np.zeros(m)
    solved: dict = {}
    budget = [MAX_INVERSIONS, MAX_GRID_WORK]
    single = np.flatnonzero(np.diff(C.indptr) == 1)  # one draw times a constant: vectorised
    rows = C.indices[C.indptr[single]]
    weight = np.abs(C.data[C.indptr[single]]) * unit[rows]
    groups = np.stack([row_law[rows].astype(float), levels[single]])
    for k, level in (np.unique(groups, axis=1).T if single.size else ()):
        at = np.flatnonzero((groups[0] == k) & (groups[1] == level))
        h, found, atom = answer_half_width(np.ones(1), np.ones(1), [params[int(k)]],
                                           distribution, float(level), budget, True)  # fmt: skip
        half[single[at]], methods[single[at]], atoms[single[at]] = weight[at] * h, found, atom
    rest = np.ones(m, dtype=bool)
    rest[single] = False
    for i in np.flatnonzero(rest):
        cols = C.indices[C.indptr[i] : C.indptr[i + 1]]
        a = np.abs(C.data[C.indptr[i] : C.indptr[i + 1]]) * unit[cols]
        if distribution == "laplace":  # rounding zeros of W A⁺ change no continuous law
            keep = a > ROUNDING_ZERO * (a.max() if a.size else 0.0)
            cols, a = cols[keep], a[keep]
        if a.size == 0 or a.max() == 0:  # a noiseless answer (a zero workload row)
            methods[i] = "laplace sum" if distribution == "laplace" else "lattice pmf"
            continue
        # the answer's law up to its scale (every method is homogeneous of degree 1 in the
        # weights): its (row law, weight / largest weight) pairs up to order and ~1e-12
        scale = float(a.max())
        mantissa, exponent = np.frexp(a / scale)  # rounded to 2^-40 relative: none to 0
        shape = np.ldexp(np.round(mantissa * 2.0**40) / 2.0**40, exponent)
        ratio = a / a.min()  # an exact integer lattice (unrounded weights) or not
        lattice = distribution != "laplace" and np.array_equal(ratio, np.rint(ratio))
        key = (float(levels[i]), lattice,
               tuple(sorted(zip(row_law[cols].tolist(), shape.tolist()))))
        if key not in solved:
            pairs, n = np.unique(np.stack([row_law[cols].astype(float), shape]), axis=1,
                                 return_counts=True)  # fmt: skip
            laws = [params[int(k)] for k in pairs[0]]
            solved[key] = answer_half_width(pairs[1], n.astype(float), laws, distribution,
                                            float(levels[i]), budget, lattice)  # fmt: skip
        h, methods[i], atoms[i] = solved[key]
        half[i] = scale * h
    return Intervals(half * (1.0 + ROUNDING_MARGIN), methods, atoms)


def answer_half_width(w, n, laws, distribution: str, level: float, budget=None,
                      lattice=None) -> tuple[float, str, float]:  # fmt: skip
    """``(half-width, method, boundary atom mass)`` of ``Σ_j w_j Z_j`` (each ``n_j`` times;
    ``Z_j`` of law ``laws_j``: None for standard Laplace) at ``level`` (module docstring);
    ``budget``: what a release has left, ``[numerical inversions, grid work]`` (decremented;
    default ``[MAX_INVERSIONS, MAX_GRID_WORK]``); ``lattice``: whether the weights are exact integer
    multiples of the smallest (default: read from ``w``; a caller that rounded ``w`` says it
    from the unrounded weights, since an atom moved by rounding may leave the interval)."""
    budget = [MAX_INVERSIONS, MAX_GRID_WORK] if budget is None else budget
    if distribution == "laplace":
        if budget[0] > 0:
            budget[0] -= 1
            try:
                return laplace_sum_half_width(w, level, n), "laplace sum", 0.0
            except ArithmeticError:  # pragma: no cover - the quadrature missed its target
                pass
        return _laplace_chernoff(w, n, level), "laplace chernoff", 0.0
    unit = float(w.min())
    multiples = w / unit
    if lattice is None:
        lattice = np.array_equal(multiples, np.rint(multiples))
    if lattice:  # an integer lattice of step `unit`
        found = lattice_half_width(np.rint(multiples).astype(int).tolist(),
                                   n.astype(int).tolist(), laws, distribution, level)
        if found is not None:
            return unit * found[0], "lattice pmf", found[1]
    if distribution == "discrete gaussian":  # subgaussian with the exact proxy Σ w² σ̄²
        proxy = float(np.sum(n * w * w * np.array([float(p[1]) for p in laws])))
        best = (math.sqrt(2.0 * proxy * math.log(2.0 / level)), "subgaussian", 0.0)
    else:
        b2 = np.array([_beta2(p[1], p[2]) for p in laws])
        best = (_dlaplace_chernoff(w, n, b2, level), "discrete laplace chernoff", 0.0)
    gridded = grid_half_width(w, n, laws, distribution, level, budget)
    if gridded is not None:
        best = min(best, (gridded, "gridded pmf", 0.0))
    if distribution == "discrete laplace" and budget[0] > 0:
        budget[0] -= 1
        ratio = np.array([p[2] / p[1] for p in laws])  # Z = L + V, L Laplace of scale t/s
        try:
            shifted = laplace_sum_half_width(w * ratio, level, n) + float(np.sum(n * w))
            best = min(best, (shifted, "shifted laplace sum", 0.0))
        except ArithmeticError:  # pragma: no cover - the quadrature missed its target
            pass
    return best


def table_counts(spans, answers: int) -> np.ndarray:
    """Per answer, the number of answers in its table, for tables on rows ``start:stop``
    (``spans``: ``(start, stop)`` pairs covering the ``answers`` rows) — the Bonferroni
    ``count`` of simultaneous intervals over each table."""
    out = np.zeros(check_int(answers, "answers", minimum=0))
    for k, (start, stop) in enumerate(spans):
        if not 0 <= start < stop <= out.size:
            raise ValueError(f"spans[{k}]: rows {start}:{stop} are not within 0:{out.size}")
        out[start:stop] = stop - start
    if out.size and out.min() < 1:
        raise ValueError(f"spans: answer {int(np.argmin(out))} is in no table")
    return out
