"""The Fourier strategy: parity rows for the coefficients a workload needs, the ``fourier``
selector (Barak et al., PODS 2007; Cormode et al., ICDE 2013, §3.6, §4; the Fourier baseline
of Li & Miklau 2012, §5), on any workload over ``2^d`` cells (:func:`fourier_coefficients`).
User guide: docs/algorithms/datacube.md.
"""

from __future__ import annotations

import numpy as np

from ...checks import check_option
from ...linalg import Fourier, Matrix, check_dense_size, normal_form
from ...linalg.fourier import downset, fwht, submasks
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, refusal, register
from .budgets import BUDGETS, budget_objective, optimal_budgets, uniform_budgets
from .cuboids import binary_workload

__all__ = [
    "COEFFICIENTS",
    "MAX_COEFFICIENTS",
    "FourierSelector",
    "fourier_b",
    "fourier_coefficients",
]

COEFFICIENTS = ("needed", "attributes", "all")

#: Largest number of Fourier coefficients one workload term may need (2^26).
MAX_COEFFICIENTS = 1 << 26


def _log2(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(
            f"the Fourier (Walsh–Hadamard) basis needs a power-of-two domain, but {what} has "
            f"{n} cells"
        )
    return n.bit_length() - 1


def _factor_norms(f: Matrix, kind: str) -> np.ndarray:
    """``v[l] = ‖f h_l‖² / n²`` for the rows ``h_l`` of the ``n``-point Hadamard matrix
    (Sylvester / C order): the squared norm of column ``l`` of ``f Hᵀ / n`` (``kind``: the
    factor's kind in the workload's normal form)."""
    n = int(f.shape[1])
    if kind == "identity":
        return np.full(n, 1.0 / n)
    if kind == "total":
        v = np.zeros(n)
        v[0] = 1.0
        return v
    if kind == "dense" and f.shape[0] <= n:  # (f Hᵀ)ᵀ = H fᵀ: m·n entries, like f
        A = fwht(f.dense().T)
        return np.sum(A * A, axis=1) / float(n * n)
    check_dense_size(n, n, "fourier: the Gram matrix of a workload factor")
    G = f.gram().dense()
    HGH = fwht(fwht(G).T)  # G symmetric: H G H
    return np.maximum(np.diag(HGH), 0.0) / float(n * n)


def fourier_coefficients(
    workload: Matrix, coefficients: str = "needed", rtol: float = 1e-9
) -> tuple[int, dict[int, float]]:
    """``(d, {β: b_β})``: the parity coefficients the Fourier strategy keeps for a workload on
    ``2^d`` cells, ``b_β = ‖W χ_β‖² / 4^d`` (Cormode et al. §3.2, §3.6); ``coefficients``:
    ``"needed"`` (Li & Miklau §5), ``"attributes"`` or ``"all"``.

    ``W χ_β`` factorises over a term's Kronecker factors (read bit by bit, most significant
    first), so ``b_β`` is a product of per-factor Hadamard column norms and no ``2^d``-cell
    array is built beyond the kept coefficients.

    Parameters
    ----------
    workload : Matrix
        The workload, on ``2^d`` cells (``d ≥ 1``); each Kronecker factor of its normal form
        has a power-of-two number of columns.
    coefficients : {"needed", "attributes", "all"}, default "needed"
        ``"needed"``: those with ``W χ_β ≠ 0`` (all of them when ``W`` has full column
        rank); ``"attributes"``: every coefficient inside the bits of the attributes a term
        does not total over; ``"all"``: the whole Hadamard basis (``d ≤ 26``).
    rtol : float, default 1e-9
        With ``"needed"``: a factor's local coefficient is kept when its column norm exceeds
        ``rtol`` times the factor's largest.

    Returns
    -------
    d : int
        ``log2`` of the number of cells.
    b : dict of int to float
        ``{β: b_β}`` in ascending ``β`` (the bitmask of the parity ``χ_β``), ``b_β ≥ 0``
        (0 for a kept coefficient the workload does not need).

    Raises
    ------
    ValueError
        When ``coefficients`` is not one of its options, ``workload`` is not a Matrix, the
        number of cells (or a factor's number of columns) is not a power of two, the
        workload has a single cell, a term needs more than :data:`MAX_COEFFICIENTS`
        coefficients, or ``"all"`` is asked for ``d > 26``.
    TooLargeError
        When a factor that is neither Identity, a total nor a short Dense needs its ``n × n``
        Gram beyond the dense-size guard.

    References
    ----------
    Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Sections 3.2 and
    3.6; Li & Miklau 2012 (Eigen-Design), Section 5 (the Fourier baseline); Barak et al.,
    PODS 2007.
    """
    check_option(coefficients, "coefficients", COEFFICIENTS)
    if not isinstance(workload, Matrix):
        raise ValueError(f"the workload must be a Matrix, got {type(workload).__name__}")
    d = _log2(int(workload.shape[1]), "the workload")
    if d == 0:
        raise ValueError("the workload has a single cell: there is no Fourier basis to use")
    out: dict[int, float] = {}
    for term in normal_form(workload).terms:
        masks = np.zeros(1, dtype=np.int64)
        vals = np.ones(1)
        offset = 0
        for f, kind in zip(term.factors, term.kinds, strict=True):
            b = _log2(int(f.shape[1]), f"a workload factor ({type(f).__name__})")
            v = _factor_norms(f, kind)
            if coefficients == "needed":
                keep = np.flatnonzero(v > rtol * max(float(v.max()), 1e-300))
            elif kind == "total":
                keep = np.zeros(1, dtype=np.int64)
            else:
                keep = np.arange(v.size)
            if masks.size * keep.size > MAX_COEFFICIENTS:
                raise ValueError(
                    f"a workload term needs more than {MAX_COEFFICIENTS} Fourier coefficients"
                )
            local = np.zeros(keep.size, dtype=np.int64)  # C-order local index -> bit mask
            for t in range(b):
                local |= ((keep >> (b - 1 - t)) & 1) << (offset + t)
            masks = (masks[:, None] | local[None, :]).ravel()
            vals = (vals[:, None] * v[keep][None, :]).ravel()
            offset += b
        for m, val in zip(masks.tolist(), (term.c * vals).tolist()):
            out[m] = out.get(m, 0.0) + val
    if coefficients == "all":
        if d > 26:
            raise ValueError(f"coefficients='all' needs 2^{d} coefficients (> 2^26)")
        out = {beta: out.get(beta, 0.0) for beta in range(1 << d)}
    return d, dict(sorted(out.items()))


def fourier_b(keys: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """``(F, b)``: the needed coefficients and ``b_β = Σ_{α ∋ β} w_α² 2^{-|α|}`` (§3.6).

    Parameters
    ----------
    keys : dict of int to float
        ``{α: w_α}``: the workload's marginals (attribute bitmasks over binary attributes) and
        their weights, as :func:`binary_workload` gives them; at least one.

    Returns
    -------
    F : numpy.ndarray
        The downset ``{β : β ≼ α for some α}``, int64 bitmasks in ascending order.
    b : numpy.ndarray
        ``b_β`` per entry of ``F`` (float64, same length): the weighted squared norm of the
        recovery column of ``χ_β``.

    Raises
    ------
    ValueError
        When ``keys`` is empty or holds a negative key.

    References
    ----------
    Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Sections 3.6 and
    4.1.
    """
    F = downset(keys)
    b = np.zeros(F.size)
    for key, w in keys.items():
        sub = submasks(key)
        b[np.searchsorted(F, sub)] += w * w * 2.0 ** (-bin(key).count("1"))
    return F, b


@register
class FourierSelector(Selector):
    """Barak et al.'s Fourier strategy (Li & Miklau 2012 §5; Cormode et al. §4): parity rows
    ``χ_β`` for the coefficients of :func:`fourier_coefficients`.

    Pure marginals on power-of-two attributes with ``"needed"`` take the downset of §4.1
    directly (:func:`fourier_b`). The strategy is a :class:`~mmtoolkit.linalg.Fourier` with
    the budget fractions as row weights (sensitivity 1); ``Strategy.loss`` is the budget
    objective (:func:`budget_objective`).

    Parameters
    ----------
    coefficients : {"needed", "attributes", "all"}, default "needed"
        Which parity coefficients to measure (:func:`fourier_coefficients`).
    budget : {"uniform", "optimal"}, default "uniform"
        ``"uniform"``: the same noise on every kept row; ``"optimal"``: the closed-form
        per-coefficient budgets (F+, :func:`optimal_budgets`).

    Raises
    ------
    ValueError
        When ``coefficients`` or ``budget`` is not one of its options.

    References
    ----------
    Barak, Chaudhuri, Dwork, Kale, McSherry & Talwar, PODS 2007; Cormode, Procopiuc,
    Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Section 4 and Section 3.6 (F+); Li &
    Miklau 2012 (Eigen-Design), Section 5.
    """

    name = "fourier"
    method = "Fourier (parity) strategy, uniform or optimal (F+) budgets"
    paper = (
        "Barak, Chaudhuri, Dwork, Kale, McSherry & Talwar, PODS 2007; Cormode et al., ICDE 2013, §4"
    )

    def __init__(self, coefficients: str = "needed", budget: str = "uniform"):
        check_option(coefficients, "coefficients", COEFFICIENTS)
        check_option(budget, "budget", BUDGETS)
        self.params = {"coefficients": coefficients, "budget": budget}

    @classmethod
    def applicability(
        cls, workload: Matrix, privacy: Privacy, objective: str = "sum"
    ) -> str | None:
        """Also: a domain of ``2^d`` cells (the Walsh–Hadamard basis).

        Parameters
        ----------
        workload : Matrix
            The workload ``W``.
        privacy : Privacy
            The privacy definition.
        objective : str, default "sum"
            The objective (only ``"sum"``).

        Returns
        -------
        str or None
            The reason (the base class's, or a number of cells that is not a power of two),
            or None.
        """
        reason = super().applicability(workload, privacy, objective)
        return refusal(_log2, int(workload.shape[1]), "the workload") if reason is None else reason

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        mode = self.params["coefficients"]
        try:  # pure marginals on power-of-two attributes: the downset of §4.1 directly
            d, keys = binary_workload(workload, encode=True)
        except ValueError:
            keys = None
        if keys is not None and mode == "needed":
            F, b = fourier_b(keys)
            groups = [int(x) for x in F]
        else:
            d, coef = fourier_coefficients(workload, mode)
            groups, b = list(coef), np.array(list(coef.values()))
        C, norm = np.ones(len(groups)), privacy.norm
        uniform = self.params["budget"] == "uniform"
        lam = uniform_budgets(C, norm) if uniform else optimal_budgets(b, C, norm)[0]
        kept = {g: lam_g for g, lam_g in zip(groups, lam.tolist()) if lam_g > 0}
        return Strategy(
            matrix=Fourier(d, kept),
            selector=self.name,
            metadata={"coefficients": len(kept), "mode": mode, "bits": d},
            loss=budget_objective(b, lam),
        )
