"""OPT_+: unions of OPT_⊗ strategies over a partition of the workload (HDMM §6.2, Def. 11):
the grouping rule (:func:`group_terms`), the closed-form budget split (:func:`budget_split`),
:func:`optimize_union` and the ``opt_union`` selector.
User guide: docs/algorithms/hdmm.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...checks import check_choice, check_int
from ...evaluate.stacked import StackedKroneckerRoute
from ...linalg import KroneckerUnion, Matrix, PIdentity, TooLargeError, Weighted, kron_terms, peel
from ...linalg.kronecker import group
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import NotApplicableError, Selector, register
from ._common import check_search_params, default_p, distinct_grams, term_sizes
from .kron import CYCLE_TOL, CYCLES, KronProblem, kron_strategy, optimize_kron
from .opt0 import FTOL, MAXITER, best_of_restarts, optimize_pidentity
from .separate import SeparateUnion

#: How an OPT_+ strategy's answers are formed.
ANSWERING = ("least_squares", "separate")


#: A factor's letter in a product's signature, by its kind (linalg.FACTOR_KINDS); "Q" else.
_LETTERS = {"total": "T", "identity": "I"}


def _signature(factors) -> str:
    return "".join(_LETTERS.get(peel(f)[1].factor_kind, "Q") for f in factors)


def check_groups(groups) -> int | str:
    """``groups``: an int >= 2 or ``"products"`` (one group per product term)."""
    if isinstance(groups, str):
        if groups != "products":
            raise ValueError(f"groups must be an int >= 2 or 'products', got {groups!r}")
        return groups
    return check_int(groups, "groups", minimum=2)


def group_terms(terms, groups: int | str = 2) -> list[list[int]] | None:
    """Indices of the product terms in each group (the signature rule, guide page), or None
    when there is no union strategy: one shared signature, or one product (``"products"``)."""
    groups = check_groups(groups)
    if isinstance(groups, str):  # "products"
        return [[j] for j in range(len(terms))] if len(terms) > 1 else None
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
    """Optimal block weights and the separate-answering error bound (closed form, guide)."""
    e = np.asarray(errors, dtype=float)
    if norm == 1:
        r = np.cbrt(e)
        return r / r.sum(), float(r.sum() ** 3)
    r = np.sqrt(e)
    w = np.sqrt(r / r.sum())
    return w, float(r.sum() ** 2)


class UnionProblem:
    """The groups of an OPT_+ problem: a :class:`KronProblem` per group (``problems``), or for
    ``groups="products"`` the shared factor problems (``products``, :class:`ProductFactors`)."""

    def __init__(self, W: Matrix, p=None, groups=2):
        terms = [(c, f) for c, f in kron_terms(W) if c != 0.0]
        parts = group_terms(terms, groups)
        self.parts, self.problems, self.products = parts, None, None
        if parts is not None and groups == "products":
            self.products = ProductFactors(terms, p)
        elif parts is not None:
            self.problems = [KronProblem([terms[j] for j in idx], p) for idx in parts]

    @property
    def applicable(self) -> bool:
        return self.parts is not None


class ProductFactors:
    """One OPT_+ group per product (OPT_0 per factor, HDMM Def. 10): the distinct (factor Gram, p)
    pairs (``keys``; a factor of each in ``examples``) and each term's per attribute (``slot``)."""

    def __init__(self, terms, p=None):
        sizes = term_sizes(terms)
        d, k = len(sizes), len(terms)
        self.d, self.coeffs = d, np.array([c for c, _ in terms])
        flat = [f for _, fs in terms for f in fs]
        self.grams, index = distinct_grams(flat)
        if p is None:  # HDMM's rule for the factor's own predicates
            by_id: dict[int, int] = {}
            ps = np.array(
                [[by_id.setdefault(id(f), default_p([f], f.shape[1])) for f in fs]
                 for _, fs in terms]
            )  # fmt: skip
        elif isinstance(p, list):
            if len(p) != d:
                raise ValueError(f"p lists {len(p)} values but the workload has {d} attributes")
            ps = np.tile(np.asarray(p), (k, 1))
        else:
            ps = np.full((k, d), p)
        pairs = np.stack([index.reshape(k, d), ps], axis=-1).reshape(-1, 2)
        keys, first, slot = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        self.keys = [(int(u), int(q)) for u, q in keys]
        self.examples = [flat[i] for i in first]
        self.slot = slot.reshape(k, d)


def optimize_products(products: ProductFactors, norm: int, rng, ftol=FTOL, maxiter=MAXITER):
    """``(blocks, errors)``: OPT_0 once per distinct (factor Gram, p) (a Total factor: ``1ᵀ``,
    its exact optimum), each product's block ``⊗_i A_i`` sharing them, error ``c_j Π_i C_i``."""
    factors: list[Matrix] = []
    costs: list[float] = []
    for (u, q), example in zip(products.keys, products.examples):
        weight, base = peel(example)
        if base.factor_kind == "total":
            factors.append(base)
            costs.append(weight * weight)
            continue
        theta, err = optimize_pidentity(
            products.grams[u], q, norm, rng, ftol=ftol, maxiter=maxiter
        )  # fmt: skip
        factors.append(PIdentity(theta, norm=norm))
        costs.append(err)
    errors = products.coeffs * np.prod(np.array(costs)[products.slot], axis=1)
    blocks = [group([factors[s] for s in row]) for row in products.slot]
    return blocks, errors


