"""Exact integer noise calibrated to a strategy (Canonne, Kamath & Steinke 2020, "The Discrete
Gaussian for Differential Privacy"): which integer noise each row of ``A`` receives
(:func:`calibrate`, for the noise plan, :mod:`mmtoolkit.plan`), the integer answers it is
added to (:func:`integer_answers`) and the row scales read a range of rows at a time
(:class:`RowScales`). The noise itself is one stream over the rows
(:class:`mmtoolkit.measurement.DiscreteNoiseStream`), the same in memory and on the Dask route.

User guide: docs/guide/privacy-and-noise.md (exact integer noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .linalg import NotSupportedByKindError, as_matrix, check_dense_size, peel
from .release_handlers import handler

__all__ = ["PRECISION", "DiscreteCalibration", "calibrate", "integer_answers", "RowScales"]

#: Denominator precision of the rational noise parameters of the discrete samplers: each is
#: rounded (towards more noise) to a relative precision of about 1/PRECISION.
PRECISION = 10**6

@dataclass(frozen=True)
class DiscreteCalibration:
    """Exact integer noise for a strategy: row ``r`` of ``A = diag(d) B`` (``B`` integer) is
    released as ``d_r (B_r x + z_r)``, ``z_r`` discrete Laplace ``Lap_Z(t_r/s_r)`` (PureDP)
    or discrete Gaussian ``N_Z(0, σ̄_r²)`` (zCDP), each noise parameter rounded up from the
    continuous one, so the release is ε-DP or ρ-zCDP (CKS Thm 4; the argument:
    docs/guide/privacy-and-noise.md). ``spent``: the exact bound ``budget · max_r(rate'_r /
    rate_r)`` (≤ budget).
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


def _discrete_gaussian_variance(sigma2: float | Fraction) -> float:
    s2 = float(sigma2)
    span = int(math.ceil(40 * math.sqrt(s2))) + 2
    k = np.arange(-span, span + 1, dtype=float)
    p = np.exp(-(k * k) / (2 * s2))
    return float(np.sum(k * k * p) / np.sum(p))


def calibrate(uniq, kind: str, scale: float, budget: float):
    """The noise parameters for the distinct row scales ``uniq`` (sorted) of a strategy whose
    continuous noise has scale ``scale`` (Laplace ``b`` or Gaussian ``σ``): ``kind``
    ``"laplace"`` (pure ε = ``budget``) or ``"gaussian"`` (zCDP ρ = ``budget``). Returns
    ``(kind, params, variances of the released rows of each scale, spent)``
    (:class:`DiscreteCalibration`)."""
    uniq = np.asarray(uniq, dtype=float)
    params: list[tuple] = []  # (d, s, t) laplace, (d, sigma2) gaussian
    var, ratios = np.empty(len(uniq)), np.empty(len(uniq))
    for k, dr in enumerate(uniq):
        b = scale / dr  # continuous scale (Laplace b or Gaussian σ) on B_r x
        if kind == "laplace":
            rate = 1.0 / b  # privacy loss per unit of |B_r δ|
            t = 1 << max(0, math.ceil(math.log2(PRECISION / rate)))
            s = math.floor(rate * t * (1 - 1e-9))
            exact = _dyadic_scale(b, t)
            if exact is not None:  # b = t/s exactly: no rounding, so none towards more noise
                s, t = exact
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
    return kind, params, uniq**2 * var, float(budget * ratios.max())


def _dyadic_scale(b: float, limit: int) -> tuple[int, int] | None:
    """``(s, t)`` with ``t/s == b`` exactly, ``t`` the smallest power of two ≤ ``limit`` for
    which ``t/b`` is an integer (a Laplace scale such as 1, 2 or 1/2: the discrete Laplace
    Lap_Z(t/s) then has exactly the scale asked for, and its sampler small parameters); else
    None."""
    ratio = Fraction(b)
    t = 1
    while t <= limit:
        s = Fraction(t) / ratio
        if s.denominator == 1 and s >= 1:
            return int(s), t
        t <<= 1
    return None


def _no_scales(A) -> NotSupportedByKindError:
    return NotSupportedByKindError(
        f"discrete noise is not supported by this strategy kind ({type(peel(A)[1]).__name__}): "
        "its rows are not integer vectors up to a positive scale (counting queries), which "
        "exact integer noise needs; use noise='continuous'"
    )


def _distinct(v: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D vector; of a constant view of one value (stride 0,
    a handler's ``row_scale_terms`` over many rows) without reading it all."""
    if v.size and v.strides[0] == 0:
        return np.asarray(v[:1], dtype=float).copy()
    return np.unique(v)


class RowScales:
    """A strategy's ``row_scales()`` a range of rows at a time, from its ``row_scale_terms()``:
    the same bits without an array over all rows (the Dask route's discrete noise). Raises
    (before anything is drawn) for a strategy without row scales."""

    def __init__(self, A):
        A = as_matrix(A)
        terms = handler(A).row_scale_terms(A)
        if terms is None:
            raise _no_scales(A)
        self.parts, off = [], 0
        for weights, vecs in terms:
            shape = tuple(v.size for v in vecs)
            self.parts.append((off, shape, weights, vecs))
            off += math.prod(shape)
        if off != A.shape[0]:  # pragma: no cover - a kind's row_scale_terms is wrong
            raise RuntimeError(f"row_scale_terms of {type(A).__name__} cover {off} rows")

    def distinct(self) -> np.ndarray:
        """The sorted distinct row scales (products of the vectors' distinct values)."""
        out = []
        for _, _, weights, vecs in self.parts:
            u = _distinct(vecs[0])
            for v in vecs[1:]:
                uv = _distinct(v)
                check_dense_size(u.size, uv.size, "the distinct row scales of a product")
                u = np.unique(np.multiply.outer(u, uv))
            for w in weights:
                u = np.unique(w * u)
            out.append(u)
        return np.unique(np.concatenate(out))

    def __call__(self, lo: int, hi: int) -> np.ndarray:
        """The row scales of rows ``lo .. hi - 1``."""
        out = np.empty(hi - lo)
        for off, shape, weights, vecs in self.parts:
            a, b = max(lo, off), min(hi, off + math.prod(shape))
            if a >= b:
                continue
            idx = np.unravel_index(np.arange(a - off, b - off), shape)
            s = vecs[0][idx[0]]
            for v, i in zip(vecs[1:], idx[1:]):
                s = s * v[i]
            for w in weights:
                s = w * s
            out[a - lo : b - lo] = s
        return out


def integer_answers(Ax: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``B x = A x / d`` as exact int64 (the data and ``B`` are integer): refused unless every
    entry is within 1e-6 of an integer below 2^52 in magnitude (NaN and infinities too)."""
    Bx = Ax / scales
    r = np.rint(Bx)
    Bx -= r
    np.abs(Bx, out=Bx)
    if not Bx.max(initial=0.0) <= 1e-6 or not np.abs(r).max(initial=0.0) < 2**52:
        raise ValueError(
            "discrete noise needs integer counts: the data vector (or records) gives a "
            "non-integer strategy answer (use noise='continuous' for fractional data)"
        )
    return r.astype(np.int64)
