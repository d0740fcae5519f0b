"""The Walsh–Hadamard parity-coefficient Matrix (Barak et al. 2007; Cormode et al. 2013 §4)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from linalg_oracle import check_against_dense

from mmtoolkit.linalg import Fourier, Marginals, MarginalsGram
from mmtoolkit.linalg.fourier import downset, fwht, local_index


def sylvester(d: int) -> np.ndarray:
    """Explicit Hadamard matrix by Sylvester's recursion H_{k+1} = [[H, H], [H, -H]]."""
    H = np.ones((1, 1))
    for _ in range(d):
        H = np.block([[H, H], [H, -H]])
    return H


def character(d: int, beta: int) -> np.ndarray:
    """χ_β(η) = (-1)^{Σ_i β_i η_i} over the cells η in C order (attribute 0 first)."""
    cells = itertools.product((0, 1), repeat=d)
    return np.array([(-1) ** sum(((beta >> i) & 1) * c[i] for i in range(d)) for c in cells])


@pytest.mark.parametrize("d", [1, 3, 6, 10])
def test_fourier_rows_are_hadamard_rows(d):
    rng = np.random.default_rng(d)
    betas = sorted(rng.choice(1 << d, size=min(1 << d, 12), replace=False).tolist())
    D = Fourier(d, betas).dense()
    for row, beta in zip(D, betas):
        np.testing.assert_array_equal(row, character(d, beta))
    H = sylvester(d)
    x = rng.normal(size=(1 << d, 2))
    np.testing.assert_allclose(fwht(x), H @ x, atol=1e-9)
    if d <= 8:  # the full transform is Sylvester's matrix up to a row permutation
        full = Fourier(d, range(1 << d)).dense()
        assert sorted(map(tuple, full)) == sorted(map(tuple, H))


def test_fourier_against_dense_oracle():
    d = 5
    rng = np.random.default_rng(1)
    coeffs = {int(b): float(rng.uniform(0.2, 2.0)) for b in [0, 1, 3, 6, 12, 17, 31]}
    F = Fourier(d, coeffs)
    ref = np.vstack([w * character(d, b) for b, w in sorted(coeffs.items())])
    check_against_dense(F, ref)
    assert isinstance(F.gram(), MarginalsGram)
    assert F.sensitivity(1) == pytest.approx(sum(coeffs.values()))
    assert F.sensitivity(2) == pytest.approx(math.sqrt(sum(w * w for w in coeffs.values())))


def test_marginals_from_coefficients_theorem_4_1():
    # E4: Fig 1(a) x; θ_β unnormalised; marginal on {A, C} from its coefficients
    x = np.array([1, 2, 0, 1, 0, 0, 1, 0], dtype=float)
    d = 3

    def key(bits: str) -> int:  # "ABC" string -> bitmask (bit 0 = A)
        return sum(1 << i for i, c in enumerate(bits) if c == "1")

    theta = {
        b: float((Fourier(d, [key(b)]) @ x)[0])
        for b in map("".join, itertools.product("01", repeat=3))
    }
    expect = {"000": 5, "001": -1, "010": 1, "011": -1, "100": 3, "101": -3, "110": 3, "111": 1}
    assert theta == expect
    alpha = key("101")
    need = downset([alpha])
    np.testing.assert_array_equal(
        sorted(need), sorted([key("000"), key("001"), key("100"), key("101")])
    )
    F = Fourier(d, need.tolist())
    local = np.zeros(4)
    local[local_index(need, alpha)] = F @ x
    marg = fwht(local) / 4
    np.testing.assert_allclose(marg, Marginals((2, 2, 2), {alpha: 1.0}) @ x)
    np.testing.assert_allclose(marg, [1, 3, 1, 0])


def test_recovery_times_strategy_is_the_workload_E5():
    d, k = 5, 2
    keys = [a for a in range(1 << d) if bin(a).count("1") == k]
    F = Fourier.for_marginals(d, keys)
    assert F.shape[0] == sum(math.comb(d, j) for j in range(k + 1))
    W = Marginals((2,) * d, {a: 1.0 for a in keys})
    # R_F: rows (α, γ), column β: 2^{-|α|} (-1)^{<β,γ>} for β ≼ α (unnormalised form)
    betas = F.betas.tolist()
    R = np.zeros((W.shape[0], len(betas)))
    off = 0
    for a in sorted(keys):
        sub = [b for b in betas if b & a == b]
        H = fwht(np.eye(4))
        for b in sub:
            R[off : off + 4, betas.index(b)] = H[:, local_index([b], a)[0]] / 4
        off += 4
    np.testing.assert_allclose(R @ F.dense(), W.dense(), atol=1e-12)
    # RᵀR is diagonal with a_β = Σ_{α ∋ β} 2^{-|α|}
    G = R.T @ R
    np.testing.assert_allclose(G, np.diag(np.diag(G)), atol=1e-12)
    a = [sum(2.0**-k for al in keys if al & b == b) for b in betas]
    np.testing.assert_allclose(np.diag(G), a, rtol=1e-12)


def test_pinv_and_gram_closed_forms():
    F = Fourier(4, {0: 2.0, 5: -1.0, 15: 0.5})
    np.testing.assert_allclose(F.pinv().dense(), np.linalg.pinv(F.dense()), atol=1e-12)
    np.testing.assert_allclose(F.gram().dense(), F.dense().T @ F.dense(), atol=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="outside the domain"):
        Fourier(3, [8])
    with pytest.raises(ValueError, match="outside the domain"):
        Fourier.for_marginals(3, [0b1000])
    with pytest.raises(ValueError, match="d: must be >= 1, got 0"):
        Fourier(0, [0])
    with pytest.raises(ValueError, match="twice"):
        Fourier(3, [1, 1])
    with pytest.raises(ValueError, match="nonzero"):
        Fourier(3, {1: 0.0})
    with pytest.raises(ValueError, match="power-of-two"):
        fwht(np.ones(3))
