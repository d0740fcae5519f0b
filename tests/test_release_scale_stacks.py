"""Memory-lean measure / reconstruct of ResidualPlanner strategies and OPT_+ unions of
Kronecker products: each product against an independent dense computation, the
streamed measurement equal to the product plus one noise draw bit for bit, and peak memory
bounded (tracemalloc)."""

import math
import warnings
from functools import reduce

import numpy as np
import pytest
from noise_draws import one_draw

# the tiny-block fixture and the tracemalloc peak of the Kronecker / marginals tests
from test_release_scale import _peak_extra, small_blocks  # noqa: F401

import mmtoolkit as mm
from mmtoolkit import measurement, mechanism, selectors, workloads
from mmtoolkit.linalg import (
    Dense,
    Identity,
    Kronecker,
    KroneckerUnion,
    PIdentity,
    Prefix,
    Total,
    VStack,
    Weighted,
    kronecker,
    union,
)
from mmtoolkit.linalg.union import NormalEquations
from mmtoolkit.privacy import ZCDP, PureDP


# ------------------------------------------------------------------ ResidualPlanner
def _rp_cases():
    marg = workloads.marginals(mm.Domain.from_sizes([3, 4, 1, 2, 3]), 2, lower=True)
    full = workloads.marginals(mm.Domain.from_sizes([3, 2, 4]), 3, lower=True)
    plus = workloads.kron([workloads.prefix(4), workloads.identity(3), workloads.all_range(5)])
    return [
        ("residual_planner", marg),
        ("residual_planner", full),
        ("residual_planner_plus", plus),
    ]


def _rp_dense(A):
    """The whitened strategy from its definition: rows ``σ_A⁻¹ ⊗_{i∈A} L_i ⊗_{i∉A} 1ᵀ``."""
    rows = []
    for S, s2 in zip(A._sets, A.plan.sigma2, strict=True):
        f = [b.whiten if i in S else np.ones((1, b.n)) for i, b in enumerate(A.plan.bases)]
        rows.append(reduce(np.kron, f) / math.sqrt(s2))
    return np.vstack(rows)


