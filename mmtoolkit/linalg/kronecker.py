"""Kronecker products ``A_1 ⊗ ... ⊗ A_d`` of per-attribute matrices (HDMM §4, App. A.5).

:class:`Kronecker` does every operation factor-wise (Gram, pseudo-inverse, trace, diagonal,
sensitivity by HDMM Thm 3) and its products by kmatvec, never a dense Kronecker product;
:class:`KroneckerRoute` is the evaluator's route against Kronecker strategies (HDMM Thm 5, 6).

User guide: docs/algorithms/implicit-algebra.md ("Kronecker products").
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from functools import reduce

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_int
from ..threads import Workers, worker_threads
from . import base
from .base import CountingQueries, Matrix, as_matrix, check_dense_size, check_p, float_dtype, peel
from .pidentity import PIdentity
from .route import RANK_RTOL, SUPPORT_RTOL, UnsupportedWorkloadError, align, as_vector

#: Entries of one block of a factor-wise product step (its temporaries stay in cache).
BLOCK_ENTRIES = 1 << 17
#: Entries of one block of columns of the first factor's in-place pass over the result.
COLUMN_ENTRIES = 1 << 19
#: Entries of a group of slabs the trailing factors are applied to at once.
SLAB_ENTRIES = 1 << 17
#: A product over one vector of at least this many entries runs on worker threads.
PARALLEL_ENTRIES = 1 << 22


def _apply_steps(X, mats, in_sizes, out_sizes, transpose):
    """kmatvec step by step, each factor's product a cache-sized block of columns at a time."""
    k = X.shape[1]
    Y = X.T  # (k, N): the column index is the most significant "axis"
    for A, n_i, m_i in zip(reversed(mats), reversed(in_sizes), reversed(out_sizes)):
        rows = Y.reshape(-1, n_i)  # (rest, n_i); the factor acts on its transpose
        apply = A._rmatmat if transpose else A._matmat
        width = max(1, BLOCK_ENTRIES // max(n_i, m_i))
        if rows.shape[0] <= width:
            Y = apply(rows.T)
            continue
        Y = np.empty((m_i, rows.shape[0]))
        for s in range(0, rows.shape[0], width):
            Y[:, s : s + width] = apply(rows[s : s + width].T)
    return Y.reshape(math.prod(out_sizes), k)


class _Steps:
    """Kronecker factors applied to a group of slabs one factor at a time (two scratches)."""

    def __init__(self, mats, in_sizes, out_sizes, transpose, group, dtype):
        self.group = group
        self.ops = [f.T if transpose else f for f in reversed(mats)]
        self.views = []  # (a, n, b, m) of each step: the factor acts along n of (a, n, b)
        cur = list(in_sizes)
        for k in reversed(range(len(mats))):
            a, b = math.prod(cur[:k]), math.prod(cur[k + 1 :])
            self.views.append((a, in_sizes[k], b, out_sizes[k]))
            cur[k] = out_sizes[k]
        size = group * max((a * m * b for a, _, b, m in self.views[:-1]), default=0)
        self.bufs = [np.empty(size, dtype) for _ in range(min(2, len(self.views) - 1))]

    def __call__(self, src, dst):
        """``src`` ``(g, N_slab)`` slabs (``g ≤ group``) → ``dst`` ``(g, M_slab)``."""
        g, cur, last = src.shape[0], src, len(self.views) - 1
        for j, (op, (a, n, b, m)) in enumerate(zip(self.ops, self.views)):
            out = dst if j == last else self.bufs[j % 2][: g * a * m * b]
            op.apply_along(cur.reshape(g * a, n, b), out.reshape(g * a, m, b))
            cur = out


def _apply_rows(
    src, dst, mats, in_sizes, out_sizes, transpose, steps, overwrite=False, workers=None
):  # fmt: skip
    """``R = ⊗ mats`` applied to every row (slab) of ``src``, written as the rows of ``dst``
    (in ``src``'s memory with ``overwrite``): small rows in groups (:class:`_Steps`), large
    ones by :func:`_apply_lean` on ``workers``. ``steps``: the :class:`_Steps` per depth."""
    t_in, t_out = math.prod(in_sizes), math.prod(out_sizes)
    rest = (mats, in_sizes, out_sizes, transpose)
    if len(mats) > 1 and max(t_in, t_out) > SLAB_ENTRIES:  # row by row, each one lean
        sub = max(in_sizes[0], out_sizes[0]) * math.prod(out_sizes[1:])
        own = overwrite or sub > t_out  # built in a scratch, else in its own row of dst
        workers = workers or Workers(1)
        k = workers.k
        if own and 16 * (k - 1) * sub > src.size:  # a scratch per thread: ≤ 1/16 of the data
            workers, k = Workers(1), 1
        scratch = [np.empty(sub, dtype=dst.dtype) if own else None for _ in range(k)]
        thread_steps = [steps] + [{} for _ in range(k - 1)]

        def row(j, i):
            buf = scratch[j] if own else dst[i]
            return _apply_lean(src[i], *rest, buf=buf, steps=thread_steps[j])

        for i0 in range(0, src.shape[0], k):
            rows = range(i0, min(i0 + k, src.shape[0]))
            tasks = [functools.partial(row, j, i) for j, i in enumerate(rows)]
            done = workers.run(tasks)
            if own:
                for i, result in zip(rows, done):
                    dst[i] = result
        return
    group = min(src.shape[0], max(1, SLAB_ENTRIES // max(t_in, t_out)))
    run = steps.get(len(mats))
    if run is None or run.group < group:
        run = steps[len(mats)] = _Steps(*rest, group, dst.dtype)
    for s in range(0, src.shape[0], group):
        run(src[s : s + group], dst[s : s + group])


def _apply_lean(x, mats, in_sizes, out_sizes, transpose, buf=None, overwrite=False, steps=None):
    """``(A_1 ⊗ R) x`` for one vector with a single array of the result's size (the lean path:
    docs/algorithms/implicit-algebra.md). ``buf``: where to build it; ``overwrite=True``: in ``x``'s
    memory (checked by :func:`_fits_in_place`). Returns a 1-D view of the buffer."""
    n_in, n_out = in_sizes[0], out_sizes[0]
    t_in, t_out = math.prod(in_sizes[1:]), math.prod(out_sizes[1:])
    own = buf is None and not overwrite
    if overwrite:
        buf = x
    elif own:
        buf = np.empty(max(n_in, n_out) * t_out, dtype=float_dtype(x))
    rows_in = buf[: n_in * t_out].reshape(n_in, t_out)
    rest = (mats[1:], in_sizes[1:], out_sizes[1:], transpose)
    top = steps is None  # the whole vector, not a slab of a larger one
    large = top and x.size >= PARALLEL_ENTRIES
    with Workers(worker_threads() if large else 1) as workers:
        _apply_rows(x.reshape(n_in, t_in), rows_in, *rest, {} if top else steps, overwrite,
                    workers)  # fmt: skip
        rows_out = buf[: n_out * t_out].reshape(n_out, t_out)
        first = mats[0].T if transpose else mats[0]
        width = max(1, (COLUMN_ENTRIES if top else BLOCK_ENTRIES) // max(n_in, n_out))
        starts = range(0, t_out, width)

        def columns(part):  # in place, block by block (each block only reads itself)
            for s in part:
                first.apply_along(
                    rows_in[None, :, s : s + width], rows_out[None, :, s : s + width]
                )

        k, b = workers.k, len(starts)
        workers.run([functools.partial(columns, starts[j * b // k : (j + 1) * b // k])
                     for j in range(k)])  # fmt: skip
    size = n_out * t_out
    if own and size < buf.size:
        del rows_in, rows_out
        try:  # give the unused tail back (realloc shrinks in place; nothing else refers to buf)
            buf.resize(size, refcheck=True)
        except ValueError:
            pass
    return buf[:size]


def _apply_pidentity_first(x, mats, in_sizes, out_sizes, each=None, out=None):
    """``(A_1 ⊗ R) x`` for one vector when ``A_1`` is a p-Identity (HDMM Def. 9), finished slab
    by slab in order, each slab handed to ``each`` while in cache; built in ``out`` if given."""
    A1 = mats[0]
    n, m = A1.n, A1.shape[0]
    t_in, t_out = math.prod(in_sizes[1:]), math.prod(out_sizes[1:])
    dtype = float_dtype(x)
    src = x.reshape(n, t_in)
    v = np.matmul((A1.theta * A1.d).astype(dtype, copy=False), src)  # one GEMM
    y = np.empty(m * t_out, dtype=dtype) if out is None else out
    rows = y.reshape(m, t_out)
    steps: dict = {}
    rest = (mats[1:], in_sizes[1:], out_sizes[1:], False, steps)
    group = max(1, SLAB_ENTRIES // max(t_in, t_out))
    for part, s in [(src, 0), (v, n)]:
        for i in range(0, part.shape[0], group):
            chunk = part[i : i + group]
            out = rows[s + i : s + i + chunk.shape[0]]
            _apply_rows(chunk, out, *rest)
            if s == 0:
                out *= A1.d[i : i + group, None]
            if each is not None:
                each(out.reshape(-1))
    return y


def _pidentity_first(mats, in_sizes) -> bool:
    """Whether :func:`_apply_pidentity_first` serves one large vector (``ΘD x`` ≤ 1/16 of it)."""
    N = math.prod(in_sizes)
    first = mats[0]
    return len(mats) > 1 and N > BLOCK_ENTRIES and isinstance(first, PIdentity) and (
        16 * first.p * (N // in_sizes[0]) <= N
    )


def _fits_in_place(in_sizes, out_sizes) -> bool:
    """Whether :func:`_apply_lean` can build the result in its input's memory."""
    n_in, n_out = in_sizes[0], out_sizes[0]
    t_in, t_out = math.prod(in_sizes[1:]), math.prod(out_sizes[1:])
    return t_out <= t_in and max(n_in, n_out) * t_out <= n_in * t_in


def _kron_vectors(vectors, what: str) -> np.ndarray:
    size = math.prod(len(v) for v in vectors)
    check_dense_size(size, 1, what)
    return reduce(np.kron, vectors)


class Kronecker(Matrix):
    """``A_1 ⊗ A_2 ⊗ ... ⊗ A_d`` (C-order: the first factor is the most significant axis).

    Gram, pseudo-inverse, trace, diagonal, norms and sensitivity are the factors', combined;
    products apply one factor at a time (kmatvec), never a dense Kronecker product. Its
    ``error_route`` scores any union of Kronecker products exactly, factor by factor.

    Parameters
    ----------
    factors : iterable of Matrix or array_like
        The factors ``A_i`` (``m_i x n_i``), first the most significant attribute; arrays are
        wrapped by :func:`as_matrix`. The product is ``Π m_i x Π n_i``.

    Raises
    ------
    ValueError
        When there is no factor, or a factor is an array :func:`as_matrix` refuses.
    TypeError
        When a factor is a string (see :func:`as_matrix`).

    References
    ----------
    McKenna et al. 2018, HDMM, Section 4.2 (Theorem 2, vectorized products), Section 4.4
    (Theorem 3, sensitivity), Section 6.1 (Theorems 5 and 6, error of a product strategy) and
    Appendix A.5 (the matrix-vector product).
    """

    def __init__(self, factors: Iterable[Matrix | ArrayLike]):
        matrices = [as_matrix(f) for f in factors]
        if not matrices:
            raise ValueError("Kronecker needs at least one factor")
        self.factors = matrices
        rows, cols = zip(*(f.shape for f in matrices))
        self.shape = (math.prod(rows), math.prod(cols))

    @property
    def _sizes(self) -> tuple[list[int], list[int]]:
        """The factors' column counts and row counts."""
        return [f.shape[1] for f in self.factors], [f.shape[0] for f in self.factors]

    def _apply(self, X, mats, in_sizes, out_sizes, transpose):
        if X.shape[1] == 1 and len(mats) > 1 and math.prod(in_sizes) > BLOCK_ENTRIES:
            if not transpose and _pidentity_first(mats, in_sizes):
                return _apply_pidentity_first(X[:, 0], mats, in_sizes, out_sizes)[:, None]
            return _apply_lean(X[:, 0], mats, in_sizes, out_sizes, transpose)[:, None]
        return _apply_steps(X, mats, in_sizes, out_sizes, transpose)

    def answers_streamed(self, x, each, out=None):
        ins, outs = self._sizes
        if out is not None and (out.dtype != float_dtype(x) or not out.flags.c_contiguous):
            return None
        if x.ndim == 1 and _pidentity_first(self.factors, ins):
            return _apply_pidentity_first(x, self.factors, ins, outs, each, out)
        lean = x.ndim == 1 and len(ins) > 1 and x.size > BLOCK_ENTRIES
        if out is None or not lean or max(ins[0], outs[0]) * math.prod(outs[1:]) > out.size:
            return None
        y = _apply_lean(x, self.factors, ins, outs, False, buf=out)
        each(y)
        return y

    def apply_overwrite(self, y):
        if all(isinstance(f, Identity) for f in self.factors):
            return y
        ins, outs = self._sizes
        lean = y.ndim == 1 and len(ins) > 1 and y.size > BLOCK_ENTRIES
        ours = y.size == self.shape[1] and y.dtype in (np.float64, np.float32) and y.flags.writeable
        if lean and ours and y.flags.c_contiguous and _fits_in_place(ins, outs):
            return _apply_lean(y, self.factors, ins, outs, False, overwrite=True)
        return self @ y

    def _matmat(self, X):
        ins, outs = self._sizes
        return self._apply(X, self.factors, ins, outs, False)

    def _rmatmat(self, Y):
        ins, outs = self._sizes
        return self._apply(Y, self.factors, outs, ins, True)

    @property
    def T(self):
        return Kronecker([f.T for f in self.factors])

    def gram(self):
        return Kronecker([f.gram() for f in self.factors])

    def pinv(self):
        return Kronecker([f.pinv() for f in self.factors])

    def colnorm_p(self, p):
        return self._kron_norms([f.colnorm_p(p) for f in self.factors], 1, "column norms")

    def rownorm_p(self, p):
        return self._kron_norms([f.rownorm_p(p) for f in self.factors], 0, "row norms")

    def _kron_norms(self, parts, axis: int, what: str):
        """The Kronecker product of per-factor norms (scalars when every factor's is)."""
        if all(np.isscalar(c) for c in parts):
            return float(math.prod(parts))
        vecs = [
            np.full(f.shape[axis], c) if np.isscalar(c) else np.asarray(c)
            for f, c in zip(self.factors, parts)
        ]
        return _kron_vectors(vecs, f"{what} of a Kronecker product")

    def sensitivity(self, p=1):  # HDMM Thm 3
        return float(math.prod(f.sensitivity(p) for f in self.factors))

    def trace(self):
        self._require_square("trace")
        if any(f.shape[0] != f.shape[1] for f in self.factors):
            return super().trace()
        return float(math.prod(f.trace() for f in self.factors))

    def diag(self):
        self._require_square("diag")
        if any(f.shape[0] != f.shape[1] for f in self.factors):
            return super().diag()
        return _kron_vectors([f.diag() for f in self.factors], "diag of a Kronecker product")

    def dense(self):
        check_dense_size(*self.shape, "dense() of Kronecker")
        return reduce(np.kron, (f.dense() for f in self.factors))

    # ---------------------------------------------------------------- strategy kind
    def kron_terms(self, signed=False):
        c, factors = 1.0, []
        for f in self.factors:
            w, b = peel(f)
            c *= w if signed else w * w
            factors.append(b)
        return [(c, factors)]

    def frobenius_sq(self):
        return float(math.prod(f.frobenius_sq() for f in self.factors))

    def error_route(self, W):
        return KroneckerRoute(W, self)

    def pinv_operator(self):
        return self.pinv()


class Identity(CountingQueries):
    """The n x n identity.

    The Identity strategy (one query per cell) and the ``"identity"`` factor of a marginal;
    it is its own transpose, Gram and pseudo-inverse, and supports every workload.

    Parameters
    ----------
    n : int
        The size, at least 1.

    Raises
    ------
    ValueError
        When ``n`` is below 1.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 3.3 (the predicate set Identity).
    """

    factor_kind = "identity"

    def __init__(self, n: int):
        self.n = check_int(n, "Identity size", minimum=1)
        self.shape = (self.n, self.n)

    def _matmat(self, X):
        return X.copy()

    def _rmatmat(self, Y):
        return Y.copy()

    @property
    def T(self):
        return self

    def gram(self):
        return self

    def pinv(self):
        return self

    def colnorm_p(self, p):
        check_p(p)
        return 1.0

    def rownorm_p(self, p):
        check_p(p)
        return 1.0

    def trace(self):
        return float(self.n)

    def diag(self):
        return np.ones(self.n)

    # ---------------------------------------------------------------- strategy kind
    def frobenius_sq(self):
        return float(self.n)

    def error_route(self, W):
        return KroneckerRoute(W, self)

    def gram_route(self, W):  # any strategy with AᵀA = I (an orthonormal basis)
        return KroneckerRoute(W, self)

    def pinv_operator(self):
        return self

    def apply_overwrite(self, y):
        return y

    def apply_along(self, X, out):
        if out.__array_interface__["data"] != X.__array_interface__["data"]:
            out[...] = X


def group(factors: list[Matrix]) -> Matrix:
    """One factor, or the Kronecker product of a consecutive group of factors."""
    return factors[0] if len(factors) == 1 else Kronecker(factors)


# ===================================================================== the error route
def kron_all(parts, sizes) -> np.ndarray:
    """Kronecker product of per-group vectors or scalars (scalars expand to their size)."""
    check_dense_size(math.prod(sizes), 1, "a per-query vector")
    out = np.ones(1)
    for r, m in zip(parts, sizes):
        out = np.kron(out, as_vector(r, m))
    return out


class StrategyFactor:
    """(AᵀA)⁺ and an orthonormal basis of null(A) for one strategy factor (None: Identity)."""

    def __init__(self, A: Matrix | None, gram: Matrix | None = None):
        self.pinv_gram: np.ndarray | None = None
        self.null: np.ndarray | None = None
        self.half: np.ndarray | None = None
        if A is None or isinstance(A, Identity):
            return
        n = A.shape[1]
        check_dense_size(n, n, "the Gram of a strategy factor")
        G = (A.gram() if gram is None else gram).dense()
        lam, V = np.linalg.eigh(0.5 * (G + G.T))
        keep = lam > RANK_RTOL * n * np.finfo(float).eps * max(lam.max(initial=0.0), 0.0)
        Vk = V[:, keep]
        self.half = Vk / np.sqrt(lam[keep])  # (AᵀA)⁺ = half · halfᵀ
        self.pinv_gram = self.half @ self.half.T
        if not keep.all():
            self.null = V[:, ~keep]

    @property
    def identity(self) -> bool:
        return self.pinv_gram is None

    def trace_with(self, wf: Matrix, gram_cache: dict) -> float:
        """tr(G_W (AᵀA)⁺) for the workload factor's Gram G_W."""
        if self.identity:
            return wf.frobenius_sq()
        G = gram_cache.get(id(wf))
        if G is None:
            n = wf.shape[1]
            check_dense_size(n, n, "the Gram of a workload factor")
            G = gram_cache[id(wf)] = (wf, wf.gram().dense())
        return float(np.sum(G[1] * self.pinv_gram))

    def worst_row_residual(self, wf: Matrix) -> tuple[float, float]:
        """(max row norm², max over rows of ||w (I − A⁺A)||² / ||w||²)."""
        norms = wf.rownorm_p(2)
        top = float(np.max(norms))
        if self.null is None or top == 0.0:
            return top, 0.0
        check_dense_size(wf.shape[0], self.null.shape[1], "the support check of a factor")
        residual = np.sum(wf.matvec(self.null) ** 2, axis=1)
        norms = as_vector(norms, wf.shape[0])
        live = norms > 0
        return top, float(np.max(residual[live] / norms[live], initial=0.0))

    def row_profile(self, wf: Matrix):
        """diag(wf (AᵀA)⁺ wfᵀ) (a float when constant)."""
        half = self.half
        if half is None:  # the identity (half and pinv_gram are set together)
            return wf.rownorm_p(2)
        m, r = wf.shape[0], half.shape[1]
        check_dense_size(m, 1, "a per-query vector")
        width = max(1, min(r, base.MAX_DENSE_ENTRIES // max(m, 1)))
        out = np.zeros(m)
        for s in range(0, r, width):
            out += np.sum(wf.matvec(half[:, s : s + width]) ** 2, axis=1)
        return out


class FactorPairs:
    """The per-pair factor values (``"trace"``, ``"profile"``, ``"max"``) of the routes, cached."""

    def __init__(self):
        self._grams: dict = {}
        self._values: dict[tuple, tuple] = {}

    def value(self, what: str, wf: Matrix, sf: StrategyFactor):
        key = (what, id(wf), id(sf))
        hit = self._values.get(key)
        if hit is None:  # wf is kept with its value, so its id cannot be reused meanwhile
            if what == "trace":
                value = sf.trace_with(wf, self._grams)
            elif what == "profile":
                value = sf.row_profile(wf)
            else:
                value = float(np.max(self.value("profile", wf, sf)))
            hit = self._values[key] = (wf, value)
        return hit[1]


class KroneckerRoute:
    """Union of Kronecker products × Kronecker (or Identity) strategy (HDMM Thm 5, 6)."""

    def __init__(self, W: Matrix, A: Kronecker | Identity):
        self.W = W
        self.a_factors = None if isinstance(A, Identity) else A.factors
        self._factors: dict[tuple[int, int], StrategyFactor] = {}
        self._identity = StrategyFactor(None)
        self._plans: dict[tuple[int, ...], list] = {}
        self.pairs = FactorPairs()

    def _groups(self, factors):
        """[(workload factor group, strategy factor)] for one term (alignments cached)."""
        a_factors = self.a_factors
        if a_factors is None:
            return [(f, self._identity) for f in factors]
        sizes = tuple(f.shape[1] for f in factors)
        plan = self._plans.get(sizes)
        if plan is None:
            plan = self._plans[sizes] = [
                (gw, self._factor(a_factors, ga.start, ga.stop))
                for gw, ga in align(list(sizes), [f.shape[1] for f in a_factors])
            ]
        return [(group(factors[gw]), sf) for gw, sf in plan]

    def _factor(self, a_factors: list[Matrix], start: int, stop: int) -> StrategyFactor:
        """The (cached) :class:`StrategyFactor` of the strategy factors ``start:stop``
        (``a_factors``: this route's)."""
        if (start, stop) not in self._factors:
            self._factors[start, stop] = StrategyFactor(group(a_factors[start:stop]))
        return self._factors[start, stop]

    def _term_value(self, what: str, c: float, factors) -> float:
        """``c`` times the product of the pairs' ``what`` values (``"trace"`` or ``"max"``)."""
        pairs = self._groups(factors)
        return math.prod((self.pairs.value(what, wf, sf) for wf, sf in pairs), start=c)

    @functools.cached_property
    def terms(self):
        return self.W.kron_terms()

    def _full_column_rank(self) -> bool:
        """A = ⊗A_i (or I) has full column rank, hence supports every workload."""
        a_factors = self.a_factors
        if a_factors is None:
            return True
        return all(self._factor(a_factors, k, k + 1).null is None for k in range(len(a_factors)))

    def check_support(self) -> None:
        if self._full_column_rank():
            return
        for c, factors in self.terms:
            if c == 0.0:
                continue
            checks = [sf.worst_row_residual(wf) for wf, sf in self._groups(factors)]
            if any(top == 0.0 for top, _ in checks):
                continue  # a zero factor: every query of this term is 0
            worst = max(res for _, res in checks)
            if worst > SUPPORT_RTOL:
                raise UnsupportedWorkloadError(
                    "the strategy does not support the workload: a query has a relative "
                    f"component {worst:.3g} outside the row space of a Kronecker factor of A"
                )

    def trace(self) -> float:
        if self.a_factors is None:
            return self.W.frobenius_sq()
        return sum((self._term_value("trace", c, fs) for c, fs in self.terms if c != 0.0), 0.0)

    def profile(self) -> np.ndarray:
        parts = []
        for c, factors in self.terms:
            groups = self._groups(factors)
            values = [self.pairs.value("profile", wf, sf) for wf, sf in groups]
            parts.append(c * kron_all(values, [wf.shape[0] for wf, _ in groups]))
        return np.concatenate(parts)

    def max_profile(self) -> float:
        return max([0.0] + [self._term_value("max", c, fs) for c, fs in self.terms])
