"""The Dask route (issue 17, mmtoolkit.dask_release) on a LocalCluster against the in-memory
mechanism: the linear parts (``A x``, ``A⁺ y``, ``W x̂``) equal to 1e-9 relative, and a full
release equal to the in-memory answers computed from the same noisy measurements."""

import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

from mmtoolkit import dask_release, mechanism, workloads  # noqa: E402
from mmtoolkit.linalg import AllRange, Identity, Kronecker, PIdentity, Prefix, Total  # noqa: E402
from mmtoolkit.privacy import ZCDP, PureDP  # noqa: E402

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


def test_kron_release_equals_in_memory_with_the_same_noise(client, kron_case):
    A, x = kron_case
    X = da.from_array(x.reshape(SIZES), chunks=(3, 10, 8))
    W = workloads.kron([Prefix(12), AllRange(10), Total(8)])
    privacy = PureDP(1.0)
    answers = dask_release.release(W, A, X, privacy, np.random.default_rng(7), cells=200)
    y = dask_release.measure(A, X, privacy, np.random.default_rng(7), cells=200).compute()
    close(answers.compute(), W @ mechanism.reconstruct(A, y))
    # the noise is Laplace with scale sens_1(A)/ε = 1: mean 0, variance 2 (1680 rows)
    z = y - A @ x
    assert abs(z.mean()) < 0.15 and abs(z.var() / 2.0 - 1.0) < 0.2
    # through mechanism.release (default blocks): the same answers as in memory from its y
    rel = mechanism.release(W, A, X, privacy, np.random.default_rng(9)).compute()
    y9 = mechanism.measure(A, X, privacy, np.random.default_rng(9)).compute()
    close(rel, W @ mechanism.reconstruct(A, y9))


def test_noise_depends_on_the_seed_only_not_the_scheduler(client, kron_case):
    A, x = kron_case
    X = da.from_array(x.reshape(SIZES), chunks=(3, 10, 8))
    privacy = ZCDP(0.5)
    lazy = dask_release.measure(A, X, privacy, np.random.default_rng(4), cells=200)
    on_cluster = lazy.compute()
    # the same graph built and run without the cluster (dask's own rechunk, one thread)
    with dask.config.set({"scheduler": "synchronous", "array.rechunk.method": "tasks"}):
        local = dask_release.measure(A, X, privacy, np.random.default_rng(4), cells=200)
        np.testing.assert_array_equal(local.compute(), on_cluster)
    np.testing.assert_array_equal(lazy.compute(), on_cluster)  # recomputing: the same release
    other = dask_release.measure(A, X, privacy, np.random.default_rng(5), cells=200).compute()
    assert not np.allclose(other, on_cluster)


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


def test_marginals_release_equals_in_memory_with_the_same_noise(client, marg_case):
    A, x = marg_case
    X = da.from_array(x.reshape(MSIZES), chunks=(1, 3, 5, 2))
    privacy = PureDP(0.5)
    y = mechanism.measure(A, X, privacy, np.random.default_rng(8)).compute()
    z = y - A @ x
    scale = A.sensitivity(1) / 0.5
    assert abs(z.var() / (2 * scale**2) - 1.0) < 0.35  # 191 rows of Laplace(scale)
    # a marginals workload: answered from y alone (no x̂)
    W = workloads.marginals(MSIZES, 1)
    got = mechanism.release(W, A, X, privacy, np.random.default_rng(8)).compute()
    close(got, mechanism.answer_marginals(W, A, y))
    # another workload: through x̂, expanded block by block
    V = workloads.kron([Prefix(4), Identity(3), Total(5), Identity(2)])
    got = mechanism.release(V, A, X, privacy, np.random.default_rng(8)).compute()
    close(got, V @ mechanism.reconstruct(A, y))


@pytest.mark.parametrize("kind", ["kron", "marg"])
def test_release_error_matches_the_evaluator(client, kron_case, marg_case, kind):
    """Monte Carlo over 30 releases (the Kronecker route's noise from many blocks, each with
    its own seed): the mean squared error of the answers matches the shared evaluator."""
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
    with pytest.raises(ValueError, match="continuous noise only"):
        mechanism.measure(A, X, PureDP(1.0), rng, noise="discrete")
    with pytest.raises(ValueError, match="one release"):
        mechanism.measure(A, X, PureDP(1.0), rng, releases=3)
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
    with pytest.raises(ValueError, match="not read into memory"):
        mechanism.release_measured(Kronecker([Identity(n) for n in SIZES]), A, X,
                                   PureDP(1.0), rng)  # fmt: skip
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=r"pip install 'mmtoolkit\[dask\]'"):
        dask_release.apply(A, X)
