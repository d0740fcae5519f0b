"""Tree strategies (linalg.tree), the evaluator's tree route, and the hierarchical / hb /
quadtree selectors: explicit constructions, dense-vs-implicit, and HDMM Table 4 values."""

import math

import numpy as np
import pytest

import mmtoolkit.linalg.tree as tree_mod
from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.linalg import Dense, Kronecker, Tree, VStack
from mmtoolkit.linalg.tree import Intervals, interval_tree
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors.baselines.hierarchical import hb2d_branching, hb_branching

EPS = PureDP(1.0)


def _dense_trace(W, A):
    Wd, Ad = W.dense(), A.dense()
    return float(np.trace(Wd.T @ Wd @ np.linalg.pinv(Ad.T @ Ad)))


def _rows(intervals_2d, n1, n2):
    """Explicit 0/1 rows for a list of rectangles ((a, b), (c, d)) on an n1 x n2 grid."""
    out = []
    for (a, b), (c, d) in intervals_2d:
        M = np.zeros((n1, n2))
        M[a:b, c:d] = 1.0
        out.append(M.ravel())
    return np.array(out)


def _ratio(W, sel):
    s = selectors.get(sel[0], **sel[1]).select(W, EPS)
    return evaluate.error_ratio(W, s, selectors.get("identity").select(W, EPS), EPS)


# ------------------------------------------------------------------------ the Tree kind
def test_interval_tree_rules_on_n10_b3():
    near = [lv.starts.tolist() for lv in interval_tree(10, 3)]
    assert near == [[0], [0, 4, 7], [0, 2, 3, 4, 5, 6, 7, 8, 9], list(range(10))]
    small = [lv.starts.tolist() for lv in interval_tree(7, 2, split="small_first")]
    assert small == [[0], [0, 3], [0, 1, 3, 5], list(range(7))]
    pad = [lv.starts.tolist() for lv in interval_tree(10, 3, split="pad")]
    assert pad == [[0], [0, 9], [0, 3, 6, 9], list(range(10))]


def _interval_tree_by_nodes(n, b, split):
    """The interval-tree rule node by node (Qardaji et al. 2013 §4; GreedyH's larger children
    last): an independent reference for the vectorised builder."""
    nodes, levels = [(0, n)], [[0]]
    while any(z > 1 for _, z in nodes):
        nxt = []
        for s, z in nodes:
            if z <= b:
                nxt += [(s + k, 1) for k in range(z)]
                continue
            m, r = divmod(z, b)
            sizes = (
                [m + 1] * r + [m] * (b - r)
                if split == "near_equal"
                else [m] * (b - r) + [m + 1] * r
            )
            for size in sizes:
                nxt.append((s, size))
                s += size
        nodes = nxt
        levels.append([s for s, _ in nodes])
    return levels


def test_interval_tree_matches_the_node_by_node_rule():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n, b = int(rng.integers(1, 2000)), int(rng.integers(2, 20))
        split = ("near_equal", "small_first")[int(rng.integers(2))]
        got = [lv.starts.tolist() for lv in interval_tree(n, b, split)]
        assert got == _interval_tree_by_nodes(n, b, split), (n, b, split)


def test_tree_products_match_dense_1d_and_2d():
    rng = np.random.default_rng(0)
    lv = interval_tree(10, 3)
    T = Tree(10, lv, [rng.uniform(0.5, 2.0, size=len(x)) for x in lv])
    A = T.dense()
    assert A.shape == (1 + 3 + 9 + 10, 10)
    assert np.allclose(T.T.dense(), A.T)
    G = A.T @ A
    assert np.allclose(T.gram().dense(), G)
    assert np.allclose(T.gram().pinv().dense(), np.linalg.inv(G))
    assert np.allclose(T.pinv().dense(), np.linalg.pinv(A))
    assert np.allclose(T.colnorm_p(1), np.abs(A).sum(0))
    assert np.allclose(T.rownorm_p(2), (A * A).sum(1))
    assert np.isclose(T.gram().trace(), np.trace(G))
    l1, l2 = interval_tree(5, 2, split="pad", height=3), interval_tree(6, 2, split="pad", height=3)
    T2 = Tree((5, 6), list(zip(l1, l2)), [1.0, 2.0, 0.5, 3.0])
    A2 = T2.dense()
    assert np.allclose(T2.gram().pinv().dense(), np.linalg.inv(A2.T @ A2))
    assert T2.sensitivity(1) == pytest.approx(6.5)
    assert T2.sensitivity(2) == pytest.approx(math.sqrt(1 + 4 + 0.25 + 9))


