"""The noise plan: a strategy's noise bound once to a privacy definition.

:class:`NoisePlan` (a strategy, a privacy definition, a noise kind; the workload, data and
releases where they matter) is the one reader of the privacy definition on the release path
(as OpenDP's ``Measurement`` binds its privacy map once): it computes the sensitivity, scale
and exact integer calibration (:mod:`mmtoolkit.discrete`) once and lazily, refuses before any
noise or ledger charge a release that would not fit in memory or cannot be calibrated, picks
the route (a kind's own mechanism receives a :class:`Noise`, not the definition), gives the
ledger's charge and opens every noise stream of :mod:`mmtoolkit.measurement`.

User guide: docs/guide/at-scale.md (memory), docs/guide/privacy-and-noise.md (noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import sparse

from .checks import check_option
from .discrete import DiscreteCalibration, RowScales, calibrate, integer_answers
from .domain import MAX_VECTOR_SIZE
from .ledger import charge_of
from .linalg import Matrix, TooLargeError, as_matrix, peel
from .linalg.base import check_fits_memory
from .measurement import Measurement, NoiseStream, continuous_stream, integer_noise_stream
from .privacy import ZCDP, Privacy, PureDP, check_privacy
from .records import Records
from .release_handlers import ReleaseHandler, handler
from .strategy import Strategy

__all__ = ["NOISES", "Noise", "NoisePlan", "is_dask_array", "data_vector", "check_rng",
           "strategy_matrix", "true_answers"]

#: Noise kinds a plan draws.
NOISES = ("continuous", "discrete")


@dataclass(frozen=True)
class Noise:
    """The noise a kind's own mechanism reads (its handler's ``release_answers`` /
    ``marginal_measurements``): ``family`` (calibrated in the L``norm`` sensitivity), exact
    integer or not, scale (Laplace ``b``, Gaussian ``σ``) and variance at sensitivity 1, the
    zCDP ``rho`` of a ZCDP guarantee (else None), the definition's name (messages)."""

    family: str
    norm: int
    discrete: bool
    unit_scale: float
    unit_variance: float
    rho: float | None
    guarantee: str

    @classmethod
    def of(cls, privacy: Privacy, discrete: bool = False) -> Noise:
        """The noise of ``privacy`` (a checked privacy definition)."""
        rho = privacy.rho if isinstance(privacy, ZCDP) else None
        return cls(privacy.family, privacy.norm, discrete, privacy.noise_scale(1.0),
                   privacy.noise_variance(1.0), rho, type(privacy).__name__)  # fmt: skip

    @property
    def distribution(self) -> str:
        """``"laplace"``, ``"gaussian"``, ``"discrete laplace"`` or ``"discrete gaussian"``."""
        return ("discrete " if self.discrete else "") + self.family


def is_dask_array(x) -> bool:
    """Whether ``x`` is a dask array (checked without importing dask)."""
    return hasattr(x, "__dask_graph__") and hasattr(x, "chunks") and hasattr(x, "map_blocks")


