"""A small example instance of every strategy kind (``linalg.Matrix`` subclass) the package
defines, for ``mmtoolkit.testing.check_strategy_kind`` (tests/test_strategy_kinds.py). A new
kind adds its example to ``EXAMPLES`` here: a function returning an instance of at most a
few hundred entries (n ≤ 16; 2–3 attributes of ≤ 4 values)."""

from __future__ import annotations

import numpy as np

from mmtoolkit import linalg as la
from mmtoolkit import selectors, workloads
from mmtoolkit.domain import Domain
from mmtoolkit.linalg import peel
from mmtoolkit.linalg.marginals import MarginalsPinv
from mmtoolkit.linalg.tree import TreePinv
from mmtoolkit.linalg.union import TwoProductPinv
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors.baselines.privelet import PriveletHaar
from mmtoolkit.selectors.hdmm.separate import SeparateUnion
from mmtoolkit.selectors.residual_planner.matrix import ResidualStrategyMatrix, SetStack

MARG = workloads.marginals(Domain.from_sizes([3, 4, 2]), 2, lower=True)
BINARY = workloads.marginals(Domain.from_sizes([2, 2, 2]), 2, lower=True)


PREFIX = workloads.prefix(8)


def selected(name: str, W: la.Matrix = PREFIX, privacy=None, **params):
    """The (unweighted) strategy matrix the selector ``name`` selects on ``W`` (PureDP(1))."""
    privacy = PureDP(1.0) if privacy is None else privacy
    return peel(selectors.get(name, **params).select(W, privacy).matrix)[1]


def derived(kind: type, *matrices: la.Matrix) -> la.Matrix:
    """The first of ``matrices``, their ``gram()``, ``pinv_operator()``, ``pinv()`` or ``.T``
    (and those of these) that is exactly a ``kind``."""
    todo = list(matrices)
    for _ in range(3):
        for M in todo:
            if type(M) is kind:
                return M
        steps = [f for M in todo for f in (M.gram, M.pinv_operator, M.pinv, lambda M=M: M.T)]
        todo = [f() for f in steps if f() is not None]
    raise LookupError(f"no {kind.__name__} derived from {matrices}")


def _pidentity():
    theta = np.array([[0.5, 1.0, 0.0, 0.25, 0.0], [0.0, 0.5, 1.0, 0.0, 0.75]])
    return la.PIdentity(theta)


def _tree():
    return selected("hierarchical")


def _union():
    return selected("opt_union", MARG, ZCDP(0.5), seed=0)


def _residual():
    return selected("residual_planner", MARG, ZCDP(0.5))


def _marginals():
    return la.Marginals((2, 3, 2), {0: 1.0, 3: 2.0, 5: 0.5, 7: 1.0})


_RNG = np.random.default_rng(0)
_D = _RNG.normal(size=(5, 6))

#: kind -> a function returning a small instance of exactly that kind.
EXAMPLES = {
    la.Dense: lambda: la.Dense(_D),
    la.Weighted: lambda: la.Weighted(-2.5, la.Prefix(6)),
    la.Transposed: lambda: la.Transposed(la.Dense(_D.T)),
    la.Sum: lambda: la.Sum([la.Prefix(6), la.Dense(_D[:, :6].T @ _D[:, :6])]),
    la.Product: lambda: la.Product(la.Dense(_D), la.AllRange(6).gram()),
    la.VStack: lambda: la.VStack([la.Total(6), la.Weighted(0.5, la.Prefix(6))]),
    la.Identity: lambda: la.Identity(7),
    la.Ones: lambda: la.Ones(3, 5),
    la.Total: lambda: la.Total(6),
    la.Prefix: lambda: la.Prefix(8),
    la.AllRange: lambda: la.AllRange(6),
    la.WidthRange: lambda: la.WidthRange(8, 3),
    la.Difference: lambda: la.Difference(7),
    la.PrefixGram: lambda: la.PrefixGram(7),
    la.AllRangeGram: lambda: la.AllRangeGram(6),
    la.WidthRangeGram: lambda: la.WidthRangeGram(8, 3),
    la.SymTridiagonal: lambda: la.SymTridiagonal(np.full(6, 3.0), np.linspace(-1, 1, 5)),
    la.Haar: lambda: la.Haar(8),
    la.HaarInverse: lambda: la.HaarInverse(8),
    la.HaarGram: lambda: la.HaarGram(8),
    la.Kronecker: lambda: la.Kronecker([la.Prefix(3), la.AllRange(2), la.Identity(2)]),
    la.Marginal: lambda: la.Marginal((2, 3, 2), 5),
    la.Marginals: _marginals,
    la.MarginalsGram: lambda: derived(la.MarginalsGram, _marginals()),
    MarginalsPinv: lambda: derived(MarginalsPinv, _marginals()),
    la.Permuted: lambda: la.Permuted(la.AllRange(5), [3, 0, 4, 1, 2]),
    la.PermutedGram: lambda: la.PermutedGram(la.AllRangeGram(5), [3, 0, 4, 1, 2]),
    la.PIdentity: _pidentity,
    la.PIdentityGram: lambda: derived(la.PIdentityGram, _pidentity()),
    la.PIdentityPinv: lambda: derived(la.PIdentityPinv, _pidentity()),
    la.LowRankUpdate: lambda: derived(la.LowRankUpdate, _pidentity()),
    la.Fourier: lambda: selected("fourier", BINARY),
    la.OrthoBasis: lambda: selected("eigen_design"),
    la.OrthoBasisGram: lambda: derived(la.OrthoBasisGram, selected("eigen_design")),
    la.Tree: _tree,
    la.TreeGram: lambda: derived(la.TreeGram, _tree()),
    la.TreeGramInverse: lambda: derived(la.TreeGramInverse, _tree()),
    TreePinv: lambda: derived(TreePinv, _tree()),
    la.KroneckerUnion: _union,
    TwoProductPinv: lambda: derived(TwoProductPinv, _union()),
    SeparateUnion: lambda: selected("opt_union", MARG, ZCDP(0.5), seed=0, answering="separate"),
    PriveletHaar: lambda: selected("privelet"),
    ResidualStrategyMatrix: _residual,
    SetStack: lambda: derived(SetStack, _residual()),
}

#: Kinds released only for some workloads: the workload their example is checked with.
WORKLOADS = {ResidualStrategyMatrix: MARG}
#: Kinds that answer by a rule of their own, not ``W A⁺ y`` (``own_answers``).
OWN_ANSWERS = {SeparateUnion}
