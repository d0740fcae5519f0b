"""Tree route: nested-partition strategies (H_b, HB, Quadtree, GreedyH, Privelet) exactly by a
Sherman–Morrison pass over the tree (``linalg/tree.py``)."""

from __future__ import annotations

import math

import numpy as np

from ..linalg import (
    Matrix,
    check_dense_size,
    kron_terms,
)
from ..linalg import base as _linalg_base
from ..linalg.tree import ReducedFactor, TreeGram, TreeGramInverse, TreeSolver
from ._common import SUPPORT_RTOL, UnsupportedWorkloadError, _align, _as_vector, _group


# ============================================================================= tree route
class _TreeRoute:
    """Union of Kronecker products × a tree strategy (``gram()`` is a ``TreeGram``: H_b, HB,
    HB-2D, Quadtree, GreedyH; ``linalg/tree.py``), exact without an N x N array.

    In the tree's reduced coordinates, the Sherman–Morrison pass ``M_Q⁻¹ = D⁻¹ − c_Q v_Q v_Qᵀ``
    gives ``tr(K̃ M̃⁻¹) = Σ_j K̃_jj / a_j − Σ_ℓ Σ_{Q ∈ ℓ} c_Q v_Qᵀ K̃[Q,Q] v_Q``; for a Kronecker
    term ``K̃[Q,Q] = ⊗_i Ỹ_i[S_i,S_i]``, so each level costs one block-diagonal product
    along each axis (``ReducedFactor``). A workload that is not constant on a finest node
    of a reduced tree is unsupported.
    """

    @classmethod
    def build(cls, W: Matrix, gram: TreeGram):
        tree = gram.tree
        if not tree.invertible:
            return None
        sizes = list(tree.sizes)
        terms = []
        for c, factors in kron_terms(W):
            groups = _align([f.shape[1] for f in factors], sizes)
            if any(ga.stop - ga.start != 1 for _, ga in groups):
                return None
            terms.append((c, [_group(factors[gw]) for gw, _ in groups]))
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
            fracs = []
            for i, f in enumerate(factors):
                counts = self.tree.fine_counts[i]
                if np.all(counts == 1):
                    continue
                fine = self.tree.levels[-1][i]
                n, g = f.shape[1], len(fine)
                check_dense_size(n, g, "the support check of a tree strategy")
                check_dense_size(f.shape[0], g, "the support check of a tree strategy")
                member = np.zeros((n, g))
                member[np.arange(n), np.repeat(np.arange(g), counts)] = 1.0
                kept = np.sum(f.matvec(member) ** 2 / counts, axis=1)
                norms = _as_vector(f.rownorm_p(2), f.shape[0])
                live = norms > 0
                if not live.any():
                    fracs = None  # a zero factor: every query of this term is 0
                    break
                fracs.append(float(np.min(kept[live] / norms[live])))
            if fracs is None:
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
            facs = [self._reduced(i, f) for i, f in enumerate(factors)]
            leaf = 1.0 / s.a_fine
            for rf in facs:
                leaf = np.tensordot(rf.diag(), leaf, axes=([0], [0]))
            value = float(leaf)
            for li in range(self.tree.depth - 1):
                V = s.U[li + 1]
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
        width = max(1, _linalg_base.MAX_DENSE_ENTRIES // (2 * max(m, N)))
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
