"""Consistent non-negative marginals and synthetic records by Private-PGM (optional extra).

Private-PGM (McKenna, Sheldon & Miklau, ICML 2019, §3-4) fits a distribution whose
marginals minimise the noise-weighted squared loss of a marginal-type strategy's noisy
measurements, so every answer is non-negative and all marginals agree. :func:`measure`
measures records for it, :func:`estimate` fits a graphical model (exact, junction tree) or a
mixture of products (Aydore et al. 2021, Liu et al. 2021), and :class:`PGMResult` answers
marginals and samples synthetic records. Calls the ``mbi`` package (``pip install
'mmtoolkit[pgm]'``); without it, :func:`estimate` raises an ImportError saying so.

User guide: docs/guide/pgm.md.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .checks import check_int, check_option, check_positive
from .domain import Domain
from .linalg import as_matrix
from .linalg.marginals import marginal_key
from .measurement import Measurement, marginal_layout, marginal_measurements
from .plan import NoisePlan
from .records import Records
from .release_handlers import handler

__all__ = ["MISSING_EXTRA", "MAX_MODEL_MB", "MODELS", "PGMResult", "estimate", "measure"]

#: The message when the optional extra is not installed.
MISSING_EXTRA = "Private-PGM post-processing needs the optional extra: pip install 'mmtoolkit[pgm]'"
#: Largest junction tree (in megabytes of float64 parameters) ``model="auto"`` fits exactly.
MAX_MODEL_MB = 256.0
#: The models :func:`estimate` fits.
MODELS = ("auto", "graphical", "mixture")
#: :func:`estimate`'s default step limits: the graphical model's mirror descent runs until
#: :data:`TOL` stops it (the limit only bounds a fit that never settles); the mixture's Adam
#: runs its fixed number of steps.
MAX_ITERS = {"graphical": 20000, "mixture": 1000}
#: Relative loss improvement per 50 mirror-descent steps below which the fit has converged.
TOL = 1e-6


def jax_running() -> bool:
    """Whether JAX has started its backend in this process (a fit ran here). A forked
    child of such a process deadlocks in its first JAX call: JAX is multithreaded and its
    runtime's locks are copied held.

    Returns
    -------
    bool
        False when JAX was never imported or has not started a backend.
    """
    if "jax" not in sys.modules:
        return False
    from jax._src import xla_bridge  # no public API says whether the backends have started

    return bool(xla_bridge.backends_are_initialized())


def _mbi():
    """The ``mbi`` package, with JAX in float64 (the fit of ~10^5 records stalls in float32,
    as mbi itself warns); an ImportError naming the extra when it is missing."""
    try:
        import jax
    except ImportError:
        raise ImportError(MISSING_EXTRA) from None
    jax.config.update("jax_enable_x64", True)
    if not jax.config.jax_compilation_cache_dir:
        # without a cache directory the persistent cache is off anyway; saying so keeps mbi
        # from warning (on every import, e.g. once per comparison job) that it is on
        jax.config.update("jax_enable_compilation_cache", False)
    try:
        import mbi
        import mbi.extensions.mixture_of_products as mixture
    except ImportError:
        raise ImportError(MISSING_EXTRA) from None
    return mbi, mixture


def measure(strategy, data, privacy, rng) -> list[Measurement]:
    """The noisy measurements of a marginal-type strategy (a ``Strategy`` or ``Matrix``) on
    ``data`` (records or a data vector), with continuous noise calibrated to ``privacy``: by
    the kind's own ``marginal_measurements`` (ResidualPlanner), else measured as a release
    measures it with the blocks' weights divided out; any other strategy is refused before
    any noise is drawn."""
    plan = NoisePlan(getattr(strategy, "matrix", strategy), privacy)
    A = plan.A
    own = handler(A).marginal_measurements(A, data, plan.spec, rng)
    if own is not None:
        return own
    sizes = data.domain.sizes if isinstance(data, Records) else None
    if marginal_layout(A, sizes) is None:
        raise ValueError(
            f"{type(A).__name__} is not a marginal-type strategy: Private-PGM needs "
            "measurements of marginals (weighted marginals such as HDMM's OPT_M or Datacube, "
            "a marginals workload measured directly, or ResidualPlanner)"
        )
    y = plan.measure(data, rng)
    found = marginal_measurements(A, y, math.sqrt(plan.variance), plan.distribution, sizes)
    if found is None:  # pragma: no cover - a bug: its layout was checked above
        raise RuntimeError(f"{type(A).__name__}: the marginal layout is gone")
    return found


# ============================================================================ queries
class _KronQuery:
    """``y = (⊗_j Q_j) vec(μ_C)`` applied factor-wise to a clique's table (an ``mbi`` linear
    query). Equal (and hashing equal) when the factors are, so the fit compiled for one
    release is reused by the next release of the same strategy."""

    def __init__(self, factors):
        self.factors = tuple(None if f is None else np.asarray(f, dtype=float) for f in factors)
        digest = hashlib.sha1()
        for f in self.factors:
            digest.update(b"I" if f is None else repr(f.shape).encode() + f.tobytes())
        self._key = digest.hexdigest()

    def __call__(self, factor):
        import jax.numpy as jnp

        T = factor.datavector(flatten=False)
        for ax, F in enumerate(self.factors):
            if F is not None:
                T = jnp.moveaxis(jnp.tensordot(jnp.asarray(F), T, axes=(1, ax)), 0, ax)
        return T.reshape(-1)

    def op_norm_sq(self) -> float:
        """``||⊗Q_j||₂² = Π ||Q_j||₂²`` (the step size of the fit)."""
        return float(math.prod(1.0 if f is None else np.linalg.norm(f, 2) ** 2
                               for f in self.factors))  # fmt: skip

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, _KronQuery) and other._key == self._key


def _total_estimate(measurements, sizes) -> tuple[float, float] | None:
    """Inverse-variance weighted total from the measurements whose query rows span ``1``:
    ``u = ⊗ Q_j⁺ᵀ 1`` gives ``uᵀy`` with variance ``σ² ||u||²``. None if none does."""
    num = den = 0.0
    for m in measurements:
        u: np.ndarray = np.ones(1)
        for i, F in zip(m.attrs, m.factors(), strict=True):
            ones = np.ones(sizes[i])
            if F is None:
                ui = ones
            else:
                ui = np.linalg.pinv(F).T @ ones
                if not np.allclose(F.T @ ui, ones, atol=1e-8 * sizes[i]):
                    break  # 1 is not in this factor's row space
            u = np.kron(u, ui)
        else:
            var = _std(m) ** 2 * float(u @ u)
            num += float(u @ np.asarray(m.values, dtype=float).ravel()) / var
            den += 1.0 / var
    return None if den == 0.0 else (num / den, 1.0 / den)


def _std(m: Measurement) -> float:
    """The one noise standard deviation of a measurement's entries (the fit weights each
    measurement by one)."""
    std = np.asarray(m.std, dtype=float)
    if std.ndim and not np.all(std == std.flat[0]):
        raise ValueError(
            f"measurement on attributes {m.attrs}: its entries have different noise "
            "standard deviations; Private-PGM weights a measurement by one"
        )
    return float(std.flat[0]) if std.size else math.nan


def _by_index(m, domain: Domain):
    """``m`` with its attributes as indices of ``domain``: a release's measurements name
    them (``mmtoolkit.release(...).measurements``), ``measure``'s index them."""
    if (not isinstance(m, Measurement) or m.attrs is None
            or not any(isinstance(a, str) for a in m.attrs)):  # fmt: skip
        return m
    try:
        return replace(m, attrs=tuple(domain.index(a) for a in m.attrs))
    except ValueError as exc:
        raise ValueError(f"measurement on attributes {m.attrs}: {exc}") from None