@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("case", range(3))
def test_residual_products_match_dense(case):
    name, W = _rp_cases()[case]
    A = selectors.get(name).select(W, ZCDP(0.5)).matrix
    D = _rp_dense(A)
    rng = np.random.default_rng(case)
    X, Y = rng.random((A.shape[1], 3)), rng.random((A.shape[0], 3))
    np.testing.assert_allclose(A @ X, D @ X, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(A.T @ Y, D.T @ Y, rtol=1e-12, atol=1e-12)
    P, Pd = A.pinv_operator(), np.linalg.pinv(D)
    np.testing.assert_allclose(P @ Y, Pd @ Y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(P.T @ X, Pd.T @ X, rtol=1e-10, atol=1e-12)
    # the closed form it replaced, (AᵀA)⁺ Aᵀ through the Gram's pseudo-inverse
    np.testing.assert_allclose(P @ Y[:, 0], A.gram_pinv().dense() @ (D.T @ Y[:, 0]), atol=1e-12)


# ------------------------------------------------------------------ OPT_+ unions
def _union(rng, first_total=False, weights=(0.6, 0.8)):
    if first_total:  # a singular first product: its Grams are not positive definite
        b1 = Kronecker([Total(4), PIdentity(rng.random((2, 5))), Identity(3)])
    else:
        b1 = Kronecker([PIdentity(rng.random((2, n))) for n in (4, 5, 3)])
    b2 = Kronecker([PIdentity(rng.random((p, n))) for p, n in ((1, 4), (2, 5), (1, 3))])
    return KroneckerUnion([Weighted(weights[0], b1), Weighted(weights[1], b2)])


@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("first_total", [False, True], ids=["pd-first", "singular-first"])
def test_two_product_pinv_matches_dense(first_total):
    rng = np.random.default_rng(4)
    A = _union(rng, first_total, weights=(0.6, -0.8))  # a negative weight keeps its sign
    D = A.dense()
    Pd = np.linalg.pinv(D)
    P = A.pinv_operator()
    assert P is not None
    Y, X = rng.standard_normal((A.shape[0], 2)), rng.standard_normal((A.shape[1], 2))
    np.testing.assert_allclose(P @ Y, Pd @ Y, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(P.T @ X, Pd.T @ X, rtol=1e-9, atol=1e-11)
    buf = Y[:, 0].copy()
    got = mechanism.reconstruct(A, buf, overwrite=True)
    np.testing.assert_allclose(got, Pd @ Y[:, 0], rtol=1e-9, atol=1e-11)
    assert np.shares_memory(got, buf)  # x̂ built in y's memory


def _solved_by_least_squares(monkeypatch):
    """Route several releases through the per-column solve (no dense shortcut) and record
    what the kind's ``least_squares`` returns, so a test can assert that it, not the LSMR
    fallback, produced x̂."""
    monkeypatch.setattr(mechanism, "SMALL_DENSE_ENTRIES", 0)
    results = []
    real = KroneckerUnion.least_squares

    def spy(self, y, tol, maxiter):
        out = real(self, y, tol, maxiter)
        results.append(out is not None)
        return out

    monkeypatch.setattr(KroneckerUnion, "least_squares", spy)
    return results


@pytest.mark.usefixtures("small_blocks")
def test_union_without_closed_form_solved_by_conjugate_gradients(monkeypatch):
    """Three products (or products with no positive definite side) have no closed form:
    pinv_operator is None and reconstruct runs the kind's preconditioned CG on the normal
    equations (asserted: its ``least_squares`` answers every column), to the dense
    least-squares solution (the minimum-norm one when AᵀA is singular) to 1e-11 of its
    size, closer than LSMR gets at the same tolerance (3.6e-10 here)."""
    used = _solved_by_least_squares(monkeypatch)
    rng = np.random.default_rng(5)
    blocks = [
        Weighted(3**-0.5, Kronecker([PIdentity(rng.random((2, n))) for n in (3, 4, 5)]))
        for _ in range(3)
    ]
    three = KroneckerUnion(blocks)
    T, I = (Total(3), Total(4)), (Identity(3), Identity(4))
    singular = KroneckerUnion([Kronecker([T[0], I[1]]), Kronecker([I[0], T[1]]), Kronecker(T)])
    for A in (three, singular):
        assert A.pinv_operator() is None
        y = rng.standard_normal(A.shape[0])
        want = np.linalg.lstsq(A.dense(), y, rcond=None)[0]
        got = mechanism.reconstruct(A, y)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-11 * np.abs(want).max())
        Y = rng.standard_normal((A.shape[0], 2))  # several releases: one solve per column
        want = np.linalg.lstsq(A.dense(), Y, rcond=None)[0]
        np.testing.assert_allclose(mechanism.reconstruct(A, Y), want, atol=1e-10)
    assert used == [True] * 6


def _pid(rng, p, n):
    return PIdentity(rng.random((p, n)))


def _three_or_more(case, rng):
    """Unions with no closed form, each preconditioner shape (``NormalEquations``): the
    heaviest product kept and the others merged by their geometric mean (3 and 4 products,
    unequal and negative weights), a singular heaviest product beside merged positive
    definite ones, a positive definite pair beside a singular product, and a positive
    definite product whose only companions are singular (the plain pair)."""
    sizes = (3, 4, 5)
    pid = [Kronecker([_pid(rng, 2, n) for n in sizes]) for _ in range(4)]
    total = [Kronecker([Total(3), _pid(rng, 1, 4), Identity(5)]) for _ in range(2)]
    return {
        "three": [Weighted(0.5, pid[0]), Weighted(0.7, pid[1]), Weighted(0.4, pid[2])],
        "four": [Weighted(0.3, pid[0]), Weighted(-0.6, pid[1]), Weighted(0.5, pid[2]),
                 Weighted(0.45, pid[3])],
        "singular-heaviest": [Weighted(0.9, total[0]), Weighted(0.5, pid[0]),
                              Weighted(0.4, pid[1])],
        "pair-and-singular": [Weighted(0.9, pid[0]), Weighted(0.5, total[0]),
                              Weighted(0.45, pid[1])],
        "singular-kept-one-pd": [Weighted(0.9, total[0]), Weighted(0.5, pid[0]),
                                 Weighted(0.4, total[1])],
        "plain-pair": [Weighted(0.8, pid[0]), Weighted(0.5, total[0]), Weighted(0.4, total[1])],
    }[case]  # fmt: skip


CASES_3P = [
    "three", "four", "singular-heaviest", "pair-and-singular", "singular-kept-one-pd",
    "plain-pair",
]  # fmt: skip


def _force(monkeypatch, candidate):
    """Make ``NormalEquations`` pick its ``"pair"`` (the kept product and one partner
    exactly) or ``"merged"`` candidate, whatever their estimated condition numbers."""
    def condition(self):  # a pair has both products of its basis diagonal
        return 1.0 if (all(self.diag) == (candidate == "pair")) else 1e12

    monkeypatch.setattr(union._Preconditioner, "condition", condition)


@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("case", CASES_3P)
def test_three_or_more_products_match_dense_least_squares(case, monkeypatch):
    """Each preconditioner shape reaches dense lstsq's x̂ to ~1e-12 relative (the default
    tol), for one release and several, and the preconditioned iteration is what runs."""
    used = _solved_by_least_squares(monkeypatch)
    rng = np.random.default_rng(12)
    A = KroneckerUnion(_three_or_more(case, rng))
    assert A.pinv_operator() is None
    assert NormalEquations(A, A._factor_lists()).basis is not None
    D = A.dense()
    y = rng.standard_normal(A.shape[0])
    want = np.linalg.lstsq(D, y, rcond=None)[0]
    got = mechanism.reconstruct(A, y)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-11 * np.abs(want).max())
    Y = rng.standard_normal((A.shape[0], 2))
    want = np.linalg.lstsq(D, Y, rcond=None)[0]
    np.testing.assert_allclose(mechanism.reconstruct(A, Y), want, rtol=0, atol=1e-10)
    assert used == [True] * 3


@pytest.mark.parametrize("candidate", ["merged", "pair"])
@pytest.mark.parametrize("case", ["three", "four", "singular-heaviest"])
def test_preconditioner_is_below_the_gram(case, candidate, monkeypatch):
    """``P = c_a K_a + h ⊗H_i`` equals the heaviest product plus the others' AM–GM merge
    (geometric means by ``scipy.linalg.sqrtm``, independently) or plus the next heaviest
    product (the pair), and ``AᵀA ≽ P``: every eigenvalue of ``P⁻¹AᵀA`` is at least 1."""
    _force(monkeypatch, candidate)
    from scipy.linalg import sqrtm

    def gmean(X, Y):  # X # Y = X^½ (X^-½ Y X^-½)^½ X^½
        h = sqrtm(X).real
        hi = np.linalg.inv(h)
        return h @ sqrtm(hi @ Y @ hi).real @ h

    rng = np.random.default_rng(13)
    A = KroneckerUnion(_three_or_more(case, rng))
    ne = NormalEquations(A, A._factor_lists())
    terms = [(c, [f.gram().dense() for f in fs]) for c, fs in A.parsed]
    order = sorted(range(len(terms)), key=lambda g: -terms[g][0])
    rest = [g for g in order[1:] if min(np.linalg.eigvalsh(X).min() for X in terms[g][1]) > 1e-9]
    if candidate == "pair":
        rest = order[1:2] if case != "singular-heaviest" else rest[:1]
    h, H = terms[rest[0]]
    for g in rest[1:]:
        c, G = terms[g]
        h, H = 2 * math.sqrt(h * c), [gmean(X, Y) for X, Y in zip(H, G)]
    keep = terms[order[0]]
    P = keep[0] * reduce(np.kron, keep[1]) + h * reduce(np.kron, H)
    V = reduce(np.kron, ne.basis.V)
    d = ne.basis.c1 + ne.basis.c2 * reduce(np.kron, ne.basis.lam)
    np.testing.assert_allclose(V.T @ P @ V, np.diag(d), atol=1e-10 * d.max())
    D = A.dense()
    G = D.T @ D
    T = (V.T @ G @ V) / np.sqrt(np.outer(d, d))
    lam = np.linalg.eigvalsh(0.5 * (T + T.T))
    assert lam[0] >= 1.0 - 1e-9
    # what the basis makes diagonal: the kept product (and the pair's partner), the rest one
    # dense Kronecker term each
    assert len(ne.terms) == len(terms) - (2 if candidate == "pair" else 1)


def test_geometric_mean():
    """``A # B`` solves the Riccati equation ``X A⁻¹ X = B``, lies below ``(A + B)/2`` and is
    compatible with Kronecker products."""
    from mmtoolkit.linalg.union import geometric_mean

    rng = np.random.default_rng(14)

    def spd(n):
        M = rng.standard_normal((n, n))
        return M @ M.T + 0.1 * np.eye(n)

    A, B, C, E = spd(4), spd(4), spd(3), spd(3)
    X = geometric_mean(A, B)
    np.testing.assert_allclose(X @ np.linalg.solve(A, X), B, rtol=1e-9, atol=1e-10)
    assert np.linalg.eigvalsh(X).min() > 0
    assert np.linalg.eigvalsh(0.5 * (A + B) - X).min() > -1e-10
    np.testing.assert_allclose(
        geometric_mean(np.kron(A, C), np.kron(B, E)),
        np.kron(X, geometric_mean(C, E)),
        rtol=1e-9,
        atol=1e-10,
    )


def _count_iterations(monkeypatch):
    calls = []
    operator = NormalEquations._operator
    monkeypatch.setattr(
        NormalEquations, "_operator", lambda self, *a: calls.append(1) or operator(self, *a)
    )
    return calls


def test_preconditioner_chosen_per_problem(monkeypatch):
    """Prefix⊗Identity, Identity⊗Prefix and a p-Identity product (review): the mean of the
    two last loses the Prefix Gram's scale and the merged preconditioner needs about 50
    iterations where the pair (the two Prefix products exactly) needs about 10; the
    estimate picks the pair, and x̂ is dense lstsq's. Equal p-Identity products: it picks
    the merge (``test_iterations_do_not_track_the_dropped_product``)."""
    calls = _count_iterations(monkeypatch)
    rng = np.random.default_rng(0)
    n = 16
    P, I = Prefix(n), Identity(n)
    A = KroneckerUnion([Kronecker([P, I]), Kronecker([I, P]), Kronecker([_pid(rng, 3, n)] * 2)])
    y = rng.standard_normal(A.shape[0])
    want = np.linalg.lstsq(A.dense(), y, rcond=None)[0]
    counts = {}
    for candidate in ("merged", "pair", None):
        with monkeypatch.context() as m:
            if candidate is not None:
                _force(m, candidate)
            ne = NormalEquations(A, A._factor_lists())
            calls.clear()
            got = ne.solve(y, 1e-12, 1000)
        counts[candidate] = len(calls)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())
    assert ne.choice == 0 and all(ne.diag)  # the pair
    assert counts[None] == counts["pair"] <= 15 and counts["merged"] >= 30


