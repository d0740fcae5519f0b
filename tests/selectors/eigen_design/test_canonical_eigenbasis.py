"""Strategies built from eigenvectors do not depend on the eigensolver's basis inside a
repeated eigenvalue, nor on the BLAS thread count (mmtoolkit.linalg.spectral)."""

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import mmtoolkit as mm
from mmtoolkit import selectors, workloads
from mmtoolkit.linalg import OrthoBasis
from mmtoolkit.linalg.spectral import canonical_eigenbasis, eigenvalue_clusters
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors.baselines.lrm import lrm_decompose
from mmtoolkit.selectors.eigen_design import mm_sdp
from mmtoolkit.selectors.eigen_design.gram import eigen_queries, workload_gram

EPS = np.finfo(float).eps
_eigh, _svd = np.linalg.eigh, np.linalg.svd


def _marginals(sizes, k=2):
    return workloads.marginals(mm.Domain.from_sizes(sizes), k)


def _rotate_inside_eigenspaces(values, V, seed):
    """``V`` with a random orthogonal rotation inside every eigenspace. Eigenspaces found
    independently of the code under test: the workloads used here have repeated eigenvalues
    that agree to ~1e-13 relative and distinct ones at least 1e-3 apart, so a 1e-8 relative
    grouping is unambiguous."""
    rng = np.random.default_rng(seed)
    order = np.argsort(values)
    s = values[order]
    cuts = np.flatnonzero(np.diff(s) > 1e-8 * np.abs(s).max()) + 1
    out = V.copy()
    rotated = 0
    for block in np.split(order, cuts):
        if block.size > 1:
            U, _ = np.linalg.qr(rng.standard_normal((block.size, block.size)))
            out[:, block] = V[:, block] @ U
            rotated += 1
    assert rotated, "the test workload must have a repeated eigenvalue"
    return out


def _rotating_eigh(seed):
    def eigh(a, *args, **kwargs):
        w, V = _eigh(a, *args, **kwargs)
        return w, _rotate_inside_eigenspaces(w, V, seed)

    return eigh


def _tol(n):
    """Rotation changes the input basis by rounding only (``~k·eps`` per entry of ``V U``).
    The canonical basis is ``V Q_c`` with ``Vᵀ[:, piv] = Q_c R``; the greedy pivots keep
    ``R_ii ≥ 1/√n`` (the residual projector has trace ≥ 1 over n cells) and ``‖R‖ ≤ 1``, so
    ``κ(R) ≤ √n`` and the output moves by at most ``~κ(R) · n · eps = n^{3/2} eps``; ×10 for
    the constants of QR's backward error."""
    return 10.0 * n**1.5 * EPS


@pytest.mark.parametrize("sizes", [[3, 4, 5], [2, 2, 2, 2, 2, 2]])
def test_canonical_basis_is_a_function_of_the_eigenspaces(sizes):
    G = workload_gram(_marginals(sizes))
    n = G.shape[0]
    w, V = _eigh(G)
    w, V = w[::-1], V[:, ::-1]
    s0, B0 = canonical_eigenbasis(w, V)
    for seed in range(3):
        s1, B1 = canonical_eigenbasis(w, _rotate_inside_eigenspaces(w, V, seed))
        np.testing.assert_array_equal(s0, s1)
        np.testing.assert_allclose(B1, B0, rtol=0, atol=_tol(n))
    # still an orthonormal eigenbasis of G, with the cluster means as eigenvalues
    np.testing.assert_allclose(B0.T @ B0, np.eye(n), rtol=0, atol=_tol(n))
    # residual of a backward-stable eigensolver: ~n·eps·‖G‖
    np.testing.assert_allclose(G @ B0, B0 * s0, rtol=0, atol=_tol(n) * s0[0])


