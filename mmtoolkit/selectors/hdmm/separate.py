"""A union strategy answered block by block (HDMM §6.2 Def. 11; HDMM digest §6): each workload
product from the one block that supports it with the least error. :class:`SeparateUnion`, its
closed-form error route :class:`SeparateRoute` (HDMM Thm 5 per block) and release handler.
User guide: docs/algorithms/hdmm.md.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...linalg import (
    Kronecker,
    KroneckerUnion,
    Matrix,
    UnsupportedWorkloadError,
    as_matrix,
    check_dense_size,
)
from ...linalg.kronecker import FactorPairs, StrategyFactor, group, kron_all
from ...linalg.route import SUPPORT_RTOL, align
from ...release_handlers import ReleaseHandler, register_handler


class SeparateUnion(KroneckerUnion):
    """A stack of weighted Kronecker products (one factorisation of the domain) whose evaluator
    error and release answer each product from its best block; the rest is the stack's."""

    def error_route(self, W):
        return SeparateRoute(as_matrix(W), self)

    def workload_answers(self, W, y):
        """``𝕎_j (w_g 𝔸_g)⁺ y_g`` for every product term ``j`` of ``W`` and its block ``g``, in
        ``W``'s row order (``y``: one release or ``rows x R``); one application of ``W`` in all."""
        W = as_matrix(W)
        route = SeparateRoute(W, self)
        route.check_support()
        y = np.asarray(y, dtype=float)
        Y = y[:, None] if y.ndim == 1 else y
        if Y.shape[0] != self.shape[0]:
            raise ValueError(f"y has {Y.shape[0]} rows, the strategy has {self.shape[0]}")
        rows = [math.prod(f.shape[0] for f in fs) for _, fs in route.terms]
        starts = np.cumsum([0] + rows)
        out = np.zeros((W.shape[0], Y.shape[1]))
        choice = route.choice[0]
        o = self._offsets

        def term(j, X):  # √c_j (⊗ factors_j) X, the rows of term j up to its sign
            c, factors = route.terms[j]
            return math.sqrt(c) * (Kronecker(factors) @ X)

        r = np.random.default_rng(0).standard_normal(W.shape[1])  # a probe, not noise
        probe = W @ r
        sign = {
            j: math.copysign(1.0, float(np.dot(probe[starts[j] : starts[j + 1]], term(j, r))))
            for j in np.flatnonzero(choice >= 0)
        }
        del r, probe  # an N-vector and an answers-sized one, not kept through the blocks
        for g in np.unique(choice[choice >= 0]):
            block = self.blocks[g]
            Yg = Y[o[g] : o[g + 1]]
            xhat = None  # the previous block's estimate goes before this one is built
            pinv = block.pinv_operator()
            if pinv is not None:
                xhat = pinv @ Yg
            else:
                check_dense_size(*block.shape, f"the least-squares solve of block {g}")
                xhat = np.linalg.lstsq(block.dense(), Yg, rcond=None)[0]
            for j in np.flatnonzero(choice == g):
                np.multiply(term(j, xhat), sign[j], out=out[starts[j] : starts[j + 1]])
        return out[:, 0] if y.ndim == 1 else out


