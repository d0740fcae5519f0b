"""Release handlers: what releasing data asks of a strategy kind, in a table.

The algebra (:mod:`mmtoolkit.linalg`) knows nothing about records, privacy or noise. What a
release needs of a kind beyond its algebra — how to measure records, whether it answers a
workload without the N-cell estimate ``x̂``, whether it runs a mechanism of its own — is asked
of the kind's *handler*, registered explicitly per kind (:func:`register_handler`) and found
by the kind's MRO (:func:`handler`) — including the row scales exact integer noise needs.
:class:`ReleaseHandler`, registered for :class:`~mmtoolkit.linalg.Matrix`, is correct for
every kind: it measures a histogram by ``A @ x`` and leaves reconstruction to the generic
algebra (``pinv_operator()`` / least squares). A composite kind's handler
(:class:`WeightedHandler`) delegates to its part's.

Kinds of the algebra have their handlers here (:class:`MarginalsHandler`); a selector
package registers the handler of its own kind from there (ResidualPlanner's strategy, HDMM's
separate-answering union), since selectors sit above this layer.
"""

from __future__ import annotations

import math
from functools import reduce

import numpy as np

from .linalg import (
    CountingQueries,
    Kronecker,
    Marginals,
    Matrix,
    Tree,
    VStack,
    Weighted,
    as_matrix,
    check_dense_size,
    peel,
)
from .linalg.base import PINV_RCOND, SMALL_DENSE_ENTRIES, integer_row_scales

__all__ = ["ReleaseHandler", "WeightedHandler", "VStackHandler", "CountingQueriesHandler",
           "KroneckerHandler", "TreeHandler", "MarginalsHandler", "handler", "register_handler"]


