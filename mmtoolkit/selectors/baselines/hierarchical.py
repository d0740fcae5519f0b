"""Hierarchical baselines as the HDMM experiments use them (HDMM §8, digest §15): H_b trees
(Hay et al. 2010, ``hierarchical``), HB (Qardaji, Yang & Li 2013, ``hb``) and Quadtree
(Cormode et al. 2012, ``quadtree``), each a :class:`~mmtoolkit.linalg.Tree` or a Kronecker
product of 1-D trees.
User guide: docs/algorithms/baselines.md.
"""

from __future__ import annotations

import math

import numpy as np

from ...checks import check_bool, check_int, check_option
from ...linalg.kronecker import group
from ...linalg.tree import SPLITS, Intervals, Tree, interval_tree, tree_height
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import NotApplicableError, Selector, register
from .sizes import check_dims, workload_sizes

__all__ = [
    "HBSelector",
    "HierarchicalSelector",
    "QuadtreeSelector",
    "hb_branching",
    "hb2d_branching",
]


def _product_levels(trees: list[list[Intervals]]) -> list[tuple]:
    """Level-wise product of per-attribute trees, the finest (single-cell) level of a
    shallower tree repeated."""
    depth = max(len(t) for t in trees)
    trees = [t + [t[-1]] * (depth - len(t)) for t in trees]
    return [tuple(t[li] for t in trees) for li in range(depth)]


def _below(levels: list, start: int) -> list:
    """The levels from ``start`` on (a single-level tree keeps its one level)."""
    return levels[start:] if len(levels) > 1 else levels


def _height_candidates(n: int):
    """For each height a ``b``-ary tree over ``n ≥ 2`` cells can have, the smallest such ``b``: both
    branching rules increase with ``b`` at a fixed height, so their minimum is among these."""
    out = []
    for h in range(tree_height(n, 2), 0, -1):
        b = max(2, int(round(n ** (1.0 / h))))
        while b**h < n:
            b += 1
        while b > 2 and (b - 1) ** h >= n:
            b -= 1
        if tree_height(n, b) == h:
            out.append(b)
    return out


def hb_branching(n: int) -> int:
    """Qardaji et al. 2013 (§4; HDMM digest §15): the ``b ∈ {2, …, n}`` minimising
    ``(b − 1) h³ − 2 (b + 1) h² / 3``, ``h = ⌈log_b n⌉`` (ties: the smallest; ``n = 1``: 2)."""
    if n < 2:
        return 2

    def cost(b):  # three times the rule's, in integers: exact ties keep the first (smallest) b
        h = tree_height(n, b)
        return 3 * (b - 1) * h**3 - 2 * (b + 1) * h**2

    return min(_height_candidates(n), key=cost)


def hb2d_branching(n: int) -> int:
    """HB on 2-D domains (Qardaji et al. 2013 §5; digest §15): the ``b ∈ {2, …, n}``
    minimising ``b (n − 1) h²``, ``h = ⌈log_b n⌉``, with ``n = ⌊√N⌋`` cells per side."""
    if n < 2:
        return 2
    return min(_height_candidates(n), key=lambda b: b * (n - 1) * tree_height(n, b) ** 2)


@register
class HierarchicalSelector(Selector):
    """H_b: the ``b``-ary interval tree, uniform budget over its levels (Hay, Rastogi, Miklau &
    Suciu, PVLDB 2010). Parameters: ``branching``, ``root``, ``split``, ``dims``, ``multi``."""

    name = "hierarchical"
    method = "H_b: b-ary hierarchical intervals, uniform budget (H2 for b = 2)"
    paper = "Hay, Rastogi, Miklau & Suciu, PVLDB 2010"

    def __init__(self, branching=2, root=True, split="near_equal", dims=None, multi="kron"):
        if multi not in ("kron", "product"):
            raise ValueError(f"multi must be 'kron' or 'product', got {multi!r}")
        check_option(split, "split", SPLITS)
        self.params = {
            "branching": check_int(branching, "branching", minimum=2),
            "root": check_bool(root, "root"),
            "split": split,
            "dims": check_dims(dims),
            "multi": multi,
        }

    def _select(self, workload, privacy: Privacy, objective: str) -> Strategy:
        sizes = workload_sizes(workload, self.params["dims"])
        start = 0 if self.params["root"] else 1
        b, split = self.params["branching"], self.params["split"]
        trees = [interval_tree(n, b, split=split) for n in sizes]
        if len(sizes) == 1 or self.params["multi"] == "kron":
            matrix = group([Tree(n, _below(lv, start)) for n, lv in zip(sizes, trees)])
        else:
            matrix = Tree(sizes, _below(_product_levels(trees), start))
        levels = [len(t) - (start if len(t) > 1 else 0) for t in trees]
        meta = {"branching": b, "sizes": sizes, "levels": levels}
        return Strategy(matrix=matrix, selector=self.name, metadata=meta)


