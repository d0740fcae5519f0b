"""GreedyH (Li, Hay, Miklau & Wang, "A data- and workload-aware algorithm for range queries
under differential privacy", PVLDB 2014, §4 — the strategy stage of DAWA; HDMM §8
baseline, digest hdmm.md §15).

A binary interval tree over the 1-D domain (a node of ``n' ≤ 2`` cells has single-cell
children, otherwise ``⌊n'/2⌋`` and ``⌈n'/2⌉`` cells, the larger last). Weights are chosen
greedily bottom-up: at a node ``v`` whose children's sub-strategies (each with unit column
norm) have Grams ``M_C``, the candidate fractions ``p ∈ {1, 0.99, …, 0.01}`` give
``A_v = [α 1_vᵀ ; p · blockdiag(A_C)]`` with ``α = 1 − p`` (L1, PureDP) or ``sqrt(1 − p²)``
(L2), whose column norm is again 1. The fraction minimising the workload error restricted
to the node, ``tr(WᵀW[v,v] M_v⁻¹)``, is kept. With ``D = blockdiag(M_C)``, ``u = D⁻¹ 1``,
``s = 1ᵀu``, ``q = uᵀ WᵀW[v,v] u`` and ``t = Σ_C tr(WᵀW[C,C] M_C⁻¹)``, Sherman–Morrison gives
the closed form

    err(p) = t / p² − α² q / (p² (p² + α² s)),    M_v⁻¹ 1 = u / (p² + α² s),

so the search costs one block-diagonal product per level. The root query is not measured
(``p = 1`` at the root). A node whose workload columns are all identical (the workload
cannot tell its cells apart) is not split: it becomes one leaf query. The selected
strategy is a weighted :class:`~mmtoolkit.linalg.Tree` (a node's weight is ``α_v`` times
the product of its ancestors' ``p``), scored by the shared evaluator with least squares.
"""

from __future__ import annotations

import numpy as np

from ..linalg import MAX_DENSE_ENTRIES
from ..linalg.tree import ReducedFactor, Tree, interval_tree
from ..privacy import PureDP
from ..strategy import Strategy
from .base import ALL_PRIVACY, Selector, register
from .hierarchical import workload_sizes

__all__ = ["GreedyHSelector"]