@pytest.mark.parametrize("chunk", [1, 5, 20])
@pytest.mark.parametrize("candidate", ["merged", "pair"])
def test_diagonal_slabs_of_several_chunks(chunk, candidate, monkeypatch):
    """``CHUNK`` small: the diagonal ``D`` in many slabs (``_operator``, ``_rz``,
    ``_update``), with the merged and the pair preconditioner, still dense lstsq's x̂."""
    monkeypatch.setattr(union, "CHUNK", chunk)
    _force(monkeypatch, candidate)
    for case in CASES_3P:
        rng = np.random.default_rng(12)
        A = KroneckerUnion(_three_or_more(case, rng))
        y = rng.standard_normal(A.shape[0])
        want = np.linalg.lstsq(A.dense(), y, rcond=None)[0]
        got = NormalEquations(A, A._factor_lists()).solve(y, 1e-12, 1000)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())


@pytest.mark.parametrize("candidate", ["merged", "pair", None])
def test_tol_is_the_normal_equations_residual_when_ill_conditioned(candidate, monkeypatch):
    """Factor Grams of condition 1e12 (review): the basis is ill-conditioned, the P⁻¹-norm
    residual far from the Euclidean one (the merged stop left 4.4e-11 at tol 1e-12) and CG
    in the basis alone stalls (the pair stopped at 6e-7): the stop measures the residual in
    the cells' basis and the solve restarts on the true residual until
    ``‖AᵀAx̂ − Aᵀy‖ ≤ tol ‖Aᵀy‖`` — what ``tol`` means for plain CG too (LSMR has its own
    atol/btol rules)."""
    if candidate is not None:
        _force(monkeypatch, candidate)
    rng = np.random.default_rng(1)

    def ill(n, cond):
        U, _ = np.linalg.qr(rng.standard_normal((n, n)))
        W, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return Dense(U @ np.diag(np.logspace(0, -math.log10(cond), n)) @ W)

    blocks = [
        Weighted(w, Kronecker([ill(6, 1e6), _pid(rng, 2, 5), Dense(rng.standard_normal((7, 4)))]))
        for w in (0.9, 0.5, 0.4)
    ]
    A = KroneckerUnion(blocks)
    D = A.dense()
    G = D.T @ D
    for tol in (1e-8, 1e-12):
        y = rng.standard_normal(A.shape[0])
        b = D.T @ y
        x = NormalEquations(A, A._factor_lists()).solve(y, tol, 5000)
        assert np.linalg.norm(G @ x - b) <= tol * np.linalg.norm(b)
    want = np.linalg.lstsq(D, y, rcond=None)[0]
    np.testing.assert_allclose(x, want, rtol=0, atol=1e-10 * np.abs(want).max())


