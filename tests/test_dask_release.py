"""The Dask route (mmtoolkit.dask_release) on a LocalCluster against the in-memory
mechanism: the linear parts (``A x``, ``A⁺ y``, ``W x̂``) equal to 1e-9 relative, and for one
seed the same noise as in memory — continuous, exact integer noise (discrete Laplace and
discrete Gaussian, equal integers), several releases at once — so measurements and releases
equal the in-memory ones."""

import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

from mmtoolkit import dask_release, mechanism, workloads  # noqa: E402
from mmtoolkit.linalg import (  # noqa: E402
    AllRange,
    Identity,
    Kronecker,
    PIdentity,
    Prefix,
    Total,
    Weighted,
)
from mmtoolkit.privacy import ZCDP, ApproxDP, PureDP  # noqa: E402

RTOL = 1e-9


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as c:  # fmt: skip
        yield c


def close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.max(np.abs(a - b)) <= RTOL * max(1.0, np.max(np.abs(b)))


# ============================================================================ Kronecker
SIZES = (12, 10, 8)


@pytest.fixture(scope="module")
def kron_case():
    rng = np.random.default_rng(3)
    A = Kronecker([PIdentity(rng.random((2, n))) for n in SIZES])
    x = rng.integers(0, 6, int(np.prod(SIZES))).astype(float)
    return A, x


@pytest.mark.parametrize("chunks", [(3, 10, 8), (4, 5, 8), 97])
def test_kron_linear_parts_equal_in_memory(client, kron_case, chunks):
    A, x = kron_case
    X = da.from_array(x if chunks == 97 else x.reshape(SIZES), chunks=chunks)
    close(dask_release.apply(A, X, cells=200).compute(), A @ x)
    y = A @ x + np.random.default_rng(1).normal(0, 3, A.shape[0])
    # y as a 1-D dask array, and as the chunked tensor the measure keeps
    xhat = mechanism.reconstruct(A, y)
    close(dask_release.reconstruct(A, da.from_array(y, chunks=131), cells=200)
          .compute().ravel(), xhat)  # fmt: skip
    Y = dask_release._apply(A, X, 200, False)
    assert Y.numblocks[0] == 1 and max(Y.numblocks) > 1  # chunked along its trailing axes
    close(dask_release.reconstruct(A, Y, cells=200).compute().ravel(), x)


@pytest.mark.parametrize("last", [Identity(10), Total(10)])
def test_product_of_identities_and_totals_reconstructs(client, last):
    """A product of identities and totals is a marginal strategy (measured by tables) whose
    pseudo-inverse is a Kronecker product with no tables: reconstructed factor-wise."""
    A = Kronecker([Identity(12), last])
    x = np.random.default_rng(6).integers(0, 6, 120).astype(float)
    y = A @ x + np.random.default_rng(7).normal(0, 2, A.shape[0])
    close(mechanism.reconstruct(A, da.from_array(y, chunks=len(y))).compute().ravel(),
          mechanism.reconstruct(A, y))  # fmt: skip
    W = Kronecker([Prefix(12), Identity(10)])
    X = da.from_array(x.reshape(12, 10), chunks=(4, 10))
    assert mechanism.release(W, A, X, PureDP(1.0), np.random.default_rng(1)).compute().shape == (
        120,
    )


