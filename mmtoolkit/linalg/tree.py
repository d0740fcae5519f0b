"""Hierarchical (tree) strategies: nested partitions of the domain, one weighted counting
query per node (Hay et al. PVLDB 2010 "H_b"; Qardaji et al. PVLDB 2013 "HB"; Cormode et al.
ICDE 2012 "Quadtree"; Li et al. PVLDB 2014 "GreedyH"; HDMM §8 baselines, digest §15).

:class:`Tree` (levels of :class:`Intervals`, built by :func:`interval_tree`), its Gram, inverse
Gram and pseudo-inverse in ``O(N · L)`` through a Sherman–Morrison pass (:class:`TreeSolver`),
and the evaluator's exact route (:class:`TreeRoute`).

User guide: docs/algorithms/trees.md.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.sparse import block_diag

from ..checks import check_int, check_option
from . import base
from .base import MAX_DENSE_ENTRIES, Matrix, Product, check_dense_size, check_fits_memory, check_p
from .kronecker import Identity, group
from .ranges import _maybe_scalar
from .route import SUPPORT_RTOL, UnsupportedWorkloadError, align, as_vector

__all__ = [
    "Intervals", "ReducedFactor", "Tree", "TreeGram", "TreeGramInverse", "TreePinv",
    "TreeSolver", "interval_tree", "tree_height",
]

SPLITS = ("near_equal", "small_first", "pad")


# =============================================================================== builders
def tree_height(n: int, b: int) -> int:
    """``⌈log_b n⌉`` in exact integer arithmetic: the least ``h`` with ``b^h ≥ n``."""
    n, b = check_int(n, "n", minimum=1), check_int(b, "branching", minimum=2)
    h, cap = 0, 1
    while cap < n:
        cap *= b
        h += 1
    return h


def _child_sizes(sizes: np.ndarray, b: int, split: str) -> np.ndarray:
    """The next level's interval sizes, in order, by the ``near_equal`` or ``small_first`` rule
    (docs/algorithms/trees.md), vectorised over the level."""
    k = np.where(sizes <= b, sizes, b)
    first = np.cumsum(k) - k  # each node's first child
    node = np.repeat(np.arange(len(sizes)), k)
    c = np.arange(int(k.sum())) - first[node]  # child index within its node
    z = sizes[node]
    m, r = z // b, z % b
    extra = (c < r) if split == "near_equal" else (c >= b - r)
    return np.where(z <= b, 1, m + extra)


def interval_tree(n: int, branching: int, split: str = "near_equal", height=None):
    """The levels (root first), each an :class:`Intervals`, of a ``b``-ary tree over ``[0, n)``:
    ``split`` ``"near_equal"`` (HB, Qardaji et al. 2013 §4), ``"small_first"`` (GreedyH, DAWA
    2014) or ``"pad"`` (HDMM digest §16.13; ``height`` default ``⌈log_b n⌉``); see trees.md."""
    n, b = check_int(n, "n", minimum=1), check_int(branching, "branching", minimum=2)
    check_option(split, "split", SPLITS)
    if split == "pad":
        h = tree_height(n, b) if height is None else check_int(height, "height", minimum=0)
        if b**h < n:
            raise ValueError(f"height {h} is too small: {b}^{h} < n = {n}")
        return [Intervals.regular(n, b ** (h - depth)) for depth in range(h + 1)]
    if height is not None:
        raise ValueError("height is only used with split='pad'")
    check_fits_memory(  # explicit levels (about n/(b−1) starts), their temporaries, a solver's
        32.0 * n,  # node grids: refused before anything is built
        f"an interval tree over {n} cells",
        "use split='pad' (its levels are regular: no arrays of the cells' size), or split "
        "the domain into attributes (a Kronecker product of trees)",
    )
    sizes = np.array([n], dtype=np.int64)
    levels = [Intervals.regular(n, n)]
    while np.any(sizes > 1):
        if np.all(sizes <= b):  # every node splits into single cells
            levels.append(Intervals.regular(n, 1))
            break
        sizes = _child_sizes(sizes, b, split)
        if np.all(sizes[:-1] == sizes[0]) and sizes[-1] <= sizes[0]:
            levels.append(Intervals.regular(n, int(sizes[0])))
        else:  # the children partition [0, n) in order
            levels.append(Intervals(n, starts=np.cumsum(sizes) - sizes))
    return levels


# ============================================================================== intervals
#: nodes per ``np.add.reduceat`` call on a regular partition (its local starts are shared)
SUM_NODES = 1 << 16


class Intervals:
    """A partition of ``[0, n)`` into contiguous intervals: *regular* (``width``) or *explicit*
    (int64 ``starts``, kept, not copied); see docs/algorithms/trees.md."""

    def __init__(self, n: int, starts: np.ndarray | None = None, width: int | None = None):
        self.n = check_int(n, "n", minimum=1)
        if (starts is None) == (width is None):
            raise ValueError("Intervals takes either starts or width")
        self.width: int | None = None
        self._starts = starts
        if starts is not None:
            self.size = len(starts)
        else:
            self.width = check_int(width, "width", minimum=1)
            self.size = -(-self.n // self.width)

    @classmethod
    def regular(cls, n: int, width: int) -> Intervals:
        """``⌈n / width⌉`` blocks of ``width`` cells over ``[0, n)`` (the last may be shorter)."""
        return cls(n, width=min(check_int(width, "width", minimum=1), check_int(n, "n", minimum=1)))

    @classmethod
    def of(cls, n: int, starts: np.ndarray) -> Intervals:
        """The partition with these (validated: sorted, from 0, below ``n``) starts, regular
        when its blocks have one width (the last may be shorter), else explicit."""
        g = len(starts)
        if g == n:  # strictly increasing from 0 and below n: every cell its own interval
            return cls(n, width=1)
        w = int(starts[1]) if g > 1 else n
        if g == -(-n // w) and np.array_equal(starts, np.arange(0, n, w, dtype=starts.dtype)):
            return cls(n, width=w)
        return cls(n, starts=starts)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        form = f"width={self.width}" if self.width is not None else "explicit"
        return f"Intervals(n={self.n}, {self.size} intervals, {form})"

    @property
    def identity(self) -> bool:
        """Every interval is a single cell."""
        return self.size == self.n

    @property
    def _explicit(self) -> np.ndarray:
        """The starts of an explicit partition (``width`` None: ``starts`` was given)."""
        if self._starts is None:  # pragma: no cover - a bug: a regular partition has none
            raise RuntimeError("a regular partition has no explicit starts")
        return self._starts

    @property
    def starts(self) -> np.ndarray:
        """The start offsets (built for a regular partition: ``O(size)``)."""
        if self.width is None:
            return self._explicit
        return np.arange(0, self.n, self.width, dtype=np.int64)

    @property
    def counts(self) -> np.ndarray:
        """Cells per interval (built: ``O(size)``)."""
        if self.width is None:
            return np.diff(self._explicit, append=self.n)
        out = np.full(self.size, self.width, dtype=np.int64)
        out[-1] = self.n - self.width * (self.size - 1)
        return out

    def cells(self, n0: int, n1: int) -> tuple[int, int]:
        """The cells ``c0:c1`` that the intervals ``n0:n1`` cover."""
        if self.width is not None:
            return n0 * self.width, min(n1 * self.width, self.n)
        s = self._explicit
        return int(s[n0]), (int(s[n1]) if n1 < self.size else self.n)

    def part(self, n0: int, n1: int) -> Intervals:
        """The intervals ``n0:n1`` as a partition of the cells they cover (shifted to 0)."""
        c0, c1 = self.cells(n0, n1)
        if self.width is not None:
            return Intervals(c1 - c0, width=min(self.width, c1 - c0))
        return Intervals(c1 - c0, starts=self._explicit[n0:n1] - c0)

    def blocks(self, rest: int):
        """``(n0, n1, c0, c1)``: runs of whole intervals ``n0:n1`` covering cells ``c0:c1``,
        each about :data:`BLOCK_CELLS` cells (``rest`` values per cell)."""
        step = max(1, BLOCK_CELLS // max(1, rest))
        n0 = c0 = 0
        while n0 < self.size:
            if self.width is not None:  # the first interval ending at or after c0 + step
                n1 = -(-(c0 + step) // self.width)
            else:
                n1 = int(np.searchsorted(self._explicit[1:], c0 + step)) + 1
            n1 = min(self.size, max(n0 + 1, n1))
            c1 = self.cells(n0, n1)[1]
            yield n0, n1, c0, c1
            n0, c0 = n1, c1

    def sum(self, X: np.ndarray, axis: int) -> np.ndarray:
        """Sums of ``X`` over the intervals along ``axis`` (``X`` itself for single cells)."""
        if self.identity:
            return X
        if self.width is None:
            return np.add.reduceat(X, self._explicit, axis=axis)
        w, size = self.width, self.size
        local = np.arange(0, min(size, SUM_NODES) * w, w, dtype=np.int64)
        lead, out = (slice(None),) * axis, None
        for q0 in range(0, size, SUM_NODES):
            q1 = min(size, q0 + SUM_NODES)
            c0, c1 = self.cells(q0, q1)
            part = np.add.reduceat(X[lead + (slice(c0, c1),)], local[: q1 - q0], axis=axis)
            if out is None:
                out = np.empty(part.shape[:axis] + (size,) + part.shape[axis + 1 :], part.dtype)
            out[lead + (slice(q0, q1),)] = part
        if out is None:  # pragma: no cover - a partition has one interval at least
            raise RuntimeError("no intervals to sum")
        return out

    def repeat(self, Y: np.ndarray, axis: int) -> np.ndarray:
        """Interval values back to cells along ``axis`` (``Y`` itself for single cells)."""
        if self.identity:
            return Y
        if self.width is not None and self.n % self.width == 0:
            return np.repeat(Y, self.width, axis=axis)
        return np.repeat(Y, self.counts, axis=axis)

    def nest_in(self, finer: Intervals) -> Intervals | None:
        """This partition on ``finer``'s intervals, or None when ``finer`` does not refine it."""
        if finer.n != self.n:
            return None
        if finer.identity:
            return self
        if self.size == 1:
            return Intervals(finer.size, width=finer.size)
        if finer.width is not None:
            w = finer.width
            if self.width is not None:
                if self.width % w:
                    return None
                return Intervals(finer.size, width=self.width // w)
            if np.any(self._explicit % w):
                return None
            return Intervals.of(finer.size, self._explicit // w)
        fine, coarse = finer.starts, self.starts
        pos = np.searchsorted(fine, coarse)
        if np.any(pos >= len(fine)) or not np.array_equal(fine[pos], coarse):
            return None
        return Intervals.of(finer.size, pos)


def _intervals(level, n: int, li: int, i: int) -> Intervals:
    """Level ``li``'s validated partition of attribute ``i`` (``n`` cells), regular if it can be."""
    given = level if isinstance(level, Intervals) else None
    if given is not None:
        if given.n != n:
            raise ValueError(
                f"level {li}, attribute {i}: the intervals cover {given.n} cells, the attribute "
                f"has {n}"
            )
        if given.width is not None:
            return given
        level = given.starts
    a = np.asarray(level)
    if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(
            f"level {li}, attribute {i}: interval starts must be a non-empty 1-D integer array"
        )
    a = a.astype(np.int64, copy=False)
    if a[0] != 0 or a[-1] >= n or np.any(np.diff(a) <= 0):
        raise ValueError(
            f"level {li}, attribute {i}: interval starts must begin at 0, increase strictly "
            f"and stay below the attribute size {n}"
        )
    if given is not None and given._starts is a:
        return given
    return Intervals(n, starts=a) if given is not None else Intervals.of(n, a)


def _block_sum(X: np.ndarray, parts) -> np.ndarray:
    """Sum a tensor over the intervals ``parts[i]`` of each leading axis ``i`` (a new array); a
    scalar ``X`` is the value of every cell."""
    if np.ndim(X) == 0:
        return X * _outer_counts(parts)
    Y = X
    for axis, p in enumerate(parts):
        Y = p.sum(Y, axis)
    return Y.copy() if Y is X else Y


def _expand(Y: np.ndarray, parts) -> np.ndarray:
    """Broadcast node values back to cells: repeat along each leading axis."""
    for axis, p in enumerate(parts):
        Y = p.repeat(Y, axis)
    return Y


def _per_cell(T: np.ndarray, parts) -> np.ndarray:
    """Node values divided by their nodes' sizes, one leading axis at a time."""
    for axis, p in enumerate(parts):
        shape = [1] * T.ndim
        shape[axis] = len(p)
        T = T / p.counts.reshape(shape)
    return T


def _outer_counts(parts) -> np.ndarray:
    """Cells per node of a node grid: the outer product of the per-axis node sizes (refused
    with ``TooLargeError`` when the grid's float64 arrays would not fit in memory)."""
    check_fits_memory(
        8.0 * math.prod(len(p) for p in parts),
        "a tree's node grid",
        "use fewer cells or a Kronecker product of smaller trees",
    )
    out = np.ones(())
    for p in parts:
        out = np.multiply.outer(out, p.counts.astype(float))
    return out


#: cells per block of the blocked passes over the cells (temporaries in cache)
BLOCK_CELLS = 1 << 17


def _expanded_add(F: np.ndarray, D: np.ndarray, parts, scale, out: np.ndarray) -> None:
    """``out = (F + expand(D)) · scale`` block by block (``out`` may be ``F``); ``D`` is on
    the node grid of ``parts``, ``scale`` a scalar or an array shaped like ``F``."""
    first, rest = parts[0], tuple(parts[1:])
    for n0, n1, c0, c1 in first.blocks(math.prod(F.shape[1:])):
        e = _expand(D[n0:n1], (first.part(n0, n1),) + rest)
        blk = out[c0:c1]
        np.add(F[c0:c1], e, out=blk)
        blk *= scale if np.ndim(scale) == 0 else scale[c0:c1]


def _add_product(D: np.ndarray, X: np.ndarray, Y: np.ndarray, sign: float = 1.0) -> None:
    """``D += X · Y`` (``sign`` −1: ``D −= X · Y``) in blocks along the first axis, without a
    temporary of ``D``'s size (``Y`` may broadcast along the trailing axes)."""
    step = max(1, BLOCK_CELLS // max(1, math.prod(D.shape[1:])))
    op = np.add if sign > 0 else np.subtract
    for r0 in range(0, D.shape[0], step):
        blk = D[r0 : r0 + step]
        op(blk, X[r0 : r0 + step] * Y[r0 : r0 + step], out=blk)


def _scaled_block_sum(F: np.ndarray, scale: np.ndarray, parts) -> np.ndarray:
    """``_block_sum(F · scale, parts)`` without an array of ``F``'s size."""
    first, rest = parts[0], tuple(parts[1:])
    out = [
        _block_sum(F[c0:c1] * scale[c0:c1], (first.part(n0, n1),) + rest)
        for n0, n1, c0, c1 in first.blocks(math.prod(F.shape[1:]))
    ]
    return np.concatenate(out, axis=0)


# =================================================================================== Tree
class Tree(Matrix):
    """A weighted hierarchy of nested interval partitions, one row ``w_Q 1_Q`` per node ``Q``:
    ``sizes``, ``levels`` (coarse to fine) and ``weights`` (docs/algorithms/trees.md).

    Level ``ℓ`` partitions every attribute into contiguous intervals; its nodes are the
    products of one interval per attribute (rows in C order over the level's node grid),
    and rows are ordered level by level. Products, Gram and (for an invertible tree) the
    pseudo-inverse cost ``O(N · L)``. Start arrays of one width are kept as regular
    :class:`Intervals`; other int64 start arrays are kept, not copied.

    Parameters
    ----------
    sizes : int or sequence of int
        The attribute sizes (an int for one attribute), each at least 1.
    levels : list or tuple
        The levels, coarse to fine, at least one. With one attribute a level is a 1-D
        integer array of interval starts or an :class:`Intervals`; with ``d`` attributes, a
        sequence of ``d`` such. Starts begin at 0, increase strictly and stay below the
        attribute size; each level refines the one before it.
    weights : sequence, optional
        One per level: a scalar or an array of the level's node-grid shape (for one
        attribute, a vector of its nodes); finite. None: every weight 1.

    Raises
    ------
    ValueError
        When ``sizes`` is empty or holds a non-integer (``CheckTypeError``) or a size below
        1; when ``levels`` is not a non-empty list or tuple, a level has not ``d``
        partitions, its starts (or an :class:`Intervals`' size) do not fit the attribute, or
        it does not refine the level before it (the message names level and attribute);
        when the number of weights is not the number of levels, a level's weights do not
        have its node-grid shape, or are not finite.

    References
    ----------
    Hay, Rastogi, Miklau & Suciu, PVLDB 2010 (H_b); Qardaji, Yang & Li, PVLDB 2013 (HB);
    Cormode et al., ICDE 2012 (Quadtree); Li et al., PVLDB 2014 (GreedyH, DAWA); the
    baselines of McKenna et al. 2018, HDMM, Section 8.
    """

    def __init__(
        self,
        sizes: int | Sequence[int],
        levels: Sequence[ArrayLike | Intervals | Sequence[ArrayLike | Intervals]],
        weights: Sequence[ArrayLike] | None = None,
    ):
        if isinstance(sizes, (list, tuple, np.ndarray)):
            sizes = tuple(check_int(s, "attribute size", minimum=1) for s in sizes)
        else:
            sizes = (check_int(sizes, "n", minimum=1),)
        if not sizes:
            raise ValueError("Tree needs at least one attribute")
        d = len(sizes)
        if not isinstance(levels, (list, tuple)) or not levels:
            raise ValueError("Tree needs a non-empty list of levels")
        parsed = []
        self.nest = []  # level ℓ's intervals on level ℓ+1's node grid
        for li, level in enumerate(levels):
            parts = [level] if d == 1 or isinstance(level, Intervals) else list(level)
            if len(parts) != d:
                raise ValueError(f"level {li} has {len(parts)} partitions for {d} attributes")
            parsed.append(
                tuple(_intervals(s, n, li, i) for i, (s, n) in enumerate(zip(parts, sizes)))
            )
            if li:
                nest = tuple(c.nest_in(f) for c, f in zip(parsed[-2], parsed[-1]))
                for i, pos in enumerate(nest):
                    if pos is None:
                        raise ValueError(
                            f"level {li}, attribute {i} does not refine level {li - 1}: the "
                            "levels of a tree must be nested"
                        )
                self.nest.append(nest)
        self.sizes = sizes
        self.levels = parsed
        self.grid = [tuple(len(s) for s in lv) for lv in parsed]
        if weights is None:
            weights = [1.0] * len(parsed)
        if len(weights) != len(parsed):
            raise ValueError(f"got {len(weights)} level weights for {len(parsed)} levels")
        ws = []
        for li, (w, g) in enumerate(zip(weights, self.grid)):
            if np.ndim(w) == 0:
                w = float(np.asarray(w))
            else:
                w = np.asarray(w, dtype=float)
                if d == 1 and w.ndim == 1 and w.size == g[0]:
                    w = w.reshape(g)
                if w.shape != g:
                    raise ValueError(
                        f"level {li}: weights of shape {w.shape}, the level's node grid is {g}"
                    )
            if not np.all(np.isfinite(w)):
                raise ValueError(f"level {li}: weights must be finite")
            ws.append(w)
        self.weights = ws
        self.shape = (sum(math.prod(g) for g in self.grid), math.prod(sizes))
        self.offsets = np.concatenate([[0], np.cumsum([math.prod(g) for g in self.grid])])

    # --------------------------------------------------------------------- structure
    @property
    def depth(self) -> int:
        """The number of levels ``L``.

        Returns
        -------
        int
            ``len(self.levels)``.
        """
        return len(self.levels)

    @functools.cached_property
    def reduced(self) -> bool:
        """True when some finest node has more than one cell.

        Returns
        -------
        bool
            Whether the strategy cannot tell apart the cells of some finest node.
        """
        return not all(p.identity for p in self.levels[-1])

    @property
    def invertible(self) -> bool:
        """Whether the reduced Gram ``M̃`` is invertible (every finest node has weight ≠ 0).

        Returns
        -------
        bool
            True when the pseudo-inverse and the exact error route are available.
        """
        return bool(np.all(np.asarray(self.weights[-1]) != 0.0))

    def _tensor(self, X):
        return X.reshape(*self.sizes, X.shape[1])

    def _w(self, li, trailing=1):
        w = self.weights[li]
        return w if np.ndim(w) == 0 else w.reshape(w.shape + (1,) * trailing)

    # ---------------------------------------------------------------------- products
    def _matmat(self, X):
        k = X.shape[1]
        S = self._tensor(X)
        if self.reduced:
            S = _block_sum(S, self.levels[-1])
        dtype = X.dtype if np.issubdtype(X.dtype, np.floating) else float
        out = np.empty((self.shape[0], k), dtype=dtype)
        for li in range(self.depth - 1, -1, -1):
            if li < self.depth - 1:
                S = _block_sum(S, self.nest[li])  # from the finer level's sums
            np.multiply(S, self._w(li), out=self._slot(out, li))
        return out

    def _slot(self, Y, li):
        """Level ``li``'s rows of ``Y`` as a view of its node grid (trailing axis)."""
        return Y[self.offsets[li] : self.offsets[li + 1]].reshape(self.grid[li] + (Y.shape[1],))

    def coarse_sum(self, Y) -> np.ndarray | None:
        """``Σ_{ℓ<L-1} w_ℓ y_ℓ`` on level ``L-2``'s grid (None for one level), in float64 always.

        Each coarse level's weighted answers are expanded down to level ``L-2`` and summed.

        Parameters
        ----------
        Y : numpy.ndarray
            The ``(m, k)`` answers, one row per node in the tree's row order.

        Returns
        -------
        numpy.ndarray or None
            A float64 array of level ``L-2``'s node-grid shape plus a trailing axis of
            ``k``; None for a one-level tree.
        """
        acc = None
        for li in range(self.depth - 1):
            part = np.multiply(self._slot(Y, li), self._w(li), dtype=np.float64)  # exact sums
            if acc is not None:
                part += _expand(acc, self.nest[li - 1])
            acc = part
        return acc

    def fine_adjoint(self, Y, out=None) -> np.ndarray:
        """``Ãᵀ y`` on the finest node grid (trailing axis): ``w_fine y_fine`` plus the
        coarse levels expanded, in one pass; ``out`` may be ``Y``'s finest slot.

        Parameters
        ----------
        Y : numpy.ndarray
            The ``(m, k)`` answers, one row per node in the tree's row order.
        out : numpy.ndarray, optional
            Where to write the result (the finest node-grid shape plus ``k``); it may be
            ``Y``'s finest level's rows, viewed on that grid. None: a new array.

        Returns
        -------
        numpy.ndarray
            ``Ãᵀ y``, the finest node-grid shape plus a trailing axis of ``k`` (``out`` when
            given).
        """
        F = self._slot(Y, self.depth - 1)
        out = np.multiply(F, self._w(self.depth - 1), out=out)
        acc = self.coarse_sum(Y)
        if acc is not None:
            _expanded_add(out, acc, self.nest[-1], 1.0, out)
        return out

    def _rmatmat(self, Y):
        X = self.fine_adjoint(Y)
        if self.reduced:
            X = _expand(X, self.levels[-1])
        return X.reshape(-1, Y.shape[1])

    def gram(self):
        return TreeGram(self)

    def pinv(self):
        if not self.invertible:
            return super().pinv()
        return TreePinv(self)

    def pinv_operator(self):
        return self.pinv() if self.invertible else None

    # -------------------------------------------------------------------- reductions
    def _cell_weights_p(self, p):
        """``Σ_ℓ |w_Q(j)|^p`` per cell j (a float when constant)."""
        total = 0.0
        for li, c in enumerate(self.levels):
            w = self.weights[li]
            if np.ndim(w) == 0:
                total = total + abs(w) ** p
            else:
                check_dense_size(self.shape[1], 1, "column norms of a Tree")
                total = total + _expand(np.abs(w) ** p, c)
        if np.ndim(total) == 0:
            return float(total)
        return np.asarray(total).reshape(-1)

    def colnorm_p(self, p):
        check_p(p)
        c = self._cell_weights_p(p)
        return c if np.ndim(c) == 0 else _maybe_scalar(c)

    def rownorm_p(self, p):
        check_p(p)
        check_dense_size(self.shape[0], 1, "row norms of a Tree")
        parts = []
        for li, (g, c) in enumerate(zip(self.grid, self.levels)):
            cells = _outer_counts(c)
            parts.append((np.abs(np.broadcast_to(self.weights[li], g)) ** p * cells).ravel())
        out = np.concatenate(parts)
        return float(out[0]) if np.all(out == out[0]) else out

    def __repr__(self):
        return f"Tree(sizes={self.sizes}, levels={self.depth}, rows={self.shape[0]})"


# ============================================================================ the Gram
class TreeSolver:
    """The bottom-up Sherman–Morrison pass over a :class:`Tree` (docs/algorithms/trees.md)."""

    def __init__(self, tree: Tree):
        if not tree.invertible:
            raise ValueError("the tree's reduced Gram is singular: a finest node has weight 0")
        self.tree = tree
        fine = tree.levels[-1]
        self.shape = tuple(len(s) for s in fine)
        self.red = [  # the finest level's own (identity) intervals are not kept
            lv if not tree.reduced else tuple(s.nest_in(f) for f, s in zip(fine, lv))
            for lv in tree.levels[:-1]
        ]
        L = tree.depth
        w_fine = tree.weights[-1]
        self.a_fine = np.broadcast_to(np.asarray(w_fine) ** 2, self.shape)
        self.inv_a = 1.0 / np.asarray(w_fine) ** 2  # a scalar when the level's weight is
        # each level's arrays, set for the levels 0..K (the finest level's stay None)
        self.s: list = [None] * L
        self.f: list = [None] * L
        self.c: list = [None] * L
        self.K: int | None = None  # the level above the finest (None: one level)
        if L == 1:
            return
        K = L - 2
        self.K = K
        self.r = _block_sum(self.inv_a, tree.nest[K])  # Σ_{j ∈ Q} 1/a_j on the level-K grid
        s = self.r
        for li in range(K, -1, -1):
            if li < K:
                s = _block_sum(self.f[li + 1] * s, tree.nest[li])
            a = np.asarray(tree.weights[li]) ** 2
            f = 1.0 / (1.0 + a * s)
            self.s[li], self.f[li] = s, f
            self.c[li] = np.broadcast_to(a * f, s.shape)

    def u(self, li: int) -> np.ndarray:
        """``u_Q = M_Q⁻¹ 1`` of each level-``li`` node, on its reduced cells."""
        K = self.K
        if li == self.tree.depth - 1 or K is None:  # (K is None: one level, li = 0)
            return np.broadcast_to(self.inv_a, self.shape)
        h = self.f[li]
        for m in range(li + 1, K + 1):
            h = _expand(h, self.tree.nest[m - 1]) * self.f[m]
        return self.inv_a * _expand(h, self.tree.nest[K])

    def trace_inverse(self) -> float:
        """``tr(M̃⁻¹) = Σ_j 1/a_j − Σ_Q c_Q ‖v_Q‖²``, summed up the node grids."""
        inv_a, K = self.inv_a, self.K
        scalar = np.ndim(inv_a) == 0
        total = float(inv_a) * math.prod(self.shape) if scalar else float(np.sum(inv_a))
        if K is None:  # one level
            return total
        nest = self.tree.nest
        p = _block_sum(inv_a**2, nest[K])
        for li in range(K, -1, -1):
            if li < K:
                p = _block_sum(self.f[li + 1] ** 2 * p, nest[li])
            total -= float(np.sum(self.c[li] * p))
        return total

    def cell_c(self, li: int) -> np.ndarray:
        """``c_Q`` of level ``li`` broadcast to the reduced cells of each node."""
        return _expand(self.c[li], self.red[li])

    def solve(self, X: np.ndarray) -> np.ndarray:
        """``M̃⁻¹ X`` for a tensor of the reduced shape with one trailing axis."""
        return self.solve_split(X, None)

    def solve_split(self, F: np.ndarray, C: np.ndarray | None, out=None) -> np.ndarray:
        """``M̃⁻¹ (F + expand(C))`` for ``F`` on the reduced cells and ``C`` on the level-``K``
        grid (or None), in two passes over the cells; ``out`` (may be ``F``) gets the result."""
        inv_a = self.inv_a if np.ndim(self.inv_a) == 0 else self.inv_a[..., None]
        if out is None:
            out = np.empty_like(F)
        K, nest = self.K, self.tree.nest
        if K is None:  # one level (depth 1)
            np.multiply(F, inv_a, out=out)
            return out
        if np.ndim(self.inv_a) == 0:
            D = _block_sum(F, nest[K]).astype(np.float64, copy=False)  # node grid: float64
            D *= self.inv_a
        else:
            D = _scaled_block_sum(F, inv_a, nest[K])
        if C is not None:
            _add_product(D, C, self.r[..., None])
        t: list = [None] * (K + 1)
        for li in range(K, -1, -1):
            if li < K:  # D − t s in the finer level's D (not needed again), then summed up
                _add_product(D, t[li + 1], self.s[li + 1][..., None], sign=-1.0)
                D = _block_sum(D, nest[li])
            t[li] = D * self.c[li][..., None]
        E = t[0]
        for li in range(1, K + 1):  # in place: E and the t's are not needed again
            E = _expand(E, self.tree.nest[li - 1])
            E *= self.f[li][..., None]
            E += t[li]
            t[li] = None
        if C is not None:
            np.subtract(C, E, out=E)
        else:
            np.negative(E, out=E)
        _expanded_add(F, E, self.tree.nest[K], inv_a, out)
        return out

    def to_reduced(self, X: np.ndarray) -> np.ndarray:
        """``D⁻¹ Pᵀ X``: cell tensor (trailing axis) → mean over each finest node."""
        fine = self.tree.levels[-1]
        return _per_cell(_block_sum(X, fine), fine)

    def from_reduced(self, Y: np.ndarray) -> np.ndarray:
        """``P D⁻¹ Y``: reduced tensor → cells (each finest node's value / its size)."""
        fine = self.tree.levels[-1]
        return _expand(_per_cell(Y, fine), fine)


class TreeGram(base.Symmetric):
    """``AᵀA = Σ_Q w_Q² 1_Q 1_Qᵀ`` of a :class:`Tree`, ``pinv`` through :class:`TreeSolver`.

    ``pinv()`` is a :class:`TreeGramInverse` for an invertible tree, else the dense
    default; its ``gram_route`` is the exact Sherman–Morrison tree route.

    Parameters
    ----------
    tree : Tree
        The strategy ``A`` whose Gram this is (``N x N``, ``N`` the tree's cells).
    """

    def __init__(self, tree: Tree):
        self.tree = tree
        N = tree.shape[1]
        self.shape = (N, N)

    def _matmat(self, X):
        return self.tree._rmatmat(self.tree._matmat(X))

    def gram(self):
        return Product(self, self)

    def gram_route(self, W):
        """Any strategy whose Gram is this tree Gram: the Sherman–Morrison tree route.

        Parameters
        ----------
        W : Matrix
            The workload, a union of Kronecker products.

        Returns
        -------
        ErrorRoute or None
            The tree route, or None when the tree is not invertible or a term's factors do
            not align one-to-one with the tree's attributes.
        """
        return TreeRoute.build(W, self)

    def pinv(self):
        if not self.tree.invertible:
            return super().pinv()
        return TreeGramInverse(self.tree)

    def diag(self):
        c = self.tree._cell_weights_p(2)
        return np.full(self.shape[0], c) if np.ndim(c) == 0 else c

    def trace(self):
        c = self.tree._cell_weights_p(2)
        return float(c * self.shape[0]) if np.ndim(c) == 0 else float(np.sum(c))

    def __repr__(self):
        return f"TreeGram({self.tree!r})"


class TreeGramInverse(base.Symmetric):
    """``(AᵀA)⁺ = P D⁻¹ M̃⁻¹ D⁻¹ Pᵀ`` for a :class:`Tree`, ``O(N · L)``.

    ``P`` maps the finest nodes to their cells, ``D`` holds their sizes, ``M̃`` is the
    reduced Gram on the finest node grid (docs/algorithms/trees.md).

    Parameters
    ----------
    tree : Tree
        An invertible tree (every finest node has a nonzero weight).
    solver : TreeSolver, optional
        The tree's Sherman–Morrison pass, when one is at hand; None: built here.

    Raises
    ------
    ValueError
        When ``solver`` is None and the tree is not invertible.
    """

    def __init__(self, tree: Tree, solver: TreeSolver | None = None):
        self.tree = tree
        self.solver = TreeSolver(tree) if solver is None else solver
        N = tree.shape[1]
        self.shape = (N, N)

    def _matmat(self, X):
        s = self.solver
        k = X.shape[1]
        T = self.tree._tensor(X)
        if self.tree.reduced:
            return s.from_reduced(s.solve(s.to_reduced(T))).reshape(-1, k)
        return s.solve(T).reshape(-1, k)

    def pinv(self):
        if self.tree.reduced:
            return super().pinv()
        return TreeGram(self.tree)

    def __repr__(self):
        return f"TreeGramInverse({self.tree!r})"


class TreePinv(Matrix):
    """``A⁺ = P D⁻¹ M̃⁻¹ Ãᵀ`` of an invertible :class:`Tree` (Hay et al. 2010, as least squares)."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.solver = TreeSolver(tree)
        self.shape = (tree.shape[1], tree.shape[0])

    def _apply(self, Y, out):
        t = self.tree
        F = t._slot(Y, t.depth - 1)
        out = np.multiply(F, t._w(t.depth - 1), out=out)
        X = self.solver.solve_split(out, t.coarse_sum(Y), out=out)
        if t.reduced:
            X = self.solver.from_reduced(X)
        return X.reshape(-1, Y.shape[1])

    def _matmat(self, Y):
        return self._apply(Y, None)

    def apply_overwrite(self, y):
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.floating) or not y.flags.writeable:
            return self @ y
        Y = y.reshape(-1, 1)
        F = self.tree._slot(Y, self.tree.depth - 1)
        return self._apply(Y, F).reshape(-1)

    def _rmatmat(self, X):
        return self.tree._matmat(TreeGramInverse(self.tree, self.solver)._matmat(X))

    def pinv(self):
        return self.tree

    def __repr__(self):
        return f"TreePinv({self.tree!r})"


# ================================================================ block-diagonal products
class ReducedFactor:
    """One attribute's workload Gram through a tree's finest partition with the block-diagonal
    products of the tree route (docs/algorithms/trees.md)."""

    def __init__(self, Y: Matrix, fine: Intervals):
        n = Y.shape[1]
        self.Y = Y
        self.n = n
        self.fine = fine
        self.counts = fine.counts.astype(float)
        self.g = len(fine)
        self.plain = fine.identity
        self.dense = None
        self._bd: dict = {}
        if n * n <= MAX_DENSE_ENTRIES:
            D = Y.dense()
            if not self.plain:
                D = fine.sum(fine.sum(D, 0), 1)
                D = D / np.outer(self.counts, self.counts)
            self.dense = 0.5 * (D + D.T)

    def matmat(self, E: np.ndarray) -> np.ndarray:
        """``Ỹ E`` for a ``(g, k)`` array."""
        if self.dense is not None:
            return self.dense @ E
        if self.plain:
            return self.Y.matvec(E)
        X = self.fine.repeat(E / self.counts[:, None], 0)
        return self.fine.sum(self.Y.matvec(X), 0) / self.counts[:, None]

    def diag(self) -> np.ndarray:
        if self.dense is not None:
            return np.diag(self.dense).copy()
        if self.plain:
            return np.asarray(self.Y.diag(), dtype=float)
        return self.block_products(Intervals(self.g, width=1), np.ones((self.g, 1)))[:, 0]

    def block_products(self, blocks: Intervals, Z: np.ndarray) -> np.ndarray:
        """``out[S] = Ỹ[S,S] Z[S]`` for the intervals ``S`` of ``blocks`` (reduced)."""
        g = self.g
        if len(blocks) == 1:
            return self.matmat(Z)
        starts = blocks.starts
        if self.dense is not None:
            key = starts.tobytes()
            if key not in self._bd:
                ends = np.append(starts[1:], g)
                diag = [self.dense[s:e, s:e] for s, e in zip(starts, ends)]
                self._bd[key] = block_diag(diag, format="csr")
            return np.asarray(self._bd[key] @ Z)
        if Z.shape[1] != 1:
            raise ValueError(
                "structured block-diagonal products take one column; the attribute's Gram is "
                f"too large to densify ({self.n} x {self.n})"
            )
        sizes = blocks.counts
        block_of = np.repeat(np.arange(len(starts)), sizes)
        out = np.empty_like(Z)
        width = max(1, MAX_DENSE_ENTRIES // (4 * max(g, self.n)))
        for q0 in range(0, len(starts), width):
            q1 = min(len(starts), q0 + width)
            r0, r1 = starts[q0], (starts[q1] if q1 < len(starts) else g)
            E = np.zeros((g, q1 - q0))
            rows = np.arange(r0, r1)
            E[rows, block_of[rows] - q0] = Z[rows, 0]
            P = self.matmat(E)
            out[r0:r1, 0] = P[rows, block_of[rows] - q0]
        return out


# ============================================================================= tree route
class TreeRoute:
    """Union of Kronecker products × a strategy whose Gram is a :class:`TreeGram`."""

    @classmethod
    def build(cls, W: Matrix, gram: TreeGram):
        tree = gram.tree
        if not tree.invertible:
            return None
        sizes = list(tree.sizes)
        terms = []
        for c, factors in W.kron_terms():
            groups = align([f.shape[1] for f in factors], sizes)
            if any(ga.stop - ga.start != 1 for _, ga in groups):
                return None
            terms.append((c, [group(factors[gw]) for gw, _ in groups]))
        return cls(W, tree, terms)

    def __init__(self, W: Matrix, tree, terms):
        self.W, self.tree, self.terms = W, tree, terms
        self.solver = TreeSolver(tree)
        self._factors: dict = {}

    def _reduced(self, i: int, f: Matrix) -> ReducedFactor:
        key = (i, id(f))
        if key not in self._factors:
            self._factors[key] = (f, ReducedFactor(f.gram(), self.tree.levels[-1][i]))
        return self._factors[key][1]

    def check_support(self) -> None:
        if not self.tree.reduced:
            return  # singleton leaves with non-zero weights: full column rank
        for c, factors in self.terms:
            if c == 0.0:
                continue
            fracs: list[float] = []
            zero = False
            for i, f in enumerate(factors):
                fine = self.tree.levels[-1][i]
                if fine.identity:
                    continue
                counts = fine.counts
                n, g = f.shape[1], len(fine)
                check_dense_size(n, g, "the support check of a tree strategy")
                check_dense_size(f.shape[0], g, "the support check of a tree strategy")
                member = np.zeros((n, g))
                member[np.arange(n), np.repeat(np.arange(g), counts)] = 1.0
                kept = np.sum(f.matvec(member) ** 2 / counts, axis=1)
                norms = as_vector(f.rownorm_p(2), f.shape[0])
                live = norms > 0
                if not live.any():
                    zero = True  # a zero factor: every query of this term is 0
                    break
                fracs.append(float(np.min(kept[live] / norms[live])))
            if zero:
                continue
            worst = 1.0 - math.prod(fracs)
            if worst > SUPPORT_RTOL:
                raise UnsupportedWorkloadError(
                    "the tree strategy does not support the workload: a query has a relative "
                    f"component {worst:.3g} that differs between cells of one finest tree node"
                )

    @staticmethod
    def _along(rf: ReducedFactor, starts, Z: np.ndarray, axis: int) -> np.ndarray:
        Zm = np.moveaxis(Z, axis, 0)
        shape = Zm.shape
        out = rf.block_products(starts, Zm.reshape(shape[0], -1)).reshape(shape)
        return np.moveaxis(out, 0, axis)

    def trace(self) -> float:
        s, total = self.solver, 0.0
        for c, factors in self.terms:
            if c == 0.0:
                continue
            if not self.tree.reduced and all(isinstance(f.gram(), Identity) for f in factors):
                total += c * s.trace_inverse()  # K̃ = I: on the node grids only
                continue
            facs = [self._reduced(i, f) for i, f in enumerate(factors)]
            leaf = 1.0 / s.a_fine
            for rf in facs:
                leaf = np.tensordot(rf.diag(), leaf, axes=([0], [0]))
            value = float(leaf)
            for li in range(self.tree.depth - 1):
                V = s.u(li + 1)
                Z = V
                for axis, rf in enumerate(facs):
                    Z = self._along(rf, s.red[li][axis], Z, axis)
                value -= float(np.sum(s.cell_c(li) * V * Z))
            total += c * value
        return total

    def profile(self) -> np.ndarray:
        m, N = self.W.shape
        check_dense_size(m, N, "per-query variances against a tree strategy")
        inverse = TreeGramInverse(self.tree)
        width = max(1, base.MAX_DENSE_ENTRIES // (2 * max(m, N)))
        out = np.empty(m)
        for s0 in range(0, m, width):
            s1 = min(m, s0 + width)
            E = np.zeros((m, s1 - s0))
            E[np.arange(s0, s1), np.arange(s1 - s0)] = 1.0
            R = self.W.rmatvec(E)  # the rows s0..s1 of W, as columns
            out[s0:s1] = np.sum(R * inverse.matvec(R), axis=0)
        return out

    def max_profile(self) -> float:
        return float(np.max(self.profile()))
