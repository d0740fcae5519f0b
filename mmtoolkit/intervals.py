"""Confidence intervals on released answers, from the noise distribution of each answer.

A released answer is ``ŷ_i = W_i x + e_i`` with ``e_i = Σ_j c_ij z_j``: a fixed linear
combination (the rows of ``W A⁺``, or the identity for ``inference="none"``) of the
independent noise draws ``z_j`` added to the strategy's rows. Its variance
``v_i = Σ_j c_ij² σ_j²`` is the shared evaluator's per-query variance
(:func:`mmtoolkit.evaluate.per_query_variance`, the ``stderr`` of a release squared). The
interval is ``ŷ_i ± h_i`` with the half-width ``h_i`` chosen by the noise distribution:

- ``"gaussian"`` (continuous zCDP / (ε, δ) noise): ``e_i`` is exactly ``N(0, v_i)``, so
  ``h_i = z_{1−α/2} √v_i`` is exact (coverage exactly 1 − α).
- ``"discrete gaussian"``: the discrete Gaussian ``N_Z(0, σ²)`` is σ²-subgaussian
  (Canonne, Kamath & Steinke 2020, Cor. 9: ``E[exp(tZ)] ≤ exp(t²σ²/2)``), so by
  independence ``e_i`` is subgaussian with proxy ``Σ_j c_ij² σ_j² = v_i`` and the Chernoff
  bound gives ``P(|e_i| ≥ h) ≤ 2 exp(−h²/(2 v_i))``: ``h_i = √(2 v_i ln(2/α))`` is a
  provably conservative half-width (coverage ≥ 1 − α). ``v_i`` is computed with the
  nominal σ², which is at least the discrete variance (CKS 2020, Cor. 9).
- ``"laplace"`` and ``"discrete laplace"``: a least-squares combination of Laplace draws
  is neither Laplace nor Gaussian. Chebyshev's inequality, ``P(|e_i| ≥ h) ≤ v_i / h²``, holds
  for any distribution of variance at most ``v_i`` (the discrete Laplace's variance is at
  most the continuous one it is calibrated from), so ``h_i = √(v_i / α)`` is provably
  conservative. It is loose (≈ 4.47 σ at α = 0.05 against ≈ 3 σ for one Laplace draw); a
  sub-exponential (Bernstein-type) bound would be tighter but needs ``max_j |c_ij| b_j``,
  which this module does not compute.

Simultaneous intervals over ``k`` answers (a table, or the whole workload) use Bonferroni:
each answer's interval at level ``α / k``, valid under any dependence between the answers
(the answers of one release share noise draws).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from .checks import check_float, check_int, check_option, check_probability

__all__ = ["DISTRIBUTIONS", "SIMULTANEOUS", "half_widths", "method", "table_counts"]

#: The noise distributions an interval is derived for (:attr:`mmtoolkit.plan.Noise.distribution`).
DISTRIBUTIONS = ("gaussian", "discrete gaussian", "laplace", "discrete laplace")
#: What a (1 − α) statement covers: each answer, each table jointly, the whole workload jointly.
SIMULTANEOUS = ("none", "table", "workload")

_METHODS = {
    "gaussian": "exact Gaussian (z quantile times the standard error)",
    "discrete gaussian": (
        "conservative subgaussian bound sqrt(2 v ln(2/alpha)) (the discrete Gaussian is "
        "sigma^2-subgaussian, Canonne, Kamath & Steinke 2020)"
    ),
    "laplace": "conservative Chebyshev bound sqrt(v / alpha)",
    "discrete laplace": "conservative Chebyshev bound sqrt(v / alpha)",
}


def method(distribution: str) -> str:
    """In words, how :func:`half_widths` bounds answers of noise ``distribution``."""
    return _METHODS[check_option(distribution, "distribution", DISTRIBUTIONS)]


def half_widths(stderr, distribution: str, alpha: float, count=1,
                proxy_factor: float = 1.0) -> np.ndarray:  # fmt: skip
    """Half-widths ``h`` of the intervals ``answer ± h`` for answers with standard errors
    ``stderr`` and noise ``distribution`` (module docstring: exact for ``"gaussian"``,
    conservative otherwise), each at level ``alpha / count`` (Bonferroni: ``count`` is how
    many answers the (1 − ``alpha``) statement covers jointly; a scalar or one per answer).
    ``proxy_factor``: :attr:`mmtoolkit.plan.NoisePlan.proxy_factor`, the bound's variance
    (proxy) over ``stderr²`` for discrete noise whose parameters were rounded up."""
    check_option(distribution, "distribution", DISTRIBUTIONS)
    a = check_probability(alpha, "alpha")
    f = check_float(proxy_factor, "proxy_factor", minimum=1.0, finite=True)
    se = np.asarray(stderr, dtype=float) * math.sqrt(f)
    if se.size and not (np.all(np.isfinite(se)) and se.min() >= 0):
        raise ValueError("stderr: every standard error must be a finite non-negative number")
    k = np.asarray(count, dtype=float)
    if k.size and (not np.all(np.isfinite(k)) or k.min() < 1):
        raise ValueError("count: every count must be a number of answers, at least 1")
    level = a / k  # each answer's share of alpha
    if distribution == "gaussian":
        z = np.vectorize(lambda p: NormalDist().inv_cdf(1.0 - p / 2.0), otypes=[float])(level)
        return z * se
    if distribution == "discrete gaussian":
        return se * np.sqrt(2.0 * np.log(2.0 / level))
    return se / np.sqrt(level)


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