@pytest.mark.parametrize("privacy", [PureDP(1.0), ZCDP(0.5)])
def test_kron_release_equals_in_memory_for_the_same_seed(client, kron_case, privacy):
    A, x = kron_case
    X = da.from_array(x.reshape(SIZES), chunks=(3, 10, 8))
    W = workloads.kron([Prefix(12), AllRange(10), Total(8)])
    y = dask_release.measure(A, X, privacy, np.random.default_rng(7), cells=200).compute()
    close(y, mechanism.measure(A, x, privacy, np.random.default_rng(7)))
    answers = dask_release.release(W, A, X, privacy, np.random.default_rng(7), cells=200)
    close(answers.compute(), mechanism.release(W, A, x, privacy, np.random.default_rng(7)))
    # the noise has the calibrated scale: sens_1(A)/ε = 1 (Laplace) or σ (1680 rows)
    z = y - A @ x
    assert (
        abs(z.mean()) < 0.15
        and abs(z.var() / privacy.noise_variance(A.sensitivity(privacy.norm)) - 1.0) < 0.2
    )
    # through mechanism.release (default blocks)
    rel = mechanism.release(W, A, X, privacy, np.random.default_rng(9)).compute()
    close(rel, mechanism.release(W, A, x, privacy, np.random.default_rng(9)))


def test_noise_depends_on_the_seed_only_not_the_scheduler(client, kron_case):
    A, x = kron_case
    X = da.from_array(x.reshape(SIZES), chunks=(3, 10, 8))
    privacy = ZCDP(0.5)
    lazy = dask_release.measure(A, X, privacy, np.random.default_rng(4), cells=200)
    on_cluster = lazy.compute()
    # the same graph built and run without the cluster (dask's own rechunk, one thread), and
    # other chunkings of the data and of the blocks
    with dask.config.set({"scheduler": "synchronous", "array.rechunk.method": "tasks"}):
        local = dask_release.measure(A, X, privacy, np.random.default_rng(4), cells=200)
        np.testing.assert_array_equal(local.compute(), on_cluster)
    for chunks, cells in [((12, 2, 8), 300), (97, 10**6)]:
        Y = da.from_array(x if chunks == 97 else x.reshape(SIZES), chunks=chunks)
        other = dask_release.measure(A, Y, privacy, np.random.default_rng(4), cells=cells)
        close(other.compute(), on_cluster)
    np.testing.assert_array_equal(lazy.compute(), on_cluster)  # recomputing: the same release
    other = dask_release.measure(A, X, privacy, np.random.default_rng(5), cells=200).compute()
    assert not np.allclose(other, on_cluster)


def test_the_generator_moves_past_the_release(client, kron_case):
    """The graph draws from a copy of the generator; the caller's generator is jumped, so two
    releases from one generator have independent noise."""
    A, x = kron_case
    X = da.from_array(x.reshape(SIZES), chunks=(3, 10, 8))
    rng = np.random.default_rng(4)
    a, b = (dask_release.measure(A, X, PureDP(1.0), rng, cells=200) for _ in range(2))
    za, zb = a.compute() - A @ x, b.compute() - A @ x
    assert abs(np.corrcoef(za, zb)[0, 1]) < 0.1


# ============================================================================ discrete noise
COUNTING = Weighted(0.37, Kronecker([Prefix(12), AllRange(10), Identity(8)]))  # scales vary


@pytest.mark.parametrize("privacy", [PureDP(0.8), ZCDP(0.3)])
@pytest.mark.parametrize("cells", [600, 10**6])  # row scales read factor-wise / row_scales()
def test_kron_discrete_noise_equals_in_memory(client, kron_case, privacy, cells):
    _, x = kron_case
    A = COUNTING
    X = da.from_array(x.reshape(SIZES), chunks=(3, 10, 8))
    y = dask_release.measure(A, X, privacy, np.random.default_rng(3), "discrete", cells=cells)
    y = y.compute()
    ym = mechanism.measure(A, x, privacy, np.random.default_rng(3), noise="discrete")
    cal = mechanism.discrete_calibration(A, privacy)
    z = y / cal.scales - A @ x / cal.scales
    np.testing.assert_allclose(z, np.rint(z), atol=1e-9)  # integer noise on integer answers
    np.testing.assert_array_equal(y, ym)
    assert np.std(z) > 1.0  # noise was drawn
    W = workloads.kron([Prefix(12), Total(10), Identity(8)])
    got = mechanism.release(W, A, X, privacy, np.random.default_rng(5), noise="discrete")
    close(got.compute(), mechanism.release(W, A, x, privacy, np.random.default_rng(5), "discrete"))


