"""Memory-lean measure / reconstruct: the lean paths against independent dense
computations, the noise stream unchanged by blocking, and peak memory bounded (tracemalloc)."""

import threading
import tracemalloc
from itertools import combinations

import numpy as np
import pytest
from noise_draws import one_draw

from mmtoolkit import measurement, mechanism
from mmtoolkit.linalg import (
    Identity,
    Kronecker,
    Marginals,
    PIdentity,
    kernels,
    kronecker,
    marginals,
)
from mmtoolkit.linalg.marginals import table_plan
from mmtoolkit.plan import Noise
from mmtoolkit.privacy import ZCDP, PureDP


def _upto3(d):
    return [sum(1 << i for i in c) for k in range(4) for c in combinations(range(d), k)]


@pytest.fixture(params=[20, 10**9], ids=["recursive", "grouped"])
def small_blocks(monkeypatch, request):
    """Blocks of a few entries, so that small problems take the slab / block / in-place and
    intermediate-table code paths (Kronecker slabs recursive, or all in groups of slabs)."""
    monkeypatch.setattr(kronecker, "BLOCK_ENTRIES", 50)
    monkeypatch.setattr(kronecker, "COLUMN_ENTRIES", 120)
    monkeypatch.setattr(kronecker, "SLAB_ENTRIES", request.param)
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


