"""OPT_+ with separate answering (HDMM §6.2, the journal-era union template; He et al. §9's
OPT+): the SeparateUnion strategy kind, its closed-form error route against a dense
computation, its release path by Monte Carlo, and the one-group-per-product selection."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mmtoolkit import datasets, evaluate, mechanism, selectors, workloads
from mmtoolkit.linalg import (
    Dense,
    Kronecker,
    KroneckerUnion,
    UnsupportedWorkloadError,
    VStack,
    Weighted,
    kron_terms,
)
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors.hdmm.opt0 import optimize_pidentity
from mmtoolkit.selectors.hdmm.separate import SeparateUnion
from mmtoolkit.selectors.hdmm.union import group_terms
from mmtoolkit.testing import check_selector

GAUSS, PURE = ZCDP(0.5), PureDP(1.0)
SIZES = [3, 4, 2]


def _workload():
    """Products on different attributes, one of them weighted negatively (its answers'
    sign must survive block-by-block answering), and their dense blocks."""
    P, T, I = workloads.prefix, workloads.total, workloads.identity
    parts = [
        (1.0, [P(3), T(4), T(2)]),
        (-2.0, [T(3), P(4), T(2)]),
        (0.5, [T(3), T(4), I(2)]),
        (1.5, [P(3), P(4), T(2)]),
    ]
    blocks = [workloads.kron(fs) for _, fs in parts]
    W = VStack([Weighted(w, b) for (w, _), b in zip(parts, blocks)])
    dense = [w * np.kron(np.kron(fs[0].dense(), fs[1].dense()), fs[2].dense()) for w, fs in parts]
    return W, dense


EPS = np.finfo(float).eps


def _svals(M):
    """Singular values of ``M`` above numpy's rank threshold (its row space)."""
    s = np.linalg.svd(M, compute_uv=False)
    return s[s > max(M.shape) * EPS * s[0]]


def _pinv_rtol(blocks):
    """Relative tolerance between two backward-stable evaluations of ``||W_j A_g⁺||²``.

    A relative backward error ``ε`` in ``A_g`` moves ``A_g⁺`` by at most ``~3 κ(A_g) ε``
    relative to first order (Wedin's bound, rank unchanged; ``κ`` = σ₁/σ_r over the row
    space); an SVD or QR of an ``m x n`` block has ``ε ≈ n · eps``; the squared norm doubles
    the relative error, and the dense pinv and the route's structured computation each
    contribute one such error: ``rtol = 12 · max κ(A_g) · n · eps``."""
    dense = [b.dense() for b in blocks]
    kappa = max(s[0] / s[-1] for s in map(_svals, dense))
    return 12.0 * kappa * dense[0].shape[1] * EPS


def _least_squares_atol(Wj, Ab, y):
    """Absolute tolerance, per column of ``y``, between two backward-stable evaluations of
    ``W_j A⁺ y``. First-order least-squares perturbation (Golub & Van Loan, Thm 5.3.1, with
    ``A``'s row space in place of full rank): a relative backward error ``ε`` in ``A`` and
    ``y`` moves ``x = A⁺y`` by at most
    ``ε κ (||y||/σ₁ + ||x||) + ε κ² ||r||/σ₁``, ``r = y − A x`` (the κ² term: ``y`` is
    noise, far from ``range(A)``), and the answers ``W_j x`` by ``||W_j||₂`` times that;
    ``ε = n · eps`` for an SVD or QR, and two computations (dense pinv, the route) each
    contribute one such error."""
    s = _svals(Ab)
    kappa = s[0] / s[-1]
    x = np.linalg.pinv(Ab) @ y
    r = y - Ab @ x
    norm = lambda v: np.linalg.norm(v, axis=0)  # noqa: E731
    dx = kappa * (norm(y) / s[0] + norm(x)) + kappa**2 * norm(r) / s[0]
    return 2.0 * Ab.shape[1] * EPS * np.linalg.norm(Wj, 2) * dx