def test_iterations_do_not_track_the_dropped_product(monkeypatch):
    """Three products of 4 p-Identity factors on 10^4 cells, as the benchmark's ``union3``:
    the merged preconditioner needs at most 30 iterations (22) where keeping two products
    exactly and dropping the third needed 54, and x̂ meets the normal equations to 1e-12."""
    rng = np.random.default_rng(0)
    A = KroneckerUnion(
        [Weighted(3**-0.5, Kronecker([_pid(rng, 4, 10) for _ in range(4)])) for _ in range(3)]
    )
    calls = []
    operator = NormalEquations._operator
    monkeypatch.setattr(
        NormalEquations, "_operator", lambda self, *a: calls.append(1) or operator(self, *a)
    )
    x = rng.integers(0, 5, A.shape[1]).astype(float)
    y = mechanism.measure(A, x, PureDP(1.0), np.random.default_rng(1))
    xhat = mechanism.reconstruct(A, y)
    assert 0 < len(calls) <= 30
    g = A.T @ (A @ xhat - y)
    assert np.linalg.norm(g) <= 1e-12 * np.linalg.norm(A.T @ y)


@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("privacy", [PureDP(0.7), ZCDP(0.3)])
def test_streamed_stack_measure_is_product_plus_one_draw(monkeypatch, privacy):
    """A stack's blocks are measured into one array and the noise added block by block: the
    stack's product plus the values of one draw, bit for bit — also with a block that
    cannot stream (a plain Kronecker product: its product written into its rows)."""
    monkeypatch.setattr(measurement, "NOISE_BLOCK", 7)
    rng = np.random.default_rng(9)
    U = _union(rng)
    plain = VStack([U.blocks[0], Kronecker([Identity(4), Total(5), PIdentity(rng.random((1, 3)))])])
    x = rng.integers(0, 9, U.shape[1]).astype(float)
    for S in (U, plain):
        streamed = []
        got = S.answers_streamed(x, streamed.append)
        assert sum(p.size for p in streamed) == S.shape[0]
        np.testing.assert_array_equal(got, S @ x)
        np.testing.assert_allclose(got, S.dense() @ x, rtol=1e-12, atol=1e-12)
        got = mechanism.measure(S, x, privacy, np.random.default_rng(11))
        z = one_draw(
            privacy, np.random.default_rng(11), S.shape[0], S.sensitivity(privacy.norm)
        )
        np.testing.assert_array_equal(got, S @ x + z)


