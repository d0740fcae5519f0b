"""Ding, Winslett, Han & Li's DataCube selection "BMAX" (SIGMOD 2011), from HDMM's baselines
(McKenna et al. 2018, §8; digest §15) and Cormode et al. 2013, §2, §5: the exact :func:`bmax`
search, :func:`minimax_budgets` and the ``ding_datacube`` selector.
User guide: docs/algorithms/datacube.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ...checks import check_float, check_option
from ...linalg import Marginals, Matrix, normal_form
from ...linalg.marginals import key_attrs
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register
from .budgets import uniform_budgets
from .cuboids import RANGES, marginal_keys

#: Largest number of lattice candidates (2^atoms) the "lattice" mode builds.
MAX_LATTICE_CANDIDATES = 1 << 20

CANDIDATES = ("workload", "lattice")

VARIANTS = ("bmax", "hdmm_table")


@dataclass
class BMaxResult:
    """BMAX output: the measured cuboids (pick order), the cuboid each workload cuboid is
    computed from, the bound ``θ* = s^{3-p} · max mag`` and the search trace.

    Parameters
    ----------
    centroids : list of int
        The cuboids to measure (attribute bitmasks), in the order the greedy cover picked
        them; ``s = len(centroids)``.
    assignment : dict of int to int
        Per workload cuboid, the measured cuboid it is computed from: the one with the
        smallest weighted ``mag`` (ties: the first picked).
    theta : float
        The bound ``θ* = s^{3-p} · max_c w_c² mag(c, κ(c))``: with uniform budgets, the
        largest weighted per-cell variance in units of the noise variance at sensitivity 1.
    p : int
        The exponent used: 1 (L1, Laplace) or 2 (L2, Gaussian).
    candidates : int
        The number of candidate cuboids the search considered.
    levels : dict of float to int, optional
        The search trace: per weighted ``mag`` level at which the greedy cover ran, the
        number of cuboids it picked.

    References
    ----------
    Ding, Winslett, Han & Li, SIGMOD 2011; as described by McKenna et al. 2018 (HDMM),
    Section 8, and Cormode et al., ICDE 2013 (Datacube), Section 5.
    """

    centroids: list[int]
    assignment: dict[int, int]
    theta: float
    p: int
    candidates: int
    levels: dict[float, int] = field(default_factory=dict)  # mag level -> greedy picks


def _cells(key: int, sizes) -> int:
    return math.prod(sizes[i] for i in key_attrs(key, len(sizes)))


def cuboid_cells(keys: np.ndarray, sizes) -> np.ndarray:
    """The number of cells ``Π_{i ∈ key} n_i`` of each cuboid (bitmask) in ``keys``, as floats
    (exact below 2^53); ``mag(c, κ) = cuboid_cells(κ) / cuboid_cells(c)``."""
    out = np.ones(keys.shape, dtype=float)
    for i, n in enumerate(sizes):
        out *= np.where((keys >> i) & 1, float(n), 1.0)
    return out


def _candidates(keys: list[int], d: int, mode: str) -> np.ndarray:
    if mode == "workload":
        return np.array(sorted(set(keys)), dtype=np.int64)
    # the atoms: the coarsest partition of the used attributes into blocks that every workload
    # key is a union of (attributes grouped by their membership signature)
    sig: dict[tuple, int] = {}
    for i in range(d):
        s = tuple((k >> i) & 1 for k in keys)
        if any(s):
            sig[s] = sig.get(s, 0) | (1 << i)
    atoms = sorted(sig.values())
    if (1 << len(atoms)) > MAX_LATTICE_CANDIDATES:
        raise ValueError(
            f"candidates='lattice' needs 2^{len(atoms)} cuboids (> {MAX_LATTICE_CANDIDATES}); "
            "use candidates='workload'"
        )
    idx = np.arange(1 << len(atoms), dtype=np.int64)
    out = np.zeros_like(idx)
    for t, a in enumerate(atoms):
        out |= np.where((idx >> t) & 1, a, 0)
    return np.sort(out)


def bmax(
    keys: Iterable[int],
    sizes: Sequence[int],
    p: int = 1,
    candidates: str = "workload",
    weights: Sequence[float] | None = None,
    mag_limit: float | Literal["L"] | None = None,
) -> BMaxResult:
    """Ding et al.'s BMAX cuboid selection for the workload cuboids ``keys`` (guide page);
    ``weights`` scale variances by ``w²``; ``mag_limit`` (a number or ``"L"``) fixes the bound.

    A workload cuboid ``c`` computed from a measured ancestor ``κ ⊇ c`` sums
    ``mag(c, κ) = Π_{i ∈ κ∖c} n_i`` cells per cell, and with ``s`` measured cuboids its
    per-cell variance is proportional to ``s^{3-p} · w_c² · mag``. BMAX minimises the
    largest such variance by an exact binary search over the bounds ``θ``, a bound being
    feasible when a greedy set cover with at most ``s`` candidates, each covering ``c``
    only when ``w_c² mag(c, κ) ≤ θ / s^{3-p}``, covers every workload cuboid.

    Parameters
    ----------
    keys : iterable of int
        The workload's cuboids, as distinct attribute bitmasks (bit ``i``: attribute ``i``),
        each below ``2^d``; at least one.
    sizes : sequence of int
        The attribute sizes ``n_i``; ``d = len(sizes)``.
    p : {1, 2}, default 1
        The exponent: 1 for L1 (Laplace, variance ``∝ s²``), 2 for L2 (Gaussian, ``∝ s``).
    candidates : {"workload", "lattice"}, default "workload"
        The cuboids that may be measured: the workload's own, or every union of the
        workload's attribute atoms (at most :data:`MAX_LATTICE_CANDIDATES`).
    weights : sequence of float, optional
        One weight ``w_c`` per key (in the order of ``keys``), scaling the cuboid's variance
        by ``w_c²``; None: every weight 1.
    mag_limit : float or "L", optional
        A fixed bound (at least 1) on the weighted ``mag``: no search, the greedy cover at
        ``w_c² mag ≤ mag_limit``; ``"L"``: the number of workload cuboids. None: search.

    Returns
    -------
    BMaxResult
        The measured cuboids, the assignment of every workload cuboid, the bound and the
        search trace.

    Raises
    ------
    ValueError
        When ``p`` is not 1 or 2, ``candidates`` not one of its options, ``keys`` is empty,
        holds a key outside the ``d`` attributes or a key twice, ``"lattice"`` would need
        more than :data:`MAX_LATTICE_CANDIDATES` candidates, or ``mag_limit`` is below 1 or
        below every weighted mag (so no cuboid covers within it).

    References
    ----------
    Ding, Winslett, Han & Li, SIGMOD 2011; as described by McKenna et al. 2018 (HDMM),
    Section 8, and Cormode et al., ICDE 2013 (Datacube), Sections 2 and 5.
    """
    if p not in (1, 2):
        raise ValueError(f"p must be 1 (L1, Laplace) or 2 (L2, Gaussian), got {p!r}")
    check_option(candidates, "candidates", CANDIDATES)
    sizes = tuple(int(n) for n in sizes)
    d = len(sizes)
    keys = [int(k) for k in keys]
    if not keys:
        raise ValueError("the workload has no cuboid")
    for k in keys:
        if not 0 <= k < 1 << d:
            raise ValueError(f"cuboid {k} is outside the domain of {d} attributes")
    if len(set(keys)) != len(keys):
        raise ValueError("a workload cuboid is listed twice")
    w2 = np.ones(len(keys)) if weights is None else np.asarray(weights, dtype=float) ** 2
    L = np.array(keys, dtype=np.int64)
    cand = _candidates(keys, d, candidates)
    subset = (cand[:, None] & L[None, :]) == L[None, :]
    mag = cuboid_cells(cand, sizes)[:, None] / cuboid_cells(L, sizes)[None, :]
    wmag = np.where(subset, mag * w2[None, :], np.inf)
    levels = np.unique(wmag[np.isfinite(wmag)])
    e = 3 - p

    cache: dict[int, list[int]] = {}

    def greedy(li: int) -> list[int]:
        if li not in cache:
            cover = wmag <= levels[li]
            useful = cover.any(axis=1)
            rows = np.flatnonzero(useful)
            cov = cover[rows]
            uncovered = np.ones(L.size, dtype=bool)
            chosen: list[int] = []
            while uncovered.any():
                counts = cov[:, uncovered].sum(axis=1)
                j = int(np.argmax(counts))
                if counts[j] == 0:  # cannot happen: every cuboid is its own candidate
                    chosen = [-1] * (L.size + 1)
                    break
                chosen.append(int(rows[j]))
                uncovered &= ~cov[j]
            cache[li] = chosen
        return cache[li]

    def feasible(theta: float) -> int | None:
        """Smallest s whose greedy cover at threshold θ / s^{3-p} uses ≤ s cuboids."""
        for s in range(1, L.size + 1):
            t = theta / s**e
            li = int(np.searchsorted(levels, t * (1 + 1e-12), side="right")) - 1
            if li < 0:
                return None  # thresholds only shrink as s grows
            if len(greedy(li)) <= s:
                return s
        return None

    if mag_limit is not None:
        limit = float(len(keys) if mag_limit == "L" else mag_limit)
        if not limit >= 1:
            raise ValueError(f"mag_limit must be >= 1 or 'L', got {mag_limit!r}")
        li = int(np.searchsorted(levels, limit * (1 + 1e-12), side="right")) - 1
        if li < 0:
            raise ValueError(
                f"mag_limit: {limit:g} is below every weighted mag w_c²·mag (the smallest is "
                f"{levels[0]:.6g}): no cuboid covers a workload cuboid within it"
            )
        chosen = greedy(li)
        worst = max(float(np.min(wmag[chosen, i])) for i in range(L.size))
        theta = len(chosen) ** e * worst
        return _result(keys, cand, chosen, wmag, theta, p, levels, cache)
    bounds = np.unique(np.outer(np.arange(1, L.size + 1, dtype=float) ** e, levels).ravel())
    lo, hi = 0, bounds.size - 1  # bounds[-1] is feasible: s = |L|, every cuboid itself
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(bounds[mid]) is not None:
            hi = mid
        else:
            lo = mid + 1
    theta = float(bounds[lo])
    s = feasible(theta)
    if s is None:  # pragma: no cover - a bug: the search ends on a feasible bound
        raise RuntimeError(f"B_max: no feasible cover at the bound {theta:.6g}")
    li = int(np.searchsorted(levels, theta / s**e * (1 + 1e-12), side="right")) - 1
    return _result(keys, cand, greedy(li), wmag, theta, p, levels, cache)


def _result(keys, cand, chosen, wmag, theta, p, levels, cache) -> BMaxResult:
    centroids = [int(cand[j]) for j in chosen]
    assignment = {}
    for c_idx, c in enumerate(keys):
        options = [(wmag[j, c_idx], pos) for pos, j in enumerate(chosen) if wmag[j, c_idx] < np.inf]
        best = min(options)[1]
        assignment[c] = centroids[best]
    return BMaxResult(
        centroids=centroids,
        assignment=assignment,
        theta=theta,
        p=p,
        candidates=int(cand.size),
        levels={float(levels[i]): len(v) for i, v in sorted(cache.items())},
    )


def minimax_budgets(worst, norm: int) -> np.ndarray:
    """Per-cuboid fractions minimising ``max_κ M_κ / λ_κ²`` under ``Σ λ_κ = 1`` (L1:
    ``λ ∝ √M``) or ``Σ λ_κ² = 1`` (L2: ``λ² ∝ M``)."""
    M = np.asarray(worst, dtype=float)
    if norm == 1:
        r = np.sqrt(M)
        return r / r.sum()
    return np.sqrt(M / M.sum())


@register
class DingDataCube(Selector):
    """DataCube (Ding et al. 2011) via BMAX, for marginal workloads on any domain; it minimises
    the max-variance bound whatever the objective ("sum": HDMM's total-error tables).

    The strategy is the weighted marginals ``[λ_κ Q_κ]`` of the cuboids :func:`bmax` picks;
    ``Strategy.metadata`` holds the cuboids, the assignment, the bound ``theta`` and the
    budgets.

    Parameters
    ----------
    p : {1, 2} or None, default None
        BMAX's exponent; None: the privacy's sensitivity norm (1 for PureDP, else 2).
    candidates : {"workload", "lattice"}, default "workload"
        BMAX's candidate cuboids.
    budget : {"uniform", "max"}, default "uniform"
        ``"uniform"``: Ding et al.'s equal fractions (``1/s`` under L1, ``1/√s`` under L2);
        ``"max"``: per-cuboid fractions minimising the same max-variance bound (a cuboid
        nothing is computed from gets 0).
    mag_limit : float or "L", optional
        A fixed bound (a number at least 1, or ``"L"``: the number of workload cuboids) that
        skips the search (:func:`bmax`); None: search.
    variant : {"bmax", "hdmm_table"}, default "bmax"
        ``"bmax"``: the exact search; ``"hdmm_table"``: the cover at ``mag_limit = |L|``,
        which reproduces the DataCube columns printed in HDMM's Tables 3 and 5.
    ranges : {"refuse", "as_marginals"}, default "refuse"
        How a range-marginal term is read (:func:`marginal_keys`).

    Raises
    ------
    ValueError
        When a parameter is not one of its options, ``mag_limit`` is not None, ``"L"`` or a
        finite number at least 1, or ``variant="hdmm_table"`` is given a ``mag_limit``.

    References
    ----------
    Ding, Winslett, Han & Li, SIGMOD 2011; McKenna et al. 2018 (HDMM), Section 8 (Tables 3
    and 5); Cormode et al., ICDE 2013 (Datacube), Section 5.
    """

    name = "ding_datacube"
    method = "DataCube: cuboid selection by BMAX"
    paper = "Ding, Winslett, Han & Li, SIGMOD 2011"

    def __init__(
        self,
        p: int | None = None,
        candidates: str = "workload",
        budget: str = "uniform",
        mag_limit: float | Literal["L"] | None = None,
        variant: str = "bmax",
        ranges: str = "refuse",
    ):
        check_option(ranges, "ranges", RANGES)
        if p is not None and (isinstance(p, bool) or p not in (1, 2)):
            raise ValueError(f"p must be 1, 2 or None (from the privacy), got {p!r}")
        check_option(candidates, "candidates", CANDIDATES)
        if budget not in ("uniform", "max"):
            raise ValueError(f"budget must be 'uniform' or 'max', got {budget!r}")
        if mag_limit is not None and mag_limit != "L":
            text = isinstance(mag_limit, str)
            if text or not check_float(mag_limit, "mag_limit", finite=True) >= 1:
                raise ValueError(
                    f"mag_limit: must be None, a number >= 1 or 'L', got {mag_limit!r}"
                )
        check_option(variant, "variant", VARIANTS)
        if variant == "hdmm_table" and mag_limit is not None:
            raise ValueError("variant='hdmm_table' fixes mag_limit = |L|; do not pass mag_limit")
        self.params = {
            "p": p,
            "candidates": candidates,
            "budget": budget,
            "mag_limit": mag_limit,
            "variant": variant,
            "ranges": ranges,
        }

    @classmethod
    def objectives(cls) -> tuple[str, ...]:
        """The objectives it accepts (it minimises the max-variance bound for both).

        Returns
        -------
        tuple of str
            ``("sum", "max")``.
        """
        return ("sum", "max")

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        keys = marginal_keys(workload, ranges=self.params["ranges"])
        sizes = normal_form(workload).sizes
        assert sizes is not None  # marginal_keys checked that the terms share them
        p = self.params["p"] or privacy.norm
        res = bmax(
            list(keys),
            sizes,
            p=p,
            candidates=self.params["candidates"],
            weights=list(keys.values()),
            mag_limit="L" if self.params["variant"] == "hdmm_table" else self.params["mag_limit"],
        )
        cents = list(dict.fromkeys(res.centroids))
        if self.params["budget"] == "uniform":
            lam = uniform_budgets(np.ones(len(cents)), privacy.norm)  # 1/k (L1) or 1/√k (L2)
        else:
            worst = dict.fromkeys(cents, 0.0)  # a cuboid nothing is computed from: λ = 0
            for c, k in res.assignment.items():
                worst[k] = max(worst[k], keys[c] ** 2 * _cells(k, sizes) / _cells(c, sizes))
            lam = minimax_budgets(list(worst.values()), privacy.norm)
        budgets = dict(zip(cents, lam.tolist()))
        meta = {"cuboids": cents, "assignment": res.assignment, "theta": res.theta, "p": p}
        meta.update(budgets=budgets, candidates=res.candidates, variant=self.params["variant"])
        return Strategy(matrix=Marginals(sizes, budgets), selector=self.name, metadata=meta)