@pytest.mark.parametrize("privacy", [PureDP(0.8), ZCDP(0.3)])
def test_marginals_discrete_noise_equals_in_memory(client, marg_case, privacy):
    A, x = marg_case  # unequal weights: one noise parameter per table weight
    X = da.from_array(x.reshape(MSIZES), chunks=(1, 3, 5, 2))
    y = mechanism.measure(A, X, privacy, np.random.default_rng(2), noise="discrete").compute()
    ym = mechanism.measure(A, x, privacy, np.random.default_rng(2), noise="discrete")
    cal = mechanism.discrete_calibration(A, privacy)
    assert len(cal.params) > 1
    z = y / cal.scales - A @ x / cal.scales
    np.testing.assert_allclose(z, np.rint(z), atol=1e-9)
    np.testing.assert_array_equal(y, ym)
    W = workloads.marginals(MSIZES, 1)  # from y alone
    V = workloads.kron([Prefix(4), Identity(3), Total(5), Identity(2)])  # through x̂
    for Q in (W, V):
        got = mechanism.release(Q, A, X, privacy, np.random.default_rng(6), "discrete").compute()
        close(got, mechanism.release(Q, A, x, privacy, np.random.default_rng(6), "discrete"))


# ============================================================================ releases=R
@pytest.mark.parametrize("noise", ["continuous", "discrete"])
def test_several_releases_equal_in_memory(client, kron_case, marg_case, noise):
    privacy = ZCDP(0.4)
    (_, xk), (M, xm) = kron_case, marg_case
    K = kron_case[0] if noise == "continuous" else COUNTING
    for A, x, sizes, chunks in [(K, xk, SIZES, (3, 10, 8)), (M, xm, MSIZES, (1, 3, 5, 2))]:
        X = da.from_array(x.reshape(sizes), chunks=chunks)
        Y = mechanism.measure(A, X, privacy, np.random.default_rng(1), noise, releases=5)
        Ym = mechanism.measure(A, x, privacy, np.random.default_rng(1), noise, releases=5)
        assert Y.shape == (A.shape[0], 5)
        Y = Y.compute()
        close(Y, Ym)
        assert np.corrcoef(Y[:, 0] - A @ x, Y[:, 1] - A @ x)[0, 1] < 0.2  # independent
        # x̂ of every release, and the answers of a workload from them
        xhat = dask_release.reconstruct(A, da.from_array(Ym, chunks=(97, 5)), cells=200)
        assert xhat.shape == sizes + (5,)
        xhat_m = mechanism.reconstruct(A, Ym)
        close(xhat.compute().reshape(-1, 5), xhat_m)
        V = workloads.kron([Prefix(sizes[0])] + [Total(n) for n in sizes[1:]])
        close(mechanism.answer(V, xhat).compute(), V @ xhat_m)


# ============================================================================ marginals
MSIZES = (4, 3, 5, 2)


@pytest.fixture(scope="module")
def marg_case():
    rng = np.random.default_rng(11)
    A = workloads.marginals(MSIZES, 2, lower=True)
    A = type(A)(MSIZES, {k: 1.0 + 0.25 * i for i, k in enumerate(A.keys)})  # unequal weights
    x = rng.integers(0, 9, int(np.prod(MSIZES))).astype(float)
    return A, x


def test_marginals_linear_parts_equal_in_memory(client, marg_case):
    A, x = marg_case
    X = da.from_array(x.reshape(MSIZES), chunks=(1, 2, 5, 2))  # chunked on the first 2 axes
    close(dask_release.apply(A, X).compute(), A @ x)
    close(dask_release.apply(A, X.astype(np.int64)).compute(), A @ x)  # integer counts
    y = A @ x + np.random.default_rng(2).normal(0, 2, A.shape[0])
    xhat = dask_release.reconstruct(A, da.from_array(y, chunks=50), chunks=X.chunks)
    assert xhat.chunks == X.chunks
    close(xhat.compute().ravel(), mechanism.reconstruct(A, y))
    close(dask_release.reconstruct(A, y, cells=7).compute().ravel(), mechanism.reconstruct(A, y))


