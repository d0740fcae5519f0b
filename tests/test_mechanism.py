"""Tests of mmtoolkit.mechanism: structured reconstruction vs dense least squares, and
Monte-Carlo error vs the evaluator's analytic expected error."""

from __future__ import annotations

import numpy as np
import pytest

from mmtoolkit import evaluate, mechanism, records, selectors, workloads
from mmtoolkit.linalg import Identity, Kronecker, Marginals, PIdentity, Prefix, VStack, Weighted
from mmtoolkit.privacy import ZCDP, ApproxDP, PureDP
from mmtoolkit.release_handlers import handler
from mmtoolkit.strategy import Strategy

RNG = np.random.default_rng(0)
KRON = Kronecker([PIdentity(RNG.random((2, 6))), PIdentity(RNG.random((1, 4)))])
MARG = Marginals([3, 4, 2], {0: 0.2, 1: 0.3, 6: 0.5})  # not full rank
UNION = VStack(
    [
        Weighted(0.4, Kronecker([Prefix(6), Identity(4)])),
        Weighted(0.6, Kronecker([Identity(6), Prefix(4)])),
    ]
)


@pytest.mark.parametrize(
    "A", [KRON, MARG, UNION, Weighted(2.0, KRON), PIdentity(RNG.random((3, 24)))]
)
def test_reconstruct_is_least_squares(A):
    y = np.random.default_rng(1).normal(size=A.shape[0])
    xhat = mechanism.reconstruct(A, y)
    ref = np.linalg.lstsq(A.dense(), y, rcond=None)[0]  # minimum-norm least squares
    np.testing.assert_allclose(xhat, ref, atol=1e-7 * max(1, np.abs(ref).max()))


@pytest.mark.parametrize(
    "W, A, privacy",
    [
        (workloads.kron([workloads.all_range(6), workloads.prefix(4)]), KRON, PureDP(1.0)),
        (workloads.marginals([3, 4, 2], 1), MARG, ZCDP(0.5)),
        (workloads.kron([workloads.prefix(6), workloads.total(4)]), UNION, PureDP(2.0)),
    ],
)
def test_monte_carlo_error_matches_evaluator(W, A, privacy):
    x = np.random.default_rng(2).integers(0, 50, size=A.shape[1])
    mc = mechanism.monte_carlo(W, A, x, privacy, 1000, np.random.default_rng(3))
    assert mc.expected == pytest.approx(evaluate.expected_error(W, A, privacy))
    assert mc.within_ci, (mc.mean_total, mc.ci, mc.expected)
    assert abs(mc.relative_error) < 0.1


def test_exact_without_noise_and_seeded():
    x = np.arange(24.0)
    y = KRON @ x
    np.testing.assert_allclose(mechanism.reconstruct(KRON, y), x, atol=1e-9)
    a = mechanism.measure(KRON, x, PureDP(1.0), np.random.default_rng(5))
    b = mechanism.measure(KRON, x, PureDP(1.0), np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)


def test_bad_input():
    with pytest.raises(ValueError, match="defined on 24"):
        mechanism.measure(KRON, np.zeros(23), PureDP(1.0), np.random.default_rng(0))
    with pytest.raises(ValueError, match="Generator"):
        mechanism.measure(KRON, np.zeros(24), PureDP(1.0), 0)
    with pytest.raises(ValueError, match="rows"):
        mechanism.reconstruct(KRON, np.zeros(3))
    lm = Strategy(matrix=Prefix(4), selector="laplace", inference="none")
    with pytest.raises(ValueError, match="nothing to reconstruct"):
        mechanism.reconstruct(lm, np.zeros(4))
    with pytest.raises(ValueError, match="defined on 4"):
        mechanism.answer(Prefix(4), np.zeros(5))


# ------------------------------------------------------------------ marginals from tables


def _dom4():
    import mmtoolkit as mm

    return mm.Domain.from_sizes([3, 4, 2, 3])