class ReleaseHandler:
    """The release operations of a strategy kind ``A`` (each takes the strategy first). This
    generic handler is correct for any kind; a kind's handler overrides what its structure
    does better."""

    def answer_records(self, A: Matrix, records) -> np.ndarray:
        """The true strategy answers ``A x`` from :class:`~mmtoolkit.records.Records`: through
        the records' histogram ``x`` (which the records refuse for a large domain)."""
        if A.shape[1] != records.domain.size:
            raise ValueError(
                f"the records' domain has {records.domain.size} cells but the strategy is "
                f"defined on {A.shape[1]}"
            )
        return A @ records.vector(np.float64)  # one N-sized array

    def workload_answers(self, A: Matrix, W: Matrix, y) -> np.ndarray | None:
        """The workload answers straight from the noisy strategy answers ``y`` (one release
        or ``m x R``) when the kind can avoid the N-cell ``x̂`` or has its own answering
        rule; None: the mechanism reconstructs ``x̂`` and answers ``W x̂``."""
        return None

    def needs_estimate(self, A: Matrix, W: Matrix) -> bool:
        """Whether releasing ``W``'s answers through ``A`` builds the N-cell estimate ``x̂``
        (asked by the noise plan's ``check_fits`` before any noise is drawn)."""
        return True

    def reads_histogram(self, A: Matrix) -> bool:
        """Whether measuring records through ``A`` forms their N-cell histogram (asked, with
        records, before any noise is drawn and before a ledger charge)."""
        return True

    def discrete_summary(self, A: Matrix, noise) -> dict | None:
        """A kind with a discrete mechanism of its own describes it (release summaries), or
        raises :class:`~mmtoolkit.linalg.NotSupportedByKindError` when it does not apply
        (``noise``: the noise plan's :class:`~mmtoolkit.plan.Noise`); None: the generic
        exact samplers (:mod:`mmtoolkit.discrete`)."""
        return None

    def discrete_proxy_factor(self, A: Matrix, noise) -> float | None:
        """A kind with a discrete mechanism of its own: the largest ratio, over its noise
        draws, of the draw's subgaussian variance proxy (``σ̄²`` of ``N_Z(0, σ̄²)``, Canonne,
        Kamath & Steinke 2020) to the continuous variance it replaces (≥ 1: parameters are
        rounded up); None: the generic exact samplers (:attr:`NoisePlan.proxy_factor`)."""
        return None

    def release_answers(self, A: Matrix, W: Matrix, data, noise, rng):
        """A kind with a mechanism of its own releases ``W``'s answers from ``data`` with the
        ``noise`` (a :class:`~mmtoolkit.plan.Noise`) drawn from ``rng``; None: the generic
        measure → answer."""
        return None

    def marginal_measurements(self, A: Matrix, data, noise, rng) -> list | None:
        """A kind with a mechanism of its own measures ``data`` for Private-PGM
        (:func:`mmtoolkit.pgm.measure`) as marginal Measurements with the continuous
        ``noise`` (a :class:`~mmtoolkit.plan.Noise`); None: the generic mechanism."""
        return None

    def noise_coefficients(self, A: Matrix, W: Matrix) -> np.ndarray | None:
        """The dense ``m x rows`` matrix ``C`` with ``W``'s released answers ``C y`` for
        noisy strategy answers ``y`` (``C = W A⁺``: the map :meth:`workload_answers`, else
        reconstruct → answer, applies), so answer ``i``'s noise is ``Σ_j C_ij z_j``
        (:mod:`mmtoolkit.intervals`); None when ``C``, the dense ``W`` or a dense ``A⁺`` it
        is computed from would exceed :data:`~mmtoolkit.linalg.base.SMALL_DENSE_ENTRIES`
        entries. Generic: this handler's own :meth:`workload_answers` applied to blocks of
        columns of the identity, else ``(A⁺ᵀ Wᵀ)ᵀ`` through the kind's ``pinv_operator()``,
        else a dense pseudo-inverse."""
        m, rows, cells = int(W.shape[0]), int(A.shape[0]), int(A.shape[1])
        if m * rows > SMALL_DENSE_ENTRIES:
            return None
        block = max(1, SMALL_DENSE_ENTRIES // (8 * max(m, rows)))
        C = np.empty((m, rows))
        for lo in range(0, rows, block):
            hi = min(rows, lo + block)
            unit = np.zeros((rows, hi - lo))
            unit[np.arange(lo, hi), np.arange(hi - lo)] = 1.0
            part = self.workload_answers(A, W, unit)
            if part is None:
                break
            C[:, lo:hi] = part
        else:
            return C
        if m * cells > SMALL_DENSE_ENTRIES:
            return None
        P = A.pinv_operator()
        if P is not None:
            return np.asarray(P.T @ W.dense().T, dtype=float).T
        if cells * rows > SMALL_DENSE_ENTRIES:
            return None
        return W.dense() @ np.linalg.pinv(A.dense(), rcond=PINV_RCOND)

    def row_scales(self, A: Matrix) -> np.ndarray | None:
        """Discrete noise: ``d > 0`` (one per row) with ``diag(d)⁻¹ A`` integer, or None
        (Canonne, Kamath & Steinke 2020 need integer queries). Generic: a small strategy read
        densely and checked exactly (:func:`~mmtoolkit.linalg.base.integer_row_scales`), None
        beyond :data:`~mmtoolkit.linalg.base.SMALL_DENSE_ENTRIES`."""
        if A.shape[0] * A.shape[1] > SMALL_DENSE_ENTRIES:
            return None
        return integer_row_scales(A.dense())

    def row_scale_terms(self, A: Matrix) -> list | None:
        """:meth:`row_scales` as a union of Kronecker products of small vectors,
        ``[(weights_t, vectors_t)]``: term ``t``'s row scales are ``w_k · (… (w_1 · (v_1 ⊗ v_2
        ⊗ …)))``, terms in row order, by the same floating-point operations as
        ``row_scales`` so a range of rows gets the same bits without an array over all rows
        (the Dask route). None when ``row_scales`` is None; generic: one term."""
        s = self.row_scales(A)
        return None if s is None else [((), [s])]


class WeightedHandler(ReleaseHandler):
    """``c · A``: its base's handler, the weight applied (the noise is calibrated to the
    sensitivity and ``A⁺`` undoes the weight, so a weighted strategy releases exactly what
    its base releases)."""

    def answer_records(self, A, records):
        return A.weight * handler(A.base).answer_records(A.base, records)

    def workload_answers(self, A, W, y):
        if A.weight == 0:
            return None
        y = np.asarray(y, dtype=float) / A.weight
        return handler(A.base).workload_answers(A.base, W, y)

    def needs_estimate(self, A, W):
        return handler(A.base).needs_estimate(A.base, W)

    def reads_histogram(self, A):
        return handler(A.base).reads_histogram(A.base)

    def discrete_summary(self, A, noise):
        return handler(A.base).discrete_summary(A.base, noise)

    def discrete_proxy_factor(self, A, noise):
        return handler(A.base).discrete_proxy_factor(A.base, noise)  # a ratio: c cancels

    def release_answers(self, A, W, data, noise, rng):
        return handler(A.base).release_answers(A.base, W, data, noise, rng)

    def marginal_measurements(self, A, data, noise, rng):
        # c·A has c times A's sensitivity, so dividing its answers by c gives A's measurements
        return handler(A.base).marginal_measurements(A.base, data, noise, rng)

    def row_scales(self, A):
        inner = handler(A.base).row_scales(A.base)
        return None if inner is None or A.weight == 0 else abs(A.weight) * inner

    def row_scale_terms(self, A):
        inner = handler(A.base).row_scale_terms(A.base)
        if inner is None or A.weight == 0:
            return None
        return [(ws + (abs(A.weight),), vecs) for ws, vecs in inner]


class VStackHandler(ReleaseHandler):
    """A stack of blocks: each block's rows by its own handler, in order."""

    def row_scales(self, A):
        parts = [handler(b).row_scales(b) for b in A.blocks]
        return None if any(p is None for p in parts) else np.concatenate(parts)

    def row_scale_terms(self, A):
        parts = [handler(b).row_scale_terms(b) for b in A.blocks]
        return None if any(p is None for p in parts) else [t for p in parts for t in p]


class CountingQueriesHandler(ReleaseHandler):
    """0/1 counting queries (identity, total, prefix, ranges): integer rows, scale 1."""

    def row_scales(self, A):
        check_dense_size(A.shape[0], 1, "the row scales of a strategy")
        return np.ones(A.shape[0])

    def row_scale_terms(self, A):
        # every scale is 1: one constant vector over the rows, without an array of them
        return [((), [_constant(1.0, A.shape[0])])]


class KroneckerHandler(ReleaseHandler):
    """A Kronecker product: row scales factor by factor."""

    def row_scales(self, A):
        check_dense_size(A.shape[0], 1, "the row scales of a strategy")
        terms = self.row_scale_terms(A)
        return None if terms is None else reduce(np.kron, terms[0][1], np.ones(1))

    def row_scale_terms(self, A):
        vecs = [handler(f).row_scales(f) for f in A.factors]
        return None if any(v is None for v in vecs) else [((), vecs)]


class TreeHandler(ReleaseHandler):
    """A nested-partition tree: each level's rows are counting queries of its weight."""

    def row_scales(self, A):
        check_dense_size(A.shape[0], 1, "the row scales of a tree strategy")
        levels = zip(A.weights, A.grid, strict=True)
        d = np.concatenate([np.abs(np.broadcast_to(np.asarray(w, float), g)).ravel()
                            for w, g in levels])
        return None if np.any(d == 0) else d

    def row_scale_terms(self, A):
        # a level of one weight: a constant vector over its nodes, without an array of them
        terms = []
        for w, g in zip(A.weights, A.grid, strict=True):
            if np.ndim(w) == 0:
                v = _constant(abs(float(w)), math.prod(g))
            else:
                v = np.abs(np.broadcast_to(np.asarray(w, float), g)).ravel()
            if np.any(v == 0):
                return None
            terms.append(((), [v]))
        return terms


def _constant(value: float, n: int) -> np.ndarray:
    """``n`` copies of ``value`` as a read-only view of one float (no memory over ``n``;
    :class:`~mmtoolkit.discrete.RowScales` takes its distinct values without sorting it)."""
    return np.broadcast_to(np.float64(value), (n,))


class MarginalsHandler(ReleaseHandler):
    """Weighted marginals (HDMM §6.3): measured from the records' marginal tables, and a
    marginals workload answered from ``y`` in the 2^d spectral algebra, without ``x̂``."""

    def answer_records(self, A, records):
        other = tuple(A.sizes) != tuple(records.domain.sizes)
        if other and A.shape[1] == records.domain.size:  # the cells in another layout
            return super().answer_records(A, records)  # (e.g. flattened): the histogram
        return A.answer_records(records)

    def workload_answers(self, A, W, y):
        return A.workload_answers(W, y)

    def needs_estimate(self, A, W):
        return not isinstance(peel(as_matrix(W))[1], Marginals)  # as workload_answers

    def reads_histogram(self, A):
        return False  # marginal tables

    def row_scales(self, A):
        check_dense_size(A.shape[0], 1, "the row scales of a marginals strategy")
        return np.concatenate([np.full(b.shape[0], abs(t)) for t, b in A.blocks()])


_TABLE: dict[type, ReleaseHandler] = {}


def register_handler(kind: type, release_handler: ReleaseHandler) -> None:
    """Register ``release_handler`` for the strategy kind ``kind`` (a Matrix subclass) and
    its subclasses without a handler of their own."""
    if not (isinstance(kind, type) and issubclass(kind, Matrix)):
        raise TypeError(f"kind must be a Matrix subclass, got {kind!r}")
    if not isinstance(release_handler, ReleaseHandler):
        raise TypeError(f"handler must be a ReleaseHandler, got {type(release_handler).__name__}")
    _TABLE[kind] = release_handler


def handler(A) -> ReleaseHandler:
    """The release handler of ``A``'s kind: the one registered for the nearest class of its
    MRO (:class:`ReleaseHandler` for any Matrix)."""
    for cls in type(as_matrix(A)).__mro__:
        if cls in _TABLE:
            return _TABLE[cls]
    raise TypeError(f"no release handler for {type(A).__name__}")  # pragma: no cover


register_handler(Matrix, ReleaseHandler())
register_handler(Weighted, WeightedHandler())
register_handler(VStack, VStackHandler())
register_handler(CountingQueries, CountingQueriesHandler())
register_handler(Kronecker, KroneckerHandler())
register_handler(Tree, TreeHandler())
register_handler(Marginals, MarginalsHandler())