def test_marginals_release_equals_in_memory_for_the_same_seed(client, marg_case):
    A, x = marg_case
    X = da.from_array(x.reshape(MSIZES), chunks=(1, 3, 5, 2))
    privacy = PureDP(0.5)
    y = mechanism.measure(A, X, privacy, np.random.default_rng(8)).compute()
    close(y, mechanism.measure(A, x, privacy, np.random.default_rng(8)))
    z = y - A @ x
    scale = A.sensitivity(1) / 0.5
    assert abs(z.var() / (2 * scale**2) - 1.0) < 0.35  # 191 rows of Laplace(scale)
    # a marginals workload: answered from y alone (no x̂)
    W = workloads.marginals(MSIZES, 1)
    got = mechanism.release(W, A, X, privacy, np.random.default_rng(8)).compute()
    close(got, mechanism.release(W, A, x, privacy, np.random.default_rng(8)))
    # another workload: through x̂, expanded block by block
    V = workloads.kron([Prefix(4), Identity(3), Total(5), Identity(2)])
    got = mechanism.release(V, A, X, privacy, np.random.default_rng(8)).compute()
    close(got, mechanism.release(V, A, x, privacy, np.random.default_rng(8)))
    # with the measurements (release_measured)
    (lazy_ans, lazy), (mem_ans, mem) = (
        mechanism.release_measured(V, A, data, privacy, np.random.default_rng(8))
        for data in (X, x)
    )
    close(lazy_ans.compute(), mem_ans)
    close(lazy.values.compute(), mem.values)
    close(lazy.std, mem.std)
    assert lazy.distribution == mem.distribution == "laplace"


@pytest.mark.parametrize("kind", ["kron", "marg"])
def test_release_error_matches_the_evaluator(client, kron_case, marg_case, kind):
    """Monte Carlo over 30 releases, each with its own seed (the Kronecker route's noise one
    stream across many blocks): the mean squared error of the answers matches the shared
    evaluator."""
    from mmtoolkit import evaluate

    if kind == "kron":
        (A, x), sizes, chunks = kron_case, SIZES, (3, 10, 8)
        W = workloads.kron([Prefix(12), Identity(10), Total(8)])
    else:
        (A, x), sizes, chunks = marg_case, MSIZES, (1, 1, 5, 2)
        W = workloads.marginals(MSIZES, 2)
    X = da.from_array(x.reshape(sizes), chunks=chunks)
    privacy = PureDP(1.0)
    truth = W @ x
    runs = [dask_release.release(W, A, X, privacy, np.random.default_rng(s), cells=200)
            for s in range(30)]  # fmt: skip
    mse = np.array([np.mean((a - truth) ** 2) for a in dask.compute(*runs)])
    expected = evaluate.rmse(W, A, privacy) ** 2
    assert abs(mse.mean() / expected - 1.0) < 4 * mse.std() / np.sqrt(30) / expected


def test_inference_none_releases_the_workload_rows(client, marg_case):
    from mmtoolkit.strategy import Strategy

    _, x = marg_case
    W = workloads.marginals(MSIZES, 2)
    X = da.from_array(x.reshape(MSIZES), chunks=(2, 3, 5, 2))
    S = Strategy(W, "identity-of-W", inference="none")
    got = mechanism.release(W, S, X, PureDP(1.0), np.random.default_rng(1)).compute()
    assert got.shape == (W.shape[0],)
    assert np.std(got - W @ x) > 0.5 and abs(np.mean(got - W @ x)) < 3.0


