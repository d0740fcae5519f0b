"""Privacy definitions: which noise a strategy's answers get, and how much.

A strategy ``A`` with sensitivity ``Δ = sens_p(A)`` (add/remove-one-record neighbours) gets
i.i.d. noise of variance ``noise_variance(Δ)`` on each answer (ARCHITECTURE.md, "Privacy and
error"). :class:`PureDP` (ε): Laplace, L1 (Dwork & Roth 2014, Thm 3.6); :class:`ApproxDP`
(ε, δ): Gaussian, L2, calibrated ``"analytic"`` (Balle & Wang, ICML 2018), ``"classic"``
(Dwork & Roth Thm A.1) or ``"eigen_design"`` (Li & Miklau 2012, Prop. 2); :class:`ZCDP` (ρ):
Gaussian, L2, ``σ² = Δ²/(2ρ)`` (Bun & Steinke 2016, Prop. 1.6; ResidualPlanner's ``pcost``
is ``2ρ``). :func:`from_spec` builds one from a configuration mapping, :func:`from_budget`
from the command line's flags.

User guide: docs/guide/privacy-and-noise.md.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from .checks import check_float, check_positive, check_probability

__all__ = ["Privacy", "PureDP", "ApproxDP", "ZCDP", "check_privacy", "from_budget", "from_spec",
           "CALIBRATIONS"]

#: The σ calibrations accepted by :class:`ApproxDP`.
CALIBRATIONS = ("classic", "analytic", "eigen_design")


# ------------------------------------------------------------------ Gaussian privacy curve
def _log_gaussian_delta(mu: float, epsilon: float) -> float:
    """``log δ(ε)`` of the Gaussian mechanism whose sensitivity/σ ratio is ``mu``:
    ``δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)`` (Balle & Wang 2018, Thm 8), in log space
    (``log_ndtr``) so that a tiny δ does not cancel catastrophically."""
    a = mu / 2.0 - epsilon / mu
    b = -mu / 2.0 - epsilon / mu
    la = float(log_ndtr(a))
    lb = float(log_ndtr(b))
    x = epsilon + lb - la  # log of  e^ε Φ(b) / Φ(a),  < 0 whenever δ > 0
    if x >= 0.0:
        return -math.inf
    return la + math.log(-math.expm1(x))


def _gaussian_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of the Gaussian mechanism with sensitivity/σ ratio ``mu`` (see above)."""
    if mu > 1.0:  # δ is not small: the direct form is accurate and avoids any log round-off
        a = mu / 2.0 - epsilon / mu
        b = -mu / 2.0 - epsilon / mu
        return float(ndtr(a) - math.exp(epsilon) * ndtr(b))
    return math.exp(_log_gaussian_delta(mu, epsilon))


