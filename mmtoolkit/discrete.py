"""Exact integer noise calibrated to a strategy (Canonne, Kamath & Steinke 2020, "The Discrete
Gaussian for Differential Privacy"): which integer noise each row of ``A`` receives
(:func:`discrete_calibration`), the integer answers it is added to (:func:`integer_answers`)
and the noise itself as a stream over the rows (:class:`DiscreteNoiseStream`), drawn by the
exact samplers of :mod:`mmtoolkit.noise`.

One home for both mechanisms: :func:`mmtoolkit.mechanism.measure` (in memory) and
:mod:`mmtoolkit.dask_release` (a dask data array, block by block) draw the same stream, so a
given generator state gives the same integer noise on either path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .linalg import as_matrix
from .noise import discrete_gaussian, discrete_laplace
from .privacy import NOISE_BLOCK, ZCDP, Privacy, PureDP, check_privacy
from .strategy import Strategy

__all__ = [
    "PRECISION",
    "DiscreteCalibration",
    "discrete_calibration",
    "discrete_params",
    "integer_answers",
    "DiscreteNoiseStream",
]

#: Denominator precision of the rational noise parameters of the discrete samplers: each is
#: rounded (towards more noise) to a relative precision of about 1/PRECISION.
PRECISION = 10**6


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


def _check_discrete_privacy(privacy) -> None:
    check_privacy(privacy)
    if not isinstance(privacy, (PureDP, ZCDP)):
        raise ValueError(
            "discrete noise is available for PureDP (discrete Laplace) and ZCDP (discrete "
            f"Gaussian), not {type(privacy).__name__}; use noise='continuous'"
        )


def discrete_params(uniq, privacy: Privacy, sens: float):
    """The noise parameters for the distinct row scales ``uniq`` (sorted) of a strategy of
    sensitivity ``sens`` (see :class:`DiscreteCalibration`): ``(kind, params, variances of
    the released rows of each scale, spent)``. What :func:`discrete_calibration` computes
    from the strategy's ``row_scales()``; the Dask route calls it with the distinct scales of
    a Kronecker product, read factor-wise."""
    _check_discrete_privacy(privacy)
    uniq = np.asarray(uniq, dtype=float)
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
    kind = "laplace" if isinstance(privacy, PureDP) else "gaussian"
    return kind, params, uniq**2 * var, float(budget * ratios.max())


def discrete_calibration(strategy, privacy: Privacy) -> DiscreteCalibration:
    """The exact integer noise for ``strategy`` under ``privacy`` (PureDP or ZCDP), see
    :class:`DiscreteCalibration`. Raises when a row of the strategy is not an integer vector
    up to a positive scale (discrete noise needs integer queries)."""
    _check_discrete_privacy(privacy)
    A = strategy.matrix if isinstance(strategy, Strategy) else as_matrix(strategy)
    scales = A.row_scales()
    if scales is None:
        raise ValueError(
            f"discrete noise needs a strategy whose rows are integer vectors up to a positive "
            f"scale (counting queries); {type(A).__name__} is not (use noise='continuous')"
        )
    uniq, inverse = np.unique(scales, return_inverse=True)
    kind, params, var, spent = discrete_params(uniq, privacy, A.sensitivity(privacy.norm))
    return DiscreteCalibration(
        kind=kind,
        scales=scales,
        params=params,
        row_param=inverse.ravel(),
        variances=var[inverse.ravel()],
        budget=float(privacy.epsilon if isinstance(privacy, PureDP) else privacy.rho),
        spent=spent,
    )


def integer_answers(Ax: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``B x = A x / d`` as exact int64 (the data and ``B`` are integer)."""
    Bx = Ax / scales
    r = np.rint(Bx)
    if not np.allclose(Bx, r, rtol=0, atol=1e-6) or np.any(np.abs(r) >= 2**52):
        raise ValueError(
            "discrete noise needs integer counts: the data vector (or records) gives a "
            "non-integer strategy answer (use noise='continuous' for fractional data)"
        )
    return r.astype(np.int64)


class DiscreteNoiseStream:
    """The integer noise of ``rows x releases`` answers (C order: a row's ``releases`` values
    together), added in order to consecutive pieces (:meth:`add`), exact samplers only.

    The values are drawn :data:`~mmtoolkit.privacy.NOISE_BLOCK` at a time at fixed offsets
    of the stream; within a block, the positions of each noise parameter (in the order of
    ``params``) take one vectorised draw of the exact sampler, in order. So the values do not
    depend on how the answers are cut into pieces — the Dask route adds them block by block
    and gets the in-memory values — and nothing larger than a block is drawn at once.
    ``param_at(lo, hi)``: the parameter index (into ``params``) of rows ``lo..hi-1``, so the
    stream never needs an array over all rows."""

    def __init__(self, kind: str, params, rng: np.random.Generator, rows: int, releases: int,
                 param_at):  # fmt: skip
        self.kind, self.params, self.rng, self.param_at = kind, list(params), rng, param_at
        self.r = int(releases)
        self.size = int(rows) * self.r
        self.start = 0  # stream position of buf[0]
        self.buf = np.empty(0, dtype=np.int64)
        self.pos = 0  # buf[pos:]: drawn, not yet added

    @property
    def left(self) -> int:
        """Values not yet added."""
        return self.size - self.start - self.pos

    def add(self, piece: np.ndarray) -> None:
        """Add the next ``piece.size`` values to ``piece`` (1-D int64, in place)."""
        if piece.ndim != 1 or piece.dtype != np.int64:
            raise ValueError(f"noise pieces are 1-D int64, got {piece.dtype} {piece.shape}")
        k = piece.size
        if k > self.left:
            raise ValueError(f"the noise stream has {self.left} values left, not {k}")
        done = 0
        while done < k:
            if self.pos == self.buf.size:
                self._draw()
            take = min(self.buf.size - self.pos, k - done)
            piece[done : done + take] += self.buf[self.pos : self.pos + take]
            self.pos += take
            done += take

    def _draw(self) -> None:
        a = self.start + self.buf.size
        b = min(a + NOISE_BLOCK, self.size)
        lo, hi = a // self.r, (b - 1) // self.r + 1
        p = np.asarray(self.param_at(lo, hi))
        if self.r > 1:
            p = p[np.arange(a, b) // self.r - lo]
        z = np.empty(b - a, dtype=np.int64)
        for k in range(len(self.params)):
            idx = slice(None) if len(self.params) == 1 else np.flatnonzero(p == k)
            n = b - a if len(self.params) == 1 else idx.size
            if n:
                z[idx] = self._sample(self.params[k], n)
        self.start, self.buf, self.pos = a, z, 0

    def _sample(self, p, n: int) -> np.ndarray:
        if self.kind == "laplace":
            return discrete_laplace(p[1], p[2], self.rng, size=n)
        return discrete_gaussian(p[1], n, self.rng)
