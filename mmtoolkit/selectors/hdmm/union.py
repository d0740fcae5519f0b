"""OPT_+: unions of OPT_⊗ strategies over a partition of the workload (HDMM §6.2, Def. 11).

Grouping rule g(𝕎) (the paper fixes two groups but not how they are formed, digest §6/§17):
each product term gets a *signature*, one letter per attribute: T (Total), I (Identity) or Q
(any other predicate set); terms with the same signature form one group; while there are more
than ``groups`` groups, the two groups whose queried attributes (non-Total) overlap most
(Jaccard index; ties: the earliest pair) are merged. ``[R⊗T; T⊗R]`` and ``[P⊗I; I⊗P]`` thus
split into their two products.
A workload whose products all share one signature has no OPT_+ candidate.

Each group ``g`` gets ``𝔸_g = OPT_⊗(𝕎_g)`` with unit sensitivity and error ``e_g = ||𝕎_g 𝔸_g⁺||²``.
Budget split (closed form): the strategy is ``[w_1 𝔸_1; ...; w_l 𝔸_l]``. Answering each group
from its own block costs ``Σ_g e_g / w_g²`` (an upper bound on the least-squares error over
the whole stack, Gauss-Markov), under ``Σ w_g = 1`` (L1: the stacked sensitivity) or
``Σ w_g² = 1`` (L2). The optimum is ``w_g ∝ e_g^{1/3}``, bound ``(Σ_g e_g^{1/3})³`` (L1), and
``w_g ∝ e_g^{1/4}``, bound ``(Σ_g e_g^{1/2})²`` (L2). The selector's ``loss`` is this bound;
reported errors come from the evaluator (exact least squares).
"""

from __future__ import annotations

import numpy as np

from ...checks import check_int
from ...linalg import Identity, Matrix, Ones, VStack, Weighted, kron_terms
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register
from ._common import (
    check_search_params,
    norm_of,
    peel,
    seed_sequences,
)
from .kron import CYCLE_TOL, CYCLES, KronProblem, kron_strategy, optimize_kron
from .opt0 import FTOL, MAXITER


def _signature(factors) -> str:
    out = []
    for f in factors:
        _, base = peel(f)
        if isinstance(base, Ones) and base.shape[0] == 1:
            out.append("T")
        else:
            out.append("I" if isinstance(base, Identity) else "Q")
    return "".join(out)


def group_terms(terms, groups: int = 2) -> list[list[int]] | None:
    """Indices of the product terms in each group (see the module docstring), or None when
    the products all share one signature (no union strategy to build)."""
    groups = check_int(groups, "groups", minimum=2)
    sigs: dict[str, list[int]] = {}
    for j, (_, factors) in enumerate(terms):
        sigs.setdefault(_signature(factors), []).append(j)
    if len(sigs) < 2:
        return None
    parts = [({i for i, c in enumerate(s) if c != "T"}, list(idx)) for s, idx in sigs.items()]
    while len(parts) > groups:
        best, pair = -1.0, (0, 1)
        for a in range(len(parts)):
            for b in range(a + 1, len(parts)):
                union = parts[a][0] | parts[b][0]
                score = len(parts[a][0] & parts[b][0]) / len(union) if union else 1.0
                if score > best:
                    best, pair = score, (a, b)
        a, b = pair
        parts[a] = (parts[a][0] | parts[b][0], sorted(parts[a][1] + parts[b][1]))
        del parts[b]
    return [idx for _, idx in parts]


def budget_split(errors, norm: int) -> tuple[np.ndarray, float]:
    """Optimal block weights and the separate-answering error bound (module docstring)."""
    e = np.asarray(errors, dtype=float)
    if norm == 1:
        r = np.cbrt(e)
        return r / r.sum(), float(r.sum() ** 3)
    r = np.sqrt(e)
    w = np.sqrt(r / r.sum())
    return w, float(r.sum() ** 2)


class UnionProblem:
    """The groups of an OPT_+ problem, each a prepared :class:`KronProblem`."""

    def __init__(self, W: Matrix, p=None, groups: int = 2):
        terms = [(c, f) for c, f in kron_terms(W) if c != 0.0]
        parts = group_terms(terms, groups)
        self.problems = (
            None if parts is None else [KronProblem([terms[j] for j in idx], p) for idx in parts]
        )
        self.parts = parts

    @property
    def applicable(self) -> bool:
        return self.problems is not None


def optimize_union(problem: UnionProblem, norm: int, rng, **kw) -> tuple[Matrix, float, dict]:
    """OPT_+: OPT_⊗ per group, optimal budget split; ``(strategy, bound, metadata)``."""
    blocks, errors = [], []
    for sub in problem.problems:
        thetas, err = optimize_kron(sub, norm, rng, **kw)
        blocks.append(kron_strategy(thetas, norm))
        errors.append(err)
    w, bound = budget_split(errors, norm)
    matrix = VStack([Weighted(float(wg), b) for wg, b in zip(w, blocks)])
    meta = {"operator": "OPT_+", "groups": problem.parts, "weights": w.tolist(), "norm": norm}
    return matrix, bound, meta


@register
class OptUnionSelector(Selector):
    """OPT_+ (HDMM §6.2): a weighted stack of OPT_⊗ strategies, one per group of products.

    Parameters: ``groups`` (default 2, as in OPT_HDMM), ``p`` (as for ``opt_kron``),
    ``restarts``, ``seed``, ``cycles``, ``tol``, ``ftol``, ``maxiter``. ``loss`` is the
    separate-answering upper bound of the module docstring.
    """

    name = "opt_union"
    method = "OPT_+ (weighted union of Kronecker products)"
    paper = "McKenna et al., PVLDB 2018 (HDMM), §6.2"

    def __init__(
        self, groups=2, p=None, restarts=1, seed=None, cycles=CYCLES, tol=CYCLE_TOL,
        ftol=FTOL, maxiter=MAXITER,
    ):  # fmt: skip
        self.params = {
            "groups": check_int(groups, "groups", minimum=2),
            **check_search_params(p, restarts, seed, cycles, tol, ftol, maxiter),
        }

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        prm = self.params
        problem = UnionProblem(workload, prm["p"], prm["groups"])
        if not problem.applicable:
            raise ValueError(
                "opt_union needs a workload whose products differ in the attributes they "
                "query (all products here share one signature); use opt_kron"
            )
        norm = norm_of(privacy)
        kw = {k: prm[k] for k in ("cycles", "tol", "ftol", "maxiter")}
        best = None
        for ss in seed_sequences(prm["seed"], prm["restarts"]):
            cand = optimize_union(problem, norm, np.random.default_rng(ss), **kw)
            if best is None or cand[1] < best[1]:
                best = cand
        matrix, bound, meta = best
        return Strategy(matrix=matrix, selector=self.name, loss=bound, metadata=meta)
