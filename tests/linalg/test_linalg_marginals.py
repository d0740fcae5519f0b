"""The marginals algebra (HDMM §6.3, App. A.4) against dense numpy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from linalg_oracle import check_against_dense, close

from mmtoolkit.linalg import (
    MAX_MARGINALS_DIM,
    Dense,
    Identity,
    Kronecker,
    Marginal,
    Marginals,
    MarginalsGram,
    Matrix,
    Ones,
    Product,
    TooLargeError,
    Total,
    projected_traces,
)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))

sizes_st = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def ref_marginal(sizes, key):
    out = np.ones((1, 1))
    for i, n in enumerate(sizes):
        out = np.kron(out, np.eye(n) if (key >> i) & 1 else np.ones((1, n)))
    return out


def ref_gram(sizes, v):
    out = np.zeros((math.prod(sizes),) * 2)
    for a in range(2 ** len(sizes)):
        C = np.ones((1, 1))
        for i, n in enumerate(sizes):
            C = np.kron(C, np.eye(n) if (a >> i) & 1 else np.ones((n, n)))
        out += v[a] * C
    return out


def ref_projector(sizes, B):
    P = np.ones((1, 1))
    for i, n in enumerate(sizes):
        J = np.ones((n, n)) / n
        P = np.kron(P, np.eye(n) - J if (B >> i) & 1 else J)
    return P


@st.composite
def weighted_marginals(draw):
    sizes = draw(sizes_st)
    d = len(sizes)
    ws = draw(
        st.lists(st.sampled_from([0.0, 0.0, 1.0, -0.5, 2.0, 0.3]), min_size=2**d, max_size=2**d)
    )
    if not any(ws):
        ws[draw(st.integers(0, 2**d - 1))] = 1.0
    return sizes, dict(enumerate(ws))


@st.composite
def marginals_grams(draw, nonnegative=False):
    sizes = draw(sizes_st)
    d = len(sizes)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    v = rng.normal(size=2**d)
    if nonnegative:
        v = np.abs(v)
    v = v * (rng.random(2**d) < draw(st.sampled_from([0.3, 0.7, 1.0])))
    return sizes, v


# ========================================================================= Marginals
@SETTINGS
@given(weighted_marginals(), st.integers(0, 2**32 - 1))
def test_marginals_match_dense(case, seed):
    sizes, weights = case
    M = Marginals(sizes, weights)
    live = sorted(a for a, w in weights.items() if w != 0.0)
    ref = np.vstack([weights[a] * ref_marginal(sizes, a) for a in live])
    assert M.keys == tuple(live)
    assert list(M.weights) == live
    assert M.shape == ref.shape
    check_against_dense(M, ref, rng=np.random.default_rng(seed))

    G = M.gram()
    assert isinstance(G, MarginalsGram)
    close(G.v, [weights.get(a, 0.0) ** 2 for a in range(2 ** len(sizes))], what="gram v")
    assert isinstance(M.colnorm_p(1), float)
    close(M.colnorm_p(2), sum(w * w for w in weights.values()), what="colnorm_p(2)")

    blocks = M.blocks()
    assert [b.key for _, b in blocks] == live
    for theta, b in blocks:
        assert isinstance(b, Marginal) and isinstance(b, Kronecker)
        assert theta == weights[b.key]
        close(b.dense(), ref_marginal(sizes, b.key), what="block")


@SETTINGS
@given(sizes_st, st.data())
def test_single_marginal(sizes, data):
    key = data.draw(st.integers(0, 2 ** len(sizes) - 1))
    Q = Marginal(sizes, key)
    assert Q.sizes == sizes and Q.key == key
    for i, f in enumerate(Q.factors):
        if (key >> i) & 1:
            assert isinstance(f, Identity)
        else:
            assert isinstance(f, Total) and isinstance(f, Ones) and f.shape == (1, sizes[i])
    check_against_dense(Q, ref_marginal(sizes, key))


# ===================================================================== MarginalsGram
@SETTINGS
@given(marginals_grams(), st.integers(0, 2**32 - 1))
def test_marginals_gram_matches_dense(case, seed):
    sizes, v = case
    G = MarginalsGram(sizes, v)
    ref = ref_gram(sizes, v)
    check_against_dense(G, ref, rng=np.random.default_rng(seed))
    assert G.T is G
    assert isinstance(G.gram(), MarginalsGram)
    assert isinstance(G.pinv(), MarginalsGram)
    assert isinstance(G.colnorm_p(1), float) and isinstance(G.colnorm_p(2), float)
    close(G.trace(), np.sum(G.spectrum() * G.dims()), what="trace = Σ μ dim")


@SETTINGS
@given(marginals_grams())
def test_spectrum_is_eigenvalue_multiset(case):
    sizes, v = case
    G = MarginalsGram(sizes, v)
    mu, dims = G.spectrum(), G.dims()
    assert mu.shape == dims.shape == (2 ** len(sizes),)
    assert dims.sum() == math.prod(sizes)  # the S_B decompose R^N
    expected = [
        math.prod(n - 1 for i, n in enumerate(sizes) if (B >> i) & 1) for B in range(len(mu))
    ]
    close(dims, expected, what="dims")
    eig = np.repeat(mu, dims.astype(int))
    close(np.sort(eig), np.linalg.eigvalsh(ref_gram(sizes, v)), what="eigenvalues")


@SETTINGS
@given(marginals_grams(), st.integers(0, 2**32 - 1))
def test_spectrum_round_trip(case, seed):
    sizes, v = case
    G = MarginalsGram(sizes, v)
    H = MarginalsGram.from_spectrum(sizes, G.spectrum())
    close(H.v, v, what="v -> mu -> v")
    mu = np.random.default_rng(seed).normal(size=2 ** len(sizes))
    close(MarginalsGram(sizes, MarginalsGram.from_spectrum(sizes, mu).v).spectrum(), mu)


@SETTINGS
@given(sizes_st, st.integers(0, 2**32 - 1))
def test_marginals_gram_products(sizes, seed):
    rng = np.random.default_rng(seed)
    d = len(sizes)
    v1, v2 = rng.normal(size=2**d), rng.normal(size=2**d) * (rng.random(2**d) < 0.5)
    G1, G2 = MarginalsGram(sizes, v1), MarginalsGram(sizes, v2)
    R1, R2 = ref_gram(sizes, v1), ref_gram(sizes, v2)
    P = G1 @ G2
    assert isinstance(P, MarginalsGram)
    close(P.dense(), R1 @ R2, what="G1 @ G2")
    close((G1 @ G2 @ G1).dense(), R1 @ R2 @ R1, what="G1 @ G2 @ G1")
    close(G1.gram().dense(), R1 @ R1, what="gram")
    S = G1 + G2
    assert isinstance(S, MarginalsGram)
    close(S.dense(), R1 + R2)
    close((G1 - G2).dense(), R1 - R2)
    close((2.5 * G1).dense(), 2.5 * R1)
    close((-G1).dense(), -R1)
    # other operands fall back to the base-class behaviour
    N = R1.shape[0]
    D = rng.normal(size=(N, 2))
    Q = G1 @ Dense(D @ D.T)
    assert isinstance(Q, Product) and not isinstance(Q, MarginalsGram)
    close(Q.dense(), R1 @ D @ D.T)
    close(G1 @ D, R1 @ D)
    close(D.T @ G1, D.T @ R1)
    other = MarginalsGram(sizes + (2,), np.ones(2 ** (d + 1)))
    assert isinstance(G1 @ Identity(N), Product)
    with pytest.raises(ValueError):
        G1 @ other  # shape mismatch is still reported


@SETTINGS
@given(marginals_grams(nonnegative=True))
def test_pinv_and_inverse(case):
    sizes, v = case
    G = MarginalsGram(sizes, v)
    ref = ref_gram(sizes, v)
    Gp = G.pinv()
    close(Gp.dense(), np.linalg.pinv(ref, rcond=1e-9, hermitian=True), rtol=1e-8, what="pinv")
    # Moore-Penrose identities
    close((G @ Gp @ G).dense(), ref, what="G G+ G")
    close((Gp @ G @ Gp).dense(), Gp.dense(), what="G+ G G+")
    live = G.dims() > 0
    if np.all(G.spectrum()[live] > 1e-9 * np.max(G.spectrum()[live])):
        Gi = G.inverse()
        close(Gi.dense(), np.linalg.inv(ref), rtol=1e-8, what="inverse")
        close((G @ Gi).dense(), np.eye(ref.shape[0]), what="G G^-1")
    else:
        with pytest.raises(ValueError, match="singular"):
            G.inverse()


def test_inverse_nonsingular_and_singular():
    sizes = (2, 3, 2)
    v = np.zeros(8)
    v[7] = 1.0  # identity
    v[0] = 0.5  # + J
    G = MarginalsGram(sizes, v)
    close(G.inverse().dense(), np.linalg.inv(ref_gram(sizes, v)))
    v = np.zeros(8)
    v[3] = 1.0  # I ⊗ I ⊗ J: singular
    with pytest.raises(ValueError, match="singular"):
        MarginalsGram(sizes, v).inverse()


# ====================================================================== projections
@SETTINGS
@given(sizes_st, st.integers(0, 2**32 - 1))
def test_projected_traces(sizes, seed):
    rng = np.random.default_rng(seed)
    Ys = []
    for n in sizes:
        A = rng.normal(size=(n + 1, n))
        Ys.append(A.T @ A if rng.random() < 0.5 else rng.normal(size=(n, n)))
    Y = np.ones((1, 1))
    for Yi in Ys:
        Y = np.kron(Y, Yi)
    out = projected_traces(sizes, [np.trace(Yi) for Yi in Ys], [Yi.sum() for Yi in Ys])
    expected = [np.trace(ref_projector(sizes, B) @ Y) for B in range(2 ** len(sizes))]
    close(out, expected, what="projected traces")
    close(out.sum(), np.trace(Y), what="Σ_B tr(P_B Y) = tr Y")
    # the evaluator identity tr(G⁺ Y) = Σ_B μ⁺_B tr(P_B Y)
    v = np.abs(rng.normal(size=2 ** len(sizes)))
    G = MarginalsGram(sizes, v)
    mu_plus = G.pinv().spectrum() * (G.dims() > 0)
    close(np.dot(mu_plus, out), np.trace(np.linalg.pinv(ref_gram(sizes, v)) @ Y), rtol=1e-8)


def test_projectors_are_the_spectral_subspaces():
    sizes = (3, 1, 2)
    Ps = [ref_projector(sizes, B) for B in range(8)]
    close(sum(Ps), np.eye(6))
    for B, P in enumerate(Ps):
        close(P @ P, P)
        assert round(np.trace(P)) == MarginalsGram(sizes, np.zeros(8)).dims()[B]


# ========================================================================= big sizes
def _low_order_keys(d, k):
    sets = (s for r in range(k + 1) for s in itertools.combinations(range(d), r))
    return {sum(1 << i for i in s): 1.0 for s in sets}


def test_marginals_on_100_attributes_stay_implicit():
    sizes = (10,) * 100
    M = Marginals(sizes, _low_order_keys(100, 3))
    n_keys = 1 + 100 + math.comb(100, 2) + math.comb(100, 3)
    rows = 1 + 100 * 10 + math.comb(100, 2) * 10**2 + math.comb(100, 3) * 10**3
    assert M.shape == (rows, 10**100)
    assert all(type(s) is int for s in M.shape)
    assert len(M.keys) == n_keys
    assert M.colnorm_p(1) == float(n_keys)
    assert M.colnorm_p(2) == float(n_keys)
    assert M.sensitivity(2) == pytest.approx(math.sqrt(n_keys))
    with pytest.raises(TooLargeError):
        M.dense()
    with pytest.raises(TooLargeError, match="MAX_MARGINALS_DIM"):
        M.gram()
    with pytest.raises(TooLargeError):
        M.T.dense()


def test_marginals_gram_on_a_huge_domain_without_materialising():
    sizes = (10,) * 20  # N = 10^20
    G = Marginals(sizes, _low_order_keys(20, 2)).gram()
    assert G.shape == (10**20, 10**20)
    mu, dims = G.spectrum(), G.dims()
    assert dims.sum() == pytest.approx(1e20)
    Gp = G.pinv()
    assert isinstance(Gp, MarginalsGram)
    assert G.trace() == pytest.approx(1e20 * (1 + 20 + 190))
    assert np.isfinite(G.colnorm_p(1)) and np.isfinite(G.colnorm_p(2))
    assert (mu > 0).sum() == 1 + 20 + 190  # supported residuals: |B| <= 2
    with pytest.raises(TooLargeError):
        G.diag()
    with pytest.raises(TooLargeError):
        G.dense()


def test_dense_fallbacks_on_huge_implicit_matrices_raise_quickly():
    K = Kronecker([Identity(100)] * 4)
    with pytest.raises(TooLargeError):
        K.dense()
    with pytest.raises(TooLargeError):
        K.pinv().dense()
    with pytest.raises(TooLargeError):
        Marginals((10,) * 100, {0: 1.0, 5: 2.0}).dense()
    with pytest.raises(TooLargeError):
        MarginalsGram((2,) * (MAX_MARGINALS_DIM + 1), np.zeros(1))
    with pytest.raises(TooLargeError):
        projected_traces((2,) * (MAX_MARGINALS_DIM + 1), [1.0] * 25, [1.0] * 25)


# ======================================================================== validation
@pytest.mark.parametrize(
    "sizes, weights, match",
    [
        ((2, 3), {4: 1.0}, "key"),
        ((2, 3), {-1: 1.0}, "key"),
        ((2, 3), {1.5: 1.0}, "key"),
        ((2, 3), {1: float("nan")}, "finite"),
        ((2, 3), {1: float("inf")}, "finite"),
        ((2, 3), {1: 0.0}, "nonzero"),
        ((2, 3), [1.0, 2.0], "mapping"),
        ((), {0: 1.0}, "attribute"),
        ((2, 0), {0: 1.0}, "sizes"),
        ((2, 2.5), {0: 1.0}, "sizes"),
        ("ab", {0: 1.0}, "sizes"),
    ],
)
def test_marginals_validation(sizes, weights, match):
    with pytest.raises(ValueError, match=match):
        Marginals(sizes, weights)


def test_marginals_gram_validation():
    with pytest.raises(ValueError, match="2\\^2"):
        MarginalsGram((2, 3), np.ones(3))
    with pytest.raises(ValueError, match="finite"):
        MarginalsGram((2, 3), [1.0, np.nan, 0.0, 0.0])
    with pytest.raises(ValueError, match="2\\^2"):
        MarginalsGram.from_spectrum((2, 3), np.ones(5))
    with pytest.raises(ValueError, match="key"):
        Marginal((2, 3), 7)
    with pytest.raises(ValueError, match="one value per attribute"):
        projected_traces((2, 3), [1.0], [1.0, 2.0])


def test_marginals_is_a_matrix_with_python_int_shape():
    M = Marginals((3, 4), {0: 1.0, 3: 2.0, 1: 0.0})
    assert isinstance(M, Matrix)
    assert M.keys == (0, 3)
    assert M.shape == (1 + 12, 12)