@register
class HBSelector(Selector):
    """HB (Qardaji, Yang & Li, PVLDB 2013; HDMM §8): the variance-optimal branching factor, the root
    dropped. Parameters: ``branching`` (overrides the rule), ``split2d``, ``dims``."""

    name = "hb"
    method = "HB: hierarchy with the variance-optimal branching factor"
    paper = "Qardaji, Yang & Li, PVLDB 2013"

    def __init__(self, branching=None, split2d="pad", dims=None):
        if branching is not None:
            branching = check_int(branching, "branching", minimum=2)
        if split2d not in ("pad", "near_equal"):
            raise ValueError(f"split2d must be 'pad' or 'near_equal', got {split2d!r}")
        self.params = {"branching": branching, "split2d": split2d, "dims": check_dims(dims)}

    def _select(self, workload, privacy: Privacy, objective: str) -> Strategy:
        sizes = workload_sizes(workload, self.params["dims"])
        b = self.params["branching"]
        domain: int | list[int]  # the cells of a 1-D tree, the sizes of a 2-D one
        if len(sizes) == 1:
            domain = sizes[0]
            b = hb_branching(domain) if b is None else b
            levels = _below(interval_tree(domain, b, split="near_equal"), 1)
        elif len(sizes) == 2:
            b = hb2d_branching(math.isqrt(math.prod(sizes))) if b is None else b
            if self.params["split2d"] == "pad":
                h = max(tree_height(s, b) for s in sizes)
                trees = [interval_tree(s, b, split="pad", height=h) for s in sizes]
            else:
                trees = [interval_tree(s, b, split="near_equal") for s in sizes]
            levels, domain = _below(_product_levels(trees), 1), sizes
        else:
            raise NotApplicableError(
                f"HB is defined for 1-D and 2-D domains (Qardaji et al. 2013); this workload "
                f"has {len(sizes)} attributes {sizes}: pass dims=[N] for a 1-D tree over the "
                "flattened domain, or use the 'hierarchical' selector (per-attribute Kronecker)"
            )
        meta = {"branching": b, "height": len(levels), "sizes": sizes}
        return Strategy(matrix=Tree(domain, levels), selector=self.name, metadata=meta)


@register
class QuadtreeSelector(Selector):
    """Quadtree (Cormode, Procopiuc, Srivastava, Shen & Yu, ICDE 2012; HDMM §8, digest §15): 2 × 2
    fan-out, every level measured, budget ``ε_ℓ ∝ 2^{(h−ℓ)/3}`` (``geometric``) or uniform."""

    name = "quadtree"
    method = "Quadtree with geometric budget"
    paper = "Cormode, Procopiuc, Srivastava, Shen & Yu, ICDE 2012"

    def __init__(self, geometric=True, dims=None):
        self.params = {"geometric": check_bool(geometric, "geometric"), "dims": check_dims(dims)}

    def _select(self, workload, privacy: Privacy, objective: str) -> Strategy:
        sizes = workload_sizes(workload, self.params["dims"])
        if len(sizes) != 2:
            raise NotApplicableError(
                f"Quadtree needs a 2-D domain (two attributes), got attribute sizes {sizes}; "
                "give dims=[n1, n2] if the workload's structure does not show them"
            )
        h = max(tree_height(s, 2) for s in sizes)
        trees = [interval_tree(s, 2, split="pad", height=h) for s in sizes]
        levels = _product_levels(trees)
        depth = np.arange(h + 1)  # root 0 .. leaves h; height above the leaves = h - depth
        if self.params["geometric"]:
            w = 2.0 ** (depth / 3.0) * (2 ** (1 / 3) - 1) / (2 ** ((h + 1) / 3) - 1)
        else:
            w = np.full(h + 1, 1.0 / (h + 1))
        meta = {"height": h, "level_budget": [float(x) for x in w], "sizes": sizes}
        return Strategy(matrix=Tree(sizes, levels, list(w)), selector=self.name, metadata=meta)
