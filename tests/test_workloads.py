"""Workload builders vs explicit numpy constructions, sizes on huge domains, bad input."""

import math
from functools import reduce
from itertools import combinations

import numpy as np
import pytest

from mmtoolkit import Domain, datasets, linalg, workloads
from mmtoolkit.workloads import (
    all_range,
    domain_size,
    identity,
    kron,
    marginal,
    marginals,
    marginals_list,
    num_queries,
    permuted,
    prefix,
    prefix_marginals,
    range_marginals,
    total,
    union,
    width_range,
)


# ----------------------------------------------------------------- explicit references
def ref_prefix(n):
    return np.tril(np.ones((n, n)))


def ref_all_range(n):
    rows = []
    for i in range(n):
        for j in range(i, n):
            r = np.zeros(n)
            r[i : j + 1] = 1
            rows.append(r)
    return np.array(rows)


def ref_width(n, w):
    return np.array([[1.0 if s <= c < s + w else 0.0 for c in range(n)] for s in range(n - w + 1)])


def ref_kron(mats):
    return reduce(np.kron, mats)


def ref_marginal(sizes, kept):
    return ref_kron([np.eye(n) if i in kept else np.ones((1, n)) for i, n in enumerate(sizes)])


def sorted_rows(A):
    """Rows in lexicographic order: compares two matrices as multisets of queries."""
    A = np.asarray(A, dtype=float)
    return A[np.lexsort(A.T[::-1])]


def assert_same_queries(W, expected):
    D = W.dense()
    assert D.shape == expected.shape
    np.testing.assert_allclose(sorted_rows(D), sorted_rows(expected), atol=1e-12)
    np.testing.assert_allclose(D.T @ D, expected.T @ expected, atol=1e-9)


# ------------------------------------------------------------------------------ 1-D
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_one_dimensional_predicate_sets(n):
    np.testing.assert_array_equal(identity(n).dense(), np.eye(n))
    np.testing.assert_array_equal(total(n).dense(), np.ones((1, n)))
    np.testing.assert_array_equal(prefix(n).dense(), ref_prefix(n))
    assert_same_queries(all_range(n), ref_all_range(n))
    assert num_queries(all_range(n)) == n * (n + 1) // 2
    for w in range(1, n + 1):
        assert_same_queries(width_range(n, w), ref_width(n, w))
        assert num_queries(width_range(n, w)) == n - w + 1


def test_hdmm_sensitivities():
    # HDMM predicate-set table: sens ‖R‖₁ = ⌊(n+1)/2⌋·⌈(n+1)/2⌉ = 262656 at n = 1024
    assert all_range(1024).sensitivity(1) == 262656
    assert np.abs(ref_all_range(9)).sum(axis=0).max() == 25
    assert width_range(1024, 32).shape == (993, 1024)  # HDMM Width 32 Range: 993 queries


def test_one_dimensional_bad_input():
    for bad in (0, -3, 2.0, True, "4"):
        with pytest.raises(ValueError, match="n: (expected an integer|must be >= 1)"):
            prefix(bad)
    with pytest.raises(ValueError, match="w"):
        width_range(5, 6)
    with pytest.raises(ValueError, match="w"):
        width_range(5, 0)


# ------------------------------------------------------------------------ combinators
def test_kron_matches_numpy():
    a = np.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])
    W = kron([prefix(3), a, total(2)])
    assert isinstance(W, linalg.Kronecker)
    np.testing.assert_allclose(W.dense(), ref_kron([ref_prefix(3), a, np.ones((1, 2))]))
    assert W.shape == (9, 12)
    with pytest.raises(ValueError, match="at least one"):
        kron([])
    with pytest.raises(ValueError, match="list"):
        kron(prefix(3))


def test_union_with_weights():
    P, R = ref_prefix(4), ref_all_range(4)
    W = union([prefix(4), all_range(4), np.eye(4)], weights=[2.0, 1, 0.5])
    D = W.dense()
    np.testing.assert_allclose(D[:4], 2.0 * P)
    assert_same_queries(linalg.Dense(D[4:14]), R)
    np.testing.assert_allclose(D[14:], 0.5 * np.eye(4))
    assert isinstance(W.blocks[1], linalg.AllRange)  # weight 1: not wrapped
    assert isinstance(W.blocks[0], linalg.Weighted)
    # unweighted
    np.testing.assert_allclose(
        union([identity(3), total(3)]).dense(), np.vstack([np.eye(3), [[1, 1, 1]]])
    )