def _dense_separate(dense_terms, A, privacy):
    """Σ_j min_g ||W_j (w_g A_g)⁺||² · v · sens², from explicit matrices; per-query variances."""
    v = privacy.noise_variance(A.sensitivity(privacy.norm))
    total, variances = 0.0, []
    for Wj in dense_terms:
        best = None
        for b in A.blocks:
            Ab = b.dense()
            pinv = np.linalg.pinv(Ab)
            if np.linalg.norm(Wj - Wj @ pinv @ Ab) > 1e-8 * np.linalg.norm(Wj):
                continue  # this block does not support the term
            X = Wj @ pinv
            if best is None or np.sum(X * X) < np.sum(best * best):
                best = X
        assert best is not None
        total += v * np.sum(best * best)
        variances.append(v * np.sum(best * best, axis=1))
    return total, np.concatenate(variances)


@pytest.mark.parametrize("privacy", [GAUSS, PURE])
@pytest.mark.parametrize("groups", ["products", 2])
def test_route_matches_dense(privacy, groups):
    W, dense = _workload()
    s = selectors.get("opt_union", groups=groups, answering="separate", p=3, seed=1).select(
        W, privacy
    )
    assert isinstance(s.matrix, SeparateUnion)
    total, var = _dense_separate(dense, s.matrix, privacy)
    rtol = _pinv_rtol(s.matrix.blocks)
    assert evaluate.expected_error(W, s, privacy) == pytest.approx(total, rel=rtol)
    np.testing.assert_allclose(evaluate.per_query_variance(W, s, privacy), var, rtol=rtol)
    assert evaluate.max_variance(W, s, privacy) == pytest.approx(var.max(), rel=rtol)
    # the selector's loss is the separate-answering error of its own grouping (or above it)
    v = privacy.noise_variance(1.0)
    assert v * s.loss >= total * (1 - rtol)
    # least squares over the same stack is never worse (Gauss-Markov)
    ls = evaluate.expected_error(W, VStack(s.matrix.blocks), privacy)
    assert ls <= total * (1 + rtol)


@pytest.mark.parametrize("groups", ["products", 2])
def test_workload_answers_match_dense(groups):
    """Each term's rows are W_j (w_g A_g)⁺ y_g from its chosen block, signs included (the
    negatively weighted term), for one release and for several."""
    W, dense = _workload()
    A = selectors.get("opt_union", groups=groups, answering="separate", p=3, seed=1).select(
        W, GAUSS
    ).matrix
    choice = A.error_route(W).choice[0]
    o = np.cumsum([0] + [b.shape[0] for b in A.blocks])
    Y = np.random.default_rng(3).normal(size=(A.shape[0], 2))
    parts = [(Wj, A.blocks[g].dense(), Y[o[g] : o[g + 1]]) for Wj, g in zip(dense, choice)]
    want = np.concatenate([Wj @ np.linalg.pinv(Ab) @ y for Wj, Ab, y in parts])
    # per term and per column: the tolerance of its least-squares problem (its block's
    # condition number, the residual of the noise)
    atol = np.concatenate(
        [np.broadcast_to(_least_squares_atol(Wj, Ab, y), (Wj.shape[0], y.shape[1]))
         for Wj, Ab, y in parts]
    )  # fmt: skip
    got = A.workload_answers(W, Y)
    assert np.all(np.abs(got - want) <= atol), np.max(np.abs(got - want) / atol)
    got0 = A.workload_answers(W, Y[:, 0])
    assert np.all(np.abs(got0 - want[:, 0]) <= atol[:, 0])


def test_products_loss_is_exact_and_factorised():
    """One group per product on a prefix-marginal union: the error is the closed form
    ``C · (e_P)^k`` summed as ``(Σ_g √e_g)²`` (L2), with e_P the 1-D OPT_0 prefix optimum
    (computed independently) and the Total factors answered exactly (error 1)."""
    d, n, k = 4, 6, 2
    W = workloads.prefix_marginals(datasets.domain("synth", n=n, d=d, numeric=True), k)
    s = selectors.get(
        "opt_union", groups="products", answering="separate", p=n, restarts=2, seed=0,
        ftol=1e-12,
    ).select(W, GAUSS)  # fmt: skip
    e_p = min(
        optimize_pidentity(workloads.prefix(n).gram(), n, 2, np.random.default_rng(r),
                           ftol=1e-12)[1]
        for r in range(4)
    )  # fmt: skip
    C = math.comb(d, k)
    closed = C * C * e_p**k  # (Σ_g √e_g)² with C equal groups, ρ = 1/2: v = 1
    assert evaluate.expected_error(W, s, GAUSS) == pytest.approx(closed, rel=1e-7)
    assert s.loss == pytest.approx(closed, rel=1e-7)
    assert s.metadata["groups"] == "products" and s.metadata["answering"] == "separate"
    blocks = s.matrix.blocks
    assert len(blocks) == C
    # permuted groups share factor objects (each distinct factor solved once)
    assert len({id(f) for b in blocks for f in b.base.factors}) == 2


