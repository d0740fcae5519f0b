"""Property tests: every Matrix kind agrees with dense numpy on every operation.

References are built independently of the implementations (loops over the definitions,
``np.kron`` of factor references), then :func:`linalg_oracle.check_against_dense` compares
products, transposes, Grams, pseudo-inverses, traces, diagonals, column norms,
sensitivities and the scipy operator.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from linalg_oracle import check_against_dense

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
    Marginal,
    Marginals,
    MarginalsGram,
    Ones,
    Permuted,
    PermutedGram,
    Prefix,
    PrefixGram,
    Product,
    Sum,
    SymTridiagonal,
    Total,
    Transposed,
    VStack,
    Weighted,
    WidthRange,
    WidthRangeGram,
)

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ============================================================== independent references
def ref_prefix(n):
    return np.array([[1.0 if c <= r else 0.0 for c in range(n)] for r in range(n)])


def ref_allrange(n):
    rows = [(i, j) for i in range(n) for j in range(i, n)]
    return np.array([[1.0 if i <= c <= j else 0.0 for c in range(n)] for i, j in rows])


def ref_width(n, w):
    windows = range(n - w + 1)
    return np.array([[1.0 if s <= c <= s + w - 1 else 0.0 for c in range(n)] for s in windows])


def ref_haar(n):
    if n == 1:
        return np.ones((1, 1))
    h = ref_haar(n // 2)
    return np.vstack([np.kron(h, [[1, 1]]), np.kron(np.eye(n // 2), [[1, -1]])])


def ref_marginal(sizes, key):
    out = np.ones((1, 1))
    for i, n in enumerate(sizes):
        out = np.kron(out, np.eye(n) if (key >> i) & 1 else np.ones((1, n)))
    return out


def ref_C(sizes, key):
    out = np.ones((1, 1))
    for i, n in enumerate(sizes):
        out = np.kron(out, np.eye(n) if (key >> i) & 1 else np.ones((n, n)))
    return out


def _is_pow2(n):
    return n >= 1 and n & (n - 1) == 0


def _split(draw, n):
    """Attribute sizes whose product is n (one or two attributes)."""
    divisors = [a for a in range(1, n + 1) if n % a == 0]
    a = draw(st.sampled_from(divisors))
    return (n,) if a in (1, n) else (a, n // a)


# ==================================================================== leaf generator
LEAVES = [
    "dense",
    "identity",
    "ones",
    "total",
    "prefix",
    "difference",
    "allrange",
    "widthrange",
    "haar",
    "haar_inverse",
    "symtri",
    "prefix_gram",
    "allrange_gram",
    "widthrange_gram",
    "haar_gram",
    "permuted",
    "permuted_gram",
    "marginal",
    "marginals",
    "marginals_gram",
]


@st.composite
def leaves(draw, n=None, kinds=None, max_n=6):
    """(Matrix, reference, pinv_exact) for a leaf kind with ``n`` columns."""
    kind = draw(st.sampled_from(kinds or LEAVES))
    if n is None:
        haar = kind in ("haar", "haar_inverse", "haar_gram")
        n = draw(st.sampled_from([1, 2, 4, 8]) if haar else st.integers(1, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind in ("haar", "haar_inverse", "haar_gram") and not _is_pow2(n):
        kind = "prefix"
    if kind == "dense":
        m = draw(st.integers(1, 6))
        A = rng.normal(size=(m, n))
        return Dense(A), A, True
    if kind == "identity":
        return Identity(n), np.eye(n), True
    if kind == "ones":
        m = draw(st.integers(1, 4))
        return Ones(m, n), np.ones((m, n)), True
    if kind == "total":
        return Total(n), np.ones((1, n)), True
    if kind == "prefix":
        return Prefix(n), ref_prefix(n), True
    if kind == "difference":
        return Difference(n), np.linalg.inv(ref_prefix(n)), True
    if kind == "allrange":
        return AllRange(n), ref_allrange(n), True
    if kind == "widthrange":
        w = draw(st.integers(1, n))
        return WidthRange(n, w), ref_width(n, w), True
    if kind == "haar":
        return Haar(n), ref_haar(n), True
    if kind == "haar_inverse":
        return HaarInverse(n), np.linalg.inv(ref_haar(n)), True
    if kind == "symtri":
        d, e = rng.normal(size=n) + 3.0, rng.normal(size=n - 1)
        ref = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
        return SymTridiagonal(d, e), ref, False
    if kind == "prefix_gram":
        L = ref_prefix(n)
        return PrefixGram(n), L.T @ L, True
    if kind == "allrange_gram":
        R = ref_allrange(n)
        return AllRangeGram(n), R.T @ R, True
    if kind == "widthrange_gram":
        w = draw(st.integers(1, n))
        W = ref_width(n, w)
        return WidthRangeGram(n, w), W.T @ W, True
    if kind == "haar_gram":
        H = ref_haar(n)
        return HaarGram(n), H.T @ H, True
    if kind == "permuted":
        base, ref, exact = draw(leaves(n=n, kinds=["dense", "prefix", "allrange", "ones"]))
        perm = rng.permutation(n)
        return Permuted(base, perm), ref[:, perm], exact
    if kind == "permuted_gram":
        base, ref, exact = draw(leaves(n=n, kinds=["allrange", "widthrange", "ones", "dense"]))
        perm = rng.permutation(n)
        G = ref.T @ ref
        return PermutedGram(base.gram(), perm), G[np.ix_(perm, perm)], exact
    sizes = _split(draw, n)
    d = len(sizes)
    if kind == "marginal":
        key = draw(st.integers(0, 2**d - 1))
        return Marginal(sizes, key), ref_marginal(sizes, key), True
    if kind == "marginals":
        ws = draw(st.lists(st.sampled_from([0.0, 1.0, -2.0, 0.5]), min_size=2**d, max_size=2**d))
        ws[draw(st.integers(0, 2**d - 1))] = 1.5
        weights = dict(enumerate(ws))
        ref = np.vstack([w * ref_marginal(sizes, a) for a, w in weights.items() if w != 0.0])
        return Marginals(sizes, weights), ref, True
    assert kind == "marginals_gram"
    v = rng.normal(size=2**d) * (rng.random(2**d) < 0.7)
    ref = sum(v[a] * ref_C(sizes, a) for a in range(2**d))
    return MarginalsGram(sizes, v), ref, True


# =============================================================== composite generator
COMPOSITES = [
    "weighted",
    "transposed",
    "dot_T",
    "sum",
    "product",
    "vstack",
    "kronecker",
    "vstack_weighted_kron",
]


@st.composite
def matrices(draw, depth=2, kind=None):
    """(Matrix, reference, pinv_exact) over leaves and nested combinators."""
    if kind is None:
        kind = draw(st.sampled_from(["leaf"] + (COMPOSITES if depth > 0 else [])))
    if kind == "leaf":
        return draw(leaves())
    if kind == "weighted":
        M, R, ex = draw(matrices(depth - 1))
        c = draw(st.sampled_from([0.0, -1.0, 2.5, 0.3]))
        return Weighted(c, M), c * R, ex
    if kind == "transposed":
        M, R, _ = draw(matrices(depth - 1))
        return Transposed(M), R.T, False
    if kind == "dot_T":
        M, R, ex = draw(matrices(depth - 1))
        return M.T, R.T, ex
    if kind == "sum":
        M, R, _ = draw(matrices(depth - 1))
        if R.shape[0] == R.shape[1] and draw(st.booleans()):
            return Sum([M, M.T]), R + R.T, False
        S = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).normal(size=R.shape)
        return Sum([M, Dense(S)]), R + S, False
    if kind == "product":
        M, R, _ = draw(matrices(depth - 1))
        N, RN, _ = draw(leaves(n=R.shape[1]))
        return Product(M, N.T), R @ RN.T, False
    if kind == "vstack":
        M, R, _ = draw(matrices(depth - 1))
        N, RN, _ = draw(leaves(n=R.shape[1]))
        return VStack([M, N]), np.vstack([R, RN]), False
    if kind == "kronecker":
        parts = [draw(leaves(max_n=3)) for _ in range(draw(st.integers(1, 3)))]
        M = Kronecker([p[0] for p in parts])
        R = np.ones((1, 1))
        for p in parts:
            R = np.kron(R, p[1])
        return M, R, all(p[2] for p in parts)
    assert kind == "vstack_weighted_kron"
    n1, n2 = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    blocks, refs = [], []
    for _ in range(draw(st.integers(1, 3))):
        (A, RA, _), (B, RB, _) = draw(leaves(n=n1)), draw(leaves(n=n2))
        c = draw(st.sampled_from([1.0, 0.5, -2.0]))
        blocks.append(Weighted(c, Kronecker([A, B])))
        refs.append(c * np.kron(RA, RB))
    return VStack(blocks), np.vstack(refs), False


# ========================================================================== tests
@pytest.mark.parametrize("kind", LEAVES)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_leaf_kind_matches_dense(kind, data, seed):
    M, ref, exact = data.draw(leaves(kinds=[kind], max_n=8))
    check_against_dense(M, ref, rng=np.random.default_rng(seed), pinv_exact=exact)


@pytest.mark.parametrize("kind", COMPOSITES)
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_composite_kind_matches_dense(kind, data, seed):
    M, ref, exact = data.draw(matrices(depth=2, kind=kind))
    check_against_dense(M, ref, rng=np.random.default_rng(seed), pinv_exact=exact)


@SETTINGS
@given(
    st.sampled_from(["prefix", "allrange", "dense", "widthrange"]),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 2**32 - 1),
)
def test_kronecker_of_three_mixed_factors(kind3, n1, n2, n3, seed):
    """Prefix ⊗ AllRange ⊗ (Dense | Prefix | AllRange | WidthRange)."""
    rng = np.random.default_rng(seed)
    third = {
        "prefix": (Prefix(n3), ref_prefix(n3)),
        "allrange": (AllRange(n3), ref_allrange(n3)),
        "dense": (Dense(D := rng.normal(size=(2, n3))), D),
        "widthrange": (WidthRange(n3, 1 + seed % n3), ref_width(n3, 1 + seed % n3)),
    }[kind3]
    K = Kronecker([Prefix(n1), AllRange(n2), third[0]])
    ref = np.kron(np.kron(ref_prefix(n1), ref_allrange(n2)), third[1])
    check_against_dense(K, ref, rng=rng)


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_vstack_of_weighted_kroneckers(n1, n2, nblocks, seed):
    rng = np.random.default_rng(seed)
    pool = [
        (lambda n: (Prefix(n), ref_prefix(n))),
        (lambda n: (AllRange(n), ref_allrange(n))),
        (lambda n: (Identity(n), np.eye(n))),
        (lambda n: (Total(n), np.ones((1, n)))),
    ]
    blocks, refs = [], []
    for _ in range(nblocks):
        (A, RA), (B, RB) = pool[rng.integers(4)](n1), pool[rng.integers(4)](n2)
        c = float(rng.normal())
        blocks.append(Weighted(c, Kronecker([A, B])))
        refs.append(c * np.kron(RA, RB))
    check_against_dense(VStack(blocks), np.vstack(refs), rng=rng, pinv_exact=False)


def test_range_products_on_wide_blocks():
    # blocks of >= 64 columns take the row-by-row running sum (linalg.ranges._cumsum):
    # the same additions in the same order as np.cumsum, in every memory layout
    from mmtoolkit.linalg.ranges import _cumsum

    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 80))
    for block in (X, np.asfortranarray(X), X[::-1], X[:, ::2], X[:, :70]):
        np.testing.assert_array_equal(_cumsum(block), np.cumsum(block, axis=0))
    for M in (Prefix(50), AllRange(50), PrefixGram(50), AllRangeGram(50)):
        D = M.dense()
        for block in (X, np.asfortranarray(X), X.T.copy().T, X[::-1]):
            np.testing.assert_allclose(M.matvec(block), D @ block, rtol=1e-12, atol=1e-9)
        Y = rng.normal(size=(M.shape[0], 70))
        np.testing.assert_allclose(M.rmatvec(Y), D.T @ Y, rtol=1e-12, atol=1e-9)


def test_all_range_builds_and_scores_without_arrays_of_its_size():
    """``all_range:n=10^8`` took 20 s and 7 GB to build (a Python list of n row offsets)
    and 8 s to score against Identity (an O(n) Gram diagonal): now both are O(1), and the
    row norms of its n(n+1)/2 rows are a TooLargeError, not a MemoryError."""
    import tracemalloc

    from mmtoolkit import evaluate
    from mmtoolkit.linalg import TooLargeError

    n = 10**6
    tracemalloc.start()
    try:
        W = AllRange(n)
        built = tracemalloc.get_traced_memory()[1]
        trace = evaluate.trace_term(W, Identity(n))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert built < 2**16 and peak < 2**20, (built, peak)  # an n-array is 8 MB
    assert trace == float(n * (n + 1) * (n + 2) // 6)  # Σ_j (j+1)(n-j), exact
    for k in (1, 2, 7, 16):
        assert AllRangeGram(k).trace() == np.trace(AllRange(k).dense().T @ AllRange(k).dense())
    with pytest.raises(TooLargeError, match="row norms of AllRange"):
        W.rownorm_p(2)


@pytest.mark.parametrize("n, error", [(2.7, TypeError), (None, TypeError), (0, ValueError)])
def test_identity_size_must_be_a_positive_integer(n, error):
    """``Identity(2.7)`` was silently the 2 × 2 identity; ``Identity(None)`` a raw TypeError."""
    from mmtoolkit.checks import CheckTypeError
    from mmtoolkit.linalg import Identity

    with pytest.raises(CheckTypeError if error is TypeError else ValueError, match="Identity size"):
        Identity(n)
