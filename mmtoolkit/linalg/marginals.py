"""The marginals algebra (HDMM §6.3 and App. A.4), in spectral form.

A marginal is an int bitmask over the attributes (bit ``i`` set: attribute ``i`` kept).
:class:`Marginals` (weighted marginals), :class:`MarginalsGram` (``Σ_a v_a ℂ(a)``, kept as its
spectrum on the residual subspaces ``P_B``), their error route (:class:`MarginalsRoute`, on
the down-closure of the keys), the marginal tables of the data (:func:`marginal_tables`) and
the pseudo-inverse in the marginal domain (:class:`MarginalsPinv`, :func:`expand_tables`).

User guide: docs/algorithms/marginals-algebra.md.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from numbers import Number

import numpy as np
from numpy.typing import ArrayLike
from scipy.fft import dct, idct

from ..checks import check_int
from ..threads import Workers, worker_threads
from . import base, kernels
from .base import Matrix, Product, TooLargeError, as_matrix, check_dense_size, check_p, peel
from .kronecker import Identity, Kronecker
from .normal_form import marginal_key
from .ranges import Total
from .route import SUPPORT_RTOL, UnsupportedWorkloadError, as_vector, common_sizes

#: Largest number of attributes for which dense 2^d coefficient vectors are built.
MAX_MARGINALS_DIM = 24

#: Relative threshold under which an eigenvalue is treated as zero by ``pinv``.
PINV_RTOL = 1e-12


# ============================================================================ helpers
def key_attrs(key: int, d: int) -> tuple[int, ...]:
    """The attributes (bit positions) of a marginal's bitmask ``key`` over ``d`` attributes."""
    return tuple(i for i in range(d) if (key >> i) & 1)


def _check_sizes(sizes) -> tuple[int, ...]:
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable):
        raise ValueError(f"sizes must be a sequence of positive integers, got {sizes!r}")
    out = tuple(check_int(n, f"sizes[{i}]", minimum=1) for i, n in enumerate(sizes))
    if not out:
        raise ValueError("sizes must name at least one attribute")
    return out


def _check_key(key, d: int) -> int:
    k = check_int(key, "marginal key")
    if not 0 <= k < (1 << d):
        raise ValueError(
            f"marginal key: must satisfy 0 <= key < 2^{d} (d = {d} attributes), got {k}"
        )
    return k


def check_dim(d: int, what: str) -> None:
    """Raise TooLargeError if the 2^d-subset algebra of ``d`` attributes is too large."""
    if d > MAX_MARGINALS_DIM:
        raise TooLargeError(
            f"{what} needs a dense vector over all 2^{d} attribute subsets "
            f"(d = {d} > MAX_MARGINALS_DIM = {MAX_MARGINALS_DIM})"
        )


def _kept_rows(sizes: tuple[int, ...], key: int) -> int:
    """``Π_{i ∈ key} n_i`` with Python ints, iterating only over the set bits."""
    r = 1
    while key:
        low = key & -key
        r *= sizes[low.bit_length() - 1]
        key ^= low
    return r


def _bit_view(f: np.ndarray, i: int) -> np.ndarray:
    """View of a length-2^d array as (high, bit i, low): ``[:, 0, :]`` is ``i ∉ a``."""
    return f.reshape(-1, 2, 1 << i)


def complement_products(sizes) -> np.ndarray:
    """``Π_{i ∉ a} n_i`` for every bitmask ``a``."""
    out = np.ones(1 << len(sizes))
    for i, n in enumerate(sizes):
        _bit_view(out, i)[:, 0, :] *= n
    return out


def _subspace_dims(sizes) -> np.ndarray:
    """``dim_B = Π_{i ∈ B} (n_i - 1)`` for every bitmask ``B``."""
    out = np.ones(1 << len(sizes))
    for i, n in enumerate(sizes):
        _bit_view(out, i)[:, 1, :] *= n - 1
    return out


def _bit_sweep(f: np.ndarray, d: int, into: int, op) -> np.ndarray:
    """A copy of ``f`` with ``g[.., into, ..] op= g[.., 1-into, ..]`` for every bit ``i``."""
    g = np.array(f, dtype=float)
    for i in range(d):
        v = _bit_view(g, i)
        op(v[:, into, :], v[:, 1 - into, :], out=v[:, into, :])
    return g


def superset_sum(f: np.ndarray, d: int) -> np.ndarray:
    """``g[B] = Σ_{a ⊇ B} f[a]`` (zeta transform over supersets)."""
    return _bit_sweep(f, d, 0, np.add)


def superset_mobius(g: np.ndarray, d: int) -> np.ndarray:
    """Inverse of :func:`superset_sum`."""
    return _bit_sweep(g, d, 0, np.subtract)


def subset_sum(f: np.ndarray, d: int) -> np.ndarray:
    """``g[E] = Σ_{a ⊆ E} f[a]``."""
    return _bit_sweep(f, d, 1, np.add)


def projected_traces(sizes: Sequence[int], traces: ArrayLike, sums: ArrayLike) -> np.ndarray:
    """``tr(P_B Y)`` for all ``B`` from ``tr(Y_i)``, ``1ᵀY_i1`` of ``Y = ⊗ Y_i`` (HDMM App. A.4).

    ``P_B = ⊗_{i∈B} (I − J/n_i) ⊗_{i∉B} J/n_i`` (``J`` all ones) is the projector on the
    residual subspace ``S_B``, so ``tr(P_B Y) = Π_{i∈B} (t_i − s_i/n_i) Π_{i∉B} s_i/n_i``.

    Parameters
    ----------
    sizes : sequence of int
        The attribute sizes ``n_i`` (``d`` of them, each at least 1).
    traces : array_like
        ``t_i = tr(Y_i)``, one per attribute.
    sums : array_like
        ``s_i = 1ᵀ Y_i 1``, the sum of the entries of ``Y_i``, one per attribute.

    Returns
    -------
    numpy.ndarray
        ``tr(P_B Y)`` for every bitmask ``B`` (bit ``i``: attribute ``i``), length ``2^d``.

    Raises
    ------
    ValueError
        When ``sizes`` is not a non-empty sequence of integers of at least 1, or ``traces``
        or ``sums`` does not have ``d`` values.
    TooLargeError
        When ``d`` exceeds :data:`MAX_MARGINALS_DIM`.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 6.3 (optimized marginal strategies) and Appendix A.4
    (marginals parameterization).
    """
    sizes = _check_sizes(sizes)
    d = len(sizes)
    check_dim(d, "projected_traces")
    t = np.asarray(traces, dtype=float).ravel()
    s = np.asarray(sums, dtype=float).ravel()
    if t.size != d or s.size != d:
        raise ValueError(
            f"traces and sums need one value per attribute ({d}), got {t.size} and {s.size}"
        )
    out = np.ones(1 << d)
    for i, n in enumerate(sizes):
        v = _bit_view(out, i)
        v[:, 0, :] *= s[i] / n
        v[:, 1, :] *= t[i] - s[i] / n
    return out


# ============================================================ down-closed families of subsets
#: Number of live subspaces up to which the support check searches the dead subspaces best
#: first instead of scanning all 2^d (:func:`_max_off_family`).
MAX_SEARCHED_LIVE = 50_000


