"""GreedyH (Li, Hay, Miklau & Wang, PVLDB 2014, §4 — the strategy stage of DAWA; HDMM §8
baseline, digest §15): a binary interval tree whose node budgets are chosen greedily bottom-up
by a Sherman-Morrison error criterion, ``criterion="dawa"`` (reproduces HDMM Table 4(a)) or
``"exact"``; the ``greedy_h`` selector.
User guide: docs/algorithms/baselines.md.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from ...checks import check_bool, check_int
from ...linalg import MAX_DENSE_ENTRIES
from ...linalg.tree import Tree, interval_tree
from ...strategy import Strategy
from ..base import ALL_PRIVACY, NotApplicableError, Selector, register
from .sizes import check_dims, workload_sizes

__all__ = ["GreedyHSelector"]

CRITERIA = ("dawa", "exact")
_CHUNK = 1 << 22  # entries of one block of workload-Gram products


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


class _Quadratic:
    """``z_vᵀ G z_v`` for blocks ``v`` of ``z``, ``G = K`` or ``K²`` for the workload Gram ``K``
    (dense if it fits, else ``K``'s structured products on chunks of block columns)."""

    def __init__(self, K, n: int, squared: bool):
        self.K, self.n, self.squared = K, n, squared
        self.dense = K.dense() if n * n <= MAX_DENSE_ENTRIES else None

    def __call__(self, lo: np.ndarray, hi: np.ndarray, z: np.ndarray) -> np.ndarray:
        out = np.empty(len(lo))
        if len(lo) == 0:
            return out
        width = max(1, _CHUNK // self.n)
        for c0 in range(0, len(lo), width):
            a, b = lo[c0 : c0 + width], hi[c0 : c0 + width]
            sizes = b - a
            rows = np.repeat(np.arange(len(a)), sizes)
            cols = np.concatenate([np.arange(x, y) for x, y in zip(a, b)])
            Zt = sparse.csr_matrix((z[cols], (rows, cols)), shape=(len(a), self.n))
            if self.dense is not None:
                KZt = np.asarray(Zt @ self.dense)  # rows: (K z_v)ᵀ, K symmetric
            else:
                KZt = self.K.matvec(Zt.T.toarray()).T
            if self.squared:
                out[c0 : c0 + len(a)] = np.einsum("ij,ij->i", KZt, KZt)
            else:
                out[c0 : c0 + len(a)] = np.asarray(Zt.multiply(KZt).sum(axis=1)).ravel()
        return out


@register
class GreedyHSelector(Selector):
    """GreedyH: a binary tree with greedily chosen, workload-adapted node budgets (DAWA, PVLDB
    2014 §4), 1-D only (``dims=[N]``: the flattened domain). Parameters: ``criterion``,
    ``granularity``, ``root``, ``collapse``, ``dims``; ``loss``: the criterion at the root."""

    name = "greedy_h"
    method = "GreedyH (DAWA's workload-adapted tree)"
    paper = "Li, Hay, Miklau & Wang, PVLDB 2014 (DAWA), §4"
    privacy = ALL_PRIVACY

    def __init__(self, criterion="dawa", granularity=100, root=False, collapse=True, dims=None):
        if criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
        self.params = {
            "criterion": criterion,
            "granularity": check_int(granularity, "granularity", minimum=1),
            "root": check_bool(root, "root"),
            "collapse": check_bool(collapse, "collapse"),
            "dims": check_dims(dims),
        }

    def _select(self, workload, privacy, objective):
        sizes = workload_sizes(workload, self.params["dims"])
        if len(sizes) != 1:
            raise NotApplicableError(
                f"GreedyH is a 1-D method; this workload has attribute sizes {sizes}: pass "
                "dims=[N] to run it on the flattened domain"
            )
        n = workload.shape[1]
        dawa = self.params["criterion"] == "dawa"
        K = workload.gram()
        levels = [lv.starts for lv in interval_tree(n, 2, split="small_first")]
        if self.params["collapse"]:
            levels = _collapse(levels, n, _identical_neighbours(K, n))
        l1 = privacy.norm == 1
        quad = _Quadratic(K, n, squared=dawa)
        grid = np.arange(self.params["granularity"], 0, -1) / self.params["granularity"]
        alpha2 = (1.0 - grid) ** 2 if l1 else 1.0 - grid**2

        # finest nodes (single cells, or collapsed nodes of identical columns): unit
        # weight, M⁻¹ 1 = 1/size per cell, criterion = q = G_ii
        fine = levels[-1]
        ends = np.append(fine[1:], n)
        U = np.repeat(1.0 / (ends - fine), ends - fine)
        err = quad(fine, ends, U)
        qf = err.copy()  # u_vᵀ G[v,v] u_v with the node's final u_v
        fractions = [None] * len(levels)
        for li in range(len(levels) - 2, -1, -1):
            starts, child = levels[li], levels[li + 1]
            ends = np.append(starts[1:], n)
            parent = _node_index(child, starts)
            k = len(starts)
            t = np.bincount(parent, weights=err, minlength=k)
            q1 = np.bincount(parent, weights=qf, minlength=k)
            s = np.add.reduceat(U, starts)
            split = np.bincount(parent, minlength=k) > 1
            if li == 0 and not self.params["root"]:
                split[:] = False
            q = q1.copy()
            p = np.ones(k)
            best = t.copy()
            if split.any():
                q[split] = quad(starts[split], ends[split], U)
                beta = 2.0 ** (-li / 2) if dawa else 1.0
                P, A2 = grid[None, :], beta * alpha2[None, :]
                ts, ss = t[split, None], s[split, None]
                qe = q1[split, None] + beta * (q[split, None] - q1[split, None])
                E = ts / P**2 - A2 * qe / (P**2 * (P**2 + A2 * ss))
                j = np.argmin(E, axis=1)  # first minimum: the largest p on ties
                p[split] = grid[j]
                best[split] = E[np.arange(len(j)), j]
            a2 = (1.0 - p) ** 2 if l1 else 1.0 - p**2
            denom = p**2 + a2 * s
            U = U / np.repeat(denom, ends - starts)
            qf = q / denom**2
            err = best
            fractions[li] = p

        # node weights: α_v · Π_{ancestors} p ; finest nodes: Π_{ancestors} p
        weights = [None] * len(levels)
        scale = np.ones(1)  # product of ancestors' fractions, per node of the level
        for li in range(len(levels)):
            if li:
                scale = scale[_node_index(levels[li], levels[li - 1])]
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
            loss=float(err[0]),
            metadata={
                "branching": 2,
                "criterion": self.params["criterion"],
                "fractions": [None if f is None else f.tolist() for f in fractions],
                "collapsed_leaves": int(np.sum(np.diff(np.append(fine, n)) > 1)),
                "norm": 1 if l1 else 2,
            },
        )
