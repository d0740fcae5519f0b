"""The compiled kernels (the ``fast`` extra, numba; ``mmtoolkit.linalg.kernels``) against the
numpy path: the same products to rounding, the same bytes with one thread or two, the
``MMTOOLKIT_NUMBA`` switch, and no reference cycle keeping a table alive.

Tolerances are derived, not tuned: every entry of a product is a chain of dot products
(one per Kronecker factor, or one sum per marginal table along the plan), so each path's
error is at most ``γ_K · (|A| |x|)`` with ``γ_K ≈ K·ε``, ``K`` the number of terms summed
along the chain and ``|A| |x|`` the product with absolute values (Higham, *Accuracy and
Stability of Numerical Algorithms*, §3.1, §3.5); two paths differ by at most twice that."""

from __future__ import annotations

import gc
import weakref
from itertools import combinations

import numpy as np
import pytest
from noise_draws import one_draw

from mmtoolkit import mechanism
from mmtoolkit.linalg import Dense, Kronecker, Marginals, PIdentity, kernels, kronecker, marginals
from mmtoolkit.linalg.marginals import expand_tables, marginal_tables
from mmtoolkit.privacy import PureDP

EPS = np.finfo(float).eps

def _numba_installed() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


needs_numba = pytest.mark.skipif(not _numba_installed(), reason="numba (the fast extra)")


def _both(monkeypatch, fn):
    """``fn()`` on the numpy path and on the compiled one (``MMTOOLKIT_NUMBA`` 0, then 1)."""
    out = []
    for flag in ("0", "1"):
        monkeypatch.setenv(kernels.ENV, flag)
        assert (kernels.compiled() is None) == (flag == "0")
        out.append(fn())
    return out


def _within(a, b, bound, K):
    """``|a − b| ≤ 2 K ε · bound`` entrywise (both paths within ``K ε · bound`` of exact)."""
    a, b, bound = (np.asarray(v, dtype=float) for v in (a, b, bound))
    excess = np.abs(a - b) - 2 * K * EPS * bound
    assert np.all(excess <= 0), f"worst excess {excess.max():.3g} (bound {bound.max():.3g})"


def _abs_forward(A):
    """``|A_1| ⊗ … ⊗ |A_d|``: each p-Identity factor's entries in absolute value."""
    return Kronecker([Dense(np.abs(f.dense())) for f in A.factors])


def _abs_pinv(A):
    """The absolute form of the pseudo-inverse as computed, ``s ∘ z_I + U (z_Θ − Θ z_I)``
    with ``U = sΘᵀM``: per factor ``[diag(s) + |U||Θ|, |U|]``, whose product with ``|y|``
    bounds every term either path sums."""
    mats = []
    for f in A.factors:
        U = np.abs(f.pinv().sTM)
        mats.append(Dense(np.hstack([np.diag(f.s) + U @ np.abs(f.theta), U])))
    return Kronecker(mats)


def _chain_terms(A):
    """``K``: terms summed along the chain of factor steps (a dot product of ``n + p``
    entries, a scaling and the expansion's ``p`` terms per factor)."""
    return sum(f.n + 2 * f.p + 2 for f in A.factors)


@pytest.fixture
def lowered(monkeypatch):
    """Small blocks, slabs, column blocks, chunks and pieces, so that small problems take
    every path: slabs recursive and grouped, in-place column blocks, several marginal chunk
    groups and pieces."""
    monkeypatch.setattr(kronecker, "BLOCK_ENTRIES", 50)
    monkeypatch.setattr(kronecker, "COLUMN_ENTRIES", 120)
    monkeypatch.setattr(kronecker, "SLAB_ENTRIES", 200)
    monkeypatch.setattr(kronecker, "PARALLEL_ENTRIES", 1)
    monkeypatch.setattr(marginals, "PLAN_DIRECT_CELLS", 1)
    monkeypatch.setattr(marginals, "CHUNK_ENTRIES", 40)
    monkeypatch.setattr(marginals, "PIECE_ENTRIES", 64)


# p not a multiple of 4 (padded rows), p > 4 (two groups of rows), a factor of p = 1, both
# norms (Θ real for the L2 version: cancellation in the products)
KRON_CASES = {
    "small": [(2, 5, 1), (5, 7, 2), (1, 4, 1), (3, 6, 2)],
    "medium": [(4, 24, 1), (6, 20, 2), (1, 18, 1), (4, 16, 1)],  # N > BLOCK_ENTRIES
}


def _kron(case, rng):
    return Kronecker(
        [
            PIdentity(rng.random((p, n)) if norm == 1 else rng.normal(size=(p, n)), norm=norm)
            for p, n, norm in KRON_CASES[case]
        ]
    )


