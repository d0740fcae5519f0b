"""Dense-numpy oracle shared by the linalg property tests.

``check_against_dense(M, ref)`` asserts that every operation of the implicit matrix ``M``
agrees with plain numpy on the independently built reference array ``ref``.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator

from mmtoolkit.linalg import Dense, Identity, Matrix, Prefix, Product, Total, VStack

RTOL = 1e-9
#: pinv of a matrix with condition number up to 1e4, computed by different algorithms.
PINV_RTOL = 1e-8


def close(actual, expected, rtol=RTOL, what=""):
    """Relative comparison: entrywise ``rtol`` plus ``rtol`` times the largest magnitude."""
    expected = np.asarray(expected, dtype=float)
    actual = np.asarray(actual, dtype=float)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


def check_colnorms(M: Matrix, ref: np.ndarray) -> None:
    for p in (1, 2):
        expected = np.abs(ref).sum(axis=0) if p == 1 else (ref * ref).sum(axis=0)
        c = M.colnorm_p(p)
        if np.isscalar(c):
            assert isinstance(c, float), f"colnorm_p({p}) scalar must be a float, got {type(c)}"
            close(np.full(ref.shape[1], c), expected, what=f"colnorm_p({p}) (scalar)")
        else:
            close(c, expected, what=f"colnorm_p({p})")
    for p in (1, 2):
        r = M.rownorm_p(p)
        expected = np.abs(ref).sum(axis=1) if p == 1 else (ref * ref).sum(axis=1)
        close(np.broadcast_to(r, expected.shape), expected, what=f"rownorm_p({p})")
    close(M.sensitivity(1), np.max(np.abs(ref).sum(axis=0)), what="sensitivity(1)")
    close(M.sensitivity(2), np.sqrt(np.max((ref * ref).sum(axis=0))), what="sensitivity(2)")


def _pinv_reference(ref: np.ndarray, exact: bool):
    """np.linalg.pinv(ref) when the comparison is well posed, else None.

    Full-rank, well-conditioned: always. Rank-deficient with a clear spectral gap: only when
    ``exact`` (the implementation handles the rank structurally rather than through a
    floating-point SVD cut-off).
    """
    if ref.size == 0:
        return None
    s = np.linalg.svd(ref, compute_uv=False)
    top = s[0] if s.size else 0.0
    if top == 0.0:
        return np.zeros(ref.T.shape)
    rel = s / top
    if s.size == min(ref.shape) and rel[-1] > 1e-4:
        return np.linalg.pinv(ref)
    if exact and np.all((rel > 1e-4) | (rel < 1e-12)):
        return np.linalg.pinv(ref, rcond=1e-9)
    return None


def check_against_dense(
    M: Matrix,
    ref: np.ndarray,
    *,
    rng: np.random.Generator | None = None,
    pinv_exact: bool = True,
    check_pinv: bool = True,
    check_gram_ops: bool = True,
) -> None:
    """Every operation of ``M`` equals the dense numpy result on ``ref``."""
    rng = np.random.default_rng(0) if rng is None else rng
    ref = np.asarray(ref, dtype=float)
    m, n = ref.shape
    assert tuple(M.shape) == (m, n), f"shape {M.shape} != {ref.shape}"
    assert isinstance(M.shape[0], int) and isinstance(M.shape[1], int)

    close(M.dense(), ref, what="dense()")

    # products: 1-D and 2-D, both directions, operators
    x, X = rng.normal(size=n), rng.normal(size=(n, 3))
    y, Y = rng.normal(size=m), rng.normal(size=(m, 2))
    close(M.matvec(x), ref @ x, what="matvec 1-D")
    close(M.matvec(X), ref @ X, what="matvec 2-D")
    close(M @ x, ref @ x, what="M @ x")
    close(M @ X, ref @ X, what="M @ X")
    close(M.rmatvec(y), ref.T @ y, what="rmatvec 1-D")
    close(M.rmatvec(Y), ref.T @ Y, what="rmatvec 2-D")
    close(y @ M, y @ ref, what="y @ M")
    close(Y.T @ M, Y.T @ ref, what="Y.T @ M")

    # transpose
    MT = M.T
    assert tuple(MT.shape) == (n, m)
    close(MT.dense(), ref.T, what=".T dense")
    close(MT.matvec(Y), ref.T @ Y, what=".T matvec")
    close(MT.rmatvec(X), ref @ X, what=".T rmatvec")
    close(MT.T.matvec(X), ref @ X, what=".T.T matvec")

    # products with other matrices
    B = rng.normal(size=(n, 2))
    P = M @ Dense(B)
    assert isinstance(P, Matrix)
    close(P.dense(), ref @ B, what="M @ Dense")
    C = rng.normal(size=(2, m))
    close((Dense(C) @ M).dense(), C @ ref, what="Dense @ M")
    close(Product(MT, M).matvec(x), ref.T @ (ref @ x), what="Product(M.T, M)")

    # gram
    G = M.gram()
    Gref = ref.T @ ref
    assert tuple(G.shape) == (n, n)
    close(G.dense(), Gref, what="gram().dense()")
    close(G.matvec(X), Gref @ X, what="gram() matvec")
    close(G.rmatvec(X), Gref @ X, what="gram() rmatvec")
    if check_gram_ops:
        close(G.trace(), np.trace(Gref), what="gram().trace()")
        close(G.diag(), np.diag(Gref), what="gram().diag()")
        check_colnorms(G, Gref)
        close(G.T.matvec(X), Gref @ X, what="gram().T")

    # square-only reductions
    if m == n:
        close(M.trace(), np.trace(ref), what="trace()")
        close(M.diag(), np.diag(ref), what="diag()")

    check_colnorms(M, ref)

    # pseudo-inverse
    if check_pinv:
        expected = _pinv_reference(ref, pinv_exact)
        if expected is not None:
            Mp = M.pinv()
            assert tuple(Mp.shape) == (n, m)
            close(Mp.dense(), expected, rtol=PINV_RTOL, what="pinv()")
            close(Mp.matvec(Y), expected @ Y, rtol=PINV_RTOL, what="pinv() matvec")

    # scipy operator
    op = M.as_operator()
    assert isinstance(op, LinearOperator)
    assert op.shape == (m, n)
    close(op.matvec(x), ref @ x, what="as_operator().matvec")
    close(op.rmatvec(y), ref.T @ y, what="as_operator().rmatvec")
    close(op.matmat(X), ref @ X, what="as_operator().matmat")
    close(op @ X, ref @ X, what="as_operator() @ X")
    close(op.H @ Y, ref.T @ Y, what="as_operator().H @ Y")


def random_factor(rng, n: int) -> Matrix:
    """A random per-attribute factor on ``n`` cells: Identity, Total, Prefix, ``[T; I]`` or a
    small dense matrix with entries in -2..2."""
    kind = int(rng.integers(0, 5))
    if kind == 0:
        return Identity(n)
    if kind == 1:
        return Total(n)
    if kind == 2:
        return Prefix(n)
    if kind == 3:
        return VStack([Total(n), Identity(n)])
    return Dense(rng.integers(-2, 3, size=(int(rng.integers(1, 4)), n)).astype(float))