class SeparateRoute:
    """The error route of :class:`SeparateUnion`: ``trace`` / ``profile`` of block-by-block
    answering, before the privacy factor and the sensitivity."""

    def __init__(self, W: Matrix, A: SeparateUnion):
        self.W, self.A = W, A
        self._slots: dict[tuple[int, int], tuple] = {}  # strategy factors per aligned slot
        self._masks: dict[tuple, tuple] = {}  # supporting blocks per (slot, workload factor)
        self.pairs = FactorPairs()
        self._plans: dict[tuple[int, ...], list] = {}

    @functools.cached_property
    def terms(self):
        return self.W.kron_terms()

    def _slot(self, ga: slice):
        """The distinct ``StrategyFactor``s on one aligned group of attributes, each block's index
        into them, and per factor the bit set of the blocks that carry it."""
        key = (ga.start, ga.stop)
        hit = self._slots.get(key)
        if hit is None:
            factors: list[StrategyFactor] = []
            index = np.empty(len(self.A.parsed), dtype=np.intp)
            by_ids: dict[tuple[int, ...], int] = {}
            for g, (_, fs) in enumerate(self.A.parsed):
                ids = tuple(id(f) for f in fs[ga])
                k = by_ids.get(ids)
                if k is None:
                    k = by_ids[ids] = len(factors)
                    factors.append(StrategyFactor(group(fs[ga])))
                index[g] = k
            bits = [0] * len(factors)
            for g, slot in enumerate(index):
                bits[slot] |= 1 << g
            hit = self._slots[key] = (factors, index, bits)
        return hit

    def _plan(self, factors):
        sizes = tuple(f.shape[1] for f in factors)
        plan = self._plans.get(sizes)
        if plan is None:
            plan = self._plans[sizes] = align(list(sizes), list(self.A.sizes))
        return [(group(factors[gw]), ga) for gw, ga in plan]

    def _support(self, wf: Matrix, ga: slice):
        """``(zero, bits)``: whether the workload factor is zero, and the blocks whose factor
        on this slot has every row of ``wf`` in its row space."""
        key = (ga.start, ga.stop, id(wf))
        hit = self._masks.get(key)
        if hit is None:
            factors, _, bits = self._slot(ga)
            mask, zero = 0, False
            for sf, b in zip(factors, bits):
                top, residual = sf.worst_row_residual(wf)
                zero = top == 0.0
                if zero or residual <= SUPPORT_RTOL:
                    mask |= b
            hit = self._masks[key] = (wf, zero, mask)  # wf kept alive while its id is a key
        return hit[1], hit[2]

    def _factor(self, ga: slice, g: int) -> StrategyFactor:
        """Block ``g``'s strategy factor on one aligned slot."""
        factors, index, _ = self._slot(ga)
        return factors[index[g]]

    def _value(self, what, c, groups, g):
        value = c / self.A.parsed[g][0]
        for wf, ga in groups:
            value *= self.pairs.value(what, wf, self._factor(ga, g))
        return value

    @functools.cached_property
    def choice(self) -> tuple[np.ndarray, np.ndarray]:
        """``(block, error)`` per workload term: the supporting block of least error and that
        error (block -1: a zero term, error 0; block -2: no block supports the term)."""
        block = np.empty(len(self.terms), dtype=np.intp)
        error = np.zeros(len(self.terms))
        everyone = (1 << len(self.A.parsed)) - 1
        for j, (c, factors) in enumerate(self.terms):
            groups = self._plan(factors)
            mask, zero = everyone, c == 0.0
            for wf, ga in groups:
                z, bits = self._support(wf, ga)
                zero |= z
                mask &= bits
            if zero:
                block[j] = -1
                continue
            best, where = math.inf, -2
            while mask:
                low = mask & -mask
                g = low.bit_length() - 1
                mask ^= low
                value = self._value("trace", c, groups, g)
                if value < best:
                    best, where = value, g
            block[j], error[j] = where, (best if where >= 0 else math.inf)
        return block, error

    def check_support(self) -> None:
        missing = np.flatnonzero(self.choice[0] == -2)
        if missing.size:
            raise UnsupportedWorkloadError(
                f"no block of the separate-answering union supports workload product "
                f"{int(missing[0])} ({missing.size} product(s) unsupported; a product is "
                "answered from one block, which must support all of its queries)"
            )

    def trace(self) -> float:
        return float(np.sum(self.choice[1]))

    def profile(self) -> np.ndarray:
        parts = []
        for (c, factors), g in zip(self.terms, self.choice[0]):
            groups = self._plan(factors)
            rows = [wf.shape[0] for wf, _ in groups]
            if g < 0:
                check_dense_size(math.prod(rows), 1, "a per-query vector")
                parts.append(np.zeros(math.prod(rows)))
                continue
            vecs = [self.pairs.value("profile", wf, self._factor(ga, g)) for wf, ga in groups]
            parts.append(c / self.A.parsed[g][0] * kron_all(vecs, rows))
        return np.concatenate(parts)

    def max_profile(self) -> float:
        # every factor profile is non-negative: the max of their Kronecker product is the
        # product of their maxima
        return max(
            (self._value("max", c, self._plan(fs), g)
             for (c, fs), g in zip(self.terms, self.choice[0]) if g >= 0),
            default=0.0,
        )  # fmt: skip


class SeparateHandler(ReleaseHandler):
    """OPT_+'s separate answering on the release side (:mod:`mmtoolkit.release_handlers`):
    each workload product answered from its one block (:meth:`SeparateUnion.workload_answers`)."""

    def workload_answers(self, A, W, y):
        return A.workload_answers(W, y)


register_handler(SeparateUnion, SeparateHandler())
