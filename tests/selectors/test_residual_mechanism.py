"""ResidualPlanner(+) measurement and reconstruction (Algorithms 1-3, 5, 6; Thm 4.4, 5.1, 7.2)."""

from fractions import Fraction

import numpy as np
import pytest

from mmtoolkit.linalg import Prefix
from mmtoolkit.privacy import ZCDP
from mmtoolkit.selectors.residual_planner.basis import general_basis, marginal_basis
from mmtoolkit.selectors.residual_planner.measurements import (
    MarginalSource,
    _apply,
    covariance,
    measure,
    measure_discrete,
    reconstruct,
    reconstruct_workload,
    variances,
)
from mmtoolkit.selectors.residual_planner.plan import select_max, select_sum
from mmtoolkit.selectors.residual_planner.workload import ResidualWorkload

HALF = ZCDP(0.5)
# Appendix A, Table 15: (a,n,2), (b,n,3), (b,y,3), (a,n,2), (b,y,3); a=0 b=1, y=0 n=1, 1..3 -> 0..2
RECORDS = np.array([[0, 1, 1], [1, 1, 2], [1, 0, 2], [0, 1, 1], [1, 0, 2]])


@pytest.fixture
def appendix_plan():
    wl = ResidualWorkload([marginal_basis(n) for n in (2, 2, 3)], [(0,), (0, 1), (1, 2)])
    return select_sum(wl)


def test_appendix_a_data_and_residual_answers(appendix_plan):
    src = MarginalSource(RECORDS, (2, 2, 3))
    x = np.zeros(12)
    x[[4, 8, 11]] = [2, 2, 1]  # Table 16: x[5] = 2, x[9] = 2, x[12] = 1 (1-based)
    vec = MarginalSource(x, (2, 2, 3))
    for A, expected in zip(
        [(0,), (0, 1), (1, 2)], [[2, 3], [0, 2, 2, 1], [0, 0, 2, 0, 2, 1]], strict=True
    ):
        assert np.array_equal(src(A).ravel(), expected)  # Table 17
        assert np.array_equal(vec(A).ravel(), expected)
    # R_A x through the marginal (Algorithm 1 line 5, noiseless), digest §7 table
    expected = {(): [5], (0,): [-1], (1,): [-1], (2,): [-2, -3], (0, 1): [-3], (1, 2): [2, -1]}
    bases = appendix_plan.bases
    for A in appendix_plan.closure_sets():
        got = _apply(np.asarray(src(A), dtype=float), [bases[i].sub for i in A]).ravel()
        assert np.allclose(got, expected[A])


def test_appendix_a_noiseless_reconstruction_is_exact(appendix_plan):
    m = measure(appendix_plan, RECORDS, ZCDP(1e16), np.random.default_rng(0))
    got = reconstruct_workload(m)
    for g, e in zip(got, [[2, 3], [0, 2, 2, 1], [0, 0, 2, 0, 2, 1]], strict=True):
        assert np.allclose(g, e, atol=1e-6)


def test_appendix_a_fixed_seed_measurement(appendix_plan):
    a = measure(appendix_plan, RECORDS, HALF, np.random.default_rng(7))
    b = measure(appendix_plan, RECORDS, HALF, np.random.default_rng(7))
    for A in appendix_plan.closure_sets():
        assert np.array_equal(a.omega[A], b.omega[A])
    # the noise is σ_A ⊗Sub z: recompute it from the same generator stream by hand
    rng = np.random.default_rng(7)
    src = MarginalSource(RECORDS, (2, 2, 3))
    bases = appendix_plan.bases
    for A, s2 in zip(appendix_plan.closure_sets(), a.sigma2, strict=True):
        z = rng.standard_normal(tuple(bases[i].n for i in A)) if A else rng.standard_normal()
        Sub = [bases[i].sub for i in A]
        manual = _apply(np.asarray(src(A), float) + np.sqrt(s2) * np.asarray(z), Sub).ravel()
        assert np.allclose(a.omega[A], manual)
    rec = reconstruct(a, (1, 2))
    assert rec.shape == (6,)
    # reconstruction is linear: rec = Σ_A' U ω_A' with U from Lemma 1 (digest §7)
    s3 = np.array([[1, 1], [-2, 1], [1, -2]]) / 3
    U = {
        (): np.full((6, 1), 1 / 6),
        (1,): np.kron(np.array([[0.5], [-0.5]]), np.full((3, 1), 1 / 3)),
        (2,): np.kron(np.full((2, 1), 0.5), s3),
        (1, 2): np.kron(np.array([[0.5], [-0.5]]), s3),
    }
    manual = sum(U[B] @ a.omega[B] for B in U)
    assert np.allclose(rec, manual)