def test_reduced_tree_pseudo_inverse():
    # finest nodes {0,1}, {2,3}, {4,5,6}, {7,8,9}: the strategy cannot split them
    levels = [np.array([0]), np.array([0, 4]), np.array([0, 2, 4, 7])]
    T = Tree(10, levels, [1.0, 1.0, np.array([1.0, 2.0, 3.0, 0.5])])
    A = T.dense()
    assert T.reduced and T.invertible
    assert np.allclose(T.gram().pinv().dense(), np.linalg.pinv(A.T @ A))
    assert np.allclose(T.pinv().dense(), np.linalg.pinv(A))


def _tree_cases(rng):
    lv = interval_tree(50, 3)
    yield Tree(50, lv, [rng.uniform(0.5, 2.0, size=len(x)) for x in lv])  # per-node weights
    yield Tree(50, interval_tree(50, 4))  # unit weights (scalar path)
    yield Tree(
        10,
        [np.array([0]), np.array([0, 4]), np.array([0, 2, 4, 7])],
        [1.0, 1.0, np.array([1.0, 2.0, 3.0, 0.5])],
    )  # reduced
    yield Tree(7, [np.arange(7)], [2.0])  # one level
    l1, l2 = interval_tree(5, 2, split="pad", height=3), interval_tree(6, 2, split="pad", height=3)
    yield Tree((5, 6), list(zip(l1, l2)), [1.0, 2.0, 0.5, 3.0])  # 2-D
    yield Tree(
        (9, 4),
        [
            (np.array([0]), np.array([0])),
            (np.array([0, 3, 6]), np.array([0, 2])),
            (np.array([0, 1, 3, 6, 7]), np.array([0, 1, 2])),
        ],
        [1.0, 0.7, rng.uniform(0.5, 2.0, size=(5, 3))],
    )  # 2-D, reduced, node weights