# ============================================================================ errors
def test_clear_errors(kron_case, monkeypatch):
    A, x = kron_case
    X = da.from_array(x.reshape(SIZES), chunks=(3, 10, 8))
    rng = np.random.default_rng(0)
    # discrete noise: the in-memory path's errors
    with pytest.raises(ValueError, match="integer vectors up to a positive scale"):
        mechanism.measure(A, X, PureDP(1.0), rng, noise="discrete")  # p-Identity: real rows
    with pytest.raises(ValueError, match="integer vectors up to a positive scale"):
        dask_release.measure(A, X, PureDP(1.0), rng, noise="discrete", cells=50)  # factor-wise
    with pytest.raises(ValueError, match="PureDP .* and ZCDP"):
        mechanism.measure(COUNTING, X, ApproxDP(1.0, 1e-6), rng, noise="discrete")
    frac = da.from_array(x.reshape(SIZES) + 0.5, chunks=(3, 10, 8))
    with (
        dask.config.set(scheduler="synchronous"),
        pytest.raises(ValueError, match="integer counts"),
    ):
        mechanism.measure(COUNTING, frac, PureDP(1.0), rng, noise="discrete").compute()
    with pytest.raises(ValueError, match="releases: must be >= 1, got 0"):
        mechanism.measure(A, X, PureDP(1.0), rng, releases=0)
    with pytest.raises(ValueError, match="bit generator with jumped.*not SFC64"):
        mechanism.measure(A, X, PureDP(1.0), np.random.Generator(np.random.SFC64(1)))
    # kinds the Dask route cannot release as the in-memory path does
    from mmtoolkit.selectors import base as selectors

    M = workloads.marginals(MSIZES, 1)
    rp = selectors.get("residual_planner").select(M, ZCDP(0.5))
    XM = da.from_array(np.ones(MSIZES), chunks=(2, 3, 5, 2))
    with pytest.raises(ValueError, match="ResidualStrategyMatrix releases by a mechanism of its"):
        mechanism.release(M, rp, XM, ZCDP(0.5), rng)
    from mmtoolkit.linalg import VStack

    union = VStack([Kronecker([Identity(12), Total(10), Total(8)]), A])
    with pytest.raises(ValueError, match="VStack has none .*least squares"):
        mechanism.release(Kronecker([Identity(12), Total(10), Total(8)]), union, X,
                          PureDP(1.0), rng)  # fmt: skip
    big = da.zeros(10**8, chunks=10**7)  # lazy: never filled
    with pytest.raises(ValueError, match="Kronecker product of small factors or marginals"):
        mechanism.measure(Prefix(10**8), big, PureDP(1.0), rng)
    with pytest.raises(ValueError, match=r"960 cells \(shape \(12, 10, 8\)\) but the operator"):
        dask_release.apply(Kronecker([Identity(5), Identity(2)]), X)
    bad = x.copy()
    bad[500] = -1.0
    Xbad = da.from_array(bad.reshape(SIZES), chunks=(3, 10, 8))
    with dask.config.set(scheduler="synchronous"), pytest.raises(ValueError, match="negative"):
        mechanism.measure(A, Xbad, PureDP(1.0), rng).compute()
    with pytest.raises(ValueError, match="not read into memory"):  # R releases of R graphs
        mechanism.monte_carlo(Kronecker([Identity(n) for n in SIZES]), A, X, PureDP(1.0), 10, rng)
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=r"pip install 'mmtoolkit\[dask\]'"):
        dask_release.apply(A, X)


# ============================================================================ review fixes
def _collision_case():
    """Weighted factors whose in-memory row scales (Π |w_i| s_i) collide differently from
    √(Π w_i²) · Π s_i: a different number of distinct scales would change every draw."""
    from mmtoolkit.linalg import Dense

    w0, w1 = 1.2526079739576417, 1.486043465869597  # (w0·1)(w1·3) != (w0·3)(w1·1)
    A = Kronecker([Weighted(w0, Dense([[1.0, 0], [0, 3.0]])),
                   Weighted(w1, Dense([[3.0, 0], [0, 1.0]])), Identity(50)])  # fmt: skip
    x = np.random.default_rng(1).integers(0, 5, A.shape[1]).astype(float)
    return A, x