@needs_numba
@pytest.mark.parametrize("case", ["small", "medium"])
def test_pidentity_kronecker_paths_agree(case, monkeypatch, request):
    if case == "small":
        request.getfixturevalue("lowered")
    rng = np.random.default_rng(41)
    A = _kron(case, rng)
    x = rng.integers(0, 9, A.shape[1]).astype(float)
    y = rng.normal(size=A.shape[0])
    K = _chain_terms(A)
    fwd = _abs_forward(A) @ np.abs(x)
    back = _abs_pinv(A) @ np.abs(y)

    def products():
        return {
            "Ax": A @ x,
            "streamed": mechanism.measure(A, x, PureDP(1.0), np.random.default_rng(3)),
            "pinv": mechanism.reconstruct(A, y),
            "in place": mechanism.reconstruct(A, y.copy(), overwrite=True),
            "float32": A @ x.astype(np.float32),
        }

    numpy_path, compiled = _both(monkeypatch, products)
    for key in ("Ax", "streamed"):
        _within(compiled[key], numpy_path[key], fwd, K)
    for key in ("pinv", "in place"):
        _within(compiled[key], numpy_path[key], back, K)
    # float32: each stored intermediate rounded to float32 (ε₃₂ per step) on both paths
    eps32 = np.finfo(np.float32).eps
    assert compiled["float32"].dtype == np.float32
    assert np.all(np.abs(compiled["float32"] - numpy_path["float32"])
                  <= 2 * (K * EPS + len(A.factors) * eps32) * fwd)  # fmt: skip
    if case == "small":  # and the dense oracle (a pseudo-inverse by SVD)
        np.testing.assert_allclose(compiled["pinv"], np.linalg.pinv(A.dense()) @ y, rtol=1e-9,
                                   atol=1e-9 * np.abs(y).max())  # fmt: skip


@needs_numba
def test_streamed_measure_is_the_product_plus_the_same_noise(monkeypatch, lowered):
    """The compiled path changes the product only: the noise of a seeded measure is the
    same stream (the release's answers to rounding, the noise values exactly)."""
    rng = np.random.default_rng(42)
    A = _kron("small", rng)
    x = rng.integers(0, 9, A.shape[1]).astype(float)
    numpy_path, compiled = _both(
        monkeypatch,
        lambda: mechanism.measure(A, x, PureDP(1.0), np.random.default_rng(8)) - A @ x,
    )
    noise = one_draw(PureDP(1.0), np.random.default_rng(8), A.shape[0], A.sensitivity(1))
    scale = np.abs(noise) + _abs_forward(A) @ np.abs(x)
    _within(compiled, noise, scale, _chain_terms(A))
    _within(numpy_path, noise, scale, _chain_terms(A))


def _upto3(d):
    return [sum(1 << i for i in c) for k in range(4) for c in combinations(range(d), k)]


@needs_numba
@pytest.mark.parametrize(
    "blocks, sizes",
    [("lowered", (10, 10, 10, 6)), ("lowered", (3, 7, 2, 5, 4)), ("default", (10,) * 6)],
)
def test_marginal_tables_and_expansion_paths_agree(blocks, sizes, monkeypatch, request):
    if blocks == "lowered":
        request.getfixturevalue("lowered")
    rng = np.random.default_rng(43)
    d = len(sizes)
    keys = _upto3(d)
    A = Marginals(sizes, {k: 0.5 + rng.random() for k in keys})
    x = rng.random(A.shape[1])  # non-negative: the sums have no cancellation
    K = A.shape[1]  # at most every cell summed into one table entry, in a chain of sums

    def tables():
        return marginal_tables(sizes, x[:, None], keys)

    numpy_path, compiled = _both(monkeypatch, tables)
    assert numpy_path.keys() == compiled.keys()
    for key in keys:  # a sum of non-negative terms: bounded by itself
        _within(compiled[key], numpy_path[key], numpy_path[key], min(K, d * max(sizes)))

    t = A.pinv_operator().tables(rng.normal(size=(A.shape[0], 1)))
    bound = expand_tables(sizes, {k: np.abs(v) for k, v in t.items()})
    given = {k: v.copy() for k, v in t.items()}

    def expanded():
        return expand_tables(sizes, given)  # given tables: not modified

    numpy_path, compiled = _both(monkeypatch, expanded)
    _within(compiled, numpy_path, bound, len(t))  # one addition per table along a chain
    for k, v in given.items():
        np.testing.assert_array_equal(v, t[k])
    if A.shape[1] <= 1000:  # the dense oracle (a pseudo-inverse by SVD)
        y = rng.normal(size=A.shape[0])
        np.testing.assert_allclose(mechanism.reconstruct(A, y),
                                   np.linalg.pinv(A.dense(), rcond=1e-10) @ y, rtol=1e-9,
                                   atol=1e-9)  # fmt: skip