@pytest.mark.parametrize("block", [3, 1 << 17])
def test_tree_lean_products_and_reconstruction_match_dense(monkeypatch, block):
    """The one-pass products (level sums from the finer level, coarse levels on the node
    grids) and the two-pass reconstruction against dense algebra, with blocks small enough
    to split nodes across many blocks; ``apply_overwrite`` builds x̂ in y's memory."""
    monkeypatch.setattr(tree_mod, "BLOCK_CELLS", block)
    rng = np.random.default_rng(3)
    for T in _tree_cases(rng):
        A = T.dense()
        m, N = A.shape
        X, Y = rng.normal(size=(N, 2)), rng.normal(size=(m, 3))
        np.testing.assert_allclose(T @ X, A @ X, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(T.T @ Y, A.T @ Y, rtol=1e-12, atol=1e-12)
        Ap = np.linalg.pinv(A)
        np.testing.assert_allclose(T.pinv_operator() @ Y, Ap @ Y, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(T.pinv().T @ X, Ap.T @ X, rtol=1e-10, atol=1e-10)
        G = np.linalg.pinv(A.T @ A)
        np.testing.assert_allclose(T.gram().pinv() @ X, G @ X, rtol=1e-10, atol=1e-10)
        y = rng.normal(size=m)
        want = Ap @ y
        xhat = T.pinv_operator().apply_overwrite(y)
        np.testing.assert_allclose(xhat, want, rtol=1e-10, atol=1e-10)
        assert T.reduced or np.shares_memory(xhat, y)


def test_tree_reconstruction_at_scale_is_exact_and_lean():
    """H_4 on 2^20 cells: A⁺ A x = x, and x̂ is built in y's finest rows."""
    n = 1 << 20
    T = Tree(n, interval_tree(n, 4))
    x = np.random.default_rng(0).integers(0, 9, n).astype(float)
    y = T @ x
    xhat = T.pinv_operator().apply_overwrite(y)
    assert np.shares_memory(xhat, y)
    np.testing.assert_allclose(xhat, x, rtol=0, atol=1e-8)


def test_tree_float32_release_stays_within_a_tiny_fraction_of_the_noise():
    """The float32 data path (mechanism.measure): the node-grid sums are float64, so the
    root total carried down the tree cancels exactly; float32 arithmetic on them moved x̂ by
    several times the noise RMSE."""
    from mmtoolkit import mechanism
    from mmtoolkit.linalg import Identity
    from mmtoolkit.privacy import ZCDP

    n = 1 << 18
    T = Tree(n, interval_tree(n, 2))
    x = np.random.default_rng(0).integers(0, 1000, n)
    out = {}
    for dtype in (np.float32, np.float64):
        rng = np.random.default_rng(1)
        out[dtype] = mechanism.release(Identity(n), T, x.astype(dtype), ZCDP(0.5), rng)
    assert out[np.float32].dtype == np.float32
    noise_rmse = float(np.sqrt(np.mean((out[np.float64] - x) ** 2)))
    gap = float(np.max(np.abs(out[np.float32].astype(float) - out[np.float64])))
    assert gap < 1e-3 * noise_rmse, (gap, noise_rmse)
    y = np.arange(T.shape[0], dtype=np.float64)
    y.flags.writeable = False  # a read-only y is not overwritten
    np.testing.assert_allclose(T.pinv_operator().apply_overwrite(y), T.pinv_operator() @ y)


# ------------------------------------------------- regular (implicit) vs explicit levels
def _explicit(level):
    """The same partition with its starts written out (never turned regular)."""
    return Intervals(level.n, starts=level.starts.copy())


def _as_explicit(T):
    """``T`` with every level explicit: the reference for the regular (implicit) levels."""
    levels = [tuple(_explicit(p) for p in lv) for lv in T.levels]
    return Tree(T.sizes, levels if len(T.sizes) > 1 else [lv[0] for lv in levels], T.weights)


def test_intervals_regular_matches_explicit(monkeypatch):
    """Sums, expansions, sub-ranges, blocks and nesting of a regular partition (equal-width
    blocks, the last shorter; chunked sums) against the same partition written out."""
    monkeypatch.setattr(tree_mod, "SUM_NODES", 3)
    monkeypatch.setattr(tree_mod, "BLOCK_CELLS", 7)
    rng = np.random.default_rng(5)
    for n, w in [(23, 4), (24, 4), (23, 1), (5, 9), (17, 17)]:
        R, E = Intervals.regular(n, w), Intervals(n, starts=np.arange(0, n, w))
        assert R.width == min(w, n) and R.identity == (w == 1) and len(R) == len(E)
        np.testing.assert_array_equal(R.counts, np.diff(np.append(E.starts, n)))
        X = rng.normal(size=(3, n, 2))
        Y = rng.normal(size=(3, len(E), 2))
        for axis, Xa, Ya in [(1, X, Y), (0, X[0], Y[0])]:
            assert np.array_equal(R.sum(Xa, axis), np.add.reduceat(Xa, E.starts, axis=axis))
            assert np.array_equal(R.repeat(Ya, axis), np.repeat(Ya, E.counts, axis=axis))
        assert list(R.blocks(2)) == list(E.blocks(2))
        for n0, n1 in [(0, len(E)), (len(E) - 1, len(E)), (0, 1)]:
            assert R.cells(n0, n1) == E.cells(n0, n1)
            np.testing.assert_array_equal(R.part(n0, n1).starts, E.part(n0, n1).starts)
        for fw in (1, 2, 3):
            fine_r, fine_e = Intervals.regular(n, fw), Intervals(n, starts=np.arange(0, n, fw))
            want = E.nest_in(fine_e)
            for got in (R.nest_in(fine_r), R.nest_in(fine_e), E.nest_in(fine_r)):
                assert (got is None) == (want is None), (n, w, fw)
                if want is not None:
                    np.testing.assert_array_equal(got.starts, want.starts)
                    assert got.n == want.n
    # arrays of one width become regular; others stay explicit (and are kept, not copied)
    assert Intervals.of(10, np.arange(0, 10, 3)).width == 3
    assert Intervals.of(10, np.arange(10)).identity
    s = np.array([0, 2, 3])
    assert Intervals.of(10, s).width is None and Intervals.of(10, s).starts is s


def _regular_tree_cases(rng):
    pad = interval_tree(23, 2, split="pad")  # every level regular, the last blocks shorter
    yield Tree(23, pad)  # unit weights (the scalar path)
    yield Tree(23, pad, [rng.uniform(0.5, 2.0, size=len(x)) for x in pad])  # node weights
    yield Tree(23, [Intervals.regular(23, 8), Intervals.regular(23, 4)], [1.0, 0.5])  # reduced
    yield Tree(
        23,
        [Intervals.regular(23, 8), Intervals.regular(23, 4)],
        [1.0, rng.uniform(0.5, 2.0, size=6)],
    )  # reduced, node weights on the finest level
    yield Tree(7, [Intervals.regular(7, 1)], [2.0])  # one level
    yield Tree(7, [Intervals.regular(7, 3)], [np.array([1.0, 2.0, 0.5])])  # one level, reduced
    l1, l2 = interval_tree(5, 2, split="pad", height=3), interval_tree(6, 3, split="pad", height=3)
    yield Tree((5, 6), list(zip(l1, l2)), [1.0, 2.0, 0.5, 3.0])  # 2-D
    yield Tree(
        (9, 4),
        [
            (Intervals.regular(9, 9), np.array([0])),
            (Intervals.regular(9, 3), np.array([0, 2])),
            (np.array([0, 1, 3, 6, 7]), Intervals.regular(4, 1)),
        ],
        [1.0, 0.7, rng.uniform(0.5, 2.0, size=(5, 4))],
    )  # 2-D, mixed regular and explicit, reduced along the first attribute, node weights


@pytest.mark.parametrize("block", [3, 1 << 17])
def test_regular_levels_match_explicit_levels_and_dense(monkeypatch, block):
    """A tree with regular (implicit) levels gives bit-identical products, adjoint,
    pseudo-inverse, Gram inverse, norms and errors to the same tree with its levels written
    out, and both agree with dense algebra (1-D, 2-D, reduced, weighted, one level)."""
    monkeypatch.setattr(tree_mod, "BLOCK_CELLS", block)
    monkeypatch.setattr(tree_mod, "SUM_NODES", 2 if block == 3 else 1 << 16)
    rng = np.random.default_rng(11)
    for T in _regular_tree_cases(rng):
        assert any(p.width is not None for lv in T.levels for p in lv)
        E = _as_explicit(T)
        assert all(p.width is None for lv in E.levels for p in lv)
        A = E.dense()
        m, N = A.shape
        X, Y = rng.normal(size=(N, 2)), rng.normal(size=(m, 3))
        assert np.array_equal(T @ X, E @ X) and np.array_equal(T.T @ Y, E.T @ Y)
        np.testing.assert_allclose(T @ X, A @ X, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(T.T @ Y, A.T @ Y, rtol=1e-12, atol=1e-12)
        assert np.array_equal(T.pinv() @ Y, E.pinv() @ Y)
        np.testing.assert_allclose(T.pinv() @ Y, np.linalg.pinv(A) @ Y, rtol=1e-10, atol=1e-10)
        assert np.array_equal(T.gram().pinv() @ X, E.gram().pinv() @ X)
        np.testing.assert_allclose(
            T.gram().pinv() @ X, np.linalg.pinv(A.T @ A) @ X, rtol=1e-10, atol=1e-10
        )
        assert T.sensitivity(1) == E.sensitivity(1) == pytest.approx(np.abs(A).sum(0).max())
        np.testing.assert_array_equal(T.rownorm_p(2), E.rownorm_p(2))
        y = rng.normal(size=m)
        want = E.pinv_operator().apply_overwrite(y.copy())
        assert np.array_equal(T.pinv_operator().apply_overwrite(y), want)
        if len(T.sizes) == 1:
            W = workloads.all_range(N)
            if T.reduced:  # a workload constant on every finest node
                C = Dense(T.levels[-1][0].repeat(rng.normal(size=(4, len(T.levels[-1][0]))), 1))
                W = C
            assert evaluate.trace_term(W, T) == evaluate.trace_term(W, E)
            assert evaluate.trace_term(W, T) == pytest.approx(_dense_trace(W, E), rel=1e-10)


def test_interval_tree_levels_are_regular_where_they_can_be():
    """H_16 over 10^7 cells keeps its single cells and its equal-width level as integers;
    a padded tree over 10^9 cells is built without any array of its cells' size."""
    near = interval_tree(10**7, 16)
    assert near[-1].identity and near[1].width == 625_000 and near[2].width is None
    assert sum(len(lv) for lv in near if lv.width is None) < 10**7 / 8
    import tracemalloc

    tracemalloc.start()
    T = Tree(10**9, interval_tree(10**9, 16, split="pad"))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert T.shape[1] == 10**9 and all(lv[0].width is not None for lv in T.levels)
    assert all(p.width is not None for ns in T.nest for p in ns)


def test_tree_rejects_bad_levels():
    with pytest.raises(ValueError, match="nested"):
        Tree(6, [np.array([0, 3]), np.array([0, 2, 4])])
    with pytest.raises(ValueError, match="begin at 0"):
        Tree(6, [np.array([1, 3])])
    with pytest.raises(ValueError, match="node grid"):
        Tree(6, [np.array([0, 3])], [np.ones(3)])
    with pytest.raises(ValueError, match="finite"):
        Tree(6, [np.array([0, 3])], [float("nan")])
    with pytest.raises(ValueError, match="increase strictly"):
        Tree(6, [Intervals(6, starts=np.array([0, 4, 2]))])  # explicit Intervals: validated
    with pytest.raises(ValueError, match="cover 6 cells, the attribute has 7"):
        Tree(7, [Intervals.regular(6, 2)])
    with pytest.raises(ValueError, match="width"):
        Intervals(6, width=0)
    with pytest.raises(ValueError, match="nested"):
        Tree(6, [Intervals.regular(6, 3), Intervals.regular(6, 2)])


# ----------------------------------------------------------------------- the tree route
@pytest.mark.parametrize(
    "W",
    [
        workloads.all_range(10),
        workloads.prefix(10),
        workloads.permuted(workloads.all_range(10), 3),
        VStack([workloads.prefix(10), workloads.identity(10)]),
    ],
)
def test_tree_route_1d_matches_dense(W):
    rng = np.random.default_rng(1)
    lv = interval_tree(10, 3)
    T = Tree(10, lv, [rng.uniform(0.5, 2.0, size=len(x)) for x in lv])
    assert evaluate.trace_term(W, T) == pytest.approx(_dense_trace(W, T), rel=1e-10)


def test_tree_route_2d_matches_dense_including_variances():
    l1, l2 = interval_tree(5, 2, split="pad", height=3), interval_tree(6, 2, split="pad", height=3)
    T = Tree((5, 6), list(zip(l1, l2)), [1.0, 2.0, 0.5, 3.0])
    R, P, Tot = workloads.all_range, workloads.prefix, workloads.total
    W = workloads.union(
        [workloads.kron([R(5), Tot(6)]), workloads.kron([Tot(5), R(6)])], weights=[1.0, 2.0]
    )
    assert evaluate.trace_term(W, T) == pytest.approx(_dense_trace(W, T), rel=1e-10)
    W2 = workloads.kron([P(5), P(6)])
    Wd, Ad = W2.dense(), T.dense()
    expected = 2 * T.sensitivity(1) ** 2 * np.diag(Wd @ np.linalg.pinv(Ad.T @ Ad) @ Wd.T)
    assert np.allclose(evaluate.per_query_variance(W2, T, EPS), expected)
    assert evaluate.max_variance(W2, T, EPS) == pytest.approx(expected.max())


def test_tree_route_identity_workload_on_the_node_grids(monkeypatch):
    """The identity workload's trace term from the node grids (Σ 1/a_j − Σ_Q c_Q ‖v_Q‖²)
    against dense algebra: 1-D and 2-D, unit and per-node weights, one level, and a union
    of identity and prefix terms (the prefix term takes the general path)."""
    from mmtoolkit.linalg import Identity

    rng = np.random.default_rng(4)
    lv = interval_tree(23, 3)
    l1, l2 = interval_tree(5, 2, split="pad", height=3), interval_tree(6, 3, split="pad", height=3)
    cases = [
        (Tree(23, lv, [rng.uniform(0.5, 2.0, size=len(x)) for x in lv]), Identity(23)),
        (Tree(23, interval_tree(23, 2, split="pad")), Identity(23)),
        (Tree(7, [np.arange(7)], [np.arange(1.0, 8.0)]), Identity(7)),
        (
            Tree((5, 6), list(zip(l1, l2)), [1.0, 2.0, 0.5, 3.0]),
            workloads.kron([workloads.identity(5), workloads.identity(6)]),
        ),
        (
            Tree((5, 6), list(zip(l1, l2)), [0.5, 1.0, 2.0, rng.uniform(0.5, 2, (5, 6))]),
            workloads.kron([workloads.identity(5), workloads.identity(6)]),
        ),
        (Tree(23, lv), VStack([workloads.identity(23), 2.0 * workloads.prefix(23)])),
    ]
    calls = []
    real = tree_mod.TreeSolver.trace_inverse

    def spy(self):
        calls.append(self)
        return real(self)

    monkeypatch.setattr(tree_mod.TreeSolver, "trace_inverse", spy)
    for T, W in cases:
        calls.clear()
        assert evaluate.trace_term(W, T) == pytest.approx(_dense_trace(W, T), rel=1e-10)
        assert calls, f"{W!r} did not take the node-grid path"  # the path under test


def test_tree_route_structured_path_matches_dense_path(monkeypatch):
    """Force the matvec (no dense Gram) path of the block-diagonal products."""
    rng = np.random.default_rng(2)
    lv = interval_tree(40, 3)
    T = Tree(40, lv, [rng.uniform(0.5, 2.0, size=len(x)) for x in lv])
    W = workloads.all_range(40)
    dense_path = evaluate.trace_term(W, T)
    monkeypatch.setattr(tree_mod, "MAX_DENSE_ENTRIES", 1000)
    assert evaluate.trace_term(W, T) == pytest.approx(dense_path, rel=1e-10)
    assert dense_path == pytest.approx(_dense_trace(W, T), rel=1e-10)


def test_tree_route_reduced_support():
    levels = [np.array([0]), np.array([0, 4]), np.array([0, 2, 4, 7])]
    T = Tree(10, levels, [1.0, 1.0, np.array([1.0, 2.0, 3.0, 0.5])])
    rng = np.random.default_rng(3)
    W = Dense(np.repeat(rng.normal(size=(6, 4)), [2, 2, 3, 3], axis=1))
    assert evaluate.trace_term(W, T) == pytest.approx(_dense_trace(W, T), rel=1e-10)
    with pytest.raises(evaluate.UnsupportedWorkloadError, match="finest tree node"):
        evaluate.trace_term(workloads.prefix(10), T)


# --------------------------------------------------------------------------- selectors
def test_hb_branching_rule_and_metadata():
    assert [hb_branching(n) for n in (128, 256, 1024, 8192)] == [128, 16, 32, 21]
    assert [hb2d_branching(n) for n in (64, 256, 1024)] == [8, 7, 6]
    s = selectors.get("hb").select(workloads.prefix(1024), EPS)
    assert s.metadata["branching"] == 32
    assert selectors.get("hb").select(workloads.prefix(256), EPS).metadata["branching"] == 16
    s128 = selectors.get("hb").select(workloads.all_range(128), EPS)
    assert s128.metadata["branching"] == 128
    assert np.array_equal(s128.matrix.dense(), np.eye(128))  # one level below the root


def test_hb_branching_rules_match_an_exhaustive_search():
    # every b in 2..n with exact rational costs (ties: the smallest b), against the rules'
    # search over one candidate b per tree height
    from fractions import Fraction

    from mmtoolkit.linalg.tree import tree_height

    def brute(n, cost):
        return min(range(2, n + 1), key=lambda b: cost(b, tree_height(n, b)))

    def hb(n):
        return brute(n, lambda b, h: (b - 1) * h**3 - Fraction(2 * (b + 1) * h**2, 3))

    def hb2d(n):
        return brute(n, lambda b, h: b * (n - 1) * h**2)

    for n in [*range(2, 300), 511, 512, 513, 1000, 4096, 8191]:
        assert hb_branching(n) == hb(n), n
        assert hb2d_branching(n) == hb2d(n), n
    assert hb_branching(1) == hb2d_branching(1) == 2


def test_hb_tree_on_27_cells_branching_3_is_the_explicit_tree():
    s = selectors.get("hb", branching=3).select(workloads.all_range(27), EPS)
    explicit = [(9 * k, 9 * k + 9) for k in range(3)]
    explicit += [(3 * k, 3 * k + 3) for k in range(9)] + [(k, k + 1) for k in range(27)]
    rows = np.zeros((len(explicit), 27))
    for r, (a, b) in enumerate(explicit):
        rows[r, a:b] = 1.0
    assert np.array_equal(s.matrix.dense(), rows)
    assert s.matrix.sensitivity(1) == 3.0


def test_h2_with_and_without_root_and_kronecker_multi_d():
    s = selectors.get("hierarchical").select(workloads.prefix(8), EPS)
    explicit = [(0, 8), (0, 4), (4, 8)] + [(2 * k, 2 * k + 2) for k in range(4)]
    explicit += [(k, k + 1) for k in range(8)]
    rows = np.zeros((len(explicit), 8))
    for r, (a, b) in enumerate(explicit):
        rows[r, a:b] = 1.0
    assert np.array_equal(s.matrix.dense(), rows)
    s0 = selectors.get("hierarchical", root=False).select(workloads.prefix(8), EPS)
    assert np.array_equal(s0.matrix.dense(), rows[1:])
    W = workloads.kron([workloads.prefix(8), workloads.prefix(4)])
    sk = selectors.get("hierarchical").select(W, EPS)
    assert isinstance(sk.matrix, Kronecker)
    h4 = selectors.get("hierarchical").select(workloads.prefix(4), EPS).matrix.dense()
    assert np.array_equal(sk.matrix.dense(), np.kron(rows, h4))
    assert evaluate.trace_term(W, sk.matrix) == pytest.approx(_dense_trace(W, sk.matrix), rel=1e-10)


def test_hb2d_explicit_on_9x9_and_padded_5x5():
    W = workloads.kron([workloads.prefix(9), workloads.prefix(9)])
    s = selectors.get("hb", branching=3).select(W, EPS)
    rects = [((3 * i, 3 * i + 3), (3 * j, 3 * j + 3)) for i in range(3) for j in range(3)]
    rects += [((i, i + 1), (j, j + 1)) for i in range(9) for j in range(9)]
    assert np.array_equal(s.matrix.dense(), _rows(rects, 9, 9))
    # 5 x 5 padded to 8 x 8 (b = 2, h = 3): the full 8 x 8 tree restricted to the real cells
    W5 = workloads.kron([workloads.prefix(5), workloads.prefix(5)])
    s5 = selectors.get("hb", branching=2).select(W5, EPS)
    full = []
    for depth in (1, 2, 3):
        w = 8 >> depth
        for i in range(0, 8, w):
            for j in range(0, 8, w):
                if i < 5 and j < 5:
                    full.append(((i, min(i + w, 5)), (j, min(j + w, 5))))
    assert np.array_equal(s5.matrix.dense(), _rows(full, 5, 5))
    assert evaluate.trace_term(W5, s5.matrix) == pytest.approx(
        _dense_trace(W5, s5.matrix), rel=1e-10
    )


def test_quadtree_on_4x4_is_explicit_with_geometric_budget():
    W = workloads.kron([workloads.prefix(4), workloads.prefix(4)])
    s = selectors.get("quadtree").select(W, EPS)
    h = 2
    w = [2 ** (t / 3) * (2 ** (1 / 3) - 1) / (2 ** ((h + 1) / 3) - 1) for t in range(h + 1)]
    rects = [((0, 4), (0, 4))]
    rects += [((2 * i, 2 * i + 2), (2 * j, 2 * j + 2)) for i in range(2) for j in range(2)]
    rects += [((i, i + 1), (j, j + 1)) for i in range(4) for j in range(4)]
    scale = np.array([w[0]] + [w[1]] * 4 + [w[2]] * 16)[:, None]
    assert np.allclose(s.matrix.dense(), scale * _rows(rects, 4, 4))
    assert s.matrix.sensitivity(1) == pytest.approx(1.0)
    assert w[2] > w[1] > w[0]  # the leaves get the most budget


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="Quadtree needs a 2-D domain"):
        selectors.get("quadtree").select(workloads.prefix(16), EPS)
    with pytest.raises(ValueError, match="1-D and 2-D"):
        selectors.get("hb").select(workloads.marginals([4, 4, 4], 1), EPS)
    with pytest.raises(ValueError, match="branching"):
        selectors.get("hierarchical", branching=1)
    with pytest.raises(ValueError, match="multiply to"):
        selectors.get("hb", dims=[3, 3]).select(workloads.prefix(10), EPS)


# -------------------------------------------------------------------- paper values
@pytest.mark.parametrize(
    "W, paper",
    [
        (workloads.all_range(1024), 1.16 / 2.36),  # Table 4(a), HB / Identity
        (workloads.prefix(1024), 1.34 / 3.34),
    ],
)
def test_hb_reproduces_table4a_at_1024(W, paper):
    assert _ratio(W, ("hb", {})) == pytest.approx(paper, rel=0.01)


def test_table4b_64_hb_and_quadtree_near_the_monte_carlo_values():
    # paper values are Monte-Carlo (50 trials) ratios to HDMM; quotients by Identity/HDMM
    P = workloads.prefix(64)
    W = workloads.kron([P, P])
    assert _ratio(W, ("hb", {})) == pytest.approx(1.41 / 2.35, rel=0.03)
    assert _ratio(W, ("quadtree", {})) == pytest.approx(1.72 / 2.35, rel=0.03)


def test_gaussian_privacy_uses_l2_sensitivity():
    s = selectors.get("quadtree").select(workloads.kron([workloads.prefix(8)] * 2), ZCDP(0.5))
    w = np.asarray([lv for lv in s.metadata["level_budget"]])
    assert s.matrix.sensitivity(2) == pytest.approx(math.sqrt(np.sum(w**2)))


def test_huge_trees_are_refused_before_anything_large_is_built():
    """review: a near-equal tree over twice the memory's worth of cells (explicit levels and
    their temporaries) is refused up front, and a padded tree of any size builds but its
    solver's node grid is refused with TooLargeError, never a numpy MemoryError."""
    import resource

    from mmtoolkit.linalg.base import TooLargeError, physical_memory

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    n = int(physical_memory() // 16)  # 32 bytes a cell: twice the memory
    with pytest.raises(TooLargeError, match="interval tree"):
        interval_tree(n, 16)
    A = Tree(10**13, interval_tree(10**13, 2, split="pad"))
    with pytest.raises(TooLargeError, match="node grid"):
        A.pinv()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KB


def test_explicit_intervals_from_a_list_are_converted():
    """review: an explicit Intervals given list starts is validated and used as int64."""
    from mmtoolkit.linalg.tree import Intervals

    A = Tree(8, [Intervals(8, starts=[0, 4]), Intervals(8, width=2)])
    np.testing.assert_array_equal(A @ np.arange(8.0), A.dense() @ np.arange(8.0))