def test_appendix_a_covariance(appendix_plan):
    C = covariance(appendix_plan, (1, 2))
    assert np.allclose(np.diag(C), 1.584042, atol=1e-6)
    assert C[0, 1] == pytest.approx(-0.2947, abs=1e-4)  # same Att2, different Att3
    assert C[0, 3] == pytest.approx(-0.0645, abs=1e-4)  # different Att2
    assert np.allclose(variances(appendix_plan, (0,)), 2.530110, atol=1e-6)
    assert np.allclose(variances(appendix_plan, (0, 1)), 1.653351, atol=1e-6)


def _monte_carlo(plan, data, runs, seed):
    rng = np.random.default_rng(seed)
    src = MarginalSource(data, plan.sizes)
    out = [[] for _ in plan.workload.sets]
    for _ in range(runs):
        m = measure(plan, src, HALF, rng)
        for j, s in enumerate(plan.workload.sets):
            out[j].append(reconstruct(m, s))
    return [np.array(o) for o in out]


def test_monte_carlo_matches_analytic_variance_and_is_unbiased():
    wl = ResidualWorkload([marginal_basis(n) for n in (3, 2, 4)], [(0, 1), (1, 2), (0,), (2,)])
    plan = select_max(wl)
    data = np.random.default_rng(1).integers(0, [3, 2, 4], size=(40, 3))
    runs = 8000
    samples = _monte_carlo(plan, data, runs, seed=2)
    src = MarginalSource(data, plan.sizes)
    for s, X in zip(plan.workload.sets, samples, strict=True):
        truth = src(s).ravel()
        var = variances(plan, s)
        emp = X.var(axis=0, ddof=1)
        assert np.all(np.abs(emp / var - 1) < 0.05)  # per cell, within 5%
        # unbiased: the mean is within 4 standard errors of the true marginal
        assert np.all(np.abs(X.mean(axis=0) - truth) < 4 * np.sqrt(var / runs))
        # full covariance (Thm 4.4): empirical vs analytic, relative Frobenius error
        C = covariance(plan, s)
        E = np.cov(X.T)
        assert np.linalg.norm(E - C) / np.linalg.norm(C) < 0.05


def test_monte_carlo_residual_planner_plus():
    # a prefix attribute (Γ = I, Sub from the eigen-factor) and a categorical one
    wl = ResidualWorkload([general_basis(Prefix(4)), marginal_basis(3)], [(0,), (0, 1)])
    plan = select_sum(wl)
    data = np.random.default_rng(3).integers(0, [4, 3], size=(30, 2))
    runs = 6000
    samples = _monte_carlo(plan, data, runs, seed=4)
    src = MarginalSource(data, plan.sizes)
    P = Prefix(4).dense()
    for s, X in zip(plan.workload.sets, samples, strict=True):
        truth = src(s)
        truth = (P @ truth.reshape(4, -1)).ravel()  # answers W_Ã (Q_Ã x)
        var = variances(plan, s)
        assert np.all(np.abs(X.var(axis=0, ddof=1) / var - 1) < 0.06)
        assert np.all(np.abs(X.mean(axis=0) - truth) < 4 * np.sqrt(var / runs))
    m = measure(plan, data, ZCDP(1e16), np.random.default_rng(0))
    assert np.allclose(reconstruct(m, (0, 1)), np.kron(P, np.eye(3)) @ src((0, 1)).ravel())


def test_discrete_measurement_accounting_and_exactness(appendix_plan):
    rng = np.random.default_rng(5)
    m = measure_discrete(appendix_plan, RECORDS, Fraction(1, 2), rng)
    rho = m.extra["rho_exact"]
    assert isinstance(rho, Fraction) and rho <= Fraction(1, 2)
    assert float(rho) == pytest.approx(0.5, rel=1e-5)  # rounding σ up costs < 1e-5
    assert np.all(m.sigma2 >= appendix_plan.scaled_sigma2(HALF))
    # Thm 5.1 identities: Y† H Q_A = R_A and γ² Y†Y†ᵀ = σ̄² Σ_A, on Example 3 (n = 4)
    from mmtoolkit.selectors.residual_planner.basis import sub_matrix, sub_pinv

    n = 4
    Y = n * sub_pinv(n)
    Xi = Y @ sub_matrix(n)
    assert np.allclose(Xi, n * np.eye(n) - 1)  # Ξ = 4I - 11ᵀ: the (3,4) entry is -1
    sbar2 = Fraction(4, 9)
    g2 = sbar2 * n * n
    Ydag = sub_matrix(n) / n
    assert np.allclose(float(g2) * Ydag @ Ydag.T, float(sbar2) * sub_matrix(n) @ sub_matrix(n).T)
    assert Fraction(12) / (2 * g2) == Fraction(27, 32)  # Example 3: ρ = 27/32
    # noiseless limit: huge ρ gives the exact marginals
    big = measure_discrete(appendix_plan, RECORDS, 10**12, np.random.default_rng(0))
    for g, e in zip(reconstruct_workload(big), [[2, 3], [0, 2, 2, 1], [0, 0, 2, 0, 2, 1]]):
        assert np.allclose(g, e, atol=1e-3)


