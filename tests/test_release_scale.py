"""Memory-lean measure / reconstruct (issue 17): the lean paths against independent dense
computations, the noise stream unchanged by blocking, and peak memory bounded (tracemalloc)."""

import tracemalloc
from itertools import combinations

import numpy as np
import pytest

from mmtoolkit import mechanism
from mmtoolkit.linalg import Kronecker, Marginals, PIdentity, kronecker, marginals
from mmtoolkit.linalg.marginals import table_plan
from mmtoolkit.privacy import ZCDP, PureDP


def _upto3(d):
    return [sum(1 << i for i in c) for k in range(4) for c in combinations(range(d), k)]


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few entries, so that small problems take the slab / block / in-place and
    intermediate-table code paths."""
    monkeypatch.setattr(kronecker, "BLOCK_ENTRIES", 50)
    monkeypatch.setattr(marginals, "PLAN_DIRECT_CELLS", 1)


def test_kronecker_lean_matches_dense(small_blocks):
    rng = np.random.default_rng(3)
    A = Kronecker(
        [
            PIdentity(rng.random((p, n)), norm=1 + (n % 2))
            for p, n in [(2, 5), (3, 7), (1, 4), (2, 6)]
        ]
    )
    D = np.kron(np.kron(np.kron(*(f.dense() for f in A.factors[:2])), A.factors[2].dense()),
                A.factors[3].dense())  # fmt: skip
    x = rng.random(A.shape[1])
    y = rng.random(A.shape[0])
    np.testing.assert_allclose(A @ x, D @ x, rtol=1e-10, atol=0)
    np.testing.assert_allclose(A.T @ y, D.T @ y, rtol=1e-10, atol=0)
    P = np.linalg.pinv(D)
    np.testing.assert_allclose(mechanism.reconstruct(A, y), P @ y, rtol=1e-10, atol=1e-12)
    Y = rng.random((A.shape[0], 3))  # several releases: step by step, blocked
    np.testing.assert_allclose(A.pinv() @ Y, P @ Y, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sizes", [(3, 4, 2, 5, 3), (2, 3, 4, 3, 2, 3)])
def test_marginals_lean_matches_dense(small_blocks, sizes):
    rng = np.random.default_rng(4)
    keys = _upto3(len(sizes))[2:]  # not the total and not every one-way table
    A = Marginals(sizes, {k: 0.5 + rng.random() for k in keys})
    D = A.dense()
    X = rng.random((A.shape[1], 2))
    np.testing.assert_allclose(A @ X, D @ X, rtol=1e-10, atol=0)
    y = rng.random(A.shape[0])
    np.testing.assert_allclose(mechanism.reconstruct(A, y), np.linalg.pinv(D) @ y, rtol=1e-10,
                               atol=1e-12)  # fmt: skip
    Y = rng.random((A.shape[0], 3))
    np.testing.assert_allclose(A.pinv_operator() @ Y, np.linalg.pinv(D) @ Y, rtol=1e-10,
                               atol=1e-12)  # fmt: skip


def test_table_plan_reads_the_data_four_times():
    """≤3-way marginals of [10]^8: 93 tables, 4 read from the data, each from a parent."""
    d = 8
    full = (1 << d) - 1
    plan = table_plan((10,) * d, _upto3(d))
    planned = {full}
    for key, parent in plan:
        assert parent in planned and parent & key == key and parent != key
        planned.add(key)
    assert set(_upto3(d)) <= planned
    assert sum(parent == full for _, parent in plan) == 4


@pytest.mark.parametrize("privacy", [PureDP(0.7), ZCDP(0.3)])
def test_blocked_noise_is_the_same_stream(monkeypatch, privacy):
    rng = np.random.default_rng(5)
    A = Kronecker([PIdentity(rng.random((2, 6))), PIdentity(rng.random((1, 5)))])
    x = rng.integers(0, 9, A.shape[1]).astype(float)
    monkeypatch.setattr(mechanism, "NOISE_BLOCK", 7)
    got = mechanism.measure(A, x, privacy, np.random.default_rng(11))
    want = A @ x + privacy.sample(
        np.random.default_rng(11), A.shape[0], A.sensitivity(privacy.norm)
    )
    np.testing.assert_array_equal(got, want)
    many = mechanism.measure(A, x, privacy, np.random.default_rng(11), releases=3)
    z = privacy.sample(np.random.default_rng(11), (A.shape[0], 3), A.sensitivity(privacy.norm))
    np.testing.assert_array_equal(many, (A @ x)[:, None] + z)
    assert np.array_equal(x, x.astype(int))  # the data vector is not modified in place


def _peak_extra(fn):
    tracemalloc.start()
    try:
        out = fn()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kind", ["kron", "marg"])
def test_peak_memory_of_measure_and_reconstruct(kind):
    """N ≈ 2·10^6 cells: measure holds y plus block-sized temporaries, reconstruct x̂ plus
    block-sized temporaries (a few MB; the old path held 2-4 N-vectors more)."""
    rng = np.random.default_rng(6)
    if kind == "kron":
        A = Kronecker([PIdentity(rng.random((2, 38))) for _ in range(4)])
    else:
        A = Marginals((10, 10, 10, 10, 10, 20), dict.fromkeys(_upto3(6), 1.0))
    N, m = A.shape[1], A.shape[0]
    vec = 8 * N
    x = rng.integers(0, 5, N).astype(float)
    peak, y = _peak_extra(lambda: mechanism.measure(A, x, PureDP(1.0), np.random.default_rng(1)))
    assert peak < 8 * m + 0.5 * vec
    peak, xhat = _peak_extra(lambda: mechanism.reconstruct(A, y))
    assert peak < 1.5 * vec
    assert xhat.shape == (N,)
    assert abs(xhat.sum() - x.sum()) < 0.05 * x.sum()
