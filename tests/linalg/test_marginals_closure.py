"""The marginals route on down-closures (HDMM §6.3) against the 2^d spectral formulas.

The reference below scores every workload row against every one of the 2^d residual
subspaces with the dense pseudo-inverse spectrum ``MarginalsGram.pinv_spectrum()`` and dense
factor rows: the computation the route did before it was restricted to the down-closure of
the supports. The route must agree to 1e-10 (trace, per-query variances, max variance) and
raise UnsupportedWorkloadError exactly when the reference finds a query with more than
SUPPORT_RTOL of its norm on an unmeasured subspace.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from linalg_oracle import close, random_factor

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.linalg import (
    SUPPORT_RTOL,
    Dense,
    Identity,
    Kronecker,
    Marginals,
    MarginalsGram,
    Prefix,
    Total,
    UnsupportedWorkloadError,
    VStack,
)
from mmtoolkit.linalg import marginals as marginals_module
from mmtoolkit.linalg.marginals import MarginalsRoute, closed_family
from mmtoolkit.privacy import PureDP

RTOL = 1e-10


def reference(W, gram: MarginalsGram):
    """(supported, trace, profile) over all 2^d subspaces, every row explicitly."""
    d = gram.d
    inv = gram.pinv_spectrum()
    dead = (inv == 0.0) & (gram.dims() > 0)
    bits = ((np.arange(1 << d)[:, None] >> np.arange(d)) & 1).astype(bool)
    trace, profile, worst = 0.0, [], 0.0
    for c, factors in W.kron_terms():
        P = np.ones((1, 1 << d))  # P[row, B] = Π_i (||w_i − mean||² if i ∈ B else ||mean||²)
        for i, f in enumerate(factors):
            D = f.dense()
            s = D.sum(axis=1) ** 2 / D.shape[1]
            t = np.clip((D * D).sum(axis=1) - s, 0.0, None)
            F = np.where(bits[:, i][None, :], t[:, None], s[:, None])
            P = (P[:, None, :] * F[None, :, :]).reshape(-1, 1 << d)
        profile.append(c * (P @ inv))
        trace += c * float(P.sum(axis=0) @ inv)
        norms = P.sum(axis=1)
        if c != 0.0 and dead.any() and (norms > 0).any():
            worst = max(worst, float(np.max(P[norms > 0][:, dead] / norms[norms > 0, None])))
    return worst <= SUPPORT_RTOL, trace, np.concatenate(profile)


def random_keys(rng, d, count, max_order):
    keys = set()
    while len(keys) < count:
        order = int(rng.integers(0, max_order + 1))
        keys.add(sum(1 << int(i) for i in rng.choice(d, size=order, replace=False)))
    return sorted(keys)


def random_case(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(6, 11))
    sizes = tuple(int(n) for n in rng.choice([1, 2, 2, 3], size=d))
    wkeys = random_keys(rng, d, int(rng.integers(2, 12)), 3)
    blocks = [Marginals(sizes, {k: float(rng.uniform(0.5, 2.0)) for k in wkeys})]
    for _ in range(int(rng.integers(0, 3))):  # general Kronecker terms, mostly marginal-like
        factors = [
            random_factor(rng, n)
            if rng.random() < 0.3
            else (Identity(n) if rng.random() < 0.2 else Total(n))
            for n in sizes
        ]
        blocks.append(float(rng.uniform(0.5, 2.0)) * Kronecker(factors))
    W = VStack(blocks) if len(blocks) > 1 else blocks[0]
    mode = int(rng.integers(0, 3))
    if mode == 0:  # the workload's keys and their subsets: supported when general terms are low
        skeys = sorted(set(wkeys) | set(random_keys(rng, d, 3, 2)))
    elif mode == 1:  # random low-order keys: often unsupported
        skeys = random_keys(rng, d, int(rng.integers(1, 15)), 3)
    else:  # the full table plus others: always supported
        skeys = sorted({(1 << d) - 1} | set(random_keys(rng, d, 4, 2)))
    A = Marginals(sizes, {k: float(rng.uniform(0.2, 3.0)) for k in skeys})
    return W, A


def check_support_is(route, supported: bool) -> None:
    if supported:
        route.check_support()
    else:
        with pytest.raises(UnsupportedWorkloadError):
            route.check_support()


@pytest.mark.parametrize("seed", range(40))
def test_closure_route_matches_the_dense_subset_route(seed):
    W, A = random_case(seed)
    supported, trace, profile = reference(W, A.gram())
    route = MarginalsRoute.build(W, A.gram())
    check_support_is(route, supported)
    close(route.trace(), trace, rtol=RTOL, what="trace")
    close(route.profile(), profile, rtol=RTOL, what="profile")
    close(route.max_profile(), np.max(profile), rtol=RTOL, what="max profile")


@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_support_check_scan_and_search_agree(seed, monkeypatch):
    W, A = random_case(seed)
    supported = reference(W, A.gram())[0]
    monkeypatch.setattr(marginals_module, "MAX_SEARCHED_LIVE", 0)  # scan all 2^d instead
    check_support_is(MarginalsRoute.build(W, A.gram()), supported)


def test_unsupported_marginals_are_refused_by_the_evaluator():
    sizes = (2, 3, 2, 2, 3, 2)
    A = Marginals(sizes, {0b000011: 1.0, 0b001100: 1.0})
    for W in (
        Marginals(sizes, {0b000110: 1.0}),  # the (1, 2) interaction is never measured
        VStack(
            [
                Marginals(sizes, {0b000001: 1.0}),
                Kronecker([Prefix(2), Identity(3), Total(2), Total(2), Total(3), Identity(2)]),
            ]
        ),
    ):
        with pytest.raises(UnsupportedWorkloadError):
            evaluate.expected_error(W, A, PureDP(1.0))
        with pytest.raises(UnsupportedWorkloadError):
            evaluate.max_variance(W, A, PureDP(1.0))


@pytest.mark.parametrize("seed", range(4))
def test_evaluator_on_marginals_matches_the_dense_route(seed):
    rng = np.random.default_rng(100 + seed)
    sizes = (2, 3, 2, 2, 3)
    A = Marginals(
        sizes, {k: float(rng.uniform(0.5, 2)) for k in random_keys(rng, 5, 8, 3)} | {0b11111: 0.3}
    )
    W = VStack(
        [
            Marginals(sizes, {k: 1.0 for k in random_keys(rng, 5, 5, 2)}),
            Kronecker([Prefix(2), Identity(3), Total(2), Dense(rng.random((2, 2))), Total(3)]),
        ]
    )
    D = Dense(A.dense())  # no structure: the evaluator's dense route
    P = PureDP(1.0)
    close(evaluate.expected_error(W, A, P), evaluate.expected_error(W, D, P), rtol=1e-8)
    close(evaluate.per_query_variance(W, A, P), evaluate.per_query_variance(W, D, P), rtol=1e-8)
    close(evaluate.max_variance(W, A, P), evaluate.max_variance(W, D, P), rtol=1e-8)


def test_closed_family_is_the_down_closure():
    rng = np.random.default_rng(7)
    for d in (9, 12, 14):
        keys = random_keys(rng, d, 6, 3)
        brute = sorted({b for k in keys for b in range(1 << d) if b & k == b})
        assert closed_family(keys, d).tolist() == brute
    assert closed_family([0b111111], 6).size == 64  # the whole lattice


def test_keyed_gram_algebra_matches_the_dense_gram():
    rng = np.random.default_rng(3)
    sizes = (2, 3, 1, 4)
    k1 = {int(k): float(rng.normal()) for k in rng.choice(16, 5, replace=False)}
    k2 = {int(k): float(rng.normal()) for k in rng.choice(16, 6, replace=False)}
    dense = [np.zeros(16), np.zeros(16)]
    for v, k in zip(dense, (k1, k2)):
        v[list(k)] = list(k.values())
    G1, G2 = MarginalsGram(sizes, k1), MarginalsGram(sizes, k2)
    H1, H2 = MarginalsGram(sizes, dense[0]), MarginalsGram(sizes, dense[1])
    for a, b in ((G1 + G2, H1 + H2), (G1 - G2, H1 - H2), (2.5 * G1, 2.5 * H1), (-G2, -H2)):
        close(a.v, b.v)
        close(a.spectrum(), b.spectrum())
    close(G1.trace(), H1.trace())
    close(G1.diag(), H1.diag())
    for G, H in ((G1, H1), (G2, H2)):
        keys, mu = G.live_spectrum()
        hkeys, hmu = H.live_spectrum()
        assert keys.tolist() == hkeys.tolist()
        close(mu, hmu)


def test_datacube_q_on_23_bits_stays_off_the_full_lattice():
    W = workloads.marginals([2] * 23, 2)
    P = PureDP(1.0)
    S = selectors.get("datacube", strategy="Q", budget="optimal").select(W, P)
    tracemalloc.start()
    err = evaluate.expected_error(W, S, P)
    top = evaluate.max_variance(W, S, P)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < (1 << 23) * 8 / 8, f"peak {peak} bytes: a 2^23 array was allocated"
    assert 0 < top < err


def test_random_cases_cover_both_outcomes():
    outcomes = [reference(W, A.gram())[0] for W, A in map(random_case, range(40))]
    assert 5 <= sum(outcomes) <= 35