def test_union_bad_input():
    with pytest.raises(ValueError, match="domain size 5.*has 4"):
        union([prefix(4), prefix(5)])
    with pytest.raises(ValueError, match="2 weights for 3"):
        union([prefix(4)] * 3, weights=[1, 2])
    for bad in (0, -1, float("nan"), float("inf"), "2"):
        with pytest.raises(
            ValueError, match="weight 1: (expected a number|must be a (finite )?number > 0)"
        ):
            union([prefix(4), prefix(4)], weights=[1, bad])
    with pytest.raises(ValueError, match="at least one"):
        union([])


def test_permuted_reproducible():
    W = permuted(all_range(6), seed=3)
    perm = np.random.default_rng(3).permutation(6)
    np.testing.assert_array_equal(W.dense(), all_range(6).dense()[:, perm])
    np.testing.assert_array_equal(W.dense(), permuted(all_range(6), 3).dense())
    assert not np.array_equal(W.dense(), permuted(all_range(6), 4).dense())
    assert W.shape == (21, 6)
    # a permutation of the columns keeps the multiset of column sums
    np.testing.assert_array_equal(
        np.sort(W.dense().sum(axis=0)), np.sort(ref_all_range(6).sum(axis=0))
    )
    np.testing.assert_array_equal(
        permuted(np.eye(3), 0).dense(), np.eye(3)[:, np.random.default_rng(0).permutation(3)]
    )


def test_permuted_legacy_uses_randomstate():
    perm = np.random.RandomState(0).permutation(8)
    W = permuted(all_range(8), 0, legacy=True)
    np.testing.assert_array_equal(W.dense(), all_range(8).dense()[:, perm])
    assert not np.array_equal(W.dense(), permuted(all_range(8), 0).dense())
    with pytest.raises(ValueError, match="legacy"):
        permuted(all_range(8), 0, legacy="yes")


# --------------------------------------------------------------------------- marginals
def test_single_marginal_exact_rows():
    dom = Domain(["a", "b", "c"], [2, 3, 2])
    np.testing.assert_array_equal(
        marginal(dom, ["a", "c"]).dense(), ref_marginal(dom.sizes, {0, 2})
    )
    np.testing.assert_array_equal(
        marginal(dom, ["c", "a"]).dense(), ref_marginal(dom.sizes, {0, 2})
    )
    np.testing.assert_array_equal(marginal(dom, [1]).dense(), ref_marginal(dom.sizes, {1}))
    np.testing.assert_array_equal(marginal(dom, "b").dense(), ref_marginal(dom.sizes, {1}))
    np.testing.assert_array_equal(marginal(dom, []).dense(), np.ones((1, 12)))
    np.testing.assert_array_equal(marginal([2, 3, 2], [0, 1, 2]).dense(), np.eye(12))
    # ResidualPlanner Example 1: Q_Att1 = I_2 ⊗ [1 1 1], Q_Att2 = [1 1] ⊗ I_3
    ex = Domain(["att1", "att2"], [2, 3])
    np.testing.assert_array_equal(
        marginal(ex, ["att1"]).dense(), np.kron(np.eye(2), np.ones((1, 3)))
    )
    np.testing.assert_array_equal(
        marginal(ex, ["att2"]).dense(), np.kron(np.ones((1, 2)), np.eye(3))
    )


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_k_way_marginals_vs_numpy(k):
    sizes = [2, 3, 2]
    W = marginals(Domain.from_sizes(sizes), k)
    assert isinstance(W, linalg.Marginals)
    expected = np.vstack([ref_marginal(sizes, set(s)) for s in combinations(range(3), k)])
    assert_same_queries(W, expected)
    # sensitivity (L1) of all k-way marginals = number of marginals, each column in one cell of each
    assert np.abs(W.dense()).sum(axis=0).max() == math.comb(3, k)