def _check_measurement(m, sizes) -> None:
    if not isinstance(m, Measurement) or m.form != "marginal" or m.attrs is None:
        raise TypeError(
            "measurements must be marginal Measurements (mmtoolkit.measurement), got "
            f"{getattr(m, 'form', type(m).__name__)!r}"
        )
    rows = 1
    for i, F in zip(m.attrs, m.factors(), strict=True):
        if not 0 <= i < len(sizes):
            raise ValueError(f"measurement on attributes {m.attrs}: no attribute {i}")
        cols = sizes[i] if F is None else np.shape(F)[1]
        if cols != sizes[i]:
            raise ValueError(
                f"measurement on attributes {m.attrs}: its factor for attribute {i} has "
                f"{cols} columns, the attribute has {sizes[i]} values"
            )
        rows *= sizes[i] if F is None else np.shape(F)[0]
    if np.size(m.values) != rows:
        raise ValueError(
            f"measurement on attributes {m.attrs}: {np.size(m.values)} answers for a query "
            f"of {rows} rows"
        )
    std = _std(m)
    if not (std > 0 and math.isfinite(std)):
        raise ValueError(f"measurement on attributes {m.attrs}: std must be > 0, got {std}")


# ============================================================================ estimate
def estimate(
    measurements: Sequence[Measurement], domain, *, model: str = "auto",
    iters: int | None = None, tol: float = TOL, components: int = 300,
    learning_rate: float = 0.1, seed: int = 0, total: float | None = None,
) -> PGMResult:  # fmt: skip
    """Fit Private-PGM (McKenna et al. 2019, §3-4) to noisy marginal measurements and return
    its non-negative, mutually consistent marginals (a :class:`PGMResult`).

    ``domain``: the Domain (or sizes) the measurements' attributes, names or indices, refer
    to;
    ``model``: one of :data:`MODELS`; ``iters``: at most this many optimiser steps (default
    :data:`MAX_ITERS`); ``tol``: the graphical model's mirror descent stops once its loss
    improves by at most ``tol`` (relative) over two blocks of 50 steps — run to convergence:
    a fixed 1,000 steps left precise measurements far from their fit (e.g. the identity on
    13,440 cells at ρ = 1.09: L1 error 0.068 after 1,000 steps, 0.022 converged; stopping
    early regularises, and on noisier measurements can be the better fit: docs/guide/pgm.md);
    ``components``, ``learning_rate``, ``seed``: the mixture's size, Adam step and
    initialisation seed; ``total``: the number of records if known (else estimated:
    docs/guide/pgm.md).
    """
    if not isinstance(domain, Domain):
        domain = Domain.from_sizes(domain)
    check_option(model, "model", MODELS)
    iters = None if iters is None else check_int(iters, "iters", minimum=1)
    tol = check_positive(tol, "tol")
    components = check_int(components, "components", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    if not (isinstance(learning_rate, (int, float)) and learning_rate > 0):
        raise ValueError(f"learning_rate must be a positive number, got {learning_rate!r}")
    measurements = [_by_index(m, domain) for m in measurements]
    if not measurements:
        raise ValueError("estimate needs at least one measurement")
    sizes = domain.sizes
    for m in measurements:
        _check_measurement(m, sizes)
    mbi, mixture = _mbi()
    if total is None:
        est = _total_estimate(measurements, sizes)
        if est is None:
            raise ValueError(
                "the measurements do not determine the number of records (no query spans the "
                "total); pass total="
            )
        total = est[0]
    total = max(1.0, float(total))

    names = domain.names
    mdomain = mbi.Domain(names, sizes)
    lms = [
        mbi.LinearMeasurement(
            np.asarray(m.values, dtype=float).ravel(), tuple(names[i] for i in m.attrs),
            _std(m), _KronQuery(m.factors()),
        )
        for m in measurements
        if m.attrs  # the total's measurement went into `total`, which the model keeps fixed
    ]  # fmt: skip
    cliques = [lm.clique for lm in lms]
    if model == "auto":
        small = mbi.junction_tree.hypothetical_model_size(mdomain, cliques) <= MAX_MODEL_MB
        model = "graphical" if small else "mixture"
    if model == "graphical":
        fitted = mbi.estimation.MirrorDescent().estimate(
            mdomain, lms, total, iters=MAX_ITERS["graphical"] if iters is None else iters,
            tol=tol,
        )
    else:
        fitted = _mixture_estimator(mixture, learning_rate, components, seed).estimate(
            mdomain, lms, total, iters=MAX_ITERS["mixture"] if iters is None else iters
        )
    return PGMResult(domain, model, fitted, total)


_ESTIMATORS: dict = {}


def _mixture_estimator(mixture, learning_rate, components, seed):
    """One estimator object per setting: JAX caches the compiled fit on it, so the releases
    of one strategy compile once."""
    key = (learning_rate, components, seed)
    if key not in _ESTIMATORS:
        import optax

        _ESTIMATORS[key] = mixture.MixtureOfProductsEstimator(
            optimizer=optax.adam(learning_rate), num_components=components, seed=seed
        )
    return _ESTIMATORS[key]


# ============================================================================ result
@dataclass(frozen=True)
class PGMResult:
    """A fitted Private-PGM model: ``marginal(attrs)`` / ``marginals(W)`` answer from it,
    ``synthetic(records, seed)`` samples records. ``model``: ``"graphical"`` or
    ``"mixture"``; ``fitted``: the ``mbi`` model; ``total``: its number of records."""

    domain: Domain
    model: str
    fitted: Any  # the mbi model (a GraphicalModel or the mixture; mbi has no type stubs)
    total: float

    def marginal(self, attrs) -> np.ndarray:
        """The model's contingency table on ``attrs`` (names or indices), attributes in
        domain order, summing to :attr:`total`; non-negative."""
        idx = self.domain.indices(attrs)
        if not idx:
            return np.array(self.total)
        factor = self.fitted.project(tuple(self.domain.names[i] for i in idx))
        return np.asarray(factor.datavector(flatten=False), dtype=float)

    def marginals(self, W) -> np.ndarray:
        """Answers to a workload of (weighted) marginals in ``W``'s row order, like
        :func:`mmtoolkit.mechanism.release` returns them."""
        W = as_matrix(W)
        if W.shape[1] != self.domain.size:
            raise ValueError(
                f"the workload is defined on {W.shape[1]} cells, the model on {self.domain.size}"
            )
        out = []
        for c, factors in W.kron_terms():
            key = None if len(factors) != len(self.domain) else marginal_key(factors)
            if key is None:
                raise ValueError("marginals(W) needs a workload of marginals")
            attrs = [i for i in range(len(self.domain)) if (key >> i) & 1]
            out.append(math.sqrt(c) * self.marginal(attrs).ravel())
        return np.concatenate(out)

    def value_labels(self, attr) -> list:
        """The values of attribute ``attr`` as they appear in :meth:`synthetic`: the domain's
        value labels (categories, bin intervals) when it has them, else its codes ``0 … n−1``."""
        labels = self.domain.labels[self.domain.index(attr)]
        return list(labels) if labels is not None else list(range(self.domain[attr]))

    def synthetic(self, records: int | None = None, seed: int = 0):
        """``records`` synthetic records (default: the model's rounded total) drawn from the
        model with ``seed``, as a pandas DataFrame with one column per attribute holding
        the attribute's values (:meth:`value_labels`)."""
        import pandas as pd

        n = max(1, round(self.total)) if records is None else check_int(records, "records",
                                                                         minimum=1)  # fmt: skip
        seed = check_int(seed, "seed", minimum=0)
        codes = self._sample(n, np.random.default_rng(seed))
        columns = {}
        for j, name in enumerate(self.domain.names):
            labels = np.asarray(self.value_labels(name), dtype=object)
            columns[name] = labels[codes[:, j]]
        return pd.DataFrame(columns)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n x d`` codes: i.i.d. draws from the mixture, or the graphical model's own
        synthetic-data routine (randomised rounding along the junction tree, §4) under a
        seeded and then restored numpy global state (mbi draws from it)."""
        if self.model == "mixture":
            products = self.fitted.products
            comp = rng.integers(self.fitted.num_components, size=n)
            out = np.empty((n, len(self.domain)), dtype=np.int64)
            for j, name in enumerate(self.domain.names):
                cdf = np.cumsum(np.asarray(products[name], dtype=float), axis=1)
                u = rng.random(n) * cdf[comp, -1]
                out[:, j] = np.minimum((cdf[comp] <= u[:, None]).sum(axis=1),
                                       self.domain.sizes[j] - 1)  # fmt: skip
            return out
        state = np.random.get_state()
        np.random.seed(int(rng.integers(2**32)))
        try:
            data = self.fitted.synthetic_data(n)
        finally:
            np.random.set_state(state)
        return np.stack([np.asarray(data.data[name]) for name in self.domain.names], axis=1)
