"""Matrix Mechanism SDP (Li et al. 2010, Programs 5.2 and 5.3, §5.2-5.4)."""

import numpy as np
import pytest
from paper_fixtures import H4, Y4

from mmtoolkit import evaluate, selectors
from mmtoolkit.linalg import AllRange, Dense, Identity
from mmtoolkit.privacy import ApproxDP, PureDP
from mmtoolkit.selectors.eigen_design.mm_sdp import (
    l1_completion,
    min_sensitivity_rotation,
    program_5_2,
)

EPS_DELTA = ApproxDP(0.5, 1e-4, calibration="eigen_design")


def units(W, A, privacy=EPS_DELTA):
    return evaluate.expected_error(W, A, privacy) / privacy.noise_variance()


@pytest.mark.parametrize("solver", ["clarabel", "scs"])
def test_program_5_2_beats_every_strategy_on_small_workloads(solver):
    rng = np.random.default_rng(0)
    W = rng.integers(0, 2, size=(10, 6)).astype(float)
    st = selectors.get("mm_sdp", solver=solver).select(Dense(W), EPS_DELTA)
    opt = units(Dense(W), st)
    assert opt == pytest.approx(st.loss, rel=1e-4)  # A = X^{1/2} attains the SDP value
    assert opt >= evaluate.svd_bound(Dense(W)) * (1 - 1e-6)
    for _ in range(20):  # no random strategy does better (L2 units)
        A = rng.normal(size=(8, 6))
        assert units(Dense(W), Dense(A)) >= opt * (1 - 1e-5)
    assert units(Dense(W), Identity(6)) >= opt


def test_program_5_2_closed_form_for_the_identity_workload():
    # W = I: tr(X⁻¹) with X_jj ≤ 1 is minimised by X = I (value n)
    X, value = program_5_2(np.eye(5))
    assert value == pytest.approx(5.0, rel=1e-6)
    np.testing.assert_allclose(X, np.eye(5), atol=1e-4)


def test_all_range_n8_between_bound_and_eigen_design():
    W = AllRange(8)
    opt = units(W, selectors.get("mm_sdp").select(W, EPS_DELTA))
    eig = units(W, selectors.get("eigen_design", tol=1e-9).select(W, EPS_DELTA))
    assert evaluate.svd_bound(W) <= opt <= eig * (1 + 1e-6)


@pytest.mark.parametrize("A,appendix_f", [(H4, 2.8960), (Y4, 2.4142)])
def test_program_5_3_rotation(A, appendix_f):
    # App. F rotations of H_4 / Y_4 reach 2.8960 / 2.4142; Program 5.3 must do at least as well,
    # keep the profile exactly, and stay above the L2 lower bound max_j ||a_j||₂
    G = A.T @ A
    lam, V = np.linalg.eigh(G)
    C = (V * np.sqrt(lam)).T
    B, info = min_sensitivity_rotation(C, iterations=40)
    np.testing.assert_allclose(B.T @ B, G, atol=1e-9)
    sens = np.abs(B).sum(axis=0).max()
    assert sens <= appendix_f + 1e-6
    assert sens <= np.abs(A).sum(axis=0).max()  # 3 for both
    assert sens >= np.sqrt(G.diagonal().max()) - 1e-9
    assert info["sensitivity"] == pytest.approx(sens)


def test_l1_completion_keeps_sensitivity_and_never_hurts():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(6, 6))
    W = rng.normal(size=(9, 6))
    Ac = l1_completion(A)
    assert np.abs(Ac).sum(axis=0) == pytest.approx(np.abs(A).sum(axis=0).max())
    pure = PureDP(1.0)
    assert evaluate.expected_error(W, Dense(Ac), pure) <= evaluate.expected_error(
        W, Dense(A), pure
    ) * (1 + 1e-12)


@pytest.mark.parametrize("method", ["l2", "svd_bound"])
def test_pure_dp_approximations(method):
    W = AllRange(8)
    pure = PureDP(1.0)
    st = selectors.get("mm_sdp", l1_method=method).select(W, pure)
    plain = selectors.get("mm_sdp", l1_method=method, rotate=False, augment=False).select(W, pure)
    e, e0 = evaluate.expected_error(W, st, pure), evaluate.expected_error(W, plain, pure)
    assert e <= e0 * (1 + 1e-9)  # rotation + augmentation only improve
    assert e >= evaluate.svd_bound_error(W, pure)
    # Thm 5.20 / 5.26: within a factor n of the L2 (resp. SV) objective, since sens₁² ≤ n·sens₂²
    l2_units = evaluate.expected_error(W, plain, EPS_DELTA) / EPS_DELTA.noise_variance()
    assert e <= 8 * l2_units * pure.noise_variance() * (1 + 1e-9)


def test_bad_input():
    sel = selectors.get("mm_sdp", max_n=16)
    with pytest.raises(ValueError, match="exceeds the SDP size limit"):
        sel.select(AllRange(32), EPS_DELTA)
    with pytest.raises(ValueError, match="all zero"):
        sel.select(Dense(np.zeros((2, 4))), EPS_DELTA)
    with pytest.raises(ValueError, match="empty"):
        sel.select(Dense(np.zeros((0, 4))), EPS_DELTA)
    for bad in [{"solver": "mosek"}, {"max_n": 0}, {"l1_method": "l3"}]:
        with pytest.raises(ValueError):
            selectors.get("mm_sdp", **bad)
