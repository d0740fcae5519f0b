"""Ding et al.'s DataCube / BMAX selection (as described in HDMM §8 and the datacube paper)."""

from __future__ import annotations

import numpy as np
import pytest

from mmtoolkit import datasets, evaluate, selectors, workloads
from mmtoolkit.linalg import Marginals
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors.datacube.bmax import bmax, cuboid_cells


def brute_force_theta(keys, sizes, p):
    """min over mag levels m of g(m)^{3-p} · m, g = uncapped greedy cover size (independent)."""
    L = np.array(sorted(keys))
    cl = cuboid_cells(L, sizes)
    sub = (L[:, None] & L[None, :]) == L[None, :]
    mag = np.where(sub, cl[:, None] / cl[None, :], np.inf)
    best = np.inf
    for m in np.unique(mag[np.isfinite(mag)]):
        cover = mag <= m
        unc = np.ones(L.size, bool)
        n = 0
        while unc.any():
            j = int(np.argmax(cover[:, unc].sum(axis=1)))
            unc &= ~cover[j]
            n += 1
        best = min(best, n ** (3 - p) * m)
    return best


def test_intro_example_picks_the_ab_marginal():
    W = Marginals((2, 2, 2), {0b001: 1.0, 0b011: 1.0})
    S = selectors.get("ding_datacube").select(W, PureDP(1.0))
    assert S.metadata["cuboids"] == [0b011]
    assert evaluate.expected_error(W, S, PureDP(1.0)) == pytest.approx(16.0, rel=1e-12)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize(
    "sizes,k", [((10,) * 6, 2), ((2,) * 8, 2), ((75, 16, 5, 2, 20), 5), ((3, 4, 5, 6), 3)]
)
def test_binary_search_finds_the_smallest_feasible_bound(sizes, k, p):
    W = workloads.marginals(list(sizes), k, lower=True)
    res = bmax(list(W.weights), sizes, p=p)
    assert res.theta == pytest.approx(brute_force_theta(W.weights, sizes, p), rel=1e-12)
    # every workload cuboid is computed from a measured ancestor
    for c, kappa in res.assignment.items():
        assert kappa & c == c and kappa in res.centroids
    # the bound holds for the chosen set
    s = len(res.centroids)
    worst = max(cuboid_cells(np.array([kp]), sizes)[0] / cuboid_cells(np.array([c]), sizes)[0]
                for c, kp in res.assignment.items())  # fmt: skip
    assert s ** (3 - p) * worst <= res.theta * (1 + 1e-12)


def test_lattice_candidates_never_worse():
    sizes = (2,) * 8
    W = workloads.marginals(list(sizes), 2)
    a = bmax(list(W.weights), sizes, p=1, candidates="workload")
    b = bmax(list(W.weights), sizes, p=1, candidates="lattice")
    assert b.theta <= a.theta
    assert b.candidates == 256


@pytest.mark.parametrize("privacy", [PureDP(1.0), ZCDP(0.5)])
def test_max_budget_variant_lowers_the_max_variance(privacy):
    dom = datasets.domain("adult_hdmm")
    W = workloads.marginals(dom, 5, lower=True)
    u = selectors.get("ding_datacube", budget="uniform").select(W, privacy)
    m = selectors.get("ding_datacube", budget="max").select(W, privacy)
    assert m.matrix.sensitivity(privacy.norm) == pytest.approx(1.0, rel=1e-12)
    assert u.matrix.sensitivity(privacy.norm) == pytest.approx(1.0, rel=1e-12)
    assert evaluate.max_variance(W, m, privacy) <= evaluate.max_variance(W, u, privacy) * 1.0001


def test_adult_two_way_quotient_hdmm_table3():
    # HDMM Table 3, Adult 2-way marginals: DataCube/LM = 2.01/2.11 = 0.953
    W = workloads.marginals(datasets.domain("adult_hdmm"), 2)
    S = selectors.get("ding_datacube").select(W, PureDP(1.0))
    lm = selectors.get("laplace").select(W, PureDP(1.0))
    assert evaluate.error_ratio(W, S, lm, PureDP(1.0)) == pytest.approx(2.01 / 2.11, rel=0.01)