def test_lower_marginals_vs_numpy():
    sizes = [2, 3, 2, 2]
    W = marginals(sizes, 2, lower=True)  # a plain sequence of sizes is a domain
    expected = np.vstack(
        [ref_marginal(sizes, set(s)) for r in range(3) for s in combinations(range(4), r)]
    )
    assert_same_queries(W, expected)
    assert num_queries(W) == 1 + (2 + 3 + 2 + 2) + (6 + 4 + 4 + 6 + 6 + 4)
    all_m = marginals(sizes, 4, lower=True)  # HDMM "All Marginals" = ⊗ [T; I]
    ti = [np.vstack([np.ones((1, n)), np.eye(n)]) for n in sizes]
    assert_same_queries(all_m, ref_kron(ti))


def test_k_way_marginals_over_chosen_attributes_vs_numpy():
    sizes = [2, 3, 2, 2]
    dom = Domain(["a", "b", "c", "d"], sizes)
    W = marginals(dom, 2, attrs=["d", "a", "c"])  # any order: the domain's order is kept
    expected = np.vstack([ref_marginal(sizes, set(s)) for s in combinations([0, 2, 3], 2)])
    assert_same_queries(W, expected)
    lower = marginals(dom, 1, lower=True, attrs=[1])
    assert_same_queries(lower, np.vstack([ref_marginal(sizes, set()), ref_marginal(sizes, {1})]))
    from mmtoolkit.workload_specs import parse_workload

    assert_same_queries(parse_workload("marginals:k=2,attrs=[d,a,c]", domain=dom).build(), expected)
    with pytest.raises(ValueError, match="k: must be <= 2"):
        marginals(dom, 3, attrs=["a", "b"])
    with pytest.raises(ValueError, match="more than once"):
        marginals(dom, 1, attrs=["a", "a"])


def test_marginals_list_weighted():
    dom = Domain(["x", "y", "z"], [2, 3, 2])
    W = marginals_list(dom, [["x", "y"], ["z"], []], weights=[2.0, 0.5, 3.0])
    expected = np.vstack(
        [
            2.0 * ref_marginal(dom.sizes, {0, 1}),
            0.5 * ref_marginal(dom.sizes, {2}),
            3.0 * np.ones((1, 12)),
        ]
    )
    assert_same_queries(W, expected)
    assert_same_queries(
        marginals_list(dom, [[0, 1], [2]]),
        np.vstack([ref_marginal(dom.sizes, {0, 1}), ref_marginal(dom.sizes, {2})]),
    )


def test_marginals_list_bad_input():
    dom = Domain(["x", "y", "z"], [2, 3, 2])
    with pytest.raises(ValueError, match="more than once"):
        marginals_list(dom, [["x", "y"], ["y", "x"]])
    with pytest.raises(ValueError, match="2 weights for 1"):
        marginals_list(dom, [["x"]], weights=[1, 2])
    with pytest.raises(ValueError, match="weight 0: must be a number > 0"):
        marginals_list(dom, [["x"]], weights=[-1])
    with pytest.raises(ValueError, match="unknown attribute 'w'"):
        marginals_list(dom, [["w"]])
    with pytest.raises(ValueError, match="at least one"):
        marginals_list(dom, [])


def test_marginal_bad_input():
    dom = Domain(["x", "y", "z"], [2, 3, 2])
    with pytest.raises(ValueError, match="unknown attribute 'age'"):
        marginal(dom, ["x", "age"])
    with pytest.raises(ValueError, match="index 3 out of range"):
        marginal(dom, [0, 3])
    with pytest.raises(ValueError, match="'x' is given more than once"):
        marginal(dom, ["x", 0])
    for bad in (-1, 4, 1.0, True, "2"):
        with pytest.raises(
            ValueError,
            match=r"k: (expected an integer|must be (>= 0|<= 3 \(the number of attributes\)))",
        ):
            marginals(dom, bad)
    with pytest.raises(ValueError, match="k: must be <= 3"):
        range_marginals(dom, 4)
    with pytest.raises(ValueError, match="Domain or a sequence"):
        marginals(7, 1)
    with pytest.raises(ValueError, match="positive int"):
        marginals([2, 0], 1)