@lru_cache(maxsize=256)
def _analytic_sigma_unit(epsilon: float, delta: float) -> float:
    """Smallest σ (for Δ = 1) with δ(ε; σ) ≤ δ, the analytic Gaussian mechanism (Balle &
    Wang 2018, Thm 8 and Alg. 1): δ(σ) decreases strictly, so the boundary is one root,
    found by Brent's method in ``log σ`` after bracketing geometrically."""
    target = math.log(delta)

    def f(log_s: float) -> float:
        s = math.exp(log_s)
        return _log_gaussian_delta(1.0 / s, epsilon) - target

    def unbracketed(side: str) -> ValueError:
        return ValueError(
            f"the analytic Gaussian calibration of epsilon={epsilon!r}, delta={delta!r} finds "
            f"no σ {side} (it searches e^-60 ≤ σ ≤ e^60): the privacy level is outside what "
            "float64 noise can calibrate"
        )

    lo, hi = -1.0, 1.0
    while f(lo) <= 0.0:  # need δ(σ_lo) > δ
        lo -= 1.0
        if lo < -60:
            raise unbracketed("from below")
    while f(hi) > 0.0:  # need δ(σ_hi) ≤ δ
        hi += 1.0
        if hi > 60:
            raise unbracketed("from above")
    if not (math.isfinite(f(lo)) and math.isfinite(f(hi))):  # δ(σ) not computable here
        raise unbracketed("where δ(σ) can be computed")
    root = brentq(f, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
    sigma = math.exp(root)
    # Return the smallest σ on the safe side of the boundary (round-off may leave the
    # root a hair below it); a relative nudge of 1e-12 is far below any reported digit.
    while _log_gaussian_delta(1.0 / sigma, epsilon) > target:
        sigma *= 1.0 + 1e-12
    return sigma


# ----------------------------------------------------------------------------- classes
class Privacy(ABC):
    """A privacy definition: the noise family, its sensitivity norm and its calibration.
    Subclasses define :attr:`norm` (1: L1 and Laplace noise; 2: L2 and Gaussian) and
    :meth:`noise_scale`. Instances are immutable, equal when their parameters are, and
    hashable."""

    #: Sensitivity norm (1 or 2) the noise is calibrated to.
    norm: int
    #: Noise family name, "laplace" or "gaussian".
    family: str
    #: The spec's ``kind`` and the parameters that identify the definition, in order (for
    #: ==, hash, repr and :meth:`to_spec`).
    _kind: str
    _fields: tuple[str, ...]

    @abstractmethod
    def noise_scale(self, sensitivity: float = 1.0) -> float:
        """Laplace scale ``b`` or Gaussian standard deviation ``σ`` for this sensitivity.

        Parameters
        ----------
        sensitivity : float, optional
            The strategy's sensitivity ``Δ`` in the definition's norm (:attr:`norm`), a
            finite number ≥ 0; default 1.

        Returns
        -------
        float
            The scale, proportional to ``sensitivity``.

        Raises
        ------
        ValueError
            ``sensitivity`` is negative or not finite, or the scale overflows float64.
        """

    def noise_variance(self, sensitivity: float = 1.0) -> float:
        """Variance of the noise added to each strategy answer (strategy sensitivity given):
        ``2b²`` for Laplace, ``σ²`` for Gaussian noise.

        Parameters
        ----------
        sensitivity : float, optional
            The strategy's sensitivity ``Δ`` in the definition's norm, a finite number ≥ 0;
            default 1 (the variance per unit sensitivity, ``v`` of the evaluator).

        Returns
        -------
        float
            The variance, proportional to ``sensitivity²``; finite.

        Raises
        ------
        ValueError
            ``sensitivity`` is negative or not finite, or the variance overflows float64.
        """
        s = self.noise_scale(sensitivity)
        return self._finite_noise(2.0 * s * s if self.family == "laplace" else s * s,
                                  "variance", sensitivity)  # fmt: skip

    def _finite_noise(self, value: float, what: str, sensitivity) -> float:
        """``value``, the noise ``what`` (scale or variance) for ``sensitivity``, when it is a
        finite float; a ValueError otherwise: noise of infinite scale would release inf or
        NaN answers, and its error could not be reported."""
        if not math.isfinite(value):
            raise ValueError(
                f"{self!r}: the noise {what} for sensitivity {float(sensitivity):g} is "
                f"{value!r}, not a finite float; the privacy level is too small (or the "
                "sensitivity too large) for float64 noise"
            )
        return value

    def _scaled(self, sensitivity, unit: float) -> float:
        """The noise scale ``sensitivity · unit`` (``unit``: the scale at sensitivity 1),
        checked finite."""
        d = check_float(sensitivity, "sensitivity", minimum=0)
        return self._finite_noise(d * unit, "scale", d)

    def _check_level(self) -> None:
        """Refuse, at construction, a privacy level whose noise at sensitivity 1 has no
        positive finite variance in float64 (e.g. ε = 1e-300: variance 2/ε² overflows; ε =
        1e300: it underflows to 0, which is no noise at all): before any selection, ledger
        charge or draw can use it."""
        v = self.noise_variance(1.0)
        if not v > 0.0:
            raise ValueError(
                f"{self!r}: the noise variance at sensitivity 1 underflows to {v!r}; the "
                "privacy level is too large for float64 noise"
            )

    def _params(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def to_spec(self) -> dict:
        """The configuration mapping that :func:`from_spec` turns back into this object.

        Returns
        -------
        dict
            ``{"kind": "pure" | "approx" | "zcdp", <its parameters>}``.
        """
        return {"kind": self._kind, **dict(zip(self._fields, self._params(), strict=True))}

    @abstractmethod
    def describe(self) -> str:
        """A one-line human-readable description (guarantee, noise, calibration).

        Returns
        -------
        str
            E.g. ``"ρ-zCDP, ρ = 0.5: Gaussian noise, L2 sensitivity, σ² = Δ²/(2ρ) = 1·Δ²"``.
        """

    def __eq__(self, other):
        if not isinstance(other, Privacy):
            return NotImplemented
        return type(self) is type(other) and self._params() == other._params()

    def __hash__(self):
        return hash((type(self).__name__, self._params()))

    def __setattr__(self, name, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"{type(self).__name__} is immutable")
        object.__setattr__(self, name, value)

    def _freeze(self):
        object.__setattr__(self, "_frozen", True)

    def __repr__(self):
        args = ", ".join(f"{f}={v!r}" for f, v in zip(self._fields, self._params(), strict=True))
        return f"{type(self).__name__}({args})"


class PureDP(Privacy):
    """ε-differential privacy through the Laplace mechanism: ``Lap(b)``, ``b = Δ₁/ε``, on each
    answer, variance ``2Δ₁²/ε²`` (Dwork & Roth 2014, Thm 3.6; HDMM Def. 5 and Thm 7); ``Δ₁``
    the strategy's max column L1 norm.

    Parameters
    ----------
    epsilon : float
        ε, a finite number > 0.

    Raises
    ------
    ValueError
        ``epsilon`` is not a finite number > 0, or so small or large that the noise variance
        at sensitivity 1 is not a positive finite float64.

    References
    ----------
    Dwork & Roth 2014, Theorem 3.6; McKenna et al. 2018, HDMM, Definition 5 and Theorem 7.
    """

    norm = 1
    family = "laplace"
    _kind, _fields = "pure", ("epsilon",)

    def __init__(self, epsilon: float):
        self.epsilon = check_positive(epsilon, "epsilon")
        self._check_level()
        self._freeze()

    def noise_scale(self, sensitivity: float = 1.0) -> float:
        return self._scaled(sensitivity, 1.0 / self.epsilon)

    def to_zcdp(self) -> ZCDP:
        """ε-DP implies (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4).

        Returns
        -------
        ZCDP
            ``ZCDP(ε²/2)``.
        """
        return ZCDP(self.epsilon**2 / 2.0)

    def describe(self):
        return (
            f"pure ε-DP, ε = {self.epsilon:g}: Laplace noise, L1 sensitivity, "
            f"scale Δ/ε = {1.0 / self.epsilon:.6g}·Δ, variance 2Δ²/ε² = "
            f"{self.noise_variance():.6g}·Δ²"
        )


class ApproxDP(Privacy):
    """(ε, δ)-differential privacy through the Gaussian mechanism (L2 sensitivity).

    ``calibration`` of σ: ``"analytic"`` (default; Balle & Wang, ICML 2018, Thm 8: the
    smallest σ with ``δ(ε; σ) ≤ δ``, exact for every ε > 0), ``"classic"``
    (``σ = Δ·sqrt(2 ln(1.25/δ))/ε``, Dwork & Roth 2014, Thm A.1) or ``"eigen_design"``
    (``σ = Δ·sqrt(2 ln(2/δ))/ε``, Li & Miklau 2012, Prop. 2). The closed forms are proven
    only for ε < 1 and refuse ε ≥ 1 (docs/guide/privacy-and-noise.md).

    Parameters
    ----------
    epsilon : float
        ε, a finite number > 0 (below 1 for the closed-form calibrations).
    delta : float
        δ, strictly between 0 and 1.
    calibration : str, optional
        One of :data:`CALIBRATIONS`: ``"analytic"`` (default), ``"classic"`` or
        ``"eigen_design"``.

    Raises
    ------
    ValueError
        ``epsilon`` or ``delta`` out of range, an unknown ``calibration``, a closed-form
        calibration with ε ≥ 1, or a noise variance that is not a positive finite float64.

    References
    ----------
    Balle & Wang 2018, Theorem 8 (analytic); Dwork & Roth 2014, Theorem A.1 (classic);
    Li & Miklau 2012, Eigen-Design, Proposition 2.
    """

    norm = 2
    family = "gaussian"
    _kind, _fields = "approx", ("epsilon", "delta", "calibration")

    def __init__(self, epsilon: float, delta: float, calibration: str = "analytic"):
        self.epsilon = check_positive(epsilon, "epsilon")
        self.delta = check_probability(delta, "delta")
        if not isinstance(calibration, str) or calibration not in CALIBRATIONS:
            raise ValueError(
                f"calibration must be one of {', '.join(repr(c) for c in CALIBRATIONS)}; "
                f"got {calibration!r}"
            )
        if calibration in ("classic", "eigen_design") and self.epsilon >= 1.0:
            raise ValueError(
                f"the {calibration!r} Gaussian calibration is proven only for epsilon < 1 "
                f"(got epsilon={self.epsilon!r}); use calibration='analytic'"
            )
        self.calibration = calibration
        self._check_level()
        self._freeze()

    def _unit_sigma(self) -> float:
        eps, delta = self.epsilon, self.delta
        if self.calibration == "classic":
            return math.sqrt(2.0 * math.log(1.25 / delta)) / eps
        if self.calibration == "eigen_design":
            return math.sqrt(2.0 * math.log(2.0 / delta)) / eps
        return _analytic_sigma_unit(eps, delta)

    def noise_scale(self, sensitivity: float = 1.0) -> float:
        return self._scaled(sensitivity, self._unit_sigma())

    def describe(self):
        return (
            f"approximate (ε, δ)-DP, ε = {self.epsilon:g}, δ = {self.delta:g}: Gaussian noise, "
            f"L2 sensitivity, {self.calibration} calibration, σ = {self._unit_sigma():.6g}·Δ"
        )


class ZCDP(Privacy):
    """ρ-zero-concentrated DP through the Gaussian mechanism (Bun & Steinke 2016):
    ``σ² = Δ₂²/(2ρ)`` (Prop. 1.6). ResidualPlanner's ``pcost = 2ρ`` (§2, Def. 1–2): its
    ``pcost = 1`` is ``ZCDP(0.5)``, unit noise variance per unit sensitivity.

    Parameters
    ----------
    rho : float
        ρ, a finite number > 0.

    Raises
    ------
    ValueError
        ``rho`` is not a finite number > 0, or the noise variance at sensitivity 1 is not a
        positive finite float64.

    References
    ----------
    Bun & Steinke 2016, Proposition 1.6; He et al., ResidualPlanner+, Section 2,
    Definitions 1 and 2.
    """

    norm = 2
    family = "gaussian"
    _kind, _fields = "zcdp", ("rho",)

    def __init__(self, rho: float):
        self.rho = check_positive(rho, "rho")
        self._check_level()
        self._freeze()

    def noise_scale(self, sensitivity: float = 1.0) -> float:
        return self._scaled(sensitivity, 1.0 / math.sqrt(2.0 * self.rho))

    def noise_variance(self, sensitivity: float = 1.0) -> float:
        d = check_float(sensitivity, "sensitivity", minimum=0)
        return self._finite_noise(d * d / (2.0 * self.rho), "variance", d)

    @property
    def pcost(self) -> float:
        """ResidualPlanner's privacy cost ``2ρ`` (= μ² in μ-Gaussian DP)."""
        return 2.0 * self.rho

    def to_approx_dp(self, delta: float) -> float:
        """ε such that ρ-zCDP implies (ε, δ)-DP: ``ε = ρ + 2 sqrt(ρ ln(1/δ))`` (Bun & Steinke
        2016, Prop. 1.3, any ρ-zCDP mechanism; :meth:`to_approx_dp_tight` is tighter for any
        such mechanism, :meth:`gaussian_delta` exact for the continuous Gaussian mechanism).

        Parameters
        ----------
        delta : float
            δ, strictly between 0 and 1.

        Returns
        -------
        float
            ε > 0.

        Raises
        ------
        ValueError
            ``delta`` is not strictly between 0 and 1.
        """
        d = check_probability(delta, "delta")
        return self.rho + 2.0 * math.sqrt(self.rho * math.log(1.0 / d))

    def to_approx_dp_tight(self, delta: float) -> float:
        """The smallest ε such that ρ-zCDP implies (ε, δ)-DP by Canonne, Kamath & Steinke
        2020 (Prop. 12, Cor. 13; any ρ-zCDP mechanism, the discrete Gaussian included):
        ``δ = inf_{α>1} exp((α−1)(αρ−ε))/(α−1)·(1−1/α)^α``, always below
        :meth:`to_approx_dp` (Bun & Steinke's Prop. 1.3), of which it is a refinement.

        With ``t = α − 1``, the logarithm of the bound is strictly convex in ``α``; where
        its derivative vanishes, ``ε = ρ(1 + 2t) + ln(t/(1+t))`` and the bound is
        ``ln δ = −ρt² − ln(1+t)``. So ε at ``δ`` is that ε at the one ``t > 0`` with
        ``ρt² + ln(1+t) = ln(1/δ)`` (a strictly increasing function of ``t``: Brent's method),
        and 0 when it is negative (the bound at ε = 0 is then below ``δ``). The root is
        taken on the side where the bound is ≤ ``δ``, so ε is never understated.

        Parameters
        ----------
        delta : float
            δ, strictly between 0 and 1.

        Returns
        -------
        float
            ε ≥ 0.

        Raises
        ------
        ValueError
            ``delta`` is not strictly between 0 and 1.

        References
        ----------
        Canonne, Kamath & Steinke 2020, Proposition 12 and Corollary 13.
        """
        d = check_probability(delta, "delta")
        rho, target = self.rho, math.log(1.0 / d)

        def excess(t: float) -> float:  # ln(1/δ(t)) − ln(1/δ): < 0 below the root
            return rho * t * t + math.log1p(t) - target

        lo = min(target / 4.0, math.sqrt(target / (4.0 * rho)))  # excess(lo) <= −target/2
        hi = math.sqrt(target / rho)  # excess(hi) = ln(1 + hi) > 0
        t = brentq(excess, lo, hi, xtol=lo * 1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
        while excess(t) < 0.0:  # round-off: step to where the bound is at most δ
            t = math.nextafter(t, math.inf)
        return max(0.0, rho * (1.0 + 2.0 * t) + math.log(t) - math.log1p(t))

    @classmethod
    def for_approx_dp(cls, epsilon: float, delta: float) -> ZCDP:
        """The largest ρ whose :meth:`to_approx_dp_tight` at ``delta`` is at most
        ``epsilon``: a ρ-zCDP mechanism with this ρ is (ε, δ)-DP (Canonne, Kamath & Steinke
        2020, Prop. 12). The conversion is increasing in ρ, so the root is bracketed by ρ
        near 0 (ε near 0) and ρ = ε (ε at least ρ) and found by Brent's method, then stepped
        down until the conversion is at most ``epsilon`` (ε is never understated).

        Parameters
        ----------
        epsilon : float
            ε, a finite number > 0.
        delta : float
            δ, strictly between 0 and 1.

        Returns
        -------
        ZCDP
            The definition with that ρ.

        Raises
        ------
        ValueError
            ``epsilon`` or ``delta`` out of range.

        References
        ----------
        Canonne, Kamath & Steinke 2020, Proposition 12.
        """
        eps = check_positive(epsilon, "epsilon")
        d = check_probability(delta, "delta")

        def excess(rho: float) -> float:
            return cls(rho).to_approx_dp_tight(d) - eps

        lo, hi = eps * 1e-300, eps  # the conversion is 0 at ρ = lo: excess(lo) = −ε
        while excess(hi) <= 0.0:  # a δ near 1, where ε ≥ ρ need not hold: widen
            lo, hi = hi, hi * 2.0
        rho = brentq(excess, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
        while excess(rho) > 0.0:
            rho = math.nextafter(rho, 0.0)
        return cls(rho)

    def gaussian_delta(self, epsilon: float) -> float:
        """The exact δ(ε) of the Gaussian mechanism calibrated to this ρ: with ``μ =
        sqrt(2ρ)``, ``δ = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)`` (Balle & Wang 2018, Thm 8;
        ResidualPlanner §2 with ``pcost = μ²``).

        Parameters
        ----------
        epsilon : float
            ε, a finite number > 0.

        Returns
        -------
        float
            δ in [0, 1).

        Raises
        ------
        ValueError
            ``epsilon`` is not a finite number > 0.
        """
        eps = check_positive(epsilon, "epsilon")
        return _gaussian_delta(math.sqrt(2.0 * self.rho), eps)

    def describe(self):
        return (
            f"ρ-zCDP, ρ = {self.rho:g}: Gaussian noise, L2 sensitivity, "
            f"σ² = Δ²/(2ρ) = {self.noise_variance():.6g}·Δ²"
        )


# ----------------------------------------------------------------------------- configs
_SPEC_FIELDS = {
    "pure": (PureDP, ("epsilon",), ()),
    "approx": (ApproxDP, ("epsilon", "delta"), ("calibration",)),
    "zcdp": (ZCDP, ("rho",), ()),
}


def check_privacy(privacy) -> Privacy:
    """Raise TypeError unless ``privacy`` is a :class:`Privacy` (PureDP, ApproxDP or ZCDP);
    return it.

    Parameters
    ----------
    privacy : object
        The argument to check.

    Returns
    -------
    Privacy
        ``privacy`` itself.

    Raises
    ------
    TypeError
        ``privacy`` is not a Privacy (a programming error, like any argument of the wrong
        type in Python).
    """
    if not isinstance(privacy, Privacy):
        raise TypeError(f"privacy must be a PureDP, ApproxDP or ZCDP instance, got {privacy!r}")
    return privacy


def from_spec(spec) -> Privacy:
    """Build a :class:`Privacy` from a configuration mapping (``{"kind": "pure", "epsilon":
    1}``, ``"approx"`` with ``epsilon``, ``delta`` and an optional ``calibration``, or
    ``"zcdp"`` with ``rho``: docs/guide/privacy-and-noise.md).

    Parameters
    ----------
    spec : Mapping or Privacy
        The mapping (e.g. read from a config or :meth:`Privacy.to_spec`); a Privacy is
        passed through unchanged.

    Returns
    -------
    Privacy
        The ``PureDP``, ``ApproxDP`` or ``ZCDP`` it describes.

    Raises
    ------
    ValueError
        Not a mapping, a missing or unknown ``kind``, a missing or unexpected field (named),
        or a value the class refuses.
    """
    if isinstance(spec, Privacy):
        return spec
    if not isinstance(spec, Mapping):
        raise ValueError(f"privacy spec must be a mapping, got {type(spec).__name__}")
    if "kind" not in spec:
        raise ValueError(
            f"privacy spec is missing field 'kind' (one of {', '.join(map(repr, _SPEC_FIELDS))})"
        )
    kind = spec["kind"]
    if not isinstance(kind, str) or kind not in _SPEC_FIELDS:  # (a list is unhashable)
        raise ValueError(
            f"privacy spec field 'kind' must be one of {', '.join(map(repr, _SPEC_FIELDS))}, "
            f"got {kind!r}"
        )
    cls, required, optional = _SPEC_FIELDS[kind]
    for field in required:
        if field not in spec:
            raise ValueError(f"privacy spec of kind {kind!r} is missing field {field!r}")
    allowed = {"kind", *required, *optional}
    extra = sorted(str(k) for k in spec if k not in allowed)
    if extra:
        raise ValueError(
            f"privacy spec of kind {kind!r} has unexpected field(s) "
            f"{', '.join(repr(e) for e in extra)}; allowed: {', '.join(sorted(allowed))}"
        )
    return cls(**{k: spec[k] for k in (*required, *optional) if k in spec})


#: A command-line word that is a number, exponent forms included (``-1e-6``): argparse's own
#: pattern (``-1``, ``-.5``) takes ``-1e-6`` for an option, so ``--delta -1e-6`` would fail
#: with "expected one argument" instead of reaching the range check naming the flag.
_NUMBER_WORD = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|nan)$", re.IGNORECASE)


def add_budget_arguments(parser, epsilon_list: bool = False) -> None:
    """Add the budget flags ``--epsilon``, ``--delta`` and ``--rho`` to the argparse
    ``parser`` (read back with :func:`from_budget`). A negative number after a flag is read
    as its value, so that :func:`from_budget` refuses it naming the flag (the parser must
    have no option that looks like a negative number). ``epsilon_list``: ``--epsilon`` is
    kept as text, which may list several values (``0.1,1,10``) for the caller to parse."""
    parser._negative_number_matcher = _NUMBER_WORD  # argparse's hook for this (3.11-3.13)
    parser.add_argument(
        "--epsilon",
        type=str if epsilon_list else float,
        help="ε (pure DP, or (ε, δ)-DP with --delta)"
        + ("; with --data a list such as 0.1,1,10" if epsilon_list else ""),
    )
    parser.add_argument("--delta", type=float, help="δ for (ε, δ)-DP (analytic Gaussian)")
    parser.add_argument("--rho", type=float, help="ρ for ρ-zCDP (Gaussian)")


def from_budget(epsilon=None, delta=None, rho=None) -> Privacy:
    """The :class:`Privacy` of the command line's budget: ``epsilon`` (:class:`PureDP`),
    ``epsilon`` and ``delta`` (:class:`ApproxDP`, analytic) or ``rho`` (:class:`ZCDP`).

    Parameters
    ----------
    epsilon : float, optional
        ``--epsilon``: ε.
    delta : float, optional
        ``--delta``: δ, with ``epsilon``.
    rho : float, optional
        ``--rho``: ρ, alone.

    Returns
    -------
    Privacy
        ``PureDP(ε)``, ``ApproxDP(ε, δ)`` or ``ZCDP(ρ)``.

    Raises
    ------
    ValueError
        A missing or conflicting flag, or a value out of range; the message names the flags.
    """
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise ValueError("give either --rho or --epsilon [--delta], not both")
        return ZCDP(check_positive(rho, "--rho"))
    if epsilon is None:
        raise ValueError("a privacy budget is required: --epsilon E [--delta D] or --rho R")
    epsilon = check_positive(epsilon, "--epsilon")
    if delta is not None:
        return ApproxDP(epsilon, check_probability(delta, "--delta"))
    return PureDP(epsilon)