@pytest.mark.parametrize(
    "A",
    [
        Marginals([3, 4, 2, 3], {3: 0.5, 5: 0.3, 12: 0.7, 14: 0.2, 1: 0.1, 0: 0.4, 15: 0.1}),
        Weighted(2.5, Marginals([3, 4, 2, 3], {3: 1.0, 12: 0.5, 6: 0.2, 9: 0.3, 0: 1.0})),
        Marginals([3, 4, 2, 3], {3: 1.0, 12: 1.0}),  # does not support every marginal
    ],
)
def test_answer_marginals_equals_dense_least_squares(A):
    W = Marginals([3, 4, 2, 3], {3: 1.0, 6: 2.0, 12: 0.5, 1: 1.0, 0: 3.0})
    Y = np.random.default_rng(4).normal(size=(A.shape[0], 3))
    ref = W.dense() @ np.linalg.lstsq(A.dense(), Y, rcond=None)[0]
    got = mechanism.answer_marginals(W, A, Y)
    np.testing.assert_allclose(got, ref, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(mechanism.answer_marginals(W, A, Y[:, 1]), ref[:, 1], atol=1e-8)


def test_measure_from_records_equals_vector():
    R = records.synthetic(_dom4(), 300, seed=2)
    A = Marginals([3, 4, 2, 3], {3: 0.5, 12: 0.7, 0: 0.4})
    a = mechanism.measure(A, R, PureDP(1.0), np.random.default_rng(9))
    b = mechanism.measure(A, R.vector(), PureDP(1.0), np.random.default_rng(9))
    np.testing.assert_allclose(a, b, atol=1e-9)
    Y = mechanism.measure(A, R, ZCDP(0.5), np.random.default_rng(9), releases=4)
    assert Y.shape == (A.shape[0], 4)


@pytest.mark.parametrize("name, privacy", [("residual_planner", ZCDP(0.5)), ("hdmm", PureDP(1.0))])
def test_release_from_records_unbiased_with_analytic_variance(name, privacy):
    import mmtoolkit as mm

    dom = mm.Domain.from_sizes([3, 4, 2, 3])
    W = workloads.marginals(dom, 2)
    params = {"restarts": 2, "seed": 0, "operators": ["marginals"]} if name == "hdmm" else {}
    st = selectors.get(name, **params).select(W, privacy)
    R = records.synthetic(dom, 400, seed=5)
    truth = W @ R.vector()
    rng = np.random.default_rng(0)
    runs = np.stack([mechanism.release(W, st, R, privacy, rng) for _ in range(400)])
    se = mechanism.standard_errors(W, st, privacy)
    z = (runs.mean(axis=0) - truth) / (se / np.sqrt(400))
    assert np.abs(z).max() < 4.5  # unbiased (≈ 60 queries)
    np.testing.assert_allclose(runs.var(axis=0), se**2, rtol=0.3)
    a = mechanism.release(W, st, R, privacy, np.random.default_rng(3))
    b = mechanism.release(W, st, R, privacy, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("privacy", [PureDP(0.7), ZCDP(0.3)])
def test_discrete_noise_is_integer_and_calibrated(privacy):
    A = Marginals([3, 4, 2, 3], {3: 0.37, 12: 0.81, 0: 0.2})  # float weights: row scales
    R = records.synthetic(_dom4(), 300, seed=2)
    cal = mechanism.discrete_calibration(A, privacy)
    assert cal.spent <= cal.budget and cal.spent > cal.budget * (1 - 1e-5)
    cont = privacy.noise_variance(A.sensitivity(privacy.norm))
    assert np.all(cal.variances <= cont * (1 + 1e-5)) and np.all(cal.variances > 0.5 * cont)
    y = mechanism.measure(A, R, privacy, np.random.default_rng(1), noise="discrete")
    Bx = A @ R.vector() / cal.scales
    z = y / cal.scales - Bx
    np.testing.assert_allclose(z, np.rint(z), atol=1e-9)  # integer noise on integer answers
    Y = mechanism.measure(A, R, privacy, np.random.default_rng(1), "discrete", releases=3000)
    emp = (Y / cal.scales[:, None] - Bx[:, None]).var(axis=1) * cal.scales**2
    np.testing.assert_allclose(emp, cal.variances, rtol=0.2)


@pytest.mark.parametrize("epsilon, scale", [(1.0, (1, 1)), (0.5, (2, 1)), (4.0, (1, 4))])
def test_discrete_laplace_of_a_dyadic_scale_is_not_rounded(epsilon, scale):
    """A Laplace scale b = t/s with a small power of two t (the identity at ε = 1: b = 1) is
    taken as it is — Lap_Z(1), not Lap_Z(2^20 / (2^20 − 1)) — so the release spends exactly
    its budget and the sampler runs on small parameters; other scales round towards more
    noise as before."""
    cal = mechanism.discrete_calibration(Identity(5), PureDP(epsilon))
    assert [(p[2], p[1]) for p in cal.params] == [scale]  # (t, s): Lap_Z(t/s)
    assert cal.spent == cal.budget == epsilon
    third = mechanism.discrete_calibration(Identity(5), PureDP(1 / 3))
    (_, s, t), = third.params
    assert s / t < 1 / 3 and s / t > (1 / 3) * (1 - 1e-5) and third.spent < third.budget


def test_discrete_noise_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="PureDP .* and ZCDP"):
        mechanism.measure(Identity(4), np.ones(4), ApproxDP(0.5, 1e-6), rng, noise="discrete")
    with pytest.raises(ValueError, match="integer vectors up to a positive scale"):
        mechanism.measure(KRON, np.ones(24), PureDP(1.0), rng, noise="discrete")
    with pytest.raises(ValueError, match="integer counts"):
        mechanism.measure(Identity(4), np.full(4, 0.5), PureDP(1.0), rng, noise="discrete")
    with pytest.raises(ValueError, match="noise must be one of"):
        mechanism.measure(Identity(4), np.ones(4), PureDP(1.0), rng, noise="exact")
    with pytest.raises(ValueError, match="releases: must be >= 1, got 0"):
        mechanism.measure(Identity(4), np.ones(4), PureDP(1.0), rng, releases=0)


def test_release_bad_input_and_large_domain():
    import mmtoolkit as mm

    big = mm.Domain.from_sizes([100] * 6)
    R = records.synthetic(big, 100, seed=0)
    W = workloads.marginals(big, 1)
    # the identity strategy's 10^12 measurements are refused before any noise is drawn
    with pytest.raises(ValueError, match="the strategy 1e\\+12 rows.*more than this machine"):
        mechanism.release(W, Identity(big.size), R, PureDP(1.0), np.random.default_rng(0))
    small = records.synthetic(_dom4(), 10, seed=0)
    with pytest.raises(ValueError, match="attribute sizes"):
        mechanism.release(
            W, Marginals([100] * 6, {1: 1.0}), small, PureDP(1.0), np.random.default_rng(0)
        )
    with pytest.raises(ValueError, match="marginals workload and a marginals strategy"):
        mechanism.answer_marginals(Prefix(4), Marginals([4], {1: 1.0}), np.zeros(4))


def test_batched_reconstruct_equals_columnwise():
    Y = np.random.default_rng(2).normal(size=(UNION.shape[0], 3))
    batch = mechanism.reconstruct(UNION, Y)
    cols = np.stack([mechanism.reconstruct(UNION, Y[:, j]) for j in range(3)], axis=1)
    np.testing.assert_allclose(batch, cols, atol=1e-7)


def test_postprocessing_steps():
    a = np.array([-1.4, 0.2, 2.6])
    np.testing.assert_array_equal(mechanism.clip_nonnegative(a), [0.0, 0.2, 2.6])
    r = mechanism.round_to_integers(a)
    assert r.dtype == np.int64 and list(r) == [-1, 0, 3]


def test_residual_release_from_vector_equals_records():
    """The residual route reads marginals from a data vector or from records alike."""
    import mmtoolkit as mm

    dom = mm.Domain.from_sizes([3, 4, 2])
    W = workloads.marginals(dom, 2, lower=True)
    st = selectors.get("residual_planner").select(W, ZCDP(0.5))
    R = records.synthetic(dom, 200, seed=1)
    a = mechanism.release(W, st, R, ZCDP(0.5), np.random.default_rng(4))
    b = mechanism.release(W, st, R.vector(), ZCDP(0.5), np.random.default_rng(4))
    np.testing.assert_allclose(a, b, atol=1e-9)
    # RP+ on a prefix workload: answers in W's row order (noise-free limit via huge rho)
    Wp = workloads.kron([workloads.prefix(4), workloads.identity(3)])
    sp = selectors.get("residual_planner_plus").select(Wp, ZCDP(0.5))
    x = np.random.default_rng(2).integers(0, 20, size=12)
    got = mechanism.release(Wp, sp, x, ZCDP(1e12), np.random.default_rng(0))
    np.testing.assert_allclose(got, Wp @ x, atol=1e-3)


def test_bad_data_vectors_and_workloads_are_refused_before_noise():
    """A DataFrame (or 2-D array) of codes whose size happens to equal the domain size is not
    a histogram; NaN or negative counts and a NaN workload entry are refused by name."""
    import pandas as pd

    from mmtoolkit.linalg import Dense

    W = Identity(6)
    codes = pd.DataFrame({"a": [0, 1, 2], "b": [1, 0, 1]})  # 3 records x 2 columns = 6 = N
    rng = np.random.default_rng(0)
    for data in (codes, codes.to_numpy()):
        with pytest.raises(ValueError, match=r"1-D data vector .* records.from_frame"):
            mechanism.release(W, Identity(6), data, PureDP(1.0), rng)
    x = np.array([1.0, 2, np.nan, 0, 0, 1])
    with pytest.raises(ValueError, match=r"data vector: cell 2 is nan"):
        mechanism.release(W, Identity(6), x, PureDP(1.0), rng)
    with pytest.raises(ValueError, match=r"data vector: cell 1 has a negative count -2"):
        mechanism.release(W, Identity(6), [1, -2, 0, 0, 0, 0], PureDP(1.0), rng)
    bad = np.eye(6)
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match=r"Dense: entry \[3, 4\] is nan"):
        Dense(bad)  # refused where it is built

    class Unchecked(Dense):  # a kind holding the NaN: the release's own check refuses it
        def __init__(self, array):
            self.array, self.shape = array, array.shape

    with pytest.raises(ValueError, match=r"the workload has a NaN or infinite entry in row 3"):
        mechanism.release(Unchecked(bad), Identity(6), np.ones(6), PureDP(1.0), rng)
    state = rng.bit_generator.state
    with pytest.raises(ValueError):
        mechanism.release(Unchecked(bad), Identity(6), np.ones(6), PureDP(1.0), rng)
    assert rng.bit_generator.state == state  # no noise was drawn