def test_mechanism_bad_input(appendix_plan):
    with pytest.raises(ValueError, match="outside the domain"):
        reconstruct(measure(appendix_plan, RECORDS, HALF, np.random.default_rng(0)), (0, 5))
    with pytest.raises(ValueError, match="not measured"):
        variances(appendix_plan, (0, 2))
    with pytest.raises(ValueError, match="outside its attribute"):
        MarginalSource(np.array([[0, 2, 0]]), (2, 2, 3))
    with pytest.raises(ValueError, match="cells"):
        MarginalSource(np.zeros(11), (2, 2, 3))
    with pytest.raises(ValueError, match="Generator"):
        measure(appendix_plan, RECORDS, HALF, 0)
    with pytest.raises(ValueError, match="ZCDP or ApproxDP"):
        from mmtoolkit.privacy import PureDP

        measure(appendix_plan, RECORDS, PureDP(1.0), np.random.default_rng(0))


# ------------------------------------------- vectorised measurement / reconstruction
def _reference_measure(plan, data, privacy, seed):
    """Algorithm 1 / 5 set by set, straight from the paper (the pre-vectorisation code)."""
    rng = np.random.default_rng(seed)
    src = MarginalSource(data, plan.sizes)
    bases = plan.bases
    out = {}
    for A, s2 in zip(plan.closure_sets(), plan.scaled_sigma2(privacy), strict=True):
        v = np.asarray(src(A), dtype=float)
        zshape = tuple(bases[i].gamma.shape[1] for i in A)
        z = rng.standard_normal(zshape) if zshape else np.array(rng.standard_normal())
        mean = _apply(v, [bases[i].sub for i in A])
        out[A] = (mean + np.sqrt(s2) * _apply(z, [bases[i].gamma for i in A])).ravel()
    return out


def _reference_reconstruct(plan, omega, attrs):
    """Algorithm 2 / 6 for one set: Σ_{A'⊆Ã} U_{Ã←A'} ω_{A'} with dense Sub† factors."""
    bases = plan.bases
    t = tuple(sorted(attrs))
    q = np.zeros(tuple(bases[i].n for i in t))
    for pat in range(1 << len(t)):
        B = tuple(t[j] for j in range(len(t)) if (pat >> j) & 1)
        if B not in omega:
            continue
        w = _apply(omega[B].reshape([bases[i].n - 1 for i in B]), [bases[i].sub_pinv for i in B])
        full = w.reshape([bases[i].n if (pat >> j) & 1 else 1 for j, i in enumerate(t)])
        q = q + full / np.prod([bases[i].n for j, i in enumerate(t) if not (pat >> j) & 1])
    Ws = [None if bases[i].marginal else bases[i].workload.dense() for i in t]
    return _apply(q, Ws).ravel()


def _mixed_plan(general: bool):
    import itertools

    sizes = (3, 2, 4, 3, 5, 3)
    bases = [marginal_basis(n) for n in sizes]
    if general:
        bases[2] = bases[5] = general_basis(Prefix(4))  # shared, as the selector caches it
        bases[5] = general_basis(Prefix(3))
    sets = list(itertools.combinations(range(6), 2)) + [(0, 3, 5), (1, 2, 4), (0, 2, 3), (3,)]
    return select_sum(ResidualWorkload(bases, sets))