def test_kronecker_lean_with_other_factor_kinds_matches_dense(small_blocks):
    """Factors without a batched form of their own (the generic ``apply_along``: first,
    middle and last axes) beside p-Identity ones, forward, transposed and pseudo-inverse."""
    from mmtoolkit.linalg import AllRange, Dense, Identity, Prefix

    rng = np.random.default_rng(31)
    A = Kronecker(
        [Prefix(4), PIdentity(rng.random((2, 5))), Identity(3), AllRange(3),
         Dense(rng.random((3, 4)))]
    )  # fmt: skip
    D = A.factors[0].dense()
    for f in A.factors[1:]:
        D = np.kron(D, f.dense())
    x, y = rng.random(A.shape[1]), rng.random(A.shape[0])
    np.testing.assert_allclose(A @ x, D @ x, rtol=1e-10, atol=0)
    np.testing.assert_allclose(A.T @ y, D.T @ y, rtol=1e-10, atol=0)
    B = Kronecker([PIdentity(rng.random((1, 4))), Identity(3), PIdentity(rng.random((2, 5)))])
    P = np.linalg.pinv(B.dense())
    z = rng.random(B.shape[0])
    np.testing.assert_allclose(mechanism.reconstruct(B, z), P @ z, rtol=1e-10, atol=1e-12)
    got = mechanism.reconstruct(B, z.copy(), overwrite=True)
    np.testing.assert_allclose(got, P @ z, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("privacy", [PureDP(0.7), ZCDP(0.3)])
def test_noise_stream_in_pieces_is_one_draw(monkeypatch, privacy):
    """A noise stream added to pieces of any sizes (across block boundaries) gives the
    values of one draw, bit for bit, and leaves the generator where one draw does."""
    monkeypatch.setattr(measurement, "NOISE_BLOCK", 7)
    sizes = [3, 11, 1, 0, 7, 20, 2]
    base = np.arange(sum(sizes), dtype=float)
    want = base.copy()
    g1, g2 = np.random.default_rng(8), np.random.default_rng(8)
    want += one_draw(privacy, g1, want.size, 1.5)
    got = base.copy()
    stream = measurement.continuous_stream(privacy.family, privacy.noise_scale(1.5), g2, got.size)
    for s, k in zip(np.cumsum([0] + sizes), sizes):
        stream.add(got[s : s + k])
    np.testing.assert_array_equal(got, want)
    assert g1.bit_generator.state == g2.bit_generator.state
    with pytest.raises(ValueError, match="values left"):
        stream.add(np.zeros(1))


@pytest.mark.parametrize("privacy", [PureDP(0.7), ZCDP(0.3)])
def test_streamed_measure_is_product_plus_one_draw(small_blocks, monkeypatch, privacy):
    """measure() with a p-Identity first factor adds the noise slab by slab as the product
    finishes them: A x plus the values of one draw, bit for bit (also weighted); A x itself
    equals the dense product."""
    monkeypatch.setattr(measurement, "NOISE_BLOCK", 7)
    rng = np.random.default_rng(32)
    A = _kron_case(rng)
    x = rng.integers(0, 9, A.shape[1]).astype(float)
    for S in (A, 2.5 * A):
        got = mechanism.measure(S, x, privacy, np.random.default_rng(11))
        z = one_draw(
            privacy, np.random.default_rng(11), S.shape[0], S.sensitivity(privacy.norm)
        )
        np.testing.assert_array_equal(got, S @ x + z)
    np.testing.assert_allclose(A @ x, A.dense() @ x, rtol=1e-10, atol=0)


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


@pytest.mark.parametrize("case", ["full table", "two-way only"])
def test_marginals_pinv_with_unmeasured_subsets_matches_dense(small_blocks, case):
    """Residuals whose subsets are not measured (every subset of the full table; the 1- and
    0-way subsets of 2-way tables) each get their own table, from chained means."""
    sizes = (3, 2, 4, 3)
    d, rng = len(sizes), np.random.default_rng(5)
    if case == "full table":
        keys = [(1 << d) - 1, 0b0011, 0b0100]
    else:
        keys = [k for k in range(1 << d) if k.bit_count() == 2]
    A = Marginals(sizes, {k: 0.5 + rng.random() for k in keys})
    P = np.linalg.pinv(A.dense())
    Y = rng.random((A.shape[0], 2))
    np.testing.assert_allclose(A.pinv_operator() @ Y, P @ Y, rtol=1e-10, atol=1e-12)
    W = Marginals(sizes, {0b0101: 1.0, 0b1000: 2.0})
    np.testing.assert_allclose(A.workload_answers(W, Y), W.dense() @ P @ Y, rtol=1e-10,
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
    monkeypatch.setattr(measurement, "NOISE_BLOCK", 7)
    got = mechanism.measure(A, x, privacy, np.random.default_rng(11))
    want = A @ x + one_draw(
        privacy, np.random.default_rng(11), A.shape[0], A.sensitivity(privacy.norm)
    )
    np.testing.assert_array_equal(got, want)
    many = mechanism.measure(A, x, privacy, np.random.default_rng(11), releases=3)
    z = one_draw(
        privacy, np.random.default_rng(11), (A.shape[0], 3), A.sensitivity(privacy.norm)
    )
    np.testing.assert_array_equal(many, (A @ x)[:, None] + z)
    assert np.array_equal(x, x.astype(int))  # the data vector is not modified in place


def _peak_extra(fn):
    """The peak of memory ``fn()`` allocates, and its result; the compiled kernels, if in
    use, are compiled first (compiling is once per process, and allocates the compiler's
    objects, not arrays)."""
    kernels.prepare()
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


# ------------------------------------------------------------------ the noise, in place
def test_laplace_noise_is_numpys_transform_of_the_same_uniforms():
    """The noise stream draws rng.laplace's values (same uniforms, the inverse CDF vectorised; SIMD
    log may differ in the last bit) and Gaussian noise bit for bit."""
    got = one_draw(PureDP(0.5), np.random.default_rng(9), (3000, 3), 1.5)
    want = np.random.default_rng(9).laplace(0.0, 3.0, (3000, 3))
    np.testing.assert_allclose(got, want, rtol=4e-16, atol=0)
    got = one_draw(ZCDP(0.2), np.random.default_rng(9), 5000, 1.5)
    want = np.random.default_rng(9).normal(0.0, ZCDP(0.2).noise_scale(1.5), 5000)
    np.testing.assert_array_equal(got, want)


def _kron_case(rng):
    return Kronecker(
        [PIdentity(rng.random((p, n)), norm=1 + (n % 2)) for p, n in [(2, 5), (3, 7), (1, 4)]]
    )


def test_reconstruct_in_place_matches_dense(small_blocks):
    rng = np.random.default_rng(12)
    A = _kron_case(rng)
    P = np.linalg.pinv(A.dense())
    y = rng.random(A.shape[0])
    want = P @ y
    buf = y.copy()
    got = mechanism.reconstruct(A, buf, overwrite=True)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert np.shares_memory(got, buf)  # built in y's memory: no new N-vector
    # a weighted Kronecker strategy too (the weight is undone after the in-place product)
    buf = y.copy()
    got = mechanism.reconstruct(2.5 * A, buf, overwrite=True)
    np.testing.assert_allclose(got, want / 2.5, rtol=1e-10, atol=1e-12)


def test_release_without_measurements_matches_release_measured(small_blocks):
    """release() builds x̂ in y's memory and answers in x̂'s; the answers are those of
    release_measured (which keeps y) for the same seed."""
    from mmtoolkit.linalg import AllRange, Identity

    rng = np.random.default_rng(13)
    A = _kron_case(rng)
    x = rng.integers(0, 6, A.shape[1]).astype(float)
    for W in (Kronecker([Identity(5), Identity(7), Identity(4)]),
              Kronecker([AllRange(5), Identity(7), AllRange(4)])):  # fmt: skip
        for privacy in (PureDP(1.0), ZCDP(0.5)):
            a = mechanism.release(W, A, x, privacy, np.random.default_rng(4))
            b = mechanism.release_measured(W, A, x, privacy, np.random.default_rng(4))[0]
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)


def test_too_many_answers_refused_before_noise():
    """All ranges ⊗ all ranges ⊗ identity on [1000]^3 has 2.5·10^14 queries: a clear error
    before any noise is drawn, no MemoryError."""
    from mmtoolkit import workloads as wl
    from mmtoolkit.linalg import Identity

    W = wl.kron([wl.all_range(1000), wl.all_range(1000), wl.identity(1000)])
    A = Kronecker([Identity(1000)] * 3)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(ValueError, match="measurements together needs .* more than this machine"):
        mechanism.release(W, A, np.zeros(4), PureDP(1.0), rng)  # refused before the data
    assert rng.bit_generator.state == state
    # a workload that fits, a strategy whose measurements do not (2.5e14 rows)
    with pytest.raises(ValueError, match="strategy 2.505e\\+14 rows"):
        mechanism.release(A, W, np.zeros(4), PureDP(1.0), rng)
    assert rng.bit_generator.state == state


def test_float32_path_close_to_float64(small_blocks):
    """float32 data: y and x̂ are float32 (half the memory); the error they add is rounding
    (~1e-7 relative), far below the noise."""
    rng = np.random.default_rng(14)
    A = _kron_case(rng)
    x = rng.integers(0, 50, A.shape[1]).astype(float)
    y64 = mechanism.measure(A, x, PureDP(1.0), np.random.default_rng(3))
    y32 = mechanism.measure(A, x.astype(np.float32), PureDP(1.0), np.random.default_rng(3))
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, y64, rtol=1e-5, atol=1e-5)
    x64 = mechanism.reconstruct(A, y64, overwrite=True)
    x32 = mechanism.reconstruct(A, y32, overwrite=True)
    assert x32.dtype == np.float32
    noise = np.sqrt(np.mean((x64 - x) ** 2))
    assert np.sqrt(np.mean((x32 - x64) ** 2)) < 1e-5 * noise