def test_peak_memory_of_union_and_residual_planner():
    """About 10^6 cells: a two-product union measures into ``y`` plus slab-sized
    temporaries and reconstructs in ``y``'s memory (LSMR held ~20 N-vectors); a
    ResidualPlanner strategy measures from marginal tables and builds x̂ as the only
    N-sized array."""
    rng = np.random.default_rng(6)
    blocks = [Kronecker([PIdentity(rng.random((2, 32))) for _ in range(4)]) for _ in range(2)]
    A = KroneckerUnion([Weighted(0.6, blocks[0]), Weighted(0.8, blocks[1])])
    N, m = A.shape[1], A.shape[0]
    x = rng.integers(0, 5, N).astype(float)
    peak, y = _peak_extra(lambda: mechanism.measure(A, x, PureDP(1.0), np.random.default_rng(1)))
    assert peak < 8 * m + 0.5 * 8 * N  # slab buffers of a few MB (a fixed size, not O(N))
    peak, xhat = _peak_extra(lambda: mechanism.reconstruct(A, y, overwrite=True))
    # a few column blocks of a fixed size (COLUMN_ENTRIES entries, 4 MB), no N-vector (8 MB)
    assert peak < 0.25 * 8 * N + 2 * 8 * kronecker.COLUMN_ENTRIES
    assert abs(xhat.sum() - x.sum()) < 0.05 * x.sum()

    W = workloads.marginals(mm.Domain.from_sizes([10] * 6), 3, lower=True)
    R = selectors.get("residual_planner").select(W, ZCDP(0.5)).matrix
    N, m = R.shape[1], R.shape[0]
    x = rng.integers(0, 5, N).astype(float)
    peak, y = _peak_extra(lambda: mechanism.measure(R, x, ZCDP(0.5), np.random.default_rng(1)))
    assert peak < 8 * m + 0.25 * 8 * N
    peak, xhat = _peak_extra(lambda: mechanism.reconstruct(R, y, overwrite=True))
    assert peak < 1.25 * 8 * N
    assert abs(xhat.sum() - x.sum()) < 0.05 * x.sum()