def test_bad_input():
    with pytest.raises(ValueError, match="p must be"):
        selectors.get("ding_datacube", p=3)
    with pytest.raises(ValueError, match="candidates"):
        selectors.get("ding_datacube", candidates="all")
    with pytest.raises(ValueError, match="outside the domain"):
        bmax([0b1000], (2, 2, 2))
    with pytest.raises(ValueError, match="twice"):
        bmax([1, 1], (2, 2))
    with pytest.raises(ValueError, match="not a set of marginals"):
        selectors.get("ding_datacube").select(workloads.all_range(8), PureDP(1.0))


def section15_literal(keys, sizes, p=2):
    """HDMM digest §15 transcribed literally (independent of :func:`bmax`): integer binary
    search of θ over [0, 2|L|²]; θ is feasible when for some s = 1..|L| a greedy cover with at
    most s picks, C covering L_c iff C ⊇ L_c and Π_{i∈C∖L_c} n_i ≤ ⌊θ / s^{3-p}⌋, covers L."""
    L = sorted(keys)

    def mag(C, c):
        return int(np.prod([sizes[i] for i in range(len(sizes)) if (C & ~c) >> i & 1]))

    def cover(theta):
        for s in range(1, len(L) + 1):
            t = theta // s ** (3 - p)
            unc, picks = set(L), []
            while unc and len(picks) < s:
                gain = {C: {c for c in unc if C & c == c and mag(C, c) <= t} for C in L}
                C = max(L, key=lambda C: len(gain[C]))  # first maximum, ascending order
                if not gain[C]:
                    break
                picks.append(C)
                unc -= gain[C]
            if not unc:
                return picks
        return None

    lo, hi = 0, 2 * len(L) ** 2
    while lo < hi:
        mid = (lo + hi) // 2
        if cover(mid) is not None:
            hi = mid
        else:
            lo = mid + 1
    return hi, cover(hi)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("sizes,k", [((10,) * 5, 2), ((3, 4, 5, 6), 3), ((2, 7, 3, 2, 5), 2)])
def test_bmax_equals_a_literal_transcription_of_hdmm_section15(sizes, k, p):
    W = workloads.marginals(list(sizes), k, lower=True)
    theta, picks = section15_literal(list(W.weights), sizes, p)
    res = bmax(list(W.weights), sizes, p=p)
    assert res.theta == theta
    assert sorted(res.centroids) == sorted(picks)


def test_hdmm_table_variant_reproduces_hdmm_printed_values():
    """variant="hdmm_table" (the §15 greedy at θ = |L|², s = |L|: mag ≤ |L|) gives HDMM's
    printed DataCube/LM quotients (Table 5, K = 2 and 4; Adult all marginals of Table 3),
    which the minimum-bound search does not."""
    P = PureDP(1.0)
    cases = [
        (workloads.marginals([10] * 8, 2, lower=True), 1.03 / 1.43),
        (workloads.marginals([10] * 8, 4, lower=True), 1.21 / 3.03),
        (workloads.marginals(datasets.domain("adult_hdmm"), 5, lower=True), 4.57 / 11.2),
    ]
    for W, printed in cases:
        lm = selectors.get("laplace").select(W, P)
        S = selectors.get("ding_datacube", p=2, variant="hdmm_table").select(W, P)
        assert evaluate.error_ratio(W, S, lm, P) == pytest.approx(printed, rel=0.01)
        T = selectors.get("ding_datacube", p=2, mag_limit="L").select(W, P)
        assert T.metadata["cuboids"] == S.metadata["cuboids"]
        B = selectors.get("ding_datacube", p=2).select(W, P)
        assert evaluate.error_ratio(W, B, lm, P) > 1.15 * printed
    with pytest.raises(ValueError, match="mag_limit"):
        selectors.get("ding_datacube", mag_limit=0.5)
    with pytest.raises(ValueError, match="variant must be"):
        selectors.get("ding_datacube", variant="fitted")
    with pytest.raises(ValueError, match="do not pass mag_limit"):
        selectors.get("ding_datacube", variant="hdmm_table", mag_limit=10)


def test_a_mag_limit_below_every_weighted_mag_is_refused():
    """With weights above 1 every w²·mag can exceed the limit: no cover exists within it
    (it used to take the largest level instead, silently ignoring the limit)."""
    with pytest.raises(ValueError, match="below every weighted mag"):
        bmax([1, 2, 3], (2, 2), weights=[2, 2, 2], mag_limit=1)
    assert bmax([1, 2, 3], (2, 2), weights=[2, 2, 2], mag_limit=4).centroids