# ============================================================================ discrete stream
ROW_SCALE_CASES = [
    Kronecker([Weighted(0.37, Prefix(5)), Weighted(0.3, Identity(4)), Weighted(1.7, Prefix(3))]),
    Weighted(0.37, Kronecker([Prefix(5), Weighted(-0.3, Identity(4))])),
    VStack([Weighted(0.4, Kronecker([Prefix(6), Weighted(1.3, Identity(4))])), MARG]),
]


@pytest.mark.parametrize("A", ROW_SCALE_CASES)
def test_row_scales_read_by_range_are_the_same_bits(A):
    """discrete.RowScales (the Dask route's factor-wise scales) against row_scales(): equal
    bits for every range, and the distinct values are exactly those of row_scales()."""
    from mmtoolkit.discrete import RowScales

    full = handler(A).row_scales(A)
    rs = RowScales(A)
    np.testing.assert_array_equal(rs.distinct(), np.unique(full))
    for lo, hi in [(0, A.shape[0]), (3, 17), (A.shape[0] - 5, A.shape[0])]:
        np.testing.assert_array_equal(rs(lo, hi), full[lo:hi])


def test_row_scales_collide_like_in_memory():
    """Weighted factors whose products round differently from √(Π w²)·Π s: the distinct
    scales (hence the noise parameters) are the in-memory ones."""
    from mmtoolkit.discrete import RowScales
    from mmtoolkit.linalg import Dense

    w0, w1 = 1.2526079739576417, 1.486043465869597  # (w0·1)(w1·3) != (w0·3)(w1·1)
    assert (w0 * 1) * (w1 * 3) != (w0 * 3) * (w1 * 1)
    A = Kronecker([Weighted(w0, Dense([[1.0, 0], [0, 3.0]])),
                   Weighted(w1, Dense([[3.0, 0], [0, 1.0]])), Identity(5)])  # fmt: skip
    np.testing.assert_array_equal(RowScales(A).distinct(), np.unique(handler(A).row_scales(A)))
    assert np.unique(handler(A).row_scales(A)).size == 4