def test_two_products_with_a_singular_factor_gram_that_passes_cholesky():
    """A rank-2 3x3 factor Gram whose Cholesky succeeds by rounding must not be taken as
    positive definite (review): x̂ is the least-squares solution of minimum norm, as dense
    lstsq gives it — for a full-rank union and for a singular one (two and three products)."""
    from mmtoolkit.linalg import Dense, Identity, Prefix, Total, Weighted
    from mmtoolkit.linalg.union import KroneckerUnion

    B = np.array([[0.35, 0.82, 0.33], [-1.3, 0.91, 0.45]])
    C = np.array([[1.0, 0, 1], [0, 1, 1]])
    cases = [
        [Kronecker([Dense(B), Identity(2)]), Weighted(2.0, Kronecker([Dense(C), Prefix(2)]))],
        [Kronecker([Dense(B), Identity(2)]), Weighted(2.0, Kronecker([Dense(B), Prefix(2)]))],
        [Kronecker([Dense(B), Identity(2)]), Weighted(2.0, Kronecker([Dense(B), Prefix(2)])),
         Weighted(0.5, Kronecker([Dense(B), Total(2)]))],
    ]  # fmt: skip
    for blocks in cases:
        A = KroneckerUnion(blocks)
        y = np.arange(A.shape[0], dtype=float)
        want = np.linalg.lstsq(A.dense(), y, rcond=None)[0]
        np.testing.assert_allclose(mechanism.reconstruct(A, y), want, rtol=1e-8, atol=1e-8)


def test_vstack_float32_dtype_does_not_depend_on_block_order():
    """review: a float32 product of a stack whose first block keeps float32 and whose second
    computes in float64 was float32 in one order and float64 in the other; now float32 in
    both (the float32 path, as the streamed measure), equal to the float64 product to
    float32 rounding, and the same values in either order."""
    from mmtoolkit.linalg import Dense, Identity, Prefix

    rng = np.random.default_rng(40)
    blocks = [Kronecker([Identity(3), Prefix(4)]), Dense(rng.random((5, 12)))]
    x = rng.integers(0, 1000, 12).astype(np.float32)
    a = VStack(blocks) @ x
    b = VStack(blocks[::-1]) @ x
    assert a.dtype == b.dtype == np.float32
    np.testing.assert_array_equal(a[:12], b[5:])
    np.testing.assert_array_equal(a[12:], b[:5])
    want = VStack(blocks) @ x.astype(float)
    np.testing.assert_allclose(a, want, rtol=1e-6)


def test_one_product_union_and_a_solve_cut_short_by_maxiter():
    """A union of one weighted product is solved (plain CG; it had raised IndexError), and a
    solve that maxiter stops above tol warns with the residual it reached instead of
    returning silently (review); plain CG reports no preconditioner choice."""
    rng = np.random.default_rng(4)
    one = KroneckerUnion([Weighted(0.7, Kronecker([_pid(rng, 2, 5), Identity(4)]))])
    y = rng.standard_normal(one.shape[0])
    want = np.linalg.lstsq(one.dense(), y, rcond=None)[0]
    np.testing.assert_allclose(one.least_squares(y, 1e-12, 1000), want, atol=1e-11)
    assert NormalEquations(one, one._factor_lists()).choice is None
    A = KroneckerUnion(_three_or_more("three", rng))
    y = rng.standard_normal(A.shape[0])
    with pytest.warns(RuntimeWarning, match=r"relative residual .* above tol = 1e-12, after 2"):
        A.least_squares(y, 1e-12, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = A.least_squares(y, 1e-12, 1000)  # converges: no warning
    np.testing.assert_allclose(got, np.linalg.lstsq(A.dense(), y, rcond=None)[0], atol=1e-10)
