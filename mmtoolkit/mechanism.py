"""Measure, reconstruct, answer: the matrix mechanism at scale (HDMM §7.2, Table 1b; App. A.5).

* :func:`measure` — ``y = A x + z``, ``z`` noise calibrated to ``sens_p(A)`` by the privacy
  definition (continuous, or exact integer noise with ``noise="discrete"``: Canonne, Kamath
  & Steinke 2020), ``A x`` an implicit product; every function here follows the noise plan
  (:class:`~mmtoolkit.plan.NoisePlan`). ``releases=R`` draws R releases (``m x R``).
* :func:`reconstruct` — ``x̂ = A⁺ y`` by the strategy kind's ``pinv_operator()`` when its
  structure gives ``A⁺`` exactly, else a dense pseudo-inverse when small, the kind's own
  iterative solver or LSMR.
* :func:`answer` — ``W x̂``; :func:`answer_marginals` — ``W A⁺ y`` for marginals in the
  ``2^d`` spectral algebra (HDMM §6.3, App. A.4; no ``N``-cell vector).
* :func:`release` — records or a data vector → noisy workload answers, by the kind's release
  handler (:mod:`mmtoolkit.release_handlers`); :func:`standard_errors`,
  :func:`clip_nonnegative`, :func:`round_to_integers`.
* :func:`monte_carlo` — the validation harness: empirical against analytic error.

A ``dask.array`` data argument goes to :mod:`mmtoolkit.dask_release`.

User guide: docs/guide/at-scale.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy.sparse.linalg import lsmr

from . import dask_release, evaluate
from .checks import check_int
from .discrete import DiscreteCalibration
from .linalg import Matrix, as_matrix
from .linalg.base import SMALL_DENSE_ENTRIES
from .plan import NOISES, NoisePlan, check_rng, data_vector, strategy_matrix, true_answers
from .privacy import Privacy
from .records import Records
from .release_handlers import handler

__all__ = ["NOISES", "measure", "reconstruct", "answer", "answer_marginals", "release",
           "release_measured", "data_vector", "check_finite", "standard_errors", "clip_nonnegative",
           "round_to_integers", "discrete_calibration", "DiscreteCalibration", "monte_carlo",
           "MonteCarloResult", "release_errors"]

#: LSMR stopping tolerances (the authors use 1e-9, digest §9) and iteration cap.
LSMR_TOL = 1e-12
LSMR_MAXITER = 10_000


# ============================================================================ helpers
def _check_releases(releases):
    return None if releases is None else check_int(releases, "releases", minimum=1)


#: Largest number of columns (cells) and of rows (queries) for which :func:`check_finite`
#: multiplies the workload by a vector of ones.
FINITE_CHECK_CELLS = 10**7


def check_finite(W: Matrix, what: str = "workload") -> None:
    """Refuse a matrix with a NaN or infinite entry (a NaN would give NaN answers): ``W 1``
    is finite exactly when every entry is (one product; skipped above
    :data:`FINITE_CHECK_CELLS` columns or rows, where only structured kinds are usable and
    the product itself would not fit)."""
    if W.shape[1] > FINITE_CHECK_CELLS or W.shape[0] > FINITE_CHECK_CELLS:
        return
    s = W @ np.ones(W.shape[1])
    bad = ~np.isfinite(s)
    if bad.any():
        raise ValueError(f"the {what} has a NaN or infinite entry in row {int(np.argmax(bad))}")


# ============================================================================ measure
def measure(
    strategy, x, privacy: Privacy, rng: np.random.Generator, noise: str = "continuous",
    releases: int | None = None,
) -> np.ndarray:  # fmt: skip
    """Noisy strategy answers ``A x + z`` (HDMM Table 1b: Multiply + noise addition; Thm 7).

    ``x``: the data vector (a float32 vector opts into the float32 data path), Records
    (marginals strategies are answered from marginal tables, others from the histogram) or
    a ``dask.array`` (a lazy result, the same noise: :mod:`mmtoolkit.dask_release`).
    ``noise="continuous"``: ``z`` i.i.d. with scale ``privacy.noise_scale(sens_p(A))``,
    added in place in cache-sized blocks by the noise plan; ``"discrete"``: exact integer
    noise (:func:`discrete_calibration`; integer data and counting-query rows needed).
    ``releases=R`` returns an ``m x R`` array of independent releases. How the noise is
    added, and the float32 path's accuracy: docs/guide/at-scale.md.
    """
    plan = NoisePlan(strategy, privacy, noise)
    check_rng(rng)
    R = _check_releases(releases)
    if dask_release.is_dask_array(x):  # past one machine
        return dask_release.measure_planned(plan, x, rng, R)
    return plan.measure(x, rng, R)


# ============================================================================ reconstruct
def reconstruct(
    strategy, y, tol: float = LSMR_TOL, maxiter: int = LSMR_MAXITER, overwrite: bool = False
) -> np.ndarray:
    """``x̂ = A⁺ y`` by structure, a dense pseudo-inverse for a small strategy and several
    releases, the kind's own iterative solver or LSMR otherwise (HDMM §7.2). ``y``: one
    release (vector) or several (``m x R``). ``tol`` / ``maxiter``: the iterative solvers'
    relative tolerance and iteration cap (their stopping rules: docs/guide/at-scale.md).
    ``overwrite=True`` (one release): the caller gives ``y`` up, and a kind that can builds
    ``x̂`` in ``y``'s memory (``A⁺.apply_overwrite``: no new N-vector for a Kronecker
    product, what lets a 10^9-cell release fit); ``y`` is then garbage."""
    A = strategy_matrix(strategy)
    if dask_release.is_dask_array(y):
        return dask_release.reconstruct(A, y)
    if not (isinstance(y, np.ndarray) and y.dtype == np.float32):
        y = np.asarray(y, dtype=float)
    if y.ndim not in (1, 2) or y.shape[0] != A.shape[0]:
        raise ValueError(
            f"y has {y.shape[0] if y.ndim else 1} answers but the strategy has {A.shape[0]} rows"
        )
    P = A.pinv_operator()
    if P is not None:
        return P.apply_overwrite(y) if overwrite and y.ndim == 1 else P @ y
    y = np.asarray(y, dtype=float)
    if y.ndim == 2 and A.shape[0] * A.shape[1] <= SMALL_DENSE_ENTRIES:
        return np.linalg.lstsq(A.dense(), y, rcond=None)[0]
    if y.ndim == 2:
        return np.stack([reconstruct(A, y[:, j], tol, maxiter) for j in range(y.shape[1])], 1)
    xhat = A.least_squares(y, tol, maxiter)
    if xhat is not None:
        return xhat
    return lsmr(A.as_operator(), y, atol=tol, btol=tol, maxiter=maxiter)[0]


def answer(W, xhat) -> np.ndarray:
    """Workload answers ``W x̂`` (HDMM Table 1b, last step); ``x̂`` a vector or ``N x R`` (a
    dask array: lazily, :func:`mmtoolkit.dask_release.apply`)."""
    W = as_matrix(W)
    if dask_release.is_dask_array(xhat):  # x̂ of the Dask route: a lazy dask array
        return dask_release.apply(W, xhat)
    xhat = np.asarray(xhat, dtype=float)
    if xhat.ndim not in (1, 2) or xhat.shape[0] != W.shape[1]:
        raise ValueError(
            f"x̂ has {xhat.shape[0] if xhat.ndim else 1} cells but the workload is defined on "
            f"{W.shape[1]}"
        )
    return W @ xhat


def answer_marginals(W, strategy, y) -> np.ndarray:
    """``W A⁺ y`` for a marginals workload ``W`` and a weighted-marginals strategy ``A``
    without the ``N``-cell ``x̂`` (HDMM §6.3, App. A.4 spectral form; the strategy kind's
    ``workload_answers``). ``y``: one release or ``m_A x R``."""
    A = strategy_matrix(strategy)
    out = handler(A).workload_answers(A, as_matrix(W), y)
    if out is None:
        raise ValueError("answer_marginals needs a marginals workload and a marginals strategy")
    return out


# ============================================================================ release
def discrete_calibration(strategy, privacy: Privacy) -> DiscreteCalibration:
    """The exact integer noise for ``strategy`` under ``privacy`` (PureDP or ZCDP), see
    :class:`~mmtoolkit.discrete.DiscreteCalibration` (the noise plan's). Raises when a
    row of the strategy is not an integer vector up to a positive scale."""
    return NoisePlan(strategy, privacy, "discrete").calibration


def release_measured(
    W, strategy, data, privacy: Privacy, rng: np.random.Generator, noise: str = "continuous"
) -> tuple:
    """:func:`release`, also returning what it measured: ``(answers, measurement)``, the
    measurement a :class:`~mmtoolkit.measurement.Measurement` of form ``"strategy"`` (``y``
    of the measured matrix — the workload itself for ``inference="none"`` — and each row's
    noise standard deviation, lazy on the Dask route), or None for a kind with a mechanism
    of its own (ResidualPlanner). The caller checks the workload for NaN entries
    (:func:`check_finite`) once, before any noise is drawn."""
    plan = NoisePlan(strategy, privacy, noise, workload=W, data=data,
                           fits=not dask_release.is_dask_array(data))  # fmt: skip
    return release_planned(plan, data, rng)


def release_planned(plan: NoisePlan, data, rng: np.random.Generator,
                    keep_y: bool = True) -> tuple:  # fmt: skip
    """:func:`release_measured` by a :class:`~mmtoolkit.plan.NoisePlan`
    with a workload (its checks made when it was built); ``keep_y=False``: no measurement is
    returned, so ``x̂`` may be built in ``y``'s memory and the workload answered in ``x̂``'s
    (:meth:`Matrix.apply_overwrite`) — one N-sized array for the whole release beyond the
    data."""
    check_rng(rng)
    W, A = plan.W, plan.A
    if W is None:
        raise ValueError("release_planned needs a plan with a workload")
    lazy = dask_release.is_dask_array(data)  # a lazy dask array of answers
    if not (lazy or isinstance(data, Records)):
        data = data_vector(data, W.shape[1])
    if lazy and plan.none:
        y = dask_release.measure_planned(plan, data, rng, None)
        return y, plan.measurement(y, dask_release.noise_std(plan))
    if lazy:
        out, y = dask_release.release_planned(plan, data, rng)
        return out, (plan.measurement(y, dask_release.noise_std(plan)) if keep_y else None)
    if plan.none:
        y = plan.measure(data, rng)
        return y, plan.measurement(y)
    own = plan.own_answers(data, rng)
    if own is not None:
        return own, None
    y = plan.measure(data, rng)
    out = handler(A).workload_answers(A, W, y)
    if out is None and keep_y:
        out = answer(W, reconstruct(A, y))
    elif out is None:
        xhat = reconstruct(A, y, overwrite=True)
        y = None
        out = W.apply_overwrite(xhat)
    return out, (plan.measurement(y) if keep_y else None)


def release(
    W, strategy, data, privacy: Privacy, rng: np.random.Generator, noise: str = "continuous"
) -> np.ndarray:
    """Noisy answers to the workload ``W`` (a numpy array in ``W``'s row order).

    ``data``: Records or a 1-D data vector (finite, non-negative counts; float32 opts into
    the float32 path), or a ``dask.array`` (a lazy result equal to the in-memory release).
    The route (``inference="none"``, the kind's own mechanism, :func:`answer_marginals`, or
    measure → reconstruct → answer in the measurements' memory) is the kind's release
    handler's; a release that would not fit in memory is refused before any noise is drawn
    (docs/guide/at-scale.md). :func:`release_measured` also returns the measurements.
    """
    W = as_matrix(W)
    check_finite(W)
    plan = NoisePlan(strategy, privacy, noise, workload=W, data=data, keep=False,
                           fits=not dask_release.is_dask_array(data))  # fmt: skip
    return release_planned(plan, data, rng, keep_y=False)[0]


def standard_errors(W, strategy, privacy: Privacy) -> np.ndarray:
    """Analytic standard error of every answer of :func:`release` (continuous noise): the
    square root of the shared evaluator's per-query variance. Discrete noise has at most
    this variance (up to the ~1e-6 relative rounding of its parameters)."""
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

    ``mean_total``: mean over releases of ``Σ_i (ŷ_i − W_i x)²``; ``ci``: its two-sided
    interval ``mean ± z_{(1+level)/2} · sd/√R`` (normal approximation of the mean of R
    i.i.d. totals); ``expected``: the evaluator's ``expected_error`` (discrete noise: scaled
    by the exact discrete/continuous variance ratio, which must be the same for every row);
    ``query_var`` / ``expected_var``: per-query empirical and analytic variances.
    """

    releases: int
    mean_total: float
    sd_total: float
    ci: tuple[float, float]
    level: float
    expected: float
    query_var: np.ndarray
    expected_var: np.ndarray

    @classmethod
    def from_totals(cls, totals, level, expected, query_var, expected_var) -> MonteCarloResult:
        """The result for the releases' total squared errors ``totals`` (one per release)."""
        totals = np.asarray(totals, dtype=float)
        mean, sd = float(totals.mean()), float(totals.std(ddof=1))
        half = NormalDist().inv_cdf((1 + level) / 2) * sd / math.sqrt(totals.size)
        return cls(int(totals.size), mean, sd, (mean - half, mean + half), level, float(expected),
                   np.asarray(query_var, dtype=float), np.asarray(expected_var, dtype=float))

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
    the kind's ``workload_answers`` as in :func:`release`, else reconstruct → answer;
    vectorised in batches of noise columns) and compare the empirical
    total squared error and per-query variances with the shared evaluator (see
    :class:`MonteCarloResult`)."""
    W = as_matrix(W)
    plan = NoisePlan(strategy, privacy, noise, workload=W, fits=False)
    check_rng(rng)
    R = _check_releases(releases)
    if R < 2:
        raise ValueError("monte_carlo needs at least 2 releases")
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    truth = true_answers(W, x)
    expected = evaluate.expected_error(W, strategy, privacy)
    expected_var = evaluate.per_query_variance(W, strategy, privacy)
    if noise == "discrete":
        ratio = plan.calibration.variances / plan.variance
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
    for err in release_errors(plan, x, truth, R, rng, batch):
        k = err.shape[1]
        totals[done : done + k] = np.sum(err * err, axis=0)
        sq += np.sum(err * err, axis=1)
        done += k
    return MonteCarloResult.from_totals(totals, level, expected, sq / R, expected_var)


def release_errors(plan: NoisePlan, x, truth, releases: int, rng, batch: int = 500):
    """The errors ``ŷ − truth`` of ``releases`` releases of ``plan`` (a NoisePlan with a
    workload) on the fixed data ``x``, as ``m x k`` arrays of ``k ≤ batch`` releases each
    (measure → the kind's ``workload_answers``, else reconstruct → answer; a kind with a
    mechanism of its own releases its strategy's rows and answers from them)."""
    W, A, none = plan.W, plan.A, plan.none
    if W is None:
        raise ValueError("release_errors needs a plan with a workload")
    done = 0
    while done < releases:
        k = min(batch, releases - done)
        Y = plan.measure(x, rng, releases=k)
        ans = Y if none else handler(A).workload_answers(A, W, Y)
        if ans is None:
            ans = answer(W, reconstruct(A, Y))
        yield ans - truth[:, None]
        done += k