#: Largest number of blocks whose weights the metadata lists one by one.
LISTED_WEIGHTS = 32


def optimize_union(
    problem: UnionProblem, norm: int, rng, answering: str = "least_squares", cycles=CYCLES,
    tol=CYCLE_TOL, ftol=FTOL, maxiter=MAXITER,
) -> tuple[KroneckerUnion, float, dict[str, Any]]:  # fmt: skip
    """OPT_+: OPT_⊗ per group, optimal budget split; ``(strategy, bound, metadata)``, the
    strategy a KroneckerUnion, or a SeparateUnion with ``answering="separate"``."""
    answering = check_choice(answering, "answering", ANSWERING)
    groups: str | list[list[int]]
    if problem.products is not None:
        blocks, errors = optimize_products(problem.products, norm, rng, ftol, maxiter)
        groups = "products"
    elif problem.problems is None or problem.parts is None:
        raise NotApplicableError(
            "OPT_+ needs a workload whose products fall into two or more groups "
            "(problem.applicable is False)"
        )
    else:
        blocks, errors = [], []
        for sub in problem.problems:
            thetas, err = optimize_kron(sub, norm, rng, cycles, tol, ftol, maxiter)
            blocks.append(kron_strategy(thetas, norm))
            errors.append(err)
        groups = problem.parts
    w, bound = budget_split(errors, norm)
    stacked = [Weighted(float(wg), b) for wg, b in zip(w, blocks)]
    matrix = SeparateUnion(stacked) if answering == "separate" else KroneckerUnion(stacked)
    meta: dict[str, Any] = {"operator": "OPT_+", "groups": groups}
    if len(w) <= LISTED_WEIGHTS:
        meta["weights"] = w.tolist()
    else:
        meta["blocks"], meta["weight_range"] = len(w), [float(w.min()), float(w.max())]
    meta["norm"] = norm
    if answering == "separate":
        meta["answering"] = answering
    return matrix, bound, meta


def union_size_refusal(workload: Matrix, answering: str) -> str | None:
    """Why an OPT_+ strategy answered by ``answering`` cannot be scored on ``workload`` (least
    squares beyond ``StackedKroneckerRoute.MAX_CELLS`` cells), or None."""
    N = workload.shape[1]
    if answering == "separate" or N <= StackedKroneckerRoute.MAX_CELLS:
        return None
    return (
        f"a least-squares union strategy on N = {N:.3g} cells is scored over every "
        f"cell (limit StackedKroneckerRoute.MAX_CELLS = {StackedKroneckerRoute.MAX_CELLS:.3g}); "
        "use answering='separate'"
    )


@register
class OptUnionSelector(Selector):
    """OPT_+ (HDMM §6.2): a weighted stack of OPT_⊗ strategies, one per group of products.
    Parameters: ``groups`` (2, or ``"products"``), ``answering`` (``"least_squares"`` or
    ``"separate"``) and those of ``opt_kron``; ``loss``: the separate-answering bound."""

    name = "opt_union"
    method = "OPT_+ (weighted union of Kronecker products)"
    paper = "McKenna et al., PVLDB 2018 (HDMM), §6.2"

    def __init__(
        self, groups=2, answering="least_squares", p=None, restarts=1, seed=None, cycles=CYCLES,
        tol=CYCLE_TOL, ftol=FTOL, maxiter=MAXITER,
    ):  # fmt: skip
        self.params = {
            "groups": check_groups(groups),
            "answering": check_choice(answering, "answering", ANSWERING),
            **check_search_params(p, restarts, seed, cycles, tol, ftol, maxiter),
        }

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        prm = self.params
        problem = UnionProblem(workload, prm["p"], prm["groups"])
        if not problem.applicable:
            raise NotApplicableError(
                "opt_union needs a workload whose products differ in the attributes they "
                "query (all products here share one signature; with groups='products', "
                "more than one product); use opt_kron"
            )
        sizes = {tuple(sub.sizes) for sub in problem.problems or []}
        if len(sizes) > 1:  # one KroneckerUnion needs one factorisation of the domain
            raise NotApplicableError(
                "opt_union's groups do not share one factorisation of the domain (attribute "
                f"sizes {sorted(sizes)}); write the workload's products over the same attributes"
            )
        too_large = union_size_refusal(workload, prm["answering"])
        if too_large is not None:
            raise TooLargeError(f"opt_union: {too_large}")
        norm = privacy.norm
        kw = {k: prm[k] for k in ("answering", "cycles", "tol", "ftol", "maxiter")}
        matrix, bound, meta = best_of_restarts(
            prm["seed"], prm["restarts"], lambda rng: optimize_union(problem, norm, rng, **kw)
        )
        return Strategy(matrix=matrix, selector=self.name, loss=bound, metadata=meta)