@needs_numba
@pytest.mark.parametrize("what", ["kron", "marg"])
def test_compiled_path_gives_the_same_bytes_on_one_thread_or_two(what, monkeypatch, lowered):
    rng = np.random.default_rng(44)
    monkeypatch.setenv(kernels.ENV, "1")
    if what == "kron":
        A = _kron("small", rng)
    else:
        A = Marginals((10, 10, 10, 10, 6), dict.fromkeys(_upto3(5), 1.0))
    x = rng.integers(0, 9, A.shape[1]).astype(float)
    y = rng.normal(size=A.shape[0])
    pooled = []

    class Counting(marginals.Workers):
        def run(self, tasks):
            tasks = list(tasks)
            pooled.append(len(tasks) - 1 if self.k > 1 else 0)
            return super().run(tasks)

    monkeypatch.setattr(kronecker, "Workers", Counting)
    monkeypatch.setattr(marginals, "Workers", Counting)

    def results(k):
        monkeypatch.setenv("MMTOOLKIT_THREADS", str(k))
        return [A @ x, mechanism.reconstruct(A, y), mechanism.reconstruct(A, y.copy(),
                                                                           overwrite=True)]

    one = results(1)
    assert sum(pooled) == 0
    two = results(2)
    assert sum(pooled) > 0  # the pool ran pieces
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_numba_switch(monkeypatch):
    """``MMTOOLKIT_NUMBA``: 0 the numpy path, 1 the kernels (an error naming the extra
    without numba), anything else an error naming the variable."""
    monkeypatch.setenv(kernels.ENV, "0")
    assert kernels.compiled() is None
    assert kernels.prepare() is False
    monkeypatch.setenv(kernels.ENV, "yes")
    with pytest.raises(ValueError, match="MMTOOLKIT_NUMBA must be 0 or 1"):
        kernels.compiled()
    # as if numba could not be imported
    missing = (None, "ModuleNotFoundError: No module 'numba'")
    monkeypatch.setattr(kernels, "_loaded", {"mmtoolkit.linalg._numba_kernels": missing})
    monkeypatch.setenv(kernels.ENV, "1")
    with pytest.raises(ValueError, match=r"MMTOOLKIT_NUMBA=1 needs numba.*\[fast\].*numba'"):
        kernels.compiled()
    monkeypatch.delenv(kernels.ENV)
    assert kernels.compiled() is None  # unset: the numpy path when numba is missing


def test_numba_switch_reaches_the_cli(monkeypatch, capsys, tmp_path):
    """A bad value is a one-line CLI error, not a traceback."""
    from mmtoolkit.cli import main

    (tmp_path / "domain.json").write_text('{"a": 40, "b": 40}')
    monkeypatch.setenv(kernels.ENV, "maybe")
    monkeypatch.setattr(kronecker, "BLOCK_ENTRIES", 4)  # a product large enough to ask
    code = main(["release", "--domain", str(tmp_path / "domain.json"), "--records", "50",
                 "--workload", "marginal:a,b", "--selector", "opt_kron", "--epsilon", "1",
                 "--seed", "1", "--out", str(tmp_path / "answers.csv")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("mmtoolkit release: error:") and "MMTOOLKIT_NUMBA" in err[-1]


@pytest.mark.parametrize("flag", ["0", "1"])
def test_tables_are_freed_without_the_garbage_collector(flag, monkeypatch, lowered):
    """No reference cycle holds the tables or the expanded result (the N-cell x̂ of a
    release) until the garbage collector runs: dropped, they are freed at once."""
    if flag == "1" and not _numba_installed():
        pytest.skip("numba (the fast extra)")
    monkeypatch.setenv(kernels.ENV, flag)
    sizes = (10, 10, 10, 8)
    keys = _upto3(4)
    x = np.random.default_rng(45).random((800 * 10, 1))
    gc.disable()
    try:
        tables = marginal_tables(sizes, x, keys)
        ref = weakref.ref(tables[keys[-1]])
        del tables
        assert ref() is None
        t = {k: np.ones(tuple(sizes[i] for i in marginals.key_attrs(k, 4)) + (1,)) for k in keys}
        out = expand_tables(sizes, t, consume=True)
        ref = weakref.ref(out.base if out.base is not None else out)
        del out
        assert ref() is None
    finally:
        gc.enable()