@pytest.mark.parametrize("general", [False, True])
@pytest.mark.parametrize("batch", [None, 40])
def test_vectorised_measure_and_reconstruct_match_set_by_set(general, batch, monkeypatch):
    from mmtoolkit.selectors.residual_planner import measurements

    if batch:  # tiny batches: many chunks, runs split, noise drawn in pieces
        monkeypatch.setattr(measurements, "MAX_BATCH_CELLS", batch)
    plan = _mixed_plan(general)
    data = np.random.default_rng(2).integers(0, plan.sizes, size=(300, 6))
    m = measure(plan, data, HALF, np.random.default_rng(7))
    ref = _reference_measure(plan, data, HALF, 7)
    assert m.omega.keys() == ref.keys()
    for A in ref:  # the same generator stream, the same noise: equal to float rounding
        np.testing.assert_allclose(m.omega[A], ref[A], rtol=1e-12, atol=1e-9)
    # the same measurements from a data vector and from a marginal callable
    x = np.zeros(plan.sizes)
    np.add.at(x, tuple(data.T), 1)
    src = MarginalSource(data, plan.sizes)
    for other in (x.ravel(), lambda attrs: src(attrs)):
        o = measure(plan, other, HALF, np.random.default_rng(7))
        np.testing.assert_allclose(o.values, m.values, rtol=1e-12, atol=1e-9)
    got = reconstruct_workload(m)
    for s, g in zip(plan.workload.sets, got, strict=True):
        np.testing.assert_allclose(g, _reference_reconstruct(plan, ref, s), rtol=1e-11, atol=1e-9)
    # sets outside the workload, unsorted, and estimated tables instead of answers
    np.testing.assert_allclose(reconstruct(m, (4, 1)), _reference_reconstruct(plan, ref, (1, 4)))
    tables = measurements.reconstruct_sets(m, [(2, 0), (5,)], answers=False)
    assert tables[0].shape == (12,) and tables[1].shape == (3,)
    noiseless = measure(plan, data, ZCDP(1e16), np.random.default_rng(0))
    src = MarginalSource(data, plan.sizes)
    for s, t in zip(
        [(0, 2), (5,)],
        measurements.reconstruct_sets(noiseless, [(2, 0), (5,)], answers=False),
        strict=True,
    ):
        np.testing.assert_allclose(t, src(s).ravel(), atol=1e-6)


def test_interleaved_groups_of_equal_span_match_set_by_set():
    """Sizes (4, 3, 4, 5, 4), 1-way marginals: the sets of attributes 0, 2 and 4 (one group,
    3 noise values each) sit at closure indices 1, 3 and 5 with sets of 2 and 4 values
    between them, so the group's span equals 3 × 3 although its parts are not evenly
    spaced. Taking it as a reshaped view had read a neighbour's noise and written ω to the
    wrong offsets: a noiseless release was off by up to 42.75 (found in review)."""
    from mmtoolkit import mechanism, selectors
    from mmtoolkit import workloads as wl

    sizes = (4, 3, 4, 5, 4)
    bases = [marginal_basis(n) for n in sizes]
    plan = select_sum(ResidualWorkload(bases, [(i,) for i in range(5)]))
    data = np.random.default_rng(2).integers(0, sizes, size=(300, 5))
    m = measure(plan, data, HALF, np.random.default_rng(7))
    ref = _reference_measure(plan, data, HALF, 7)
    for A in ref:
        np.testing.assert_allclose(m.omega[A], ref[A], rtol=1e-12, atol=1e-9)
    for s, g in zip(plan.workload.sets, reconstruct_workload(m), strict=True):
        np.testing.assert_allclose(g, _reference_reconstruct(plan, ref, s), rtol=1e-11, atol=1e-9)
    W = wl.marginals(sizes, 1)
    S = selectors.get("residual_planner").select(W, ZCDP(0.5))
    x = np.random.default_rng(1).integers(0, 20, W.shape[1]).astype(float)
    got = mechanism.release(W, S, x, ZCDP(1e14), np.random.default_rng(0))
    np.testing.assert_allclose(got, W @ x, atol=1e-3)


def test_batched_marginal_counts_match_single_counts(monkeypatch):
    from mmtoolkit.selectors.residual_planner import measurements

    sizes = (4,) * 9
    data = np.random.default_rng(3).integers(0, 4, size=(500, 9))
    src = MarginalSource(data, sizes)
    # runs sharing a prefix with contiguous last attributes (slice path) and with sparse
    # ones (gather path), 1-way sets (no prefix)
    for attrs in ([(0, 1, 2), (0, 1, 3), (0, 1, 4), (2, 3, 8), (0, 1, 8)], [(0, 1, 4), (0, 1, 3)],
                  [(0, 8), (1, 5)], [(3,), (7,), (0,)]):  # fmt: skip
        for cells in (None, 600):
            if cells:
                monkeypatch.setattr(measurements, "MAX_BATCH_CELLS", cells)
            got = src.batch(np.array(attrs))
            for g, a in zip(got, attrs, strict=True):
                assert np.array_equal(g, src(a))


def test_reconstruction_bad_input(appendix_plan):
    from mmtoolkit.selectors.residual_planner.measurements import reconstruct_sets

    m = measure(appendix_plan, RECORDS, HALF, np.random.default_rng(0))
    with pytest.raises(ValueError, match="repeated"):
        reconstruct_sets(m, [(0,), (1, 1)])
    with pytest.raises(ValueError, match=r"residual of \[0, 2\] was not measured"):
        reconstruct_sets(m, [(1, 2), (0, 2)])