def closed_family(keys, d: int) -> np.ndarray:
    """A down-closed family containing ``keys``, as sorted bitmasks: their down-closure, or all
    ``2^d`` subsets when it could be a quarter of them (the dense transforms are then as cheap)."""
    K = np.unique(np.fromiter(keys, dtype=np.int64))
    bound = sum(1 << int(k).bit_count() for k in K.tolist())
    if 4 * bound >= 1 << d:
        check_dim(d, "the subset lattice of a marginals Gram")
        return np.arange(1 << d, dtype=np.int64)
    for i in range(d):
        bit = np.int64(1 << i)
        has = K[(K & bit) != 0]
        if has.size:
            K = np.union1d(K, has ^ bit)
    return K


def key_products(keys: np.ndarray, a, b) -> np.ndarray:
    """``Π_{i∈B} a_i · Π_{i∉B} b_i`` for every bitmask ``B`` in ``keys``."""
    out = np.ones(keys.size)
    for i, (ai, bi) in enumerate(zip(a, b)):
        out *= np.where((keys >> i) & 1, float(ai), float(bi))
    return out


def locate(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(pos, found)``: ``keys[pos[found]] == wanted[found]`` for sorted ``keys``."""
    pos = np.searchsorted(keys, wanted)
    found = pos < keys.size
    found[found] = keys[pos[found]] == wanted[found]
    return pos, found


class SubsetLattice:
    """Subset-sum transforms on a down-closed family ``keys`` (sorted bitmasks), values aligned."""

    def __init__(self, keys: np.ndarray, d: int):
        self.keys, self.d = keys, d
        self.full = keys.size == 1 << d
        self._pairs = []
        if not self.full:
            for i in range(d):  # (position of B, position of B ∪ {i}) for B ∌ i, both in K
                bit = np.int64(1 << i)
                hi = np.flatnonzero(keys & bit)
                self._pairs.append((np.searchsorted(keys, keys[hi] ^ bit), hi))

    def superset_sum(self, f: np.ndarray) -> np.ndarray:
        """``g_B = Σ_{a ⊇ B} f_a`` (``f`` zero outside the family)."""
        return superset_sum(f, self.d) if self.full else self._sweep(f, down=True)

    def subset_sum(self, f: np.ndarray) -> np.ndarray:
        """``g_E = Σ_{B ⊆ E} f_B``."""
        return subset_sum(f, self.d) if self.full else self._sweep(f, down=False)

    def _sweep(self, f, down: bool, op=np.add) -> np.ndarray:
        g = np.array(f, dtype=float)
        for lo, hi in self._pairs:
            if down:
                g[lo] = op(g[lo], g[hi])
            else:
                g[hi] = op(g[hi], g[lo])
        return g

    def superset_min(self, f: np.ndarray) -> np.ndarray:
        """``g_B = min_{a ⊇ B} f_a`` (``f`` = +inf outside the family)."""
        if self.full:
            return _bit_sweep(f, self.d, 0, np.minimum)
        return self._sweep(f, down=True, op=np.minimum)


# ============================================================================ Marginal
class Marginal(Kronecker):
    """One marginal ``Q_a = ⊗_i (I_{n_i} if bit i of a else 1ᵀ_{n_i})`` (HDMM §6.3, App. A.4):
    a :class:`Kronecker` of :class:`Identity` / :class:`Total` with ``sizes`` and ``key``.

    Parameters
    ----------
    sizes : sequence of int
        The attribute sizes ``n_i`` (``d`` of them, each at least 1).
    key : int
        The marginal's bitmask, ``0 ≤ key < 2^d``: bit ``i`` set keeps attribute ``i``
        (an identity factor), else it is summed out (a total); 0 is the total count.

    Raises
    ------
    ValueError
        When ``sizes`` is not a non-empty sequence of integers of at least 1, or ``key`` is
        not an integer in ``0 ≤ key < 2^d``.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 6.3 (optimized marginal strategies) and Appendix A.4
    (marginals parameterization).
    """

    def __init__(self, sizes: Sequence[int], key: int):
        sizes = _check_sizes(sizes)
        key = _check_key(key, len(sizes))
        super().__init__([Identity(n) if (key >> i) & 1 else Total(n) for i, n in enumerate(sizes)])
        self.sizes = sizes
        self.key = key

    def __repr__(self):
        return f"Marginal(sizes={self.sizes}, key={self.key:#b})"


class MarginalFactors(Sequence):
    """The factors of the marginal ``key`` on ``sizes``, picked on access from the shared ``pairs``;
    ``marginal = (sizes, key)`` for the normal form."""

    def __init__(self, sizes: tuple[int, ...], key: int, pairs):
        self.marginal = (sizes, key)
        self._pairs = pairs

    def __len__(self):
        return len(self._pairs)

    def __getitem__(self, i):
        key = self.marginal[1]
        if isinstance(i, slice):
            return [self._pairs[j][(key >> j) & 1] for j in range(*i.indices(len(self)))]
        j = range(len(self))[i]
        return self._pairs[j][(key >> j) & 1]

    def __repr__(self):
        return f"MarginalFactors(sizes={self.marginal[0]}, key={self.marginal[1]:#b})"


# =========================================================================== Marginals
class Marginals(Matrix):
    """Weighted marginals ``[θ_a Q_a]``, keys ascending (HDMM §6.3, App. A.4): ``{key: θ_a}``.

    Shape ``(Σ_a Π_{i∈a} n_i, Π_i n_i)``. Every column has the norm ``Σ_a |θ_a|^p``; the Gram
    is a :class:`MarginalsGram` (dense ``2^d`` algebra: ``d ≤ MAX_MARGINALS_DIM``), the
    pseudo-inverse works in the marginal domain, and releases are measured from the records'
    marginal tables (no ``N``-cell histogram).

    Parameters
    ----------
    sizes : sequence of int
        The attribute sizes ``n_i`` (``d`` of them, each at least 1).
    weights : mapping of int to float
        ``{key: θ_a}``: each marginal's bitmask (``0 ≤ key < 2^d``, bit ``i`` keeps
        attribute ``i``) and its finite weight; zero weights are dropped.

    Raises
    ------
    ValueError
        When ``sizes`` is not a non-empty sequence of integers of at least 1, ``weights`` is
        not a mapping, a key is not an integer in ``0 ≤ key < 2^d``, a weight is not a
        finite real number, or no weight is nonzero.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 6.3 (optimized marginal strategies) and Appendix A.4
    (marginals parameterization).
    """

    def __init__(self, sizes: Sequence[int], weights: Mapping[int, float]):
        self.sizes = _check_sizes(sizes)
        d = len(self.sizes)
        if not isinstance(weights, Mapping):
            raise ValueError(
                f"weights must be a mapping {{key: weight}}, got {type(weights).__name__}"
            )
        items = []
        for key, w in weights.items():
            k = _check_key(key, d)
            try:
                w = float(w)
            except (TypeError, ValueError):
                raise ValueError(
                    f"weight of marginal {k} must be a real number, got {w!r}"
                ) from None
            if not math.isfinite(w):
                raise ValueError(f"weight of marginal {k} must be finite, got {w!r}")
            if w != 0.0:
                items.append((k, w))
        if not items:
            raise ValueError("Marginals needs at least one marginal with a nonzero weight")
        items.sort()
        self.weights = dict(items)
        self.keys = tuple(k for k, _ in items)
        self._rows = [_kept_rows(self.sizes, k) for k in self.keys]
        self.shape = (sum(self._rows), math.prod(self.sizes))

    @property
    def d(self) -> int:
        """The number of attributes.

        Returns
        -------
        int
            ``len(self.sizes)``.
        """
        return len(self.sizes)

    def _matmat(self, X):
        k = X.shape[1]
        tables = marginal_tables(self.sizes, X, self.keys)
        return np.vstack(
            [theta * tables[key].reshape(-1, k) for key, theta in self.weights.items()]
        )

    def _rmatmat(self, Y):
        k = Y.shape[1]
        out = np.zeros(self.sizes + (k,))
        off = 0
        for (key, theta), r in zip(self.weights.items(), self._rows, strict=True):
            shape = [n if (key >> i) & 1 else 1 for i, n in enumerate(self.sizes)] + [k]
            out += theta * Y[off : off + r].reshape(shape)
            off += r
        return out.reshape(self.shape[1], k)

    def blocks(self) -> list[tuple[float, Marginal]]:
        """``[(θ_a, Marginal(sizes, a))]`` in ascending key order.

        Returns
        -------
        list of (float, Marginal)
            Each marginal's weight and unweighted :class:`Marginal`, in row order.
        """
        return [(theta, Marginal(self.sizes, key)) for key, theta in self.weights.items()]

    def gram(self):
        check_dim(self.d, "Marginals.gram()")
        return MarginalsGram(self.sizes, {k: t * t for k, t in self.weights.items()})

    def pinv(self):
        return Product(self.gram().pinv(), self.T)

    def colnorm_p(self, p):
        check_p(p)
        return float(sum(abs(t) ** p for t in self.weights.values()))

    def rownorm_p(self, p):
        check_p(p)  # a row of marginal a sums Π_{i∉a} n_i cells with weight θ_a
        check_dense_size(self.shape[0], 1, "row norms of Marginals")
        return np.concatenate(
            [np.full(r, abs(t) ** p * (self.shape[1] // r))
             for t, r in zip(self.weights.values(), self._rows, strict=True)]
        )

    def dense(self):
        check_dense_size(*self.shape, "dense() of Marginals")
        return np.vstack([theta * blk.dense() for theta, blk in self.blocks()])

    # ---------------------------------------------------------------- strategy kind
    @functools.cached_property
    def _factor_pairs(self):
        return [(Total(n), Identity(n)) for n in self.sizes]

    def kron_terms(self, signed=False):
        pairs = self._factor_pairs
        return [
            (theta if signed else theta**2, MarginalFactors(self.sizes, key, pairs))
            for key, theta in self.weights.items()
        ]

    def frobenius_sq(self):
        return float(sum(t * t for t in self.weights.values())) * float(self.shape[1])

    def pinv_operator(self):
        return MarginalsPinv(self)

    def _noisy_tables(self, Y) -> dict[int, tuple[float, np.ndarray]]:
        """``{a: (θ_a, block a of Y as a table)}``, each table with a trailing column axis."""
        if Y.ndim != 2 or Y.shape[0] != self.shape[0]:
            raise ValueError(
                f"y has {Y.shape[0]} answers but the strategy has {self.shape[0]} rows"
            )
        tables, off = {}, 0
        for (key, theta), r in zip(self.weights.items(), self._rows, strict=True):
            shape = tuple(self.sizes[i] for i in key_attrs(key, self.d))
            tables[key] = (theta, Y[off : off + r].reshape(shape + (Y.shape[1],)))
            off += r
        return tables

    def answer_records(self, records):
        """``A x`` from the records' marginal tables (no N-cell histogram).

        Parameters
        ----------
        records : mmtoolkit.records.Records
            Integer-coded records over a domain with this strategy's attribute sizes.

        Returns
        -------
        numpy.ndarray
            The ``m`` answers ``A x`` (float64), marginal by marginal in ascending key order,
            each table in C order.

        Raises
        ------
        ValueError
            When the records' attribute sizes differ from the strategy's.
        TooLargeError
            When a marginal table exceeds :data:`MAX_DENSE_ENTRIES` cells.
        """
        if tuple(self.sizes) != tuple(records.domain.sizes):
            raise ValueError(
                f"the strategy is defined on attribute sizes {list(self.sizes)}, the records "
                f"on {list(records.domain.sizes)}"
            )
        return np.concatenate([
            theta * records.marginal(key_attrs(key, self.d)).ravel().astype(float)
            for key, theta in self.weights.items()
        ])

    def workload_answers(self, W, y):
        """``W A⁺ y`` for a marginals workload ``W`` without the ``N``-cell ``x̂`` (HDMM §6.3,
        App. A.4), ``y`` one release or ``m_A x R``; None for any other workload.

        Parameters
        ----------
        W : Matrix or array_like
            The workload: a (weighted) :class:`Marginals` on this strategy's sizes is
            answered; anything else gives None.
        y : array_like
            The noisy strategy answers: one release (length ``m_A``) or ``R`` of them as the
            columns of an ``m_A x R`` array.

        Returns
        -------
        numpy.ndarray or None
            ``W A⁺ y``: ``m_W`` answers (``m_W x R`` for a 2-D ``y``), in ``W``'s row order;
            None when ``W`` is not a weighted union of marginals.

        Raises
        ------
        ValueError
            When ``W``'s attribute sizes differ from the strategy's, or ``y`` does not have
            ``m_A`` rows.

        References
        ----------
        McKenna et al. 2018, HDMM, Section 6.3 and Appendix A.4.
        """
        w, wbase = peel(as_matrix(W))
        if not isinstance(wbase, Marginals):
            return None
        sizes, d = self.sizes, self.d
        if tuple(wbase.sizes) != sizes:
            raise ValueError(
                f"workload attribute sizes {list(wbase.sizes)} differ from the strategy's "
                f"{list(sizes)}"
            )
        y = np.asarray(y, dtype=float)
        vec = y.ndim == 1
        Y = y[:, None] if vec else y
        R = Y.shape[1]
        residuals = Residuals(self, Y)
        mu_pinv = residuals.mu_pinv
        out = []
        for T, omega in wbase.weights.items():
            T_attrs = key_attrs(T, d)
            out_scale = float(math.prod(n for i, n in enumerate(sizes) if not (T >> i) & 1))
            ans = np.zeros(tuple(sizes[i] for i in T_attrs) + (R,))
            sub = T
            while True:  # every B ⊆ T
                if sub in mu_pinv:
                    bshape = _broadcast_shape(sizes, sub, T, R)
                    ans = ans + mu_pinv[sub] * residuals[sub].reshape(bshape)
                if sub == 0:
                    break
                sub = (sub - 1) & T
            out.append((w * omega * out_scale * ans).reshape(-1, R))
        res = np.concatenate(out, axis=0)
        return res[:, 0] if vec else res

    def __repr__(self):
        return f"Marginals(sizes={self.sizes}, {len(self.keys)} marginals)"


#: Larger tables are reduced one attribute at a time (:func:`table_plan`).
PLAN_DIRECT_CELLS = 1 << 16
#: Entries of a table's chunk read for several children at once (second-level cache).
CHUNK_ENTRIES = 1 << 17
#: Entries of a table per piece of work of one thread (the compiled kernels).
PIECE_ENTRIES = 1 << 22
#: Fraction of a table's cells its children computed together may hold.
GROUP_FRACTION = 0.25


def table_plan(sizes, keys) -> list[tuple[int, int]]:
    """``[(key, parent)]`` in computation order for the marginal tables ``keys`` of the data
    (docs/algorithms/marginals-algebra.md, "Marginal tables of the data")."""
    full = (1 << len(sizes)) - 1
    planned = {full}
    order = []

    def add(key):
        while key not in planned:
            parent = min(
                (q for q in planned if q & key == key), key=lambda q: (_kept_rows(sizes, q), q)
            )
            extra = parent & ~key
            if extra & (extra - 1) and _kept_rows(sizes, parent) > PLAN_DIRECT_CELLS:
                add(parent & ~(1 << (extra.bit_length() - 1)))
                continue
            planned.add(key)
            order.append((key, parent))

    for key in sorted(keys, key=lambda k: (-bin(k).count("1"), k)):
        add(key)
    return order


def _children(plan) -> dict[int, list[int]]:
    """``{parent: [children in plan order]}`` of a :func:`table_plan`."""
    out: dict[int, list[int]] = {}
    for key, parent in plan:
        out.setdefault(parent, []).append(key)
    return out


def _child_groups(sizes, parent: int, children) -> list[tuple[int | None, list]]:
    """The ``children`` of ``parent``'s table in groups computed, or added back, together:
    ``[(inner, [(child, (a, n, b))])]``; ``(None, [(child, None)])`` for a multi-attribute drop."""
    attrs = key_attrs(parent, len(sizes))
    shape = [sizes[i] for i in attrs]
    cells = math.prod(shape)
    single: list[tuple[int, int]] = []
    groups: list[tuple[int | None, list]] = []
    for key in children:
        extra = parent & ~key
        if extra & (extra - 1):
            groups.append((None, [(key, None)]))
        else:
            single.append((attrs.index(extra.bit_length() - 1), key))
    members: list = []
    for axis, key in sorted(single, reverse=True):
        held = sum(cells // shape[a] for a, _ in members) + cells // shape[axis]
        if members and (math.prod(shape[axis:]) > CHUNK_ENTRIES or held > GROUP_FRACTION * cells):
            groups.append(_chunk_geometry(shape, members))
            members = []
        members.append((axis, key))
    if members:
        groups.append(_chunk_geometry(shape, members))
    return groups


def _chunk_geometry(shape, members) -> tuple[int, list]:
    """``(inner, [(child, (a, n, b))])`` of ``members`` ``[(dropped axis, key)]`` of a table."""
    h = min(axis for axis, _ in members)
    geo = [(key, (math.prod(shape[h:axis]), shape[axis], math.prod(shape[axis + 1 :])))
           for axis, key in members]  # fmt: skip
    return math.prod(shape[h:]), geo


def _fused(inner, cells: int, columns: int, *tables: np.ndarray) -> bool:
    """Whether the compiled kernels take a group (one-attribute drops, large one-column table)."""
    large = inner is not None and cells > PLAN_DIRECT_CELLS and columns == 1
    return large and all(t.dtype == np.float64 for t in tables) and kernels.compiled() is not None


def _run_chunks(kernel, flat: np.ndarray, inner: int, geo, arrays, *args) -> None:
    """``kernel(flat, inner, geo, arrays, o0, o1, *args)`` over the chunks of the flat table,
    in pieces of :data:`PIECE_ENTRIES` entries (cut alike for any thread count) on threads."""
    outer = flat.size // inner
    step = max(1, PIECE_ENTRIES // inner)
    starts = list(range(0, outer, step))
    k = worker_threads() if len(starts) > 1 else 1
    geo = np.array([g for _, g in geo], dtype=np.int64)

    def run(part):
        for o0 in part:
            kernel(flat, inner, geo, arrays, o0, min(o0 + step, outer), *args)

    with Workers(k) as workers:
        workers.run([functools.partial(run, starts[j * len(starts) // k :
                                              (j + 1) * len(starts) // k])
                     for j in range(k)])  # fmt: skip


def _sum_group(sizes, parent: int, table: np.ndarray, inner, geo) -> dict[int, np.ndarray]:
    """The tables of one group of children, summed from ``parent``'s ``table``."""
    d = len(sizes)
    if not (_fused(inner, table.size, table.shape[-1], table) and table.flags.c_contiguous):
        attrs = key_attrs(parent, d)
        return {
            key: table.sum(axis=tuple(j for j, i in enumerate(attrs) if not (key >> i) & 1))
            for key, _ in geo
        }
    arrays = tuple(np.empty(table.size // n) for _, (_, n, _) in geo)
    _run_chunks(kernels.compiled().drop_sums, table.reshape(-1), inner, geo, arrays)
    return {
        key: arr.reshape(tuple(sizes[i] for i in key_attrs(key, d)) + (1,))
        for (key, _), arr in zip(geo, arrays)
    }


def marginal_tables(sizes, X, keys) -> dict[int, np.ndarray]:
    """The marginal tables ``{key: Q_key X}`` of ``X`` (``N x k``, cells in C order over ``sizes``),
    each of shape ``(n_i for i in key) + (k,)``, computed along :func:`table_plan`."""
    sizes = _check_sizes(sizes)
    k = X.shape[1]
    full = (1 << len(sizes)) - 1
    keys = set(keys)
    tables = {full: X.reshape(sizes + (k,))}
    _sum_children(sizes, full, _children(table_plan(sizes, keys)), tables, keys)
    if full not in keys:
        del tables[full]
    return tables


def _sum_children(sizes, parent: int, children: dict, tables: dict, keys: set) -> None:
    """The tables below ``parent``'s, depth first; intermediate ones (not in ``keys``) dropped."""
    for inner, geo in _child_groups(sizes, parent, children.get(parent, ())):
        tables.update(_sum_group(sizes, parent, tables[parent], inner, geo))
        for key, _ in geo:
            _sum_children(sizes, key, children, tables, keys)
            if key not in keys:
                del tables[key]  # an intermediate table no longer needed


class Residuals:
    """The noisy marginals projected on each residual subspace (HDMM App. A.4): ``self[B]`` is
    ``z_B`` over ``B``, trailing column axis (cached); ``mu_pinv``: ``{B: 1/μ_B}``, live ``B``."""

    def __init__(self, A: Marginals, Y: np.ndarray):
        self.sizes, self.d, self.R = A.sizes, A.d, Y.shape[1]
        self.tables = A._noisy_tables(Y)
        keys, mu = A.gram().live_spectrum()
        self.mu_pinv = dict(zip(keys.tolist(), (1.0 / mu).tolist(), strict=True))
        self._cache: dict[int, np.ndarray] = {}
        self._means: dict[tuple[int, int], np.ndarray] = {}

    def __getitem__(self, B: int) -> np.ndarray:
        if B not in self._cache:
            self._cache[B] = self.take(B)
        return self._cache[B]

    def take(self, B: int) -> np.ndarray:
        """``z_B`` computed afresh and not cached (for a caller that uses it once)."""
        shape = tuple(self.sizes[i] for i in key_attrs(B, self.d)) + (self.R,)
        z = np.zeros(shape)
        for S, (theta, _) in self.tables.items():
            if S & B == B:
                z += theta * self.mean(S, B)
        for j in range(len(shape) - 1):  # ⊗_{i∈B} P⊥_i: centre every kept axis
            z -= z.mean(axis=j, keepdims=True)
        return z

    def mean(self, S: int, B: int) -> np.ndarray:
        """The mean of ``S``'s noisy table over ``S \\ B``, from the cached mean over one
        attribute fewer."""
        if B == S:
            return self.tables[S][1]
        m = self._means.get((S, B))
        if m is None:
            j = (S & ~B) & -(S & ~B)  # the lowest attribute averaged out
            parent = B | j
            m = self.mean(S, parent).mean(axis=(parent & (j - 1)).bit_count())
            self._means[(S, B)] = m
        return m


def _broadcast_shape(sizes, key: int, within: int, R: int) -> tuple[int, ...]:
    """The shape that broadcasts a table over ``key`` against one over ``within ⊇ key``."""
    return tuple(sizes[i] if (key >> i) & 1 else 1 for i in key_attrs(within, len(sizes))) + (R,)


def _between_sums(mu: dict, S: int, d: int):
    """``(C, c_{S,C})`` for every ``C ⊆ S`` with ``c_{S,C} = Σ_{C⊆B⊆S} (−1)^{|B\\C|} μ[B]``
    nonzero (``mu``: ``{B: μ_B}``, absent keys 0)."""
    attrs = key_attrs(S, d)
    keys = np.zeros(1 << len(attrs), dtype=np.int64)
    for j, i in enumerate(attrs):  # local mask (bit j = attribute attrs[j]) -> global key
        keys[1 << j : 2 << j] = keys[: 1 << j] + (1 << i)
    f = np.array([mu.get(k, 0.0) for k in keys.tolist()])
    for j in range(len(attrs)):
        g = f.reshape(-1, 2, 1 << j)
        g[:, 0, :] -= g[:, 1, :]
    nz = np.flatnonzero(f)
    return zip(keys[nz].tolist(), f[nz].tolist(), strict=True)


class MarginalsPinv(Matrix):
    """``A⁺ = (AᵀA)⁺ Aᵀ`` of weighted marginals in the marginal domain (HDMM §6.3, App. A.4)."""

    def __init__(self, A: Marginals):
        self.A = A
        self.shape = (A.shape[1], A.shape[0])

    def tables(self, Y) -> dict[int, np.ndarray]:
        """The small tables ``t_C`` with ``A⁺ Y = Σ_C Q_Cᵀ t_C`` (each over ``C``'s attributes
        with a trailing column axis), in closed form with no centring."""
        res = Residuals(self.A, Y)
        acc: dict[int, np.ndarray] = {}
        for S, (theta, _) in res.tables.items():
            for C, c in _between_sums(res.mu_pinv, S, self.A.d):
                term = (theta * c) * res.mean(S, C)
                if C in acc:
                    acc[C] += term
                else:
                    acc[C] = term
        if not acc:  # a zero spectrum: A⁺ = 0
            acc[0] = np.zeros(Y.shape[1])
        return acc

    def _matmat(self, Y):
        out = expand_tables(self.A.sizes, self.tables(Y), consume=True)
        return out.reshape(self.shape[0], Y.shape[1])

    def _rmatmat(self, X):
        return self.A._matmat(self.A.gram().pinv()._matmat(X))

    def pinv(self):
        return self.A


def expand_tables(sizes, tables, consume: bool = False) -> np.ndarray:
    """``Σ_a Q_aᵀ t_a`` of shape ``sizes + (R,)`` for tables ``{a: t_a}`` (HDMM App. A.4), along
    :func:`table_plan` in reverse; the tables are modified in place only with ``consume=True``."""
    sizes = _check_sizes(sizes)
    if not tables:
        raise ValueError("expand_tables needs at least one table")
    full = (1 << len(sizes)) - 1
    acc, own = dict(tables), set(tables) if consume else set()
    R = next(iter(tables.values())).shape[-1]
    _add_children(sizes, full, _children(table_plan(sizes, list(tables))), acc, own, R)
    return acc[full].reshape(sizes + (R,))


def _add_children(sizes, parent: int, children: dict, acc: dict, own: set, R: int) -> None:
    """Complete ``parent``'s table in ``acc`` from the tables below it, depth first."""
    for inner, geo in _child_groups(sizes, parent, children.get(parent, ())):
        for key, _ in geo:
            _add_children(sizes, key, children, acc, own, R)
        _add_group(sizes, parent, inner, [(key, g, acc.pop(key)) for key, g in geo], acc, own,
                   R)  # fmt: skip


def _add_group(sizes, parent: int, inner, group, acc: dict, own: set, R: int) -> None:
    """``acc[parent] += Σ Q_cᵀ t_c`` over one group of children ``[(c, (a, n, b), t_c)]``; a
    parent not in ``acc`` is written by the first, a given one (not in ``own``) copied."""
    shape = _broadcast_shape(sizes, parent, parent, R)
    given = acc.get(parent)
    tables = [t for _, _, t in group]
    if not _fused(inner, math.prod(shape), R, *tables, *([] if given is None else [given])):
        for key, _, child in group:
            child = child.reshape(_broadcast_shape(sizes, key, parent, R))
            if parent in own:
                acc[parent] += child
            elif parent in acc:  # a given table: added into a copy
                acc[parent] = acc[parent] + child
                own.add(parent)
            else:  # the first contribution writes the parent (the cells for the data's key)
                acc[parent] = np.broadcast_to(child, shape).copy()
                own.add(parent)
        return
    if given is None:
        out = np.empty(shape)
    elif parent in own and given.flags.c_contiguous:
        out = given
    else:  # a given table: added into a copy
        out = np.array(given, order="C")
    acc[parent] = out
    own.add(parent)
    _run_chunks(kernels.compiled().add_expanded, out.reshape(-1), inner,
                [(key, g) for key, g, _ in group], tuple(_kernel_input(t) for t in tables),
                given is None)  # fmt: skip


def _kernel_input(table: np.ndarray) -> np.ndarray:
    """A float64 table flat, C-ordered and writeable, copied only when it is not already."""
    flat = np.ascontiguousarray(table).reshape(-1)
    return flat if flat.flags.writeable else flat.copy()


# ======================================================================= MarginalsGram
class MarginalsGram(base.Symmetric):
    """``𝔾(v) = Σ_a v_a ℂ(a)``, ``ℂ(a) = ⊗_i (I if bit i of a else J)`` (HDMM §6.3, App. A.4);
    ``v``: a length-2^d array, or a mapping ``{key: v_key}`` (kept: the closure route).

    ``J`` is the ``n_i x n_i`` all-ones matrix. The Gram is diagonal in the residual
    subspaces ``S_B`` (eigenvalue ``μ_B``, :meth:`spectrum`), so its products, pseudo-inverse
    and error route are computed from ``2^d`` numbers (or from the down-closure of the keys
    when ``v`` is a mapping). ``MarginalsGram`` objects of one ``sizes`` add, subtract,
    multiply (``@``) and scale in closed form. Shape ``N x N``, ``N = Π_i n_i``.

    Parameters
    ----------
    sizes : sequence of int
        The attribute sizes ``n_i`` (``d`` of them, each at least 1).
    v : array_like or mapping of int to float
        The coefficients ``v_a``: ``2^d`` finite numbers indexed by the bitmask ``a``, or a
        mapping ``{a: v_a}`` of finite numbers (keys ``0 ≤ a < 2^d``; absent keys are 0).

    Raises
    ------
    ValueError
        When ``sizes`` is not a non-empty sequence of integers of at least 1, an array ``v``
        does not have ``2^d`` values, a key is not an integer in ``0 ≤ a < 2^d``, or a
        coefficient is not finite.
    TooLargeError
        When ``d`` exceeds :data:`MAX_MARGINALS_DIM`.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 6.3 (optimized marginal strategies) and Appendix A.4
    (marginals parameterization).
    """

    def __init__(self, sizes: Sequence[int], v: ArrayLike | Mapping[int, float]):
        self.sizes = _check_sizes(sizes)
        d = len(self.sizes)
        check_dim(d, "MarginalsGram")
        self._v: np.ndarray | None = None
        self._keys: np.ndarray | None = None
        self._coefs: np.ndarray | None = None
        self._sparse = isinstance(v, Mapping)  # coefficients given by key: the closure route
        if isinstance(v, Mapping):
            keys = [_check_key(k, d) for k in v]
            coefs = np.array([float(c) for c in v.values()], dtype=float)
            order = np.argsort(keys, kind="stable")
            self._keys = np.array(keys, dtype=np.int64)[order]
            self._coefs = coefs[order]
            if np.unique(self._keys).size != self._keys.size:
                raise ValueError("MarginalsGram coefficients name a marginal key twice")
            values = self._coefs
        else:
            self._v = np.array(v, dtype=float).ravel()
            if self._v.size != 1 << d:
                raise ValueError(
                    f"MarginalsGram needs one coefficient per attribute subset "
                    f"(2^{d} = {1 << d}), got {self._v.size}"
                )
            values = self._v
        if not np.all(np.isfinite(values)):
            raise ValueError("MarginalsGram coefficients must be finite")
        N = math.prod(self.sizes)
        self.shape = (N, N)
        self._mu: np.ndarray | None = None
        self._bidx: np.ndarray | None = None

    @property
    def d(self) -> int:
        """The number of attributes.

        Returns
        -------
        int
            ``len(self.sizes)``.
        """
        return len(self.sizes)

    @property
    def v(self) -> np.ndarray:
        """The dense coefficient vector over all 2^d subsets.

        Returns
        -------
        numpy.ndarray
            ``v_a`` for every bitmask ``a`` (length ``2^d``; cached, not a copy).
        """
        if self._v is None:
            keyed = self._by_key()
            if keyed is not None:
                v = np.zeros(1 << self.d)
                v[keyed[0]] = keyed[1]
            else:  # a Gram given by its spectrum
                mu = self._mu
                assert mu is not None  # every MarginalsGram has coefficients or a spectrum
                v = superset_mobius(mu, self.d) / complement_products(self.sizes)
            self._v = v
        return self._v

    def _by_key(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(keys, coefficients)``, keys ascending, of a Gram given by key; else None."""
        keys, coefs = self._keys, self._coefs
        return (keys, coefs) if self._sparse and keys is not None and coefs is not None else None

    def _combine(self, other: MarginalsGram, sign: float) -> MarginalsGram:
        """``self + sign · other``, keyed when both are (coefficients add key by key)."""
        mine, theirs = self._by_key(), other._by_key()
        if mine is None or theirs is None:
            return MarginalsGram(self.sizes, self.v + sign * other.v)
        coefs = dict(zip(mine[0].tolist(), mine[1].tolist()))
        for k, c in zip(theirs[0].tolist(), theirs[1].tolist()):
            coefs[k] = coefs.get(k, 0.0) + sign * c
        return MarginalsGram(self.sizes, {k: c for k, c in coefs.items() if c != 0.0})

    def _scaled(self, c: float) -> MarginalsGram:
        keyed = self._by_key()
        if keyed is not None:
            coefs = (c * keyed[1]).tolist()
            return MarginalsGram(self.sizes, dict(zip(keyed[0].tolist(), coefs)))
        return MarginalsGram(self.sizes, c * self.v)

    # ------------------------------------------------------------------ spectrum
    @classmethod
    def from_spectrum(cls, sizes, mu) -> MarginalsGram:
        """The Gram whose eigenvalue on ``S_B`` is ``mu[B]`` (Möbius transform back to ``v``).

        Parameters
        ----------
        sizes : sequence of int
            The attribute sizes ``n_i`` (``d`` of them, each at least 1).
        mu : array_like
            ``2^d`` finite eigenvalues, indexed by the bitmask ``B``.

        Returns
        -------
        MarginalsGram
            The Gram with that spectrum (its coefficients ``v`` computed when asked).

        Raises
        ------
        ValueError
            When ``sizes`` is not a non-empty sequence of integers of at least 1, or ``mu``
            does not have ``2^d`` finite values.
        TooLargeError
            When ``d`` exceeds :data:`MAX_MARGINALS_DIM`.
        """
        sizes = _check_sizes(sizes)
        d = len(sizes)
        check_dim(d, "MarginalsGram.from_spectrum")
        mu = np.array(mu, dtype=float).ravel()
        if mu.size != 1 << d:
            raise ValueError(f"spectrum needs 2^{d} = {1 << d} values, got {mu.size}")
        if not np.all(np.isfinite(mu)):
            raise ValueError("spectrum values must be finite")
        out = cls(sizes, {})  # no coefficients yet: v is the Möbius transform of mu, on demand
        out._sparse, out._keys, out._coefs, out._mu = False, None, None, mu
        return out

    def spectrum(self) -> np.ndarray:
        """``μ_B = Σ_{a ⊇ B} v_a Π_{i∉a} n_i`` for every bitmask ``B``.

        Returns
        -------
        numpy.ndarray
            The eigenvalue ``μ_B`` on each residual subspace ``S_B``, length ``2^d`` (a copy).
        """
        if self._mu is None:
            self._mu = superset_sum(self.v * complement_products(self.sizes), self.d)
        return self._mu.copy()

    def live_spectrum(self) -> tuple[np.ndarray, np.ndarray]:
        """``(B, μ_B)`` over the live residual subspaces, ``B`` ascending (keys' down-closure).

        A subspace is live when its dimension is positive and ``|μ_B|`` exceeds
        ``PINV_RTOL = 1e-12`` times the largest such ``|μ|``. For a Gram given by key, only
        the down-closure of its keys is visited (no ``2^d`` array for low orders).

        Returns
        -------
        tuple of numpy.ndarray
            The live bitmasks ``B`` (int64, ascending) and their eigenvalues ``μ_B``.
        """
        sizes = self.sizes
        keyed = self._by_key()
        if keyed is None:
            mu = self.spectrum()
            live = np.flatnonzero(self._live(mu, self.dims()))
            return live.astype(np.int64), mu[live]
        keys, coefs = keyed
        lattice = SubsetLattice(closed_family(keys, self.d), self.d)
        K = lattice.keys
        f = np.zeros(K.size)
        f[np.searchsorted(K, keys)] = coefs * key_products(keys, [1] * self.d, sizes)
        mu = lattice.superset_sum(f)
        live = self._live(mu, key_products(K, [n - 1 for n in sizes], [1] * self.d))
        return K[live], mu[live]

    def dims(self) -> np.ndarray:
        """``dim_B = Π_{i∈B}(n_i - 1)`` (floats; 0 when some kept attribute has size 1).

        Returns
        -------
        numpy.ndarray
            The dimension of each residual subspace ``S_B``, length ``2^d``.
        """
        return _subspace_dims(self.sizes)

    def _live(self, mu, dims):
        live = dims > 0
        scale = np.max(np.abs(mu[live]), initial=0.0)
        return live & (np.abs(mu) > PINV_RTOL * scale)

    # ------------------------------------------------------------------ algebra
    def __matmul__(self, other):
        if isinstance(other, MarginalsGram) and other.sizes == self.sizes:
            return MarginalsGram.from_spectrum(self.sizes, self.spectrum() * other.spectrum())
        return super().__matmul__(other)

    def __add__(self, other):
        if isinstance(other, MarginalsGram) and other.sizes == self.sizes:
            return self._combine(other, 1.0)
        return super().__add__(other)

    def __sub__(self, other):
        if isinstance(other, MarginalsGram) and other.sizes == self.sizes:
            return self._combine(other, -1.0)
        return super().__sub__(other)

    def __mul__(self, c):
        if isinstance(c, Number):
            return self._scaled(float(c))
        return NotImplemented

    __rmul__ = __mul__

    def __neg__(self):
        return self._scaled(-1.0)

    def gram(self):
        return self @ self

    def gram_route(self, W):
        """Any strategy whose Gram is this marginals Gram: the spectral route.

        Parameters
        ----------
        W : Matrix
            The workload, a union of Kronecker products.

        Returns
        -------
        ErrorRoute or None
            The spectral route, or None when ``W``'s Kronecker terms do not all have this
            Gram's attribute sizes.

        References
        ----------
        McKenna et al. 2018, HDMM, Section 6.3 and Appendix A.4.
        """
        return MarginalsRoute.build(W, self)

    def pinv_spectrum(self) -> np.ndarray:
        """The spectrum of ``self.pinv()``: 1/μ_B on live subspaces, exactly 0 elsewhere.

        Returns
        -------
        numpy.ndarray
            Length ``2^d``, indexed by the bitmask ``B``.
        """
        mu = self.spectrum()
        live = self._live(mu, self.dims())
        inv = np.zeros_like(mu)
        inv[live] = 1.0 / mu[live]
        return inv

    def pinv(self):
        return MarginalsGram.from_spectrum(self.sizes, self.pinv_spectrum())

    def inverse(self):
        """The inverse Gram, refused when the Gram is singular (:meth:`pinv` is not).

        Returns
        -------
        MarginalsGram
            The Gram with eigenvalue ``1/μ_B`` on every residual subspace of positive
            dimension.

        Raises
        ------
        ValueError
            When some residual subspace of positive dimension has a zero eigenvalue (by the
            rule of :meth:`live_spectrum`).
        """
        mu = self.spectrum()
        dims = self.dims()
        dead = (dims > 0) & ~self._live(mu, dims)
        if np.any(dead):
            raise ValueError(
                f"MarginalsGram is singular: {int(np.count_nonzero(dead))} residual subspace(s) "
                "have a zero eigenvalue; use pinv()"
            )
        inv = np.zeros_like(mu)
        inv[dims > 0] = 1.0 / mu[dims > 0]
        return MarginalsGram.from_spectrum(self.sizes, inv)

    # ---------------------------------------------------------------- reductions
    def _coef_sum(self) -> float:
        keyed = self._by_key()
        return float(np.sum(keyed[1] if keyed is not None else self.v))

    def trace(self):
        return float(self.shape[0]) * self._coef_sum()

    def diag(self):
        check_dense_size(self.shape[0], 1, "diag() of MarginalsGram")
        return np.full(self.shape[0], self._coef_sum())

    def colnorm_p(self, p):
        check_p(p)  # every column a permutation of column 0 (the guide's derivation)
        g = np.abs(subset_sum(self.v, self.d))
        count = self.dims()[::-1]  # dims of the complement of E
        return float(np.sum((g if p == 1 else g * g) * count))

    # ------------------------------------------------------------------ products
    def _eigen_tensor(self) -> np.ndarray:
        """``μ_{B(x)}`` on the DCT coefficient grid: index ``j_i ≥ 1`` ⇔ ``i ∈ B``."""
        if self._bidx is None:
            bidx = np.zeros(self.sizes, dtype=np.int64)
            for i, n in enumerate(self.sizes):
                shape = [1] * self.d
                shape[i] = n
                bidx = bidx + ((np.arange(n) > 0).astype(np.int64) << i).reshape(shape)
            self._bidx = bidx
        return self.spectrum()[self._bidx]

    def _matmat(self, X):
        k = X.shape[1]  # in the per-axis DCT-II basis every P_B is a coordinate projector
        T = np.array(X, dtype=float).reshape(self.sizes + (k,))
        for i, n in enumerate(self.sizes):
            if n > 1:
                T = dct(T, type=2, norm="ortho", axis=i)
        T *= self._eigen_tensor()[..., None]
        for i, n in enumerate(self.sizes):
            if n > 1:
                T = idct(T, type=2, norm="ortho", axis=i)
        return T.reshape(self.shape[0], k)

    def __repr__(self):
        return f"MarginalsGram(sizes={self.sizes})"


# =================================================================== marginals algebra
def is_total(f: Matrix) -> bool:
    """Whether ``f`` is the total query ``1ᵀ`` (a 1 x n all-ones factor)."""
    return f.factor_kind == "total"


def _row_split(f: Matrix) -> tuple[np.ndarray, np.ndarray]:
    """Per row w of f: (||w − mean||², ||mean part||²) = (||w||² − (w·1)²/n, (w·1)²/n)."""
    n = f.shape[1]
    sums = f.matvec(np.ones(n))
    s = sums**2 / n
    t = np.clip(as_vector(f.rownorm_p(2), f.shape[0]) - s, 0.0, None)
    return t, s


def _max_off_family(alpha, beta, sizes, live: np.ndarray) -> float:
    """``max Π_{i∈B} α_i Π_{i∉B} β_i`` over the dead subspaces ``B`` (not in sorted ``live``), for
    ``α, β ≥ 0``, by a best-first search (docs/algorithms/marginals-algebra.md); 0.0 if none."""
    d = len(sizes)
    free = [i for i, n in enumerate(sizes) if n > 1]  # dim_B > 0 ⇔ B ⊆ free
    if live.size >= 1 << len(free):
        return 0.0
    if live.size > MAX_SEARCHED_LIVE:
        check_dim(d, "the support check of a marginals route")
        every = np.arange(1 << d, dtype=np.int64)
        dims = key_products(every, [n - 1 for n in sizes], [1] * d)
        dead = dims > 0
        dead[live] = False
        return float(np.max(key_products(every, alpha, beta)[dead]))
    best, top, flips = 0, 1.0, []
    for i in range(d):
        a, b = float(alpha[i]), float(beta[i])
        if i in free and a > b:
            best |= 1 << i
            top *= a
            flips.append((b / a, i))
        else:
            top *= b
            if i in free:
                flips.append((a / b if b > 0 else 0.0, i))
    if top == 0.0:
        return 0.0
    flips.sort(reverse=True)
    ratio = [r for r, _ in flips]
    bit = [1 << i for _, i in flips]
    alive = set(live.tolist())
    heap = [(-1.0, -1, 0, 1.0)]  # (-value, last flipped position, flip set, value without it)
    while heap:
        neg, j, X, before = heapq.heappop(heap)
        if neg == 0.0:
            return 0.0
        if best ^ X not in alive:
            return -neg * top
        if j + 1 < len(ratio):
            k = j + 1
            heapq.heappush(heap, (neg * ratio[k], k, X | bit[k], -neg))
            if j >= 0:
                heapq.heappush(heap, (-before * ratio[k], k, (X ^ bit[j]) | bit[k], before))
    return 0.0


def sparse_kron_apply(mats, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``(M_0 ⊗ ... ⊗ M_{d-1}) μ`` for ``r_i x 2`` matrices and ``μ`` given on bitmask ``keys``."""
    d = len(mats)
    K = np.asarray(keys, dtype=np.int64)
    V = np.asarray(values, dtype=float)[:, None]
    one = [i for i, M in enumerate(mats) if M.shape[0] == 1]
    if one:
        w = key_products(
            K,
            [M[0, 1] if M.shape[0] == 1 else 1.0 for M in mats],
            [M[0, 0] if M.shape[0] == 1 else 1.0 for M in mats],
        )
        K, V = _merge_keys(K & ~np.int64(sum(1 << i for i in one)), V * w[:, None])
    for i in reversed(range(d)):
        M = mats[i]
        if M.shape[0] == 1:
            continue
        has = ((K >> i) & 1).astype(bool)
        Kp, inv = np.unique(K & ~np.int64(1 << i), return_inverse=True)
        check_dense_size(Kp.size * M.shape[0], V.shape[1], "a per-query vector (intermediate)")
        out = np.zeros((Kp.size, M.shape[0], V.shape[1]))
        out[inv[~has]] += M[None, :, 0, None] * V[~has][:, None, :]
        out[inv[has]] += M[None, :, 1, None] * V[has][:, None, :]
        K, V = Kp, out.reshape(Kp.size, -1)
    rows = math.prod(M.shape[0] for M in mats)
    return V[0] if K.size else np.zeros(rows)


def _merge_keys(K: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the rows of ``V`` whose keys agree; keys ascending."""
    order = np.argsort(K, kind="stable")
    Ks = K[order]
    if Ks.size == 0:
        return Ks, V
    starts = np.flatnonzero(np.r_[True, Ks[1:] != Ks[:-1]])
    return Ks[starts], np.add.reduceat(V[order], starts, axis=0)


class MarginalsRoute:
    """Union of Kronecker products × a strategy whose ``gram()`` is a MarginalsGram (HDMM §6.3,
    App. A.4; docs/algorithms/marginals-algebra.md, "The error route")."""

    @classmethod
    def build(cls, W: Matrix, gram: MarginalsGram):
        terms = W.kron_terms()
        if common_sizes(terms) != list(gram.sizes):
            return None
        return cls(terms, gram)

    def __init__(self, terms, gram: MarginalsGram):
        self.terms = terms
        self.sizes = list(gram.sizes)
        self.live, mu = gram.live_spectrum()
        self.inv = 1.0 / mu
        self.keys = [marginal_key(factors) for _, factors in terms]
        self.marginal_keys = np.array(sorted({k for k in self.keys if k is not None}), np.int64)
        self._splits: dict[int, tuple] = {}
        self._marginal = None

    def _split(self, f: Matrix):
        if id(f) not in self._splits:
            self._splits[id(f)] = (f, _row_split(f))
        return self._splits[id(f)][1]

    def _marginal_part(self):
        """``(lattice, μ⁺, dim)`` on the down-closure K of the workload's marginal keys."""
        if self._marginal is None:
            d = len(self.sizes)
            lattice = SubsetLattice(closed_family(self.marginal_keys, d), d)
            K = lattice.keys
            inv = np.zeros(K.size)
            pos, found = locate(K, self.live)
            inv[pos[found]] = self.inv[found]
            dims = key_products(K, [n - 1 for n in self.sizes], [1] * d)
            self._marginal = (lattice, inv, dims)
        return self._marginal

    def _marginal_unit_variances(self) -> dict[int, float]:
        """Per workload key T: the variance of each cell of the (unweighted) marginal T."""
        lattice, inv, dims = self._marginal_part()
        K = lattice.keys
        h = lattice.subset_sum(inv * dims)
        keys = self.marginal_keys
        scale = key_products(keys, [1.0 / n for n in self.sizes], self.sizes)
        unit = scale * h[np.searchsorted(K, keys)]
        return dict(zip(keys.tolist(), unit.tolist()))

    def check_support(self) -> None:
        d = len(self.sizes)
        if self.live.size >= 1 << sum(1 for n in self.sizes if n > 1):
            return  # no dead subspace
        marginal = {k for (c, _), k in zip(self.terms, self.keys) if k is not None and c != 0.0}
        if marginal:
            lattice, inv, dims = self._marginal_part()
            K = lattice.keys
            keys = np.array(sorted(marginal), dtype=np.int64)
            rows = np.full(K.size, np.inf)
            rows[np.searchsorted(K, keys)] = key_products(keys, self.sizes, [1] * d)
            smallest = lattice.superset_min(rows)  # the fewest rows of a key T ⊇ B
            dead = (dims > 0) & (inv == 0.0)
            if np.any(dims[dead] / smallest[dead] > SUPPORT_RTOL):
                self._unsupported()
        seen = set()
        for (c, factors), key in zip(self.terms, self.keys):
            if c == 0.0 or key is not None:
                continue
            fracs = []
            for t, s in (self._split(f) for f in factors):
                q = t + s
                live = q > 0
                if not live.any():
                    break  # a zero factor: the term is zero
                fracs.append(t[live] / q[live])
            else:
                # the worst fraction of ||w||² in a dead S_B factorises (the guide)
                alpha = tuple(float(f.max()) for f in fracs)
                beta = tuple(float(1 - f.min()) for f in fracs)
                if (alpha, beta) in seen:
                    continue
                seen.add((alpha, beta))
                if _max_off_family(alpha, beta, self.sizes, self.live) > SUPPORT_RTOL:
                    self._unsupported()

    @staticmethod
    def _unsupported():
        raise UnsupportedWorkloadError(
            "the marginals strategy does not support the workload: a query has "
            "weight on a residual subspace that no measured marginal covers"
        )

    def trace(self) -> float:
        d = len(self.sizes)
        total = 0.0
        coeffs: dict[int, float] = {}
        for (c, factors), key in zip(self.terms, self.keys):
            if key is not None:
                coeffs[key] = coeffs.get(key, 0.0) + c
                continue
            splits = [self._split(f) for f in factors]
            perp = [float(np.sum(t)) for t, _ in splits]  # tr(P⊥ f_iᵀf_i)
            mean = [float(np.sum(s)) for _, s in splits]  # tr(P1 f_iᵀf_i)
            total += c * float(np.dot(self.inv, key_products(self.live, perp, mean)))
        if coeffs:  # Σ_a c_a tr(P_B ℂ(a)) = dim_B · μ^W_B, μ^W the spectrum of Σ_a c_a ℂ(a)
            lattice, inv, dims = self._marginal_part()
            keys = np.array(list(coeffs), dtype=np.int64)
            f = np.zeros(lattice.keys.size)
            f[np.searchsorted(lattice.keys, keys)] = np.array(list(coeffs.values())) * (
                key_products(keys, [1] * d, self.sizes)
            )
            total += float(np.dot(inv * dims, lattice.superset_sum(f)))
        return total

    def _term_profile(self, c, factors, unique: bool) -> np.ndarray:
        mats = []
        for f in factors:
            t, s = self._split(f)
            M = np.column_stack([s, t])
            mats.append(np.unique(M, axis=0) if unique else M)
        rows = math.prod(M.shape[0] for M in mats)
        check_dense_size(rows, 1, "a per-query vector")
        return c * sparse_kron_apply(mats, self.live, self.inv)

    def profile(self) -> np.ndarray:
        unit = self._marginal_unit_variances() if self.marginal_keys.size else {}
        parts = []
        for (c, factors), key in zip(self.terms, self.keys):
            if key is None:
                parts.append(self._term_profile(c, factors, unique=False))
            else:
                rows = _kept_rows(tuple(self.sizes), key)
                check_dense_size(rows, 1, "a per-query vector")
                parts.append(np.full(rows, c * unit[key]))
        return np.concatenate(parts)

    def max_profile(self) -> float:
        unit = self._marginal_unit_variances() if self.marginal_keys.size else {}
        return max(
            float(np.max(self._term_profile(c, factors, unique=True)))
            if key is None
            else c * unit[key]
            for (c, factors), key in zip(self.terms, self.keys)
        )