@pytest.mark.parametrize("privacy", [GAUSS, PURE])
def test_release_monte_carlo(privacy):
    """Empirical error of block-by-block answers (vectorised and through mechanism.release)
    against the route's expected error."""
    W, _ = _workload()
    s = selectors.get("opt_union", groups="products", answering="separate", p=3, seed=2).select(
        W, privacy
    )
    x = np.random.default_rng(0).integers(0, 30, size=W.shape[1]).astype(float)
    mc = mechanism.monte_carlo(W, s, x, privacy, 4000, np.random.default_rng(1), level=0.999)
    assert mc.within_ci, (mc.ci, mc.expected)
    # a variance estimated from 4000 draws has relative standard deviation sqrt(2/3999) ≈
    # 0.022 (Gaussian; Laplace: sqrt(5/3999) ≈ 0.035): 0.25 is > 7 of them for every query
    np.testing.assert_allclose(mc.query_var, mc.expected_var, rtol=0.25)
    rng = np.random.default_rng(3)
    truth = W @ x
    totals = [float(np.sum((mechanism.release(W, s, x, privacy, rng) - truth) ** 2))
              for _ in range(600)]  # fmt: skip
    res = mechanism.MonteCarloResult.from_totals(
        np.array(totals), 0.999, mc.expected, mc.query_var, mc.expected_var
    )
    assert res.within_ci, (res.ci, res.expected)
    # and it is not least squares: that would be measurably better here
    assert evaluate.expected_error(W, VStack(s.matrix.blocks), privacy) < 0.9 * mc.expected


def test_conformance_kit():
    report = check_selector(
        selectors.get_class("opt_union"),
        params={"groups": "products", "answering": "separate", "p": 2},
        workloads=[_workload()[0], workloads.marginals(SIZES, 1)],
    )
    assert not report.failed, report.failed


def test_support_is_per_block():
    """A query the stack supports but no single block does is refused, not scored."""
    A = SeparateUnion([Dense([[1.0, 0.0]]), Dense([[0.0, 1.0]])])
    assert evaluate.expected_error(workloads.identity(2), VStack(A.blocks), GAUSS) > 0
    with pytest.raises(UnsupportedWorkloadError, match="no block"):
        evaluate.expected_error(workloads.total(2), A, GAUSS)
    ok = Dense([[2.0, 0.0]])
    assert evaluate.expected_error(ok, A, GAUSS) == pytest.approx(GAUSS.noise_variance(1.0) * 4.0)


def test_bad_blocks_and_parameters():
    with pytest.raises(ValueError, match="block 0 is a union"):
        SeparateUnion([workloads.marginals([2, 2], 1), Kronecker([Dense(np.eye(2))] * 2)])
    with pytest.raises(ValueError, match="factorisation"):
        SeparateUnion([Kronecker([Dense(np.eye(2))] * 2), Dense(np.eye(4))])
    with pytest.raises(ValueError, match="answering"):
        selectors.get("opt_union", answering="lsq")
    with pytest.raises(ValueError, match="products"):
        selectors.get("opt_union", groups="all")
    W, _ = _workload()
    assert group_terms(kron_terms(W), "products") == [[0], [1], [2], [3]]
    assert group_terms(kron_terms(workloads.prefix(4)), "products") is None
    # the default is the least-squares stack (answered through x̂, not block by block)
    assert type(selectors.get("opt_union", seed=0).select(W, GAUSS).matrix) is KroneckerUnion