# ------------------------------------------------------------- range / prefix marginals
def generalized_ref(sizes, numeric, k, lower, block):
    out = []
    for r in range(k + 1) if lower else (k,):
        for s in combinations(range(len(sizes)), r):
            mats = []
            for i, (n, num) in enumerate(zip(sizes, numeric, strict=True)):
                if i not in s:
                    mats.append(np.ones((1, n)))
                else:
                    mats.append(block(n) if num else np.eye(n))
            out.append(ref_kron(mats))
    return np.vstack(out)


@pytest.mark.parametrize("k, lower", [(0, False), (1, False), (2, False), (2, True), (3, True)])
def test_range_and_prefix_marginals_vs_numpy(k, lower):
    dom = Domain(["num1", "cat", "num2"], [3, 2, 4], [True, False, True])
    W = range_marginals(dom, k, lower)
    assert isinstance(W, linalg.VStack)
    assert_same_queries(W, generalized_ref(dom.sizes, dom.numeric, k, lower, ref_all_range))
    P = prefix_marginals(dom, k, lower)
    np.testing.assert_array_equal(  # prefix rows are in a fixed order: compare exactly
        P.dense(), generalized_ref(dom.sizes, dom.numeric, k, lower, ref_prefix)
    )


def test_prefix_marginals_max_cells_drops_large_sets():
    """``max_cells`` keeps exactly the sets with Π n_i ≤ max_cells (the dense rows of the
    kept products, in order), and refuses a filter that keeps nothing."""
    dom = Domain(["num1", "cat", "num2"], [3, 2, 4], [True, False, True])
    W = prefix_marginals(dom, 3, lower=True, max_cells=8)
    kept = [
        s
        for r in range(4)
        for s in combinations(range(3), r)
        if math.prod(dom.sizes[i] for i in s) <= 8
    ]
    blocks = []
    for s in kept:
        mats = [
            (ref_prefix(n) if num else np.eye(n)) if i in s else np.ones((1, n))
            for i, (n, num) in enumerate(zip(dom.sizes, dom.numeric))
        ]
        blocks.append(ref_kron(mats))
    assert len(kept) == 6  # all but {num1, num2} (12 cells) and {num1, cat, num2} (24)
    np.testing.assert_array_equal(W.dense(), np.vstack(blocks))
    with pytest.raises(ValueError, match="at most 1 cells"):
        prefix_marginals(dom, 2, max_cells=1)
    with pytest.raises(ValueError, match="max_cells"):
        prefix_marginals(dom, 2, max_cells=0)


def test_range_marginals_cps_hdmm_count():
    # HDMM "2-way Range-Marginals" on CPS: 10 products (R100, R50, I7, I4, I2) on 2 attributes
    cps = datasets.domain("cps")
    W = range_marginals(cps, 2)
    assert len(W.blocks) == 10
    rows = [5050, 1275, 7, 4, 2]
    assert num_queries(W) == sum(a * b for a, b in combinations(rows, 2))
    assert domain_size(W) == 280_000
    P = prefix_marginals(cps, 1)
    assert num_queries(P) == 100 + 50 + 7 + 4 + 2


# ------------------------------------------------------------------ size on huge domains
def test_adult_lower_3_way_count_without_materialising():
    adult = datasets.domain("adult")
    W = marginals(adult, 3, lower=True)
    expected = sum(
        math.prod(adult.sizes[i] for i in s)
        for r in range(4)
        for s in combinations(range(len(adult)), r)
    )
    assert 2.0e7 < expected < 2.2e7
    assert num_queries(W) == expected
    assert type(num_queries(W)) is int
    assert domain_size(W) == adult.size
    with pytest.raises(linalg.TooLargeError):
        W.dense()


def test_synth_d100_lower_3_way_builds_instantly():
    dom = datasets.domain("synth", n=10, d=100)
    W = marginals(dom, 3, lower=True)
    assert W.shape[1] == 10**100
    assert domain_size(W) == 10**100
    assert num_queries(W) == 1 + 100 * 10 + math.comb(100, 2) * 100 + math.comb(100, 3) * 1000


def test_module_exports():
    for name in workloads.__all__:
        assert callable(getattr(workloads, name))


@pytest.mark.parametrize("seed", [None, -1, 1.5, True, "0"])
def test_permuted_needs_an_integer_seed(seed):
    with pytest.raises(ValueError, match="seed: (expected an integer|must be >= 0)"):
        workloads.permuted(workloads.all_range(8), seed)