def test_empirical_rmse_of_one_release_matches_expected():
    """The 10^9 check of bench_release.py --huge at N = 52^3 (above BLOCK_ENTRIES: the lean,
    in-place path): OPT_⊗ for all ranges ⊗ all ranges ⊗ identity, x̂ released;
    ||x̂ − x||² / N against the evaluator's identity-workload RMSE (within 1%), and
    eᵀ(G₁⊗G₂⊗I)e (structural, no answers) equal to ||W e||²."""
    import math

    from mmtoolkit import evaluate, selectors
    from mmtoolkit import workloads as wl
    from mmtoolkit.linalg import Identity

    n = 52
    assert n**3 > kronecker.BLOCK_ENTRIES
    W = wl.kron([wl.all_range(n), wl.all_range(n), wl.identity(n)])
    S = selectors.get_class("opt_kron")(seed=0).select(W, PureDP(1.0))
    ident = Kronecker([Identity(n)] * 3)
    rng = np.random.default_rng(5)
    x = rng.integers(0, 5, n**3).astype(float)
    e = mechanism.release(ident, S, x, PureDP(1.0), np.random.default_rng(6)) - x
    expected = evaluate.rmse(ident, S, PureDP(1.0))
    assert math.sqrt(e @ e / e.size) == pytest.approx(expected, rel=0.01)
    small = wl.kron([wl.all_range(6), wl.all_range(5), wl.identity(4)])
    v = rng.normal(size=small.shape[1])
    assert v @ (small.gram() @ v) == pytest.approx(np.sum((small @ v) ** 2), rel=1e-12)