@pytest.mark.parametrize("privacy", [PureDP(1.0), ZCDP(0.5)])
def test_discrete_weighted_factors_factor_wise_equal_in_memory(client, privacy):
    A, x = _collision_case()
    X = da.from_array(x.reshape(2, 2, 50), chunks=(1, 2, 50))
    for B in (A, Kronecker([Weighted(0.37, Prefix(12)), Weighted(0.3, AllRange(10)),
                            Weighted(1.7, Identity(8))])):  # fmt: skip
        if B is not A:
            x = np.random.default_rng(0).integers(0, 5, 960).astype(float)
            X = da.from_array(x.reshape(SIZES), chunks=(5, 7, 3))
        ym = mechanism.measure(B, x, privacy, np.random.default_rng(3), noise="discrete")
        y = dask_release.measure(B, X, privacy, np.random.default_rng(3), "discrete", cells=20)
        np.testing.assert_array_equal(y.compute(), ym)  # factor-wise scales (cells < rows)


def test_negative_weights_inside_factors_equal_in_memory(client):
    """A negative weight inside a Kronecker factor or a stacked block: the Dask route
    measures the strategy's own rows (kron_terms(signed=True)), so y and the release are the
    in-memory ones, and release_measured's y comes from A."""
    x = np.random.default_rng(0).integers(0, 5, 960).astype(float)
    X = da.from_array(x.reshape(SIZES), chunks=(5, 7, 3))
    W = workloads.kron([Prefix(12), Total(10), Identity(8)])
    inner = Kronecker([Weighted(-0.5, Prefix(12)), Identity(10), Weighted(-2.0, Identity(8))])
    odd = Kronecker([Weighted(-0.5, Prefix(12)), Identity(10), Identity(8)])
    for A in (odd, inner, Weighted(-1.0, odd)):
        close(dask_release.apply(A, X).compute(), A @ x)
        for noise in ("continuous", "discrete"):
            y = mechanism.measure(A, X, PureDP(1), np.random.default_rng(1), noise).compute()
            close(y, mechanism.measure(A, x, PureDP(1), np.random.default_rng(1), noise))
            got = mechanism.release(W, A, X, PureDP(1), np.random.default_rng(1), noise)
            close(got.compute(), mechanism.release(W, A, x, PureDP(1), np.random.default_rng(1),
                                                   noise))  # fmt: skip
    from mmtoolkit.linalg import VStack

    union = VStack([Weighted(-0.6, Kronecker([Identity(12), Total(10), Total(8)])),
                    Kronecker([Total(12), Identity(10), Identity(8)])])  # fmt: skip
    close(dask_release.apply(union, X).compute(), union @ x)