def _identical_neighbours(K, n: int) -> np.ndarray:
    """``same[i]`` ⇔ workload columns ``i`` and ``i + 1`` are equal, i.e.
    ``(e_i − e_{i+1})ᵀ WᵀW (e_i − e_{i+1}) = 0`` (relative to the diagonal)."""
    if n < 2:
        return np.zeros(0, dtype=bool)
    width = max(1, MAX_DENSE_ENTRIES // (4 * n))
    delta = np.empty(n - 1)
    scale = np.empty(n - 1)
    for s in range(0, n - 1, width):
        e = min(n - 1, s + width)
        idx = np.arange(s, e)
        E = np.zeros((n, e - s))
        E[idx, idx - s] = 1.0
        E[idx + 1, idx - s] = -1.0
        KE = K.matvec(E)
        delta[s:e] = np.sum(E * KE, axis=0)
        scale[s:e] = np.abs(KE[idx, idx - s]) + np.abs(KE[idx + 1, idx - s])
    return delta <= 1e-12 * np.maximum(scale, 1e-300)


def _collapse(levels: list[np.ndarray], n: int, same: np.ndarray) -> list[np.ndarray]:
    """Stop splitting at the highest nodes whose cells all have identical columns."""
    blocked = np.zeros(n, dtype=bool)  # blocked[s]: s lies strictly inside a collapsed node
    out = []
    for starts in levels:
        starts = starts[~blocked[starts]]
        out.append(starts)
        ends = np.append(starts[1:], n)
        for s, e in zip(starts, ends):
            if e - s > 1 and not blocked[s] and np.all(same[s : e - 1]):
                blocked[s + 1 : e] = True
    return out


def _node_index(child_starts: np.ndarray, parent_starts: np.ndarray) -> np.ndarray:
    return np.searchsorted(parent_starts, child_starts, side="right") - 1


@register
class GreedyHSelector(Selector):
    """GreedyH: a binary tree with greedily chosen, workload-adapted level budgets (DAWA,
    PVLDB 2014 §4; module docstring). 1-D only: a workload with a multi-attribute Kronecker
    structure is an error unless ``dims=[N]`` asks for the flattened domain.

    Parameters: ``granularity`` (number of candidate fractions, default 100: ``p = k/100``),
    ``root`` (measure the root query too; default False as in DAWA), ``collapse`` (merge
    nodes whose workload columns are identical; default True). ``metadata`` records the
    chosen fraction per node (``"fractions"``, per level) and the tree's error estimate.
    """

    name = "greedy_h"
    privacy = ALL_PRIVACY

    def __init__(self, granularity=100, root=False, collapse=True, dims=None):
        if isinstance(granularity, bool) or not isinstance(granularity, (int, np.integer)):
            raise ValueError(f"granularity must be an integer >= 1, got {granularity!r}")
        if granularity < 1:
            raise ValueError(f"granularity must be an integer >= 1, got {granularity}")
        for name, v in (("root", root), ("collapse", collapse)):
            if not isinstance(v, bool):
                raise ValueError(f"{name} must be True or False, got {v!r}")
        self.params = {
            "granularity": int(granularity),
            "root": root,
            "collapse": collapse,
            "dims": dims,
        }

    def _select(self, workload, privacy, objective):
        sizes = workload_sizes(workload, self.params["dims"])
        if len(sizes) != 1:
            raise ValueError(
                f"GreedyH is a 1-D method; this workload has attribute sizes {sizes}: pass "
                "dims=[N] to run it on the flattened domain"
            )
        n = workload.shape[1]
        K = workload.gram()
        levels = interval_tree(n, 2, split="small_first")
        if self.params["collapse"]:
            levels = _collapse(levels, n, _identical_neighbours(K, n))
        l1 = isinstance(privacy, PureDP)
        fine = levels[-1]
        rf = ReducedFactor(K, fine)
        g = len(fine)
        red = [np.searchsorted(fine, s) for s in levels]
        grid = np.arange(self.params["granularity"], 0, -1) / self.params["granularity"]
        alpha2 = (1.0 - grid) ** 2 if l1 else 1.0 - grid**2

        # leaves (reduced cells): unit weight, M = 1
        U = np.ones(g)
        err = rf.diag()  # tr(K̃_jj · 1)
        fractions = [None] * len(levels)
        for li in range(len(levels) - 2, -1, -1):
            starts, child = red[li], red[li + 1]
            parent = _node_index(child, starts)
            k = len(starts)
            t = np.bincount(parent, weights=err, minlength=k)
            s = np.add.reduceat(U, starts)
            Z = rf.block_products(starts, U[:, None])[:, 0]
            q = np.add.reduceat(U * Z, starts)
            nchild = np.bincount(parent, minlength=k)
            p = np.ones(k)
            best = t.copy()
            split = nchild > 1
            if li == 0 and not self.params["root"]:
                split[:] = False
            if split.any():
                P, A2 = grid[None, :], alpha2[None, :]
                ts, ss, qs = t[split, None], s[split, None], q[split, None]
                E = ts / P**2 - A2 * qs / (P**2 * (P**2 + A2 * ss))
                j = np.argmin(E, axis=1)  # first minimum: the largest p on ties
                p[split] = grid[j]
                best[split] = E[np.arange(len(j)), j]
            a2 = (1.0 - p) ** 2 if l1 else 1.0 - p**2
            denom = p**2 + a2 * s
            U = U / np.repeat(denom, np.diff(np.append(starts, g)))
            err = best
            fractions[li] = p

        # node weights: α_v · Π_{ancestors} p ; cells: Π_{ancestors} p
        weights = [None] * len(levels)
        scale = np.ones(1)  # product of ancestors' fractions, per node of the level
        for li in range(len(levels)):
            if li:
                scale = scale[_node_index(red[li], red[li - 1])]
            if li == len(levels) - 1:
                weights[li] = scale.copy()
                break
            p = fractions[li]
            a = (1.0 - p) if l1 else np.sqrt(np.clip(1.0 - p**2, 0.0, None))
            weights[li] = a * scale
            scale = scale * p
        keep = [li for li in range(len(levels)) if li == len(levels) - 1 or np.any(weights[li])]
        tree = Tree(n, [levels[li] for li in keep], [weights[li] for li in keep])
        return Strategy(
            matrix=tree,
            selector=self.name,
            loss=float(err[0]) if np.ndim(err) else float(err),
            metadata={
                "branching": 2,
                "fractions": [None if f is None else f.tolist() for f in fractions],
                "collapsed_leaves": int(np.sum(np.diff(np.append(fine, n)) > 1)),
                "norm": 1 if l1 else 2,
            },
        )