@pytest.mark.parametrize("privacy", [PureDP(1.0), ZCDP(0.5)])
def test_monte_carlo_of_in_place_releases(small_blocks, privacy):
    """Single-vector releases through the lean in-place path (measure, x̂ in y's memory,
    answers in x̂'s), repeated: the mean total squared error agrees with the evaluator."""
    from statistics import NormalDist

    from mmtoolkit import evaluate
    from mmtoolkit.linalg import AllRange, Identity

    rng = np.random.default_rng(21)
    A = _kron_case(rng)
    W = Kronecker([AllRange(5), Identity(7), AllRange(4)])
    x = rng.integers(0, 6, A.shape[1]).astype(float)
    truth = W @ x
    gen = np.random.default_rng(22)
    totals = np.array(
        [np.sum((mechanism.release(W, A, x, privacy, gen) - truth) ** 2) for _ in range(600)]
    )
    expected = evaluate.expected_error(W, A, privacy)
    half = NormalDist().inv_cdf(0.9995) * totals.std(ddof=1) / np.sqrt(totals.size)
    assert abs(totals.mean() - expected) < half


@pytest.mark.parametrize("kind", ["fourier", "privelet 1-D", "privelet padded"])
def test_orthogonal_row_kinds_reconstruct_exactly_not_by_least_squares(kind):
    """Fourier (Barak et al. 2007) and the Haar wavelet (Privelet) have closed-form
    pseudo-inverses: the mechanism uses them (an LSMR solve would stop at its tolerance)."""
    from mmtoolkit.linalg import Fourier
    from mmtoolkit.selectors.baselines.privelet import PriveletHaar

    rng = np.random.default_rng(6)
    A = {
        "fourier": lambda: Fourier(5, {b: 0.5 + rng.random() for b in (0, 1, 3, 6, 17, 31)}),
        "privelet 1-D": lambda: PriveletHaar(64),
        "privelet padded": lambda: PriveletHaar(45),
    }[kind]()
    assert A.pinv_operator() is not None
    y = rng.random(A.shape[0])
    np.testing.assert_allclose(mechanism.reconstruct(A, y), np.linalg.pinv(A.dense()) @ y,
                               rtol=1e-12, atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("first", [(1, 2), (12, 4), (4, 100)])
def test_pidentity_first_product_holds_no_large_temporary(monkeypatch, first):
    """``ΘD x`` of a p-Identity first factor is p/n of the data: the slab-by-slab path takes
    it only when that is at most 1/16 (a binary first attribute would add 0.5 N), so a
    product holds its result and at most a small fraction of the data besides."""
    import tracemalloc

    monkeypatch.setattr(kronecker, "BLOCK_ENTRIES", 50)
    monkeypatch.setattr(kronecker, "COLUMN_ENTRIES", 120)
    monkeypatch.setattr(kronecker, "SLAB_ENTRIES", 64)
    p, n = first
    A1 = PIdentity(np.random.default_rng(0).random((p, n)))
    A = Kronecker([A1, Identity(100), Identity(100)])
    x = np.random.default_rng(1).random(A.shape[1])
    want = (A1.dense() @ x.reshape(n, -1)).ravel()
    kernels.prepare()  # compiled before tracing (see _peak_extra)
    tracemalloc.start()
    try:
        y = A @ x
        extra = tracemalloc.get_traced_memory()[1] - y.nbytes
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(y, want, rtol=1e-12)
    assert extra <= 0.25 * x.nbytes, extra / x.nbytes  # was 0.67 and 3.0 N for (1, 2), (12, 4)


@pytest.fixture(params=[1, 2], ids=["1 thread", "2 threads"])
def threads(monkeypatch, request):
    """``MMTOOLKIT_THREADS`` 1 or 2, with the thresholds lowered so that small problems take
    the threaded paths (slabs and column blocks of a Kronecker product on two threads, the
    noise drawn ahead in chunks of three blocks)."""
    monkeypatch.setenv("MMTOOLKIT_THREADS", str(request.param))
    monkeypatch.setattr(kronecker, "PARALLEL_ENTRIES", 1)
    monkeypatch.setattr(measurement, "NOISE_BLOCK", 7)
    monkeypatch.setattr(measurement, "PREFETCH_CHUNK", 21)
    return request.param


@pytest.mark.parametrize("privacy", [PureDP(0.7), ZCDP(0.3)])
def test_prefetched_noise_stream_is_one_draw(threads, privacy):
    """With prefetch, a second thread draws the chunks ahead: the same values as one
    draw, bit for bit, for pieces across block and chunk boundaries; the generator
    ends where one draw leaves it, and is untouched until the first piece."""
    sizes = [3, 11, 1, 0, 7, 20, 2, 40, 9]
    base = np.arange(sum(sizes), dtype=float)
    want = base.copy()
    g1, g2 = np.random.default_rng(8), np.random.default_rng(8)
    want += one_draw(privacy, g1, want.size, 1.5)
    got = base.copy()
    scale = privacy.noise_scale(1.5)
    stream = measurement.continuous_stream(privacy.family, scale, g2, got.size, prefetch=True)
    assert (stream._ahead is not None) == (threads == 2)  # the thread is really used
    assert g2.bit_generator.state == np.random.default_rng(8).bit_generator.state
    for s, k in zip(np.cumsum([0] + sizes), sizes):
        stream.add(got[s : s + k])
    np.testing.assert_array_equal(got, want)
    assert g1.bit_generator.state == g2.bit_generator.state
    assert stream._ahead is None or stream._ahead._pool is None  # ended with the stream


def test_ahead_runs_tasks_in_order_on_one_thread(threads):
    """``Ahead`` hands out ``task(0..count−1)`` in order; with two threads every task runs on
    one other thread (so a generator advanced by the tasks gives the same values as on the
    calling thread), with one thread on the calling thread; nothing runs before the first
    result is asked for or ``start``; ``next`` after the last result or ``close`` raises."""
    from mmtoolkit.threads import Ahead

    ran, rng = [], np.random.default_rng(3)

    def task(i):
        ran.append((i, threading.get_ident()))
        return rng.random(5)

    want = np.random.default_rng(3).random(5 * 6).reshape(6, 5)
    ahead = Ahead(task, 6)
    assert not ran  # untouched until started
    got = np.array([ahead.next() for _ in range(6)])
    np.testing.assert_array_equal(got, want)
    assert [i for i, _ in ran] == list(range(6))
    idents = {t for _, t in ran}
    main = threading.get_ident()
    assert idents == ({main} if threads == 1 else idents - {main}) and len(idents) == 1
    with pytest.raises(ValueError, match="closed"):
        ahead.next()
    early = Ahead(task, 4)
    early.start()
    early.next()
    early.close()
    with pytest.raises(ValueError, match="closed"):
        early.next()


def test_residual_planner_noise_thread_follows_worker_threads(threads):
    """ResidualPlanner's measurement draws its chunks ahead through ``Ahead`` (on a second
    thread only when ``worker_threads()`` allows: ``MMTOOLKIT_THREADS=1`` keeps it on the
    calling thread), with the same values either way."""
    from mmtoolkit import selectors
    from mmtoolkit import workloads as wl
    from mmtoolkit.privacy import ZCDP
    from mmtoolkit.selectors.residual_planner import measurements

    W = wl.marginals((3, 4, 5), 2, lower=True)
    strategy = selectors.get_class("residual_planner")().select(W, ZCDP(0.5))
    plan = strategy.matrix.plan
    records = np.random.default_rng(1).integers(0, [3, 4, 5], size=(200, 3))
    seen = set()
    real = measurements.Ahead

    class Spy(real):
        def next(self):
            seen.add(self._pool is not None)
            return super().next()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(measurements, "Ahead", Spy)
        got = measurements.measure(plan, records, Noise.of(ZCDP(0.5)), np.random.default_rng(2))
    assert len(measurements._layout(plan).batches) > 1  # so two threads do draw ahead
    assert seen == {threads == 2}
    with pytest.MonkeyPatch.context() as mp:  # the reference on the calling thread
        mp.setenv("MMTOOLKIT_THREADS", "1")
        ref = measurements.measure(plan, records, Noise.of(ZCDP(0.5)), np.random.default_rng(2))
    np.testing.assert_array_equal(got.values, ref.values)


def test_prefetched_noise_stream_closed_early(threads):
    """A stream closed part-way (the product failed) ends its thread; the values it added
    are the first ones of the one draw."""
    privacy = PureDP(1.0)
    want = one_draw(privacy, np.random.default_rng(4), 100)
    got = np.zeros(30)
    stream = measurement.continuous_stream(privacy.family, privacy.noise_scale(1.0),
                                           np.random.default_rng(4), 100, prefetch=True)
    stream.add(got)
    stream.close()
    assert stream._ahead is None or stream._ahead._pool is None
    np.testing.assert_array_equal(got, want[:30])
    with pytest.raises(ValueError, match="closed"):
        stream.add(np.zeros(1))


def test_kronecker_threads_give_the_same_bytes(small_blocks, monkeypatch):
    """Slabs and column blocks on two threads: products, transposed products, pseudo-inverse
    (in place and not) and the streamed measure equal the one-thread results bit for bit,
    and the dense ones to rounding; the pool really ran tasks."""
    monkeypatch.setattr(kronecker, "PARALLEL_ENTRIES", 1)
    monkeypatch.setattr(measurement, "NOISE_BLOCK", 7)
    monkeypatch.setattr(measurement, "PREFETCH_CHUNK", 21)
    pooled = []

    class Counting(kronecker.Workers):
        def run(self, tasks):
            tasks = list(tasks)
            pooled.append(len(tasks) - 1 if self.k > 1 else 0)
            return super().run(tasks)

    monkeypatch.setattr(kronecker, "Workers", Counting)
    rng = np.random.default_rng(33)
    A = _kron_case(rng)
    x = rng.integers(0, 9, A.shape[1]).astype(float)
    y = rng.random(A.shape[0])

    def results(k):
        monkeypatch.setenv("MMTOOLKIT_THREADS", str(k))
        return {
            "Ax": A @ x,
            "ATy": A.T @ y,
            "pinv": mechanism.reconstruct(A, y),
            "in place": mechanism.reconstruct(A, y.copy(), overwrite=True),
            "measure": mechanism.measure(A, x, PureDP(1.0), np.random.default_rng(5)),
        }

    one = results(1)
    assert sum(pooled) == 0
    two = results(2)
    assert sum(pooled) > 0
    for key in one:
        np.testing.assert_array_equal(two[key], one[key], err_msg=key)
    P = np.linalg.pinv(A.dense())
    np.testing.assert_allclose(two["Ax"], A.dense() @ x, rtol=1e-10, atol=0)
    np.testing.assert_allclose(two["in place"], P @ y, rtol=1e-10, atol=1e-12)


def test_worker_threads_setting(monkeypatch):
    from mmtoolkit.threads import MAX_THREADS, Workers, worker_threads

    monkeypatch.delenv("MMTOOLKIT_THREADS", raising=False)
    assert 1 <= worker_threads() <= MAX_THREADS
    with Workers(2) as w:  # on another thread than the main one: that thread alone
        assert w.run([lambda: 0, worker_threads]) == [0, 1]
    monkeypatch.setenv("MMTOOLKIT_THREADS", "3")
    assert worker_threads() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("MMTOOLKIT_THREADS", bad)
        with pytest.raises(ValueError, match="MMTOOLKIT_THREADS"):
            worker_threads()
    with Workers(3) as w:  # results in order; an error raised after every task finished
        assert w.run([lambda i=i: i * i for i in range(5)]) == [0, 1, 4, 9, 16]
        finished = []

        def slow():
            __import__("time").sleep(0.05)
            finished.append(1)

        with pytest.raises(ZeroDivisionError):
            w.run([lambda: 1 / 0, slow])
        assert finished == [1]


def test_threads_keep_in_place_reconstruction_lean(monkeypatch):
    """In place, each thread's slab scratch counts: with a small first factor (slabs of half
    the data) the slabs run one at a time, so x̂ still costs well under one N-vector; with a
    large one the extra scratch is at most 1/16 of the data."""
    monkeypatch.setenv("MMTOOLKIT_THREADS", "2")
    rng = np.random.default_rng(34)
    for first, rest, ratio in [((1, 2), (2, 126), 0.45), ((2, 40), (2, 62), 0.1)]:
        A = Kronecker([PIdentity(rng.random(first))] + [PIdentity(rng.random(rest))] * 3)
        y = rng.random(A.shape[0])
        want = mechanism.reconstruct(A, y)
        buf = y.copy()
        kernels.prepare()  # compiled before tracing (see _peak_extra)
        tracemalloc.start()
        got = mechanism.reconstruct(A, buf, overwrite=True)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        np.testing.assert_array_equal(got, want)
        assert peak < ratio * y.nbytes, (first, peak / y.nbytes)


@pytest.mark.parametrize("privacy", [PureDP(0.7), ZCDP(0.3)])
def test_measure_of_a_kind_that_does_not_stream_adds_the_started_stream(threads, privacy):
    """measure() starts the noise thread before the product; a kind without a streamed
    product (marginals) gets the same stream added to A x: A x plus the values of one draw,
    bit for bit, with one thread or two."""
    A = Marginals((3, 4, 5), {0b011: 1.0, 0b110: 2.0, 0b101: 0.5})
    x = np.random.default_rng(6).integers(0, 9, A.shape[1]).astype(float)
    assert A.answers_streamed(x, lambda piece: None) is None
    got = mechanism.measure(A, x, privacy, np.random.default_rng(11))
    z = one_draw(
        privacy, np.random.default_rng(11), A.shape[0], A.sensitivity(privacy.norm)
    )
    np.testing.assert_array_equal(got, A @ x + z)


def test_bench_release_times_the_floor_draw_like_the_measure():
    """benchmarks/bench_release.py: each repeat times the floor's draw into a fresh array
    (its system seconds reported, as the measure's are) and says whether the compiled
    kernels ran; the row renders in the table."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_release.py"
    spec = importlib.util.spec_from_file_location("bench_release", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = bench.run_case("kron", 10**4, 2)
    assert row["compiled"] == (kernels.compiled() is not None)
    assert row["draw"] > 0 and row["draw_sys"] >= 0 and row["measure_sys"] >= 0
    line = bench.table([row]).splitlines()[-1]
    assert f"({row['draw_sys']:.2f}) /" in line and ("numba" in line or "numpy" in line)