def test_close_but_distinct_small_eigenvalues_are_not_merged():
    """The 1-D prefix Gram at n = 2048 has neighbouring small eigenvalues only ~0.3 · n · eps ·
    ‖G‖ apart, yet resolved by the eigensolver (their eigenvectors agree across thread counts
    to ~1e-6): merged by an absolute tolerance, cluster boundaries fell where rounding put
    them and Eigen-Design's error moved by 4e-4 between one and two threads."""
    G = workload_gram(workloads.prefix(2048))
    w = np.linalg.eigvalsh(G)[::-1]
    n = G.shape[0]
    assert np.min(-np.diff(w)) < n * EPS * w[0]  # the case: closer than the absolute bound
    assert len(eigenvalue_clusters(w, n, w[0])) == n
    # while the repeated eigenvalues of a marginals Gram are found as such
    Gm = workload_gram(_marginals([3, 4, 5]))
    wm = np.linalg.eigvalsh(Gm)[::-1]
    sizes = sorted(sl.stop - sl.start for sl in eigenvalue_clusters(wm, wm.size, wm[0]))
    exact = np.unique(np.round(wm / wm[0], 8), return_counts=True)[1]
    assert sizes == sorted(exact)


def test_canonical_basis_fixes_the_sign_of_a_simple_eigenvector():
    v = np.array([[0.6], [-0.8]])
    assert canonical_eigenbasis(np.array([1.0]), -v)[1][1, 0] > 0
    # equal magnitudes: the lowest index is the one made positive, whatever the rounding
    u = np.array([[-1.0], [1.0]]) / np.sqrt(2.0)
    np.testing.assert_array_equal(canonical_eigenbasis(np.array([1.0]), u)[1], -u)


def test_eigen_queries_ignore_the_eigensolvers_basis(monkeypatch):
    G = workload_gram(_marginals([3, 4, 5]))
    sigma0, Q0 = eigen_queries(G)
    monkeypatch.setattr(np.linalg, "eigh", _rotating_eigh(1))
    sigma1, Q1 = eigen_queries(G)
    np.testing.assert_array_equal(sigma0, sigma1)
    np.testing.assert_allclose(Q1, Q0, rtol=0, atol=_tol(G.shape[0]))


def _strategy(name, params, W, privacy):
    return selectors.get(name, **params).select(W, privacy).matrix.dense()


@pytest.mark.parametrize(
    "name, params, privacy",
    [
        ("eigen_design", {}, ZCDP(0.5)),
        ("eigen_design", {}, PureDP(1.0)),
        ("svd_strategy", {"complete": True}, ZCDP(0.5)),
        ("mm_sdp", {"l1_method": "svd_bound", "rotate": False}, PureDP(1.0)),
    ],
)
def test_selected_strategy_ignores_the_eigensolvers_basis(monkeypatch, name, params, privacy):
    """Eigen-Design's Program 1 weighs the entries of the eigen-queries, the SVD-bound and
    SDP strategies are made of them: a rotated eigenbasis used to change the strategy."""
    W = _marginals([3, 4, 5])
    A0 = _strategy(name, params, W, privacy)
    monkeypatch.setattr(np.linalg, "eigh", _rotating_eigh(2))
    A1 = _strategy(name, params, W, privacy)
    assert A1.shape == A0.shape
    # the queries move by _tol (above); Program 1 (a certified optimum, unique here: its
    # objective is strictly convex in u) and the scaling to unit sensitivity are Lipschitz
    # in them with constants of order one for this well-conditioned workload
    np.testing.assert_allclose(A1, A0, rtol=0, atol=_tol(W.shape[1]) * np.abs(A0).max())