def test_one_release_keeps_its_column_axis(client, kron_case, marg_case):
    """releases=1 gives m x 1, x̂ N x 1 and answers q x 1, as in memory, on both routes."""
    for (A, x), sizes, chunks in [(kron_case, SIZES, (5, 7, 3)), (marg_case, MSIZES, (2, 3, 5, 2))]:
        X = da.from_array(x.reshape(sizes), chunks=chunks)
        y = mechanism.measure(A, X, PureDP(1), np.random.default_rng(1), releases=1)
        ym = mechanism.measure(A, x, PureDP(1), np.random.default_rng(1), releases=1)
        assert y.shape == ym.shape == (A.shape[0], 1)
        close(y.compute(), ym)
        xhat, xm = mechanism.reconstruct(A, y), mechanism.reconstruct(A, ym)
        assert xhat.shape == sizes + (1,) and xm.shape == (x.size, 1)
        close(xhat.compute().reshape(-1, 1), xm)
        W = workloads.kron([Prefix(sizes[0])] + [Total(n) for n in sizes[1:]])
        a = mechanism.answer(W, xhat)
        assert a.shape == (W.shape[0], 1)
        close(a.compute(), mechanism.answer(W, xm))
        close(mechanism.answer(W, xhat.reshape(-1, 1)).compute(), W @ xm)  # N x 1
    # a tensor of the cells whose last factor has size 1, (6, 1): one release, not six
    A1 = Kronecker([PIdentity(np.random.default_rng(0).random((2, 6))), Identity(1)])
    x1 = np.arange(6.0)
    X1 = da.from_array(x1.reshape(6, 1), chunks=(3, 1))
    y1 = mechanism.measure(A1, X1, PureDP(1), np.random.default_rng(1))
    ym1 = mechanism.measure(A1, x1, PureDP(1), np.random.default_rng(1))
    assert y1.shape == ym1.shape == (A1.shape[0],)  # was (8, 1): taken as N x 1
    close(y1.compute(), ym1)
    xhat1 = mechanism.reconstruct(A1, y1)
    assert xhat1.shape == (6, 1)  # the tensor of the cells, as given
    close(xhat1.compute().ravel(), mechanism.reconstruct(A1, ym1))


def test_refusals_leave_the_generator_untouched(kron_case):
    A, x = kron_case
    X = da.from_array(x.reshape(SIZES), chunks=(3, 10, 8))
    W = workloads.kron([Prefix(12), Total(10), Identity(8)])
    cases = [
        lambda rng: mechanism.measure(COUNTING, X, ApproxDP(1.0, 1e-6), rng, noise="discrete"),
        lambda rng: mechanism.release(W, A, X, PureDP(1.0), rng, noise="discrete"),
        lambda rng: mechanism.release_measured(W, A, X, PureDP(1.0), rng, noise="discrete"),
        lambda rng: mechanism.release(AllRange(960), COUNTING, X.reshape(-1), PureDP(1.0), rng),
    ]
    for case in cases:
        rng = np.random.default_rng(0)
        before = rng.bit_generator.state
        with pytest.raises(ValueError):
            case(rng)
        assert rng.bit_generator.state == before


def test_release_measured_discrete_on_a_large_strategy_stays_lazy():
    """6.4e7 rows (beyond the m-sized row-scales array's guard): release_measured builds its
    graph and a lazy noise_std without an array over all rows; a slice of it is the
    calibration's standard deviation."""
    A = Kronecker([Identity(400), Prefix(400), Identity(400)])
    X = da.zeros((400, 400, 400), chunks=(20, 400, 400))  # lazy: never computed whole
    W = Kronecker([Total(400), Identity(400), Identity(400)])
    _, m = mechanism.release_measured(W, A, X, PureDP(1.0), np.random.default_rng(0), "discrete")
    assert m.values.shape == (A.shape[0],) and m.std.shape == (A.shape[0],)
    small = Kronecker([Identity(2), Prefix(400), Identity(3)])
    want = np.sqrt(mechanism.discrete_calibration(small, PureDP(1.0)).variances)
    assert np.all(np.asarray(m.std[:5]) == want[0])  # unweighted: one scale


def test_release_measured_discrete_noise_std_equals_in_memory(client):
    A, x = _collision_case()
    X = da.from_array(x.reshape(2, 2, 50), chunks=(1, 2, 50))
    W = workloads.kron([Total(2), Identity(2), Prefix(50)])
    lazy_ans, lazy = mechanism.release_measured(W, A, X, ZCDP(0.5), np.random.default_rng(2),
                                                "discrete")  # fmt: skip
    mem_ans, mem = mechanism.release_measured(W, A, x, ZCDP(0.5), np.random.default_rng(2),
                                              "discrete")  # fmt: skip
    np.testing.assert_array_equal(lazy.std.compute(), mem.std)
    np.testing.assert_array_equal(lazy.values.compute(), mem.values)
    close(lazy_ans.compute(), mem_ans)