def check_rng(rng) -> None:
    """Refuse anything but a numpy Generator as the noise generator."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            "rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )


def data_vector(data, cells: int) -> np.ndarray:
    """``data`` as a checked data vector of ``cells`` counts: one dimension (a histogram, not
    a table of records — a DataFrame or 2-D array is refused even when its size happens to
    equal ``cells``), finite and non-negative."""
    if is_dask_array(data):
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


def strategy_matrix(strategy) -> Matrix:
    """The matrix a strategy reconstructs from (a Strategy with least-squares inference, a
    Matrix or an array)."""
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


def true_answers(A: Matrix, data) -> np.ndarray:
    """``A x`` from a data vector, or from records (the kind's ``answer_records``: marginal
    tables for marginals strategies, else the histogram, refused for a large domain)."""
    if isinstance(data, Records):
        return handler(A).answer_records(A, data)
    return A @ data_vector(data, A.shape[1])


class ParamAt:
    """The noise parameter of rows ``lo .. hi - 1`` (``param_at(lo, hi)``): each one's scale's
    index among the sorted distinct scales."""

    def __init__(self, scales_of, distinct):
        self.scales_of, self.distinct = scales_of, distinct

    def __call__(self, lo: int, hi: int) -> np.ndarray:
        s = self.scales_of(lo, hi)
        k = np.minimum(np.searchsorted(self.distinct, s), len(self.distinct) - 1)
        if not np.array_equal(self.distinct[k], s):  # pragma: no cover - a bug, not an input
            raise RuntimeError("a row scale is missing from the distinct scales")
        return k


class NoisePlan:
    """How ``strategy`` is measured under ``privacy`` with ``noise`` (module docstring).

    ``workload``: the workload a release answers (measured itself for ``inference="none"``);
    given, the memory and fit are checked at once (:meth:`check_fits` with ``data``,
    ``releases`` and ``keep``), unless ``fits=False`` (the Dask route's lazy arrays).
    Without one the plan measures the strategy's matrix itself."""

    def __init__(self, strategy, privacy: Privacy, noise: str = "continuous", *,
                 workload=None, data=None, releases: int = 1, keep: bool = True,
                 fits: bool = True):  # fmt: skip
        check_privacy(privacy)
        check_option(noise, "noise", NOISES)
        self.privacy, self.noise = privacy, noise
        self.W = None if workload is None else as_matrix(workload)
        self.none = isinstance(strategy, Strategy) and strategy.inference == "none"
        if self.W is None:
            self.A = as_matrix(strategy.matrix if isinstance(strategy, Strategy) else strategy)
        else:
            self.A = self.W if self.none else strategy_matrix(strategy)
            if self.A.shape[1] != self.W.shape[1]:
                raise ValueError(f"the workload is defined on {self.W.shape[1]} cells, the "
                                 f"strategy on {self.A.shape[1]}")  # fmt: skip
        own = type(handler(peel(self.A)[1])).release_answers is not ReleaseHandler.release_answers
        self.route = "own" if own and not self.none else "generic"
        self.spec = Noise.of(privacy, noise == "discrete")
        if self.W is not None and fits:
            self.check_fits(data, releases, keep)
        if noise == "discrete":
            self._check_discrete()

    # ------------------------------------------------------------ the noise, computed once
    @cached_property
    def sensitivity(self) -> float:
        """``sens_p(A)`` in the privacy definition's norm."""
        return self.A.sensitivity(self.privacy.norm)

    @cached_property
    def scale(self) -> float:
        """The continuous noise scale of every row (Laplace ``b`` or Gaussian ``σ``)."""
        return self.privacy.noise_scale(self.sensitivity)

    @cached_property
    def variance(self) -> float:
        """The continuous noise variance of every row."""
        return self.privacy.noise_variance(self.sensitivity)

    @property
    def distribution(self) -> str:
        """The name of the noise drawn (:attr:`Noise.distribution`)."""
        return self.spec.distribution

    def _discrete_kind(self) -> tuple[str, float]:
        """``(kind, budget)`` of exact integer noise, refusing a definition without it."""
        if isinstance(self.privacy, PureDP):
            return "laplace", self.privacy.epsilon
        if isinstance(self.privacy, ZCDP):
            return "gaussian", self.privacy.rho
        raise ValueError(
            "discrete noise is available for PureDP (discrete Laplace) and ZCDP (discrete "
            f"Gaussian), not {type(self.privacy).__name__}; use noise='continuous'"
        )

    def _check_discrete(self) -> None:
        """Refuse discrete noise that cannot be calibrated (before any noise or charge): a
        definition without exact integer noise, a kind whose rows are not integer up to a
        scale (:class:`~mmtoolkit.linalg.NotSupportedByKindError`), a parameter that cannot
        be represented. Reads the scales factor-wise (no array over all rows). A kind with a
        discrete mechanism of its own (``discrete_summary``) checks its own."""
        self._discrete_kind()
        if handler(self.A).discrete_summary(self.A, self.spec) is None:
            self.row_scale_parts  # noqa: B018 - computed to refuse now

    @cached_property
    def row_scale_parts(self) -> tuple:
        """The row scales block by block (:class:`~mmtoolkit.discrete.RowScales`, no array
        over all rows), each row's noise parameter index block by block (:class:`ParamAt`),
        and the calibration of the sorted distinct scales (``kind, params, variances,
        spent``, :func:`~mmtoolkit.discrete.calibrate`)."""
        scales_of = RowScales(self.A)
        distinct = scales_of.distinct()
        kind, budget = self._discrete_kind()
        return (scales_of, ParamAt(scales_of, distinct)) + calibrate(distinct, kind, self.scale,
                                                                     budget)  # fmt: skip

    @cached_property
    def calibration(self) -> DiscreteCalibration:
        """The exact integer noise of every row, in arrays over the rows (in memory)."""
        scales_of, param_at, kind, params, var, spent = self.row_scale_parts
        rows = param_at(0, self.A.shape[0])
        return DiscreteCalibration(kind, scales_of(0, self.A.shape[0]), params, rows, var[rows],
                                   float(self._discrete_kind()[1]), spent)  # fmt: skip

    @cached_property
    def proxy_factor(self) -> float:
        """The largest ratio, over the rows, of the noise actually drawn to the continuous
        variance :attr:`variance` the evaluator's per-query variances assume (≥ 1):
        continuous noise 1; discrete Gaussian the subgaussian proxy ``σ̄²`` of ``N_Z(0, σ̄²)``
        (Canonne, Kamath & Steinke 2020), σ̄ rounded up from σ; discrete Laplace its exact
        variance (:mod:`mmtoolkit.intervals` bounds answers with these)."""
        if self.noise == "continuous":
            return 1.0
        own = handler(self.A).discrete_proxy_factor(self.A, self.spec)
        if own is not None:
            return float(own)
        _, _, kind, params, var, _ = self.row_scale_parts
        if kind == "gaussian":
            proxies = [d * d * float(sigma2) for d, sigma2 in params]
        else:
            proxies = list(var)  # uniq² · exact variance, in A's units
        return max(1.0, max(proxies) / self.variance)

    def coefficients(self):
        """How each workload answer's noise is made of the rows' noise draws: the ``m x rows``
        matrix ``C`` of the release's reconstruction (answers ``C y``; the kind's handler's
        ``noise_coefficients``, dense; a sparse identity for ``inference="none"``), or None
        for a kind with a mechanism of its own or a ``C`` too large to form
        (:func:`mmtoolkit.intervals.release_intervals` then bounds from the variances)."""
        if self.W is None:
            raise ValueError("the coefficients of the answers need a plan with a workload")
        if self.none:
            return sparse.identity(int(self.W.shape[0]), format="csr")
        if self.route == "own":
            return None
        return handler(self.A).noise_coefficients(self.A, self.W)

    def std(self):
        """Each row's noise standard deviation: one value broadcast over the rows
        (continuous), or the calibrated rows' (discrete, in memory)."""
        if self.noise == "discrete":
            return np.sqrt(self.calibration.variances)
        # one value broadcast (read-only), not an m-vector
        return np.broadcast_to(np.float64(math.sqrt(self.variance)), (self.A.shape[0],))

    def measurement(self, y, std=None) -> Measurement:
        """The noisy strategy answers ``y`` as a ``"strategy"`` :class:`Measurement`
        (``std`` default :meth:`std`)."""
        std = self.std() if std is None else std
        return Measurement("strategy", None, y, std, self.distribution, self.A)

    def charge(self, releases: int = 1) -> dict:
        """What ``releases`` releases of this plan charge a ledger
        (:func:`mmtoolkit.ledger.charge_of`)."""
        return charge_of(self.privacy, releases)

    # ------------------------------------------------------------ memory and fit
    def check_fits(self, data=None, releases: int = 1, keep: bool = True) -> None:
        """Refuse, with the size message (:class:`~mmtoolkit.linalg.TooLargeError`) instead of
        a MemoryError, a release whose arrays would not fit in memory: the answers, the
        measurements and the N-cell ``x̂`` when the kind answers through it (beside the
        measurements if ``keep``), ``R`` of each for ``releases=R`` (``x̂`` one at a time),
        and the histogram of ``data`` measured through it (over
        :data:`~mmtoolkit.domain.MAX_VECTOR_SIZE` cells refused). A lower bound on what the
        release holds (docs/guide/at-scale.md)."""
        W, A = self.W, self.A
        if W is None:
            raise ValueError("the memory of a release needs a plan with a workload")
        m, rows = int(W.shape[0]), int(A.shape[0])
        cells = 0 if self.none or not handler(A).needs_estimate(A, W) else int(W.shape[1])
        hist = int(W.shape[1]) if isinstance(data, Records) and handler(A).reads_histogram(A) else 0
        if keep:  # the histogram while measuring, x̂ while answering
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
                "release a workload with fewer queries answered from the same strategy (e.g. "
                "the data vector estimate, workload identity, from which any query is "
                "post-processing) or part of it"
            )
        check_fits_memory(8 * held, what, advice)
        if hist > MAX_VECTOR_SIZE:
            raise TooLargeError(
                f"measuring these records through {type(A).__name__} forms their histogram of "
                f"{hist:.4g} cells (> {MAX_VECTOR_SIZE:.0e}); choose a strategy that reads "
                "marginal tables (a marginals strategy, ResidualPlanner) or fewer cells"
            )

    # ------------------------------------------------------------ drawing the noise
    def noise_stream(self, rng: np.random.Generator, size: int,
                     prefetch: bool = False) -> NoiseStream:  # fmt: skip
        """The continuous noise of ``size`` values of this plan's scale
        (:class:`~mmtoolkit.measurement.NoiseStream`)."""
        return continuous_stream(self.privacy.family, self.scale, rng, size, prefetch)

    def own_answers(self, data, rng):
        """The workload answers of a kind with a mechanism of its own (its handler's
        ``release_answers``, given the plan's :class:`Noise`), or None for the generic route."""
        return handler(self.A).release_answers(self.A, self.W, data, self.spec, rng)

    def measure(self, x, rng: np.random.Generator, releases: int | None = None) -> np.ndarray:
        """Noisy strategy answers ``A x + z`` in memory (``m``, or ``m x R`` for
        ``releases=R``): see :func:`mmtoolkit.mechanism.measure`."""
        check_rng(rng)
        A, R = self.A, releases
        if self.noise == "continuous":
            if R is None and not isinstance(x, Records):  # the noise added piece by piece
                x = data_vector(x, A.shape[1])
                stream = self.noise_stream(rng, A.shape[0], prefetch=True)
                stream.start()  # the draw runs beside the product from here
                try:
                    y = A.answers_streamed(x, stream.add)
                    if y is None:  # not streamed: the same stream added to A x
                        return _add_noise(A @ x, R, x, stream)
                finally:
                    stream.close()
                if stream.left:  # every answer must have received its noise
                    raise RuntimeError(f"{type(A).__name__}.answers_streamed left "
                                       f"{stream.left} answers without noise")  # fmt: skip
                return y
            Ax = true_answers(A, x)
            return _add_noise(Ax, R, x, self.noise_stream(rng, Ax.shape[0] * (R or 1)))
        Ax = true_answers(A, x)
        scales_of, param_at, kind, params, _, _ = self.row_scale_parts
        integers = integer_noise_stream(kind, params, rng, A.shape[0], R or 1, param_at)
        return _add_integer_noise(Ax, R, x, scales_of, integers)


