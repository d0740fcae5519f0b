"""Marginal workloads on a binary-encoded domain (Cormode et al., ICDE 2013, §4.1 and §5).

The datacube paper's Fourier strategy and its experiments work on **binary** attributes:
Adult's 8 attributes become 23 bits, and a marginal on a set of original attributes is the
marginal on all of their bits (§5, "encoded as binary attributes"). The encoding is
:class:`mmtoolkit.budgeting.BinaryEncoding`: attribute ``a`` with ``n_a`` values becomes
``⌈log2 n_a⌉`` binary attributes (most significant bit first, value ``v`` ↦ its binary
code; codes ``≥ n_a`` are cells no record occupies; a 1-value attribute has no bit).

:func:`binary_marginals` builds the paper's workloads on that encoding:

* ``Q1`` — all k-way marginals of the original attributes (``lower=True``: all of order ≤ k);
* ``Q2`` — Q1 plus half of the (k+1)-way marginals, the half drawn with
  ``numpy.random.default_rng(seed)`` (the paper does not say which half);
* ``Q3`` — Q1 plus the (k+1)-way marginals containing the attribute ``fixed`` (default: the
  last attribute; the paper does not say which);

``over="bits"`` instead takes the k-way marginals over the encoded bits themselves (every
bit an attribute of its own). The result is one :class:`~mmtoolkit.linalg.Marginals` on the
``2^D``-cell binary domain (weight 1 per marginal), usable with every selector and the
shared evaluator; ``datacube``, ``fourier`` and ``ding_datacube`` need this form.
"""

from __future__ import annotations

from itertools import combinations
from numbers import Integral

import numpy as np

from .budgeting import BinaryEncoding
from .domain import Domain
from .linalg import Marginals

__all__ = ["binary_marginals", "workload_attribute_sets"]

VARIANTS = ("Q1", "Q2", "Q3")


def workload_attribute_sets(
    d: int, k: int, variant: str = "Q1", seed: int = 0, fixed: int | None = None, lower=False
) -> list[list[int]]:
    """The attribute sets (indices into ``d`` attributes) of the paper's workloads Q1–Q3 at
    order ``k`` (§5; see the module docstring). ``lower=True`` adds every order below ``k``
    (including the 0-way total)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if isinstance(k, bool) or not isinstance(k, Integral) or not 0 <= k <= d:
        raise ValueError(f"k must be an integer with 0 <= k <= d = {d}, got {k!r}")
    if variant != "Q1" and k >= d:
        raise ValueError(f"{variant} adds (k+1)-way marginals: k must be < d = {d}, got {k}")
    orders = range(0, k + 1) if lower else (k,)
    base = [list(c) for j in orders for c in combinations(range(d), j)]
    if variant == "Q1":
        return base
    upper = [list(c) for c in combinations(range(d), k + 1)]
    if variant == "Q2":
        if isinstance(seed, bool) or not isinstance(seed, Integral):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        rng = np.random.default_rng(int(seed))
        pick = np.sort(rng.choice(len(upper), size=len(upper) // 2, replace=False))
        return base + [upper[i] for i in pick]
    f = d - 1 if fixed is None else fixed
    if isinstance(f, bool) or not isinstance(f, Integral) or not 0 <= f < d:
        raise ValueError(f"fixed attribute {fixed!r} is outside the {d} attributes")
    return base + [c for c in upper if f in c]


def _domain(domain) -> Domain:
    if isinstance(domain, Domain):
        return domain
    if isinstance(domain, str):
        from . import datasets

        return datasets.domain(domain)
    raise ValueError(f"domain must be a Domain or a dataset preset name, got {domain!r}")


def binary_marginals(
    domain,
    k: int,
    lower: bool = False,
    variant: str = "Q1",
    seed: int = 0,
    fixed=None,
    over: str = "attributes",
) -> Marginals:
    """The marginals Q1/Q2/Q3 of order ``k`` on the binary encoding of ``domain``
    (Cormode et al. §5): one Marginals on the ``2^D``-cell binary domain, ``D = Σ ⌈log2 n_a⌉``.

    ``over="attributes"`` (default): marginals on sets of original attributes, each
    expanded to all of its bits; ``fixed`` (Q3) is an attribute name or index.
    ``over="bits"``: the same workloads with every bit as an attribute.
    """
    dom = _domain(domain)
    if over not in ("attributes", "bits"):
        raise ValueError(f"over must be 'attributes' or 'bits', got {over!r}")
    enc = BinaryEncoding(dom)
    if over == "bits":
        d, names = enc.d, enc.binary.names
    else:
        d, names = len(dom), dom.names
    if fixed is not None and not isinstance(fixed, Integral):
        if fixed not in names:
            raise ValueError(f"fixed attribute {fixed!r} is not one of {list(names)}")
        fixed = list(names).index(fixed)
    sets = workload_attribute_sets(d, k, variant, seed, fixed, lower)
    if over == "bits":
        return Marginals(enc.binary.sizes, {sum(1 << i for i in s): 1.0 for s in sets})
    keys = [enc.attribute_key(s) for s in sets]
    empty = [s for s, key in zip(sets, keys) if key == 0 and s]
    if empty:
        raise ValueError(f"attribute set {empty[0]} has only single-value attributes (no bit)")
    if len(set(keys)) != len(keys):
        raise ValueError(
            "two attribute sets differ only by single-value attributes (same bits): "
            "drop the single-value attributes from the domain"
        )
    return Marginals(enc.binary.sizes, dict.fromkeys(keys, 1.0))