def _reference_stream(kind, params, rng, row_param, block):
    """The stream's definition: blocks of ``block`` values at fixed offsets, each from its
    own generator keyed by the next four words of ``rng``; in each, the positions of each
    parameter (in order) take one vectorised draw, in order."""
    from mmtoolkit.measurement import block_generator
    from mmtoolkit.noise import discrete_gaussian, discrete_laplace

    z = np.empty(row_param.size, dtype=np.int64)
    for a in range(0, row_param.size, block):
        g = block_generator(rng, rng.integers(0, 2**64, dtype=np.uint64, size=4))
        p = row_param[a : a + block]
        for k, par in enumerate(params):
            idx = a + np.flatnonzero(p == k)
            if idx.size and kind == "laplace":
                z[idx] = discrete_laplace(par[1], par[2], g, size=idx.size)
            elif idx.size:
                z[idx] = discrete_gaussian(par[1], idx.size, g)
    return z


@pytest.mark.parametrize("privacy", [PureDP(0.9), ZCDP(0.4)])
def test_discrete_stream_draws_one_call_per_parameter_per_block(privacy, monkeypatch):
    """Many distinct row scales: the stream's values are its definition's (reference draw),
    whatever the pieces, and a block takes one sampler call per parameter (60 scales,
    1.2e5 rows: one block, 60 calls — was 60 per 65,536 values)."""
    from mmtoolkit import measurement

    A = Kronecker([Identity(2000), Weighted(0.5, _diag_counting(60))])
    cal = mechanism.discrete_calibration(A, privacy)
    assert len(cal.params) == 60
    ref = _reference_stream(cal.kind, cal.params, np.random.default_rng(4), cal.row_param,
                            measurement.DISCRETE_BLOCK)  # fmt: skip
    calls = []
    sample = measurement.DiscreteNoiseStream._sample
    monkeypatch.setattr(measurement.DiscreteNoiseStream, "_sample",
                        lambda self, p, n, g: calls.append(n) or sample(self, p, n, g))  # fmt: skip
    row_param = cal.row_param
    stream = measurement.DiscreteNoiseStream(
        cal.kind, cal.params, np.random.default_rng(4), A.shape[0], 1,
        lambda lo, hi: row_param[lo:hi],
    )  # fmt: skip
    got = np.zeros(A.shape[0], dtype=np.int64)
    for lo, hi in [(0, 7), (7, 70_001), (70_001, A.shape[0])]:
        piece = np.zeros(hi - lo, dtype=np.int64)
        stream.add(piece)
        got[lo:hi] = piece
    np.testing.assert_array_equal(got, ref)
    assert len(calls) == 60 * -(-A.shape[0] // measurement.DISCRETE_BLOCK) == 60


def _diag_counting(n):
    from mmtoolkit.linalg import Dense

    return Dense(np.diag(np.arange(1.0, n + 1)))
