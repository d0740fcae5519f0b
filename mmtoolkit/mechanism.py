"""Measure, reconstruct, answer: the matrix mechanism at scale (HDMM §7.2, Table 1b; App. A.5).

* :func:`measure` — ``y = A x + z``, ``z`` i.i.d. noise calibrated to ``sens_p(A)`` by the
  privacy definition (Laplace for PureDP, Gaussian for ApproxDP/ZCDP); ``A x`` is an implicit
  product (Kronecker mat-vec, marginal sums), never a dense ``A``. ``noise="discrete"``
  draws exact integer noise instead (discrete Laplace for PureDP, discrete Gaussian for zCDP;
  Canonne, Kamath & Steinke 2020, :mod:`mmtoolkit.noise`), see :func:`discrete_calibration`
  (:mod:`mmtoolkit.discrete`).
  ``releases=R`` draws R independent releases at once (an ``m x R`` array).
* :func:`reconstruct` — ``x̂ = A⁺ y`` (least squares, minimum norm) by the strategy kind's own
  ``pinv_operator()`` when its structure gives ``A⁺`` exactly (identity, Kronecker products
  factor-wise — HDMM §7.2 —, p-Identity, weighted marginals, invertible trees, Haar and
  Privelet's padded Haar, Fourier, ResidualPlanner, OPT_+'s union of two Kronecker products);
  anything else by a dense pseudo-inverse when small, else by the kind's own iterative solver
  (``least_squares``: OPT_+ unions of more products) or LSMR on the implicit operator.
* :func:`answer` — ``W x̂``. :func:`answer_marginals` — ``W A⁺ y`` for a marginals workload
  and a weighted-marginals strategy straight from the noisy marginal tables, in the
  ``2^d`` spectral algebra (no ``N``-cell vector; what makes HDMM's OPT_M usable on Adult).
* :func:`release` — records or a data vector → noisy workload answers. The mechanism knows no
  strategy kind: it asks the kind's release handler (:mod:`mmtoolkit.release_handlers`) —
  ``release_answers`` for a kind with a mechanism of its own (ResidualPlanner),
  ``answer_records`` to measure (marginal tables for marginals strategies),
  ``workload_answers`` to answer without ``x̂`` (marginals) or by the kind's own answering
  rule (HDMM's separate union: each product from one block), else ``x̂`` and ``W x̂``.
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
from statistics import NormalDist

import numpy as np
from scipy.sparse.linalg import lsmr

from . import dask_release, evaluate
from .checks import check_int
from .discrete import (
    DiscreteCalibration,
    check_discrete,
    discrete_calibration,
    integer_answers,
)
from .domain import MAX_VECTOR_SIZE
from .linalg import Matrix, TooLargeError, as_matrix
from .linalg.base import SMALL_DENSE_ENTRIES, check_fits_memory
from .measurement import Measurement, add_noise, integer_noise_stream, noise_stream
from .privacy import Privacy, PureDP, check_privacy
from .records import Records
from .release_handlers import handler
from .strategy import Strategy

__all__ = [
    "NOISES",
    "measure",
    "reconstruct",
    "answer",
    "answer_marginals",
    "release",
    "release_measured",
    "check_release_fits",
    "data_vector",
    "check_finite",
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


def _check_args(privacy, noise, rng) -> None:
    """The arguments every noisy step takes: a privacy definition, a noise kind, a Generator."""
    check_privacy(privacy)
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            "rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )


def _check_releases(releases):
    return None if releases is None else check_int(releases, "releases", minimum=1)


def data_vector(data, cells: int) -> np.ndarray:
    """``data`` as a checked data vector of ``cells`` counts: one dimension (a histogram, not
    a table of records — a DataFrame or 2-D array is refused even when its size happens to
    equal ``cells``), finite and non-negative."""
    if dask_release.is_dask_array(data):
        raise ValueError(
            "a dask array is released by mechanism.release / measure / reconstruct (the Dask "
            "route, mmtoolkit.dask_release), not read into memory"
        )
    if hasattr(data, "columns") or (hasattr(data, "ndim") and np.ndim(data) > 1):
        raise ValueError(
            f"data must be Records or a 1-D data vector (histogram) of {cells} counts, got a "
            f"{type(data).__name__} of shape {np.shape(data)}; read records with "
            "records.from_frame / records.from_codes / records.read_csv"
        )
    if isinstance(data, np.ndarray) and data.dtype == np.float32:
        x = data.ravel()  # the opt-in float32 data path (measure)
    else:
        x = np.asarray(data, dtype=float).ravel()
    if x.size != cells:
        raise ValueError(f"data vector has {x.size} cells but the strategy is defined on {cells}")
    if x.size and np.isfinite(x.max()) and x.min() >= 0:  # NaN propagates through max
        return x  # (two reading passes, no N-sized temporary)
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"data vector: cell {i} is {x[i]}; counts must be finite numbers")
    if (x < 0).any():
        i = int(np.argmax(x < 0))
        raise ValueError(f"data vector: cell {i} has a negative count {x[i]:g}")
    return x


def _true_answers(A: Matrix, data) -> np.ndarray:
    """``A x`` from a data vector, or from records (the kind's ``answer_records``: marginal
    tables for marginals strategies, else the histogram, refused for a large domain)."""
    if isinstance(data, Records):
        return handler(A).answer_records(A, data)
    return A @ data_vector(data, A.shape[1])


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
def _add_noise(
    Ax: np.ndarray, R: int | None, privacy: Privacy, rng, sens: float, x, stream=None
):  # fmt: skip
    """``A x + z`` (``m`` or ``m x R``), the noise added in place by
    :func:`~mmtoolkit.measurement.add_noise` (in cache-sized blocks, the same values as one
    draw of every row) — or by ``stream``, a :class:`~mmtoolkit.measurement.NoiseStream` of
    those values already begun (one release);
    one release is added into ``Ax`` itself when it is a fresh array of its own (not the
    data)."""
    if R is None:
        own = Ax.dtype in (np.float64, np.float32) and Ax.flags.writeable
        own = own and Ax.flags.c_contiguous
        if own and isinstance(x, np.ndarray) and np.may_share_memory(Ax, x):
            own = False
        out = Ax if own else np.array(Ax, dtype=float)
    else:
        out = np.empty((Ax.shape[0], R), dtype=Ax.dtype if Ax.dtype == np.float32 else float)
        out[...] = Ax[:, None]
    if stream is None:
        add_noise(privacy, out, rng, sens)
    else:
        stream.add(out.reshape(-1))
    return out


def measure(
    strategy, x, privacy: Privacy, rng: np.random.Generator, noise: str = "continuous",
    releases: int | None = None,
) -> np.ndarray:  # fmt: skip
    """Noisy strategy answers ``A x + z`` (HDMM Table 1b: Multiply + noise addition; Thm 7).

    ``x``: the data vector, or :class:`~mmtoolkit.records.Records` (marginals strategies are
    then answered from marginal tables, others from the histogram). ``noise="continuous"``:
    ``z`` i.i.d. with scale ``privacy.noise_scale(sens_p(A))``; ``"discrete"``: exact integer
    noise (:func:`discrete_calibration`; integer data and counting-query rows needed).
    ``releases=R`` returns an ``m x R`` array of independent releases. Continuous noise is
    added in place by :func:`~mmtoolkit.measurement.add_noise`, drawn in cache-sized
    blocks (the same values as one draw of all rows, so no extra ``m``-sized arrays; issue
    17) — for one release of a kind with ``answers_streamed`` (a Kronecker product with a
    p-Identity first factor, a stack of blocks such as OPT_+'s) to each piece of ``A x`` as
    soon as it is computed, while it is in cache
    (:func:`~mmtoolkit.measurement.noise_stream`, the same values), the noise drawn ahead
    on a second thread when :func:`~mmtoolkit.threads.worker_threads` allows (the same
    values again, so the release does not depend on the number of threads).
    Discrete noise is one :func:`~mmtoolkit.measurement.integer_noise_stream` over the rows,
    in blocks likewise. A ``dask.array`` ``x`` gives a lazy dask array
    (:mod:`mmtoolkit.dask_release`): the same noise for the same generator state, both
    kinds, any ``releases``.

    float32 data path (opt-in): a float32 data vector ``x`` gives float32 ``y`` and
    :func:`reconstruct` then a float32 ``x̂`` — half the memory. The kinds' products keep
    float32 arithmetic as well as storage (``Prefix``, ``Total``, ``Identity`` and p-Identity
    factors compute in the input's dtype), and :func:`release` answers the workload from the
    float32 ``x̂`` on that path. Measured (Kronecker of three p-Identity factors, 10^6 cells,
    counts below 5 or below 1000, PureDP ε = 1 and zCDP ρ = 1/2, same seed): the RMSE of ``x̂``
    changes by less than 2e-8 relative, and ``x̂`` differs from the float64 one by at most 7e-4
    of the noise RMSE (counts below 1000 under zCDP; 2e-6 to 1.2e-4 in the other three
    cases). Long sums lose more: ``Prefix(4096) ⊗ Prefix(64)`` applied to
    float32 data differs from float64 by 2.6e-6 relative (22 float32 ulps), which is below the
    noise only while the answers' noise standard deviation exceeds about 3e-6 of their size;
    counts (and answers meant to be exact) must stay below 2^24. Use float64 when a workload
    sums millions of cells of large counts.
    """
    _check_args(privacy, noise, rng)
    R = _check_releases(releases)
    A = as_matrix(strategy.matrix if isinstance(strategy, Strategy) else strategy)
    if dask_release.is_dask_array(x):  # past one machine
        return dask_release.measure(A, x, privacy, rng, noise, R)
    if noise == "continuous":
        sens = A.sensitivity(privacy.norm)
        if R is None and not isinstance(x, Records):  # the noise added piece by piece
            x = data_vector(x, A.shape[1])
            stream = noise_stream(privacy, rng, A.shape[0], sens, prefetch=True)
            stream.start()  # the draw runs beside the product from here
            try:
                y = A.answers_streamed(x, stream.add)
                if y is None:  # not streamed: the same stream added to A x
                    return _add_noise(A @ x, R, privacy, rng, sens, x, stream)
            finally:
                stream.close()
            if stream.left:  # every answer must have received its noise
                raise RuntimeError(
                    f"{type(A).__name__}.answers_streamed left {stream.left} answers "
                    "without noise"
                )
            return y
        return _add_noise(_true_answers(A, x), R, privacy, rng, sens, x)
    Ax = _true_answers(A, x)
    cal = discrete_calibration(A, privacy)
    noisy = integer_answers(Ax, cal.scales)
    if R is not None:
        noisy = np.repeat(noisy[:, None], R, axis=1)
    row_param = cal.row_param
    stream = integer_noise_stream(cal.kind, cal.params, rng, A.shape[0], R or 1,
                                  lambda lo, hi: row_param[lo:hi])  # fmt: skip
    stream.add(noisy.reshape(-1))
    # exact integers above; the scaling back to A's rows is post-processing
    return noisy * (cal.scales if R is None else cal.scales[:, None])


# ============================================================================ reconstruct
def reconstruct(
    strategy, y, tol: float = LSMR_TOL, maxiter: int = LSMR_MAXITER, overwrite: bool = False
) -> np.ndarray:
    """``x̂ = A⁺ y`` by structure (see the module docstring), a dense pseudo-inverse for a small
    strategy and several releases, the kind's own iterative solver (``least_squares``: a
    union of three or more Kronecker products) or LSMR otherwise (HDMM §7.2). ``y``: one
    release (vector) or several (``m x R``, one column per release). ``tol``: the iterative
    solvers' relative tolerance — the kind's conjugate gradients stop when
    ``‖AᵀAx̂ − Aᵀy‖ ≤ tol ‖Aᵀy‖`` (whatever their preconditioner; plain CG on its updated
    residual) and warn when ``maxiter`` stops them first; LSMR takes it as its ``atol`` and
    ``btol`` (its own stopping rules, not that residual); ``maxiter`` caps the iterations.

    ``overwrite=True`` (one release): the caller gives ``y`` up, and a kind that can builds
    ``x̂`` in ``y``'s memory (``A⁺.apply_overwrite``; a Kronecker product does, so x̂ costs no
    new N-vector — what lets a 10^9-cell release fit in memory); ``y`` is then
    garbage. A float32 ``y`` (see :func:`measure`) gives a float32 ``x̂`` on that path."""
    A = _matrix(strategy)
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
    A = _matrix(strategy)
    out = handler(A).workload_answers(A, as_matrix(W), y)
    if out is None:
        raise ValueError("answer_marginals needs a marginals workload and a marginals strategy")
    return out


# ============================================================================ release
def distribution(privacy: Privacy, noise: str) -> str:
    """The name of the noise ``privacy`` and ``noise`` draw: ``"laplace"``, ``"gaussian"``,
    ``"discrete laplace"`` or ``"discrete gaussian"``."""
    kind = "laplace" if isinstance(privacy, PureDP) else "gaussian"
    return ("discrete " if noise == "discrete" else "") + kind


def _noise_std(A: Matrix, privacy: Privacy, noise: str, lazy: bool = False):
    """Each row's noise standard deviation (a lazy dask array for discrete noise on the Dask
    route: no array over all rows on the client)."""
    if noise == "discrete" and lazy:
        return dask_release.discrete_noise_std(A, privacy)
    if noise == "discrete":
        return np.sqrt(discrete_calibration(A, privacy).variances)
    std = math.sqrt(privacy.noise_variance(A.sensitivity(privacy.norm)))
    # one value broadcast (read-only), not an m-vector
    return np.broadcast_to(np.float64(std), (A.shape[0],))


def check_release_fits(
    W, strategy, keep_measurements: bool = True, releases: int = 1, data=None,
    privacy: Privacy | None = None, noise: str = "continuous",
) -> None:  # fmt: skip
    """Refuse a release whose arrays would not fit in this machine's memory with the size
    message (:class:`~mmtoolkit.linalg.TooLargeError`) instead of a MemoryError:
    the answers (``m``) and measurements (strategy rows), held together at least while the
    answers are formed, and the N-cell estimate ``x̂`` when the kind answers the workload
    through it (``needs_estimate``) — beside the measurements when they are kept
    (:func:`release_measured`), else at least in their place (:func:`release`). A lower
    bound on what the release holds; ``releases=R`` kept releases (``mmtoolkit.release``
    keeps each one's answers and measurements) hold ``R`` of each, ``x̂`` one at a time.
    ``data``: :class:`~mmtoolkit.records.Records` measured through their N-cell histogram
    (``reads_histogram``) also count it beside the measurements, and a histogram over
    :data:`~mmtoolkit.domain.MAX_VECTOR_SIZE` cells is refused here rather than after the
    charge. ``noise="discrete"`` (with ``privacy``): a strategy whose exact integer noise
    cannot be calibrated is refused here too (:func:`~mmtoolkit.discrete.check_discrete`: a
    kind whose rows are not integer up to a scale raises
    :class:`~mmtoolkit.linalg.NotSupportedByKindError`). :func:`release` asks it before any
    noise is drawn, and ``mmtoolkit.release`` before it charges a ledger."""
    W = as_matrix(W)
    m = int(W.shape[0])
    if isinstance(strategy, Strategy) and strategy.inference == "none":
        A, rows, cells = W, m, 0
    else:
        A = _matrix(strategy)
        rows = int(A.shape[0])
        cells = int(W.shape[1]) if handler(A).needs_estimate(A, W) else 0
    hist = int(W.shape[1]) if isinstance(data, Records) and handler(A).reads_histogram(A) else 0
    if keep_measurements:  # the histogram while measuring, x̂ while answering
        held = releases * (m + rows) + max(cells, hist)
    else:
        held = releases * m + max(rows + hist, cells)
    what = f"the workload has {m:.4g} queries and the strategy {rows:.4g} rows"
    if releases > 1:
        what += f", {releases} releases kept"
    if cells:
        what += (
            f", answered through the estimate x̂ of all {cells:.4g} cells: x̂, answers and "
            "measurements together"
        )
        advice = (
            "choose a strategy that answers this workload without x̂ (ResidualPlanner; a "
            "marginals strategy for a marginals workload), fewer cells (coarser bins, fewer "
            "attributes), or answer part of the workload"
        )
    else:
        what += ": answers and measurements together"
        advice = (
            "release a workload with fewer queries answered from the same strategy (e.g. the "
            "data vector estimate, workload identity, from which any query is "
            "post-processing) or part of it"
        )
    check_fits_memory(8 * held, what, advice)
    if hist > MAX_VECTOR_SIZE:
        raise TooLargeError(
            f"measuring these records through {type(A).__name__} forms their histogram of "
            f"{hist:.4g} cells (> {MAX_VECTOR_SIZE:.0e}); choose a strategy that reads marginal "
            "tables (a marginals strategy, ResidualPlanner) or fewer cells"
        )
    if noise == "discrete":
        check_discrete(A, privacy)


def release_measured(
    W, strategy, data, privacy: Privacy, rng: np.random.Generator, noise: str = "continuous"
) -> tuple:
    """:func:`release`, also returning what it measured: ``(answers, measurement)``, the
    measurement a :class:`~mmtoolkit.measurement.Measurement` of form ``"strategy"`` — the
    noisy ``y = A x + z`` of the measured matrix ``A`` (the workload itself for
    ``inference="none"``) with each row's noise standard deviation (a lazy dask array for
    discrete noise on the Dask route) — or None when the strategy kind runs a mechanism of
    its own (ResidualPlanner), whose noisy measurements are not rows of ``A``. Lazy dask
    arrays of answers and measurements for a dask array ``data``. The caller checks the
    workload for NaN entries (:func:`check_finite`) once, before any noise is drawn —
    :func:`release` and ``releasing.workload_matrix`` do."""
    return _release(W, strategy, data, privacy, rng, noise, keep_y=True)


def _release(W, strategy, data, privacy, rng, noise, keep_y: bool) -> tuple:
    """:func:`release_measured`; ``keep_y=False``: no measurement is returned, so ``x̂`` may
    be built in ``y``'s memory and the workload answered in ``x̂``'s
    (:meth:`Matrix.apply_overwrite`) — one N-sized array for the whole release beyond the
    data."""
    _check_args(privacy, noise, rng)
    W = as_matrix(W)
    none = isinstance(strategy, Strategy) and strategy.inference == "none"
    lazy = dask_release.is_dask_array(data)  # a lazy dask array of answers
    if not lazy:
        check_release_fits(W, strategy, keep_y, data=data, privacy=privacy, noise=noise)
    if not (lazy or isinstance(data, Records)):
        data = data_vector(data, W.shape[1])
    if none:
        std = _noise_std(W, privacy, noise, lazy)  # refusals before any noise is drawn
        y = measure(W, data, privacy, rng, noise)
        return y, _strategy_measurement(W, y, std, privacy, noise)
    A = _matrix(strategy)
    if A.shape[1] != W.shape[1]:
        raise ValueError(
            f"the workload is defined on {W.shape[1]} cells, the strategy on {A.shape[1]}"
        )
    if lazy:
        std = _noise_std(A, privacy, noise, lazy) if keep_y else None  # before any noise
        out, y = dask_release.release(W, A, data, privacy, rng, noise, measurements=True)
        return out, (_strategy_measurement(A, y, std, privacy, noise) if keep_y else None)
    own = handler(A).release_answers(A, W, data, privacy, rng, noise)
    if own is not None:
        return own, None
    y = measure(A, data, privacy, rng, noise)
    out = handler(A).workload_answers(A, W, y)
    if out is None and keep_y:
        out = answer(W, reconstruct(A, y))
    elif out is None:
        xhat = reconstruct(A, y, overwrite=True)
        y = None
        out = W.apply_overwrite(xhat)
    if not keep_y:
        return out, None
    return out, _strategy_measurement(A, y, _noise_std(A, privacy, noise), privacy, noise)


def _strategy_measurement(A: Matrix, y, std, privacy: Privacy, noise: str) -> Measurement:
    return Measurement("strategy", None, y, std, distribution(privacy, noise), A)


def release(
    W, strategy, data, privacy: Privacy, rng: np.random.Generator, noise: str = "continuous"
) -> np.ndarray:
    """Noisy answers to the workload ``W`` (a numpy array in ``W``'s row order).

    ``data``: :class:`~mmtoolkit.records.Records` or a 1-D data vector (finite, non-negative
    counts; a float32 vector opts into the float32 data path, see :func:`measure`); a
    ``dask.array`` (vector or tensor) gives a lazy dask array of answers through
    :mod:`mmtoolkit.dask_release` (as ``measure``, ``reconstruct`` and ``answer`` do), equal
    to the in-memory release for the same seed, either noise (Kronecker and marginals
    strategies; others are refused with the reason). Routes: a
    strategy with ``inference="none"`` releases ``W x + z``; a ResidualPlanner strategy
    measures and reconstructs from marginal tables (He et al. Alg. 1/2, discrete: Alg. 3); a
    marginals strategy with a marginals workload uses :func:`answer_marginals` (no ``x̂``);
    anything else :func:`measure` → :func:`reconstruct` → :func:`answer` on the data vector,
    with ``x̂`` built in the memory of the measurements and the answers in that of ``x̂`` where
    the kinds allow (a Kronecker strategy, the identity workload: a release of 10^9 cells
    holds the data and one array of the strategy's rows). A workload whose answers
    would not fit in memory — with the N-cell ``x̂`` when it is needed — is refused before any
    noise is drawn (:func:`check_release_fits`). :func:`release_measured`
    also returns the measurements; ``mmtoolkit.release`` (:mod:`mmtoolkit.releasing`)
    returns labelled tables.
    """
    W = as_matrix(W)
    check_finite(W)
    return _release(W, strategy, data, privacy, rng, noise, keep_y=False)[0]


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

    @classmethod
    def from_totals(cls, totals, level, expected, query_var, expected_var) -> MonteCarloResult:
        """The result for the releases' total squared errors ``totals`` (one per release)."""
        totals = np.asarray(totals, dtype=float)
        mean, sd = float(totals.mean()), float(totals.std(ddof=1))
        half = NormalDist().inv_cdf((1 + level) / 2) * sd / math.sqrt(totals.size)
        return cls(
            releases=int(totals.size),
            mean_total=mean,
            sd_total=sd,
            ci=(mean - half, mean + half),
            level=level,
            expected=float(expected),
            query_var=np.asarray(query_var, dtype=float),
            expected_var=np.asarray(expected_var, dtype=float),
        )

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
    _check_args(privacy, noise, rng)
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
        ans = Y if none else handler(A).workload_answers(A, W, Y)
        if ans is None:
            ans = answer(W, reconstruct(A, Y))
        err = ans - truth[:, None]
        totals[done : done + k] = np.sum(err * err, axis=0)
        sq += np.sum(err * err, axis=1)
        done += k
    return MonteCarloResult.from_totals(totals, level, expected, sq / R, expected_var)