def test_mm_sdp_l1_start_ignores_the_basis_of_the_sdp_solution(monkeypatch):
    """PureDP mm_sdp starts its L1 strategy from ``C`` with ``CᵀC = X``, X Program 5.2's
    solution, read off X's eigenvectors: with X held fixed (the SDP solve itself is
    another computation), a rotated eigenbasis of X used to change the strategy."""
    W = _marginals([2, 3, 4])
    sigma, Q = eigen_queries(workload_gram(W))
    solved = mm_sdp.program_5_2(np.sqrt(sigma)[:, None] * Q, "scs")
    monkeypatch.setattr(mm_sdp, "program_5_2", lambda F, solver="scs", eps=None: solved)
    params = {"rotate": False}
    A0 = _strategy("mm_sdp", params, W, PureDP(1.0))
    monkeypatch.setattr(np.linalg, "eigh", _rotating_eigh(4))
    A1 = _strategy("mm_sdp", params, W, PureDP(1.0))
    # X's clusters are merged at SDP_ACCURACY: the mean eigenvalue replaces values that
    # differ by up to that much, identically in both runs; the bases agree to _tol
    np.testing.assert_allclose(A1, A0, rtol=0, atol=_tol(W.shape[1]) * np.abs(A0).max())


def test_lrm_svd_start_ignores_the_svds_basis(monkeypatch):
    """LRM's ``init='svd'`` starts from W's top right singular vectors."""
    W = _marginals([3, 4, 5]).dense()

    def rotating_svd(a, *args, **kwargs):
        U, s, Vt = _svd(a, *args, **kwargs)
        return U, s, _rotate_inside_eigenspaces(s, Vt.T, 3).T

    _, L0, _ = lrm_decompose(W, 30, init="svd", max_iter=1, inner=1)
    monkeypatch.setattr(np.linalg, "svd", rotating_svd)
    _, L1, _ = lrm_decompose(W, 30, init="svd", max_iter=1, inner=1)
    # one B-step (a solve with I + β L Lᵀ, well conditioned for β of order one) and one
    # projected gradient step: Lipschitz in the start with constants of order one
    np.testing.assert_allclose(L1, L0, rtol=0, atol=_tol(W.shape[1]))


def _threads_available():
    """Whether numpy's BLAS (the one numpy.linalg.eigh runs on) can run 2 threads. Other
    BLAS copies loaded by then (SCS ships its own) need not follow threadpool_limits."""
    with threadpool_limits(2, user_api="blas"):
        blas = [m for m in threadpool_info() if m["user_api"] == "blas"]
    mine = [m for m in blas if "numpy" in m["filepath"]] or blas
    return bool(mine) and max(m["num_threads"] for m in mine) >= 2


def test_release_is_the_same_on_one_and_two_blas_threads():
    """The tester's finding: a seeded Eigen-Design release moved by up to 11.6 between
    OMP_NUM_THREADS=1 and the default. 480 cells: large enough that OpenBLAS splits the
    eigensolver's work over threads (and then returns another basis of each eigenspace)."""
    if not _threads_available():
        pytest.skip("the BLAS cannot run 2 threads here, so there is nothing to compare")
    sizes = {"a": 6, "b": 8, "c": 10}
    rng = np.random.default_rng(0)
    df = pd.DataFrame({k: rng.integers(0, s, 300) for k, s in sizes.items()})
    domain = {k: {"values": list(range(s))} for k, s in sizes.items()}
    out = {}
    for threads in (1, 2):
        with threadpool_limits(threads, user_api="blas"):
            out[threads] = mm.release(
                df, "marginals:2", ZCDP(0.5), "eigen_design", domain=domain, seed=42
            )
    a1, a2 = (np.asarray(out[t].answers, dtype=float) for t in (1, 2))
    A = out[1].strategy.matrix
    assert isinstance(A, OrthoBasis)
    # rounding in the eigensolver (backward error n·eps·‖G‖) reaches the answers through the
    # reconstruction from the weighted eigen-queries diag(λ) Q (Q orthonormal rows: condition
    # number max λ / min λ); completion rows, when present, only add information
    atol = A.weights.max() / A.weights.min() * A.shape[1] * EPS * np.abs(a1).max()
    np.testing.assert_allclose(a2, a1, rtol=0, atol=atol)