#: Rows whose exact integer answers are formed, noised and scaled back at once (cache-sized).
INTEGER_CHUNK = 1 << 16


def _own_answers(Ax: np.ndarray, x, dtypes) -> bool:
    """Whether ``Ax`` may be overwritten by the release: a fresh writeable C-contiguous array
    of one of ``dtypes``, not sharing memory with the data ``x``."""
    own = Ax.dtype in dtypes and Ax.flags.writeable and Ax.flags.c_contiguous
    return own and not (isinstance(x, np.ndarray) and np.may_share_memory(Ax, x))


def _add_integer_noise(Ax: np.ndarray, R: int | None, x, scales_of, stream):
    """``d (B x + z)`` (``m`` or ``m x R``) for ``A x = d B x`` (``scales_of(lo, hi)``: the row
    scales ``d``, :class:`~mmtoolkit.discrete.RowScales`), :data:`INTEGER_CHUNK` rows at a
    time: the exact integer answers ``B x`` (:func:`~mmtoolkit.discrete.integer_answers`),
    the stream's integer noise added to them, the sum scaled back (post-processing) — into
    ``Ax`` itself for one release when it is a float64 array of its own, so no ``m``-sized
    integer array or temporary is made. The stream gives the same values whatever the
    chunks."""
    m = Ax.shape[0]
    if R is None:
        out = Ax if _own_answers(Ax, x, (np.float64,)) else np.empty(m)
    else:
        out = np.empty((m, R))
    try:
        for lo in range(0, m, INTEGER_CHUNK):
            hi = min(m, lo + INTEGER_CHUNK)
            d = scales_of(lo, hi)
            z = integer_answers(Ax[lo:hi], d)
            if R is not None:
                z, d = np.repeat(z[:, None], R, axis=1), d[:, None]
            stream.add(z.reshape(-1))
            np.multiply(z, d, out=out[lo:hi])
    finally:
        stream.close()  # the threads drawing blocks ahead end, even on a failure
    return out


def _add_noise(Ax: np.ndarray, R: int | None, x, stream: NoiseStream):
    """``A x + z`` (``m`` or ``m x R``), the noise added in place by ``stream`` (drawn in
    cache-sized blocks: the same values as one draw of every row, no ``m``-sized noise
    array); one release is added into ``Ax`` itself when it is a fresh array of its own (not
    the data)."""
    if R is None:
        own = _own_answers(Ax, x, (np.float64, np.float32))
        out = Ax if own else np.array(Ax, dtype=float)
    else:
        out = np.empty((Ax.shape[0], R), dtype=Ax.dtype if Ax.dtype == np.float32 else float)
        out[...] = Ax[:, None]
    stream.add(out.reshape(-1))
    return out
