"""Explicit small fixtures, closed forms, argument validation and large-n smoke tests for the
range, Haar and permuted kinds (HDMM §4, Table of predicate sets)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from linalg_oracle import check_against_dense, close

from mmtoolkit.linalg import (
    AllRange,
    AllRangeGram,
    Dense,
    Difference,
    Haar,
    HaarGram,
    HaarInverse,
    Identity,
    Kronecker,
    Ones,
    Permuted,
    PermutedGram,
    Prefix,
    PrefixGram,
    SymTridiagonal,
    TooLargeError,
    Total,
    Weighted,
    WidthRange,
    WidthRangeGram,
)

HAAR_4 = [
    [1, 1, 1, 1],
    [1, 1, -1, -1],
    [1, -1, 0, 0],
    [0, 0, 1, -1],
]
HAAR_8 = [
    [1, 1, 1, 1, 1, 1, 1, 1],
    [1, 1, 1, 1, -1, -1, -1, -1],
    [1, 1, -1, -1, 0, 0, 0, 0],
    [0, 0, 0, 0, 1, 1, -1, -1],
    [1, -1, 0, 0, 0, 0, 0, 0],
    [0, 0, 1, -1, 0, 0, 0, 0],
    [0, 0, 0, 0, 1, -1, 0, 0],
    [0, 0, 0, 0, 0, 0, 1, -1],
]
ALLRANGE_3 = [  # (0,0) (0,1) (0,2) (1,1) (1,2) (2,2)
    [1, 0, 0],
    [1, 1, 0],
    [1, 1, 1],
    [0, 1, 0],
    [0, 1, 1],
    [0, 0, 1],
]
PREFIX_3 = [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
WIDTH_5_2 = [
    [1, 1, 0, 0, 0],
    [0, 1, 1, 0, 0],
    [0, 0, 1, 1, 0],
    [0, 0, 0, 1, 1],
]


@pytest.mark.parametrize(
    "M, rows",
    [
        (Haar(4), HAAR_4),
        (Haar(8), HAAR_8),
        (AllRange(3), ALLRANGE_3),
        (Prefix(3), PREFIX_3),
        (WidthRange(5, 2), WIDTH_5_2),
        (Haar(1), [[1]]),
        (Total(3), [[1, 1, 1]]),
        (Ones(2, 3), [[1, 1, 1], [1, 1, 1]]),
        (Difference(3), [[1, 0, 0], [-1, 1, 0], [0, -1, 1]]),
    ],
)
def test_fixture_rows(M, rows):
    ref = np.array(rows, dtype=float)
    assert M.shape == ref.shape
    close(M.dense(), ref)
    close(M.matvec(np.eye(ref.shape[1])), ref, what="rows through matvec")
    close(M.rmatvec(np.eye(ref.shape[0])), ref.T, what="columns through rmatvec")
    check_against_dense(M, ref)


# ======================================================================= closed forms
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_prefix_closed_forms(n):
    P = Prefix(n)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    G = P.gram()
    assert isinstance(G, PrefixGram)
    close(G.dense(), n - np.maximum(i, j))
    Pi = P.pinv()
    assert isinstance(Pi, Difference)
    close((Pi @ P).dense(), np.eye(n))
    close(P.colnorm_p(1) * np.ones(n), n - np.arange(n))
    close(P.colnorm_p(2) * np.ones(n), n - np.arange(n))
    assert isinstance(G.pinv(), SymTridiagonal)
    close((G.pinv() @ G).dense(), np.eye(n))


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_allrange_closed_forms(n):
    R = AllRange(n)
    assert R.shape == (n * (n + 1) // 2, n)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    G = R.gram()
    assert isinstance(G, AllRangeGram)
    close(G.dense(), (np.minimum(i, j) + 1) * (n - np.maximum(i, j)))
    close(R.colnorm_p(1) * np.ones(n), (np.arange(n) + 1) * (n - np.arange(n)))
    # (RᵀR)⁻¹ = tridiag(-1, 2, -1) / (n + 1)
    T = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    close(G.pinv().dense(), T / (n + 1))


@pytest.mark.parametrize("n, w", [(5, 1), (5, 2), (5, 5), (6, 3)])
def test_widthrange_closed_forms(n, w):
    W = WidthRange(n, w)
    assert W.shape == (n - w + 1, n)
    ref = np.array(WIDTH_5_2) if (n, w) == (5, 2) else W.dense()
    G = W.gram()
    assert isinstance(G, WidthRangeGram)
    counts = [
        [
            sum(1 for s in range(n - w + 1) if s <= min(a, b) and max(a, b) <= s + w - 1)
            for b in range(n)
        ]
        for a in range(n)
    ]
    close(G.dense(), counts)
    close(W.colnorm_p(1) * np.ones(n), ref.sum(axis=0))
    close(W.pinv().dense(), np.linalg.pinv(ref))


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16])
def test_haar_closed_forms(n):
    H = Haar(n)
    L = int(math.log2(n))
    assert H.colnorm_p(1) == float(L + 1) and H.colnorm_p(2) == float(L + 1)
    D = H.dense()
    close(D @ D.T, np.diag(H.rownorm_p(2)), what="orthogonal rows")
    assert isinstance(H.gram(), HaarGram)
    assert isinstance(H.pinv(), HaarInverse)
    close(H.pinv().dense(), D.T @ np.diag(1.0 / H.rownorm_p(2)))
    close(H.gram().diag(), np.full(n, L + 1.0))
    x = np.random.default_rng(n).normal(size=n)
    close(H.pinv() @ (H @ x), x)


def test_ones_and_total_closed_forms():
    O = Ones(3, 4)
    g = O.gram()
    assert isinstance(g, Weighted) and isinstance(g.base, Ones) and g.weight == 3.0
    close(O.pinv().dense(), np.ones((4, 3)) / 12)
    assert O.colnorm_p(1) == 3.0 and O.colnorm_p(2) == 3.0
    assert isinstance(Total(5), Ones) and Total(5).shape == (1, 5)
    S = Ones(4, 4)
    assert S.trace() == 4.0
    close(S.diag(), np.ones(4))


def test_permuted_closed_forms():
    rng = np.random.default_rng(3)
    perm = rng.permutation(5)
    base = AllRange(5)
    P = Permuted(base, perm)
    ref = base.dense()[:, perm]
    close(P.dense(), ref)
    G = P.gram()
    assert isinstance(G, PermutedGram)
    close(G.dense(), ref.T @ ref)
    close(G.diag(), np.diag(ref.T @ ref))
    close(G.pinv().dense(), np.linalg.pinv(ref.T @ ref))
    close(P.pinv().dense(), np.linalg.pinv(ref))
    close(P.colnorm_p(1), np.abs(ref).sum(axis=0))
    assert P.sensitivity(1) == base.sensitivity(1)
    # perm as a list, and the identity permutation
    close(Permuted(Prefix(3), [0, 1, 2]).dense(), np.array(PREFIX_3, dtype=float))


# ======================================================================== validation
@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: Haar(6), "power of two"),
        (lambda: Haar(0), ">= 1"),
        (lambda: WidthRange(5, 0), ">= 1"),
        (lambda: WidthRange(5, 6), "w"),
        (lambda: Prefix(0), ">= 1"),
        (lambda: AllRange(-2), ">= 1"),
        (lambda: Prefix(2.5), "integer"),
        (lambda: Ones(0, 3), ">= 1"),
        (lambda: Ones(2, True), "integer"),
        (lambda: Permuted(Prefix(3), [0, 1, 1]), "permutation"),
        (lambda: Permuted(Prefix(3), [0, 1]), "permutation"),
        (lambda: Permuted(Prefix(3), [0.0, 1.0, 2.0]), "integers"),
        (lambda: PermutedGram(Dense(np.ones((2, 3))), [0, 1]), "square"),
        (lambda: SymTridiagonal([1.0, 2.0], [1.0, 2.0]), "length"),
    ],
)
def test_invalid_arguments(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_numpy_array_on_the_left():
    A = np.arange(6.0).reshape(2, 3)
    close(A @ Prefix(3), A @ np.array(PREFIX_3, dtype=float))
    close(np.ones(6) @ AllRange(3), np.ones(6) @ np.array(ALLRANGE_3, dtype=float))


# ============================================================== large n, no densities
def test_large_structured_products_stay_implicit():
    rng = np.random.default_rng(0)
    n = 1 << 20
    x = rng.normal(size=n)
    H = Haar(n)
    close(H.pinv() @ (H @ x), x, what="Haar round trip")
    close(H.gram() @ x, H.T @ (H @ x))
    P = Prefix(n)
    close(P.pinv() @ (P @ x), x, what="Prefix round trip")
    # LᵀL has condition number ~ n², so the Gram round trip is checked on a smaller n
    G = Prefix(4096).gram()
    close(G.pinv() @ (G @ x[:4096]), x[:4096], rtol=1e-6, what="Prefix Gram round trip")
    with pytest.raises(TooLargeError):
        P.dense()
    with pytest.raises(TooLargeError):
        H.gram().dense()
    # AllRange(2000) has ~2e6 rows: products by prefix sums, pinv through the tridiagonal
    R = AllRange(2000)
    z = rng.normal(size=2000)
    close(R.pinv() @ (R @ z), z, what="AllRange R⁺R = I")
    y = rng.normal(size=R.shape[0])
    close(R.gram() @ z, R.T @ (R @ z))
    I, J = np.triu_indices(2000)  # rows in lexicographic (i, j) order
    cols = [0, 999, 1999]
    close((R.T @ y)[cols], [y[(I <= c) & (J >= c)].sum() for c in cols], what="rmatvec spot")
    close((R @ z)[:3], [z[0], z[:2].sum(), z[:3].sum()], what="matvec spot")
    assert R.colnorm_p(1)[0] == 2000.0
    K = Kronecker([Identity(100)] * 4)
    with pytest.raises(TooLargeError):
        K.dense()
