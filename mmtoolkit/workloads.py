"""Workload builders: a workload is a :class:`~mmtoolkit.linalg.Matrix` whose rows are queries.

Queries are linear counting queries on the C-order data vector of a
:class:`~mmtoolkit.Domain` (HDMM §3.4), built implicitly as (weighted) unions of Kronecker
products of per-attribute predicate sets (HDMM §3.2–3.3, §4.2; digest §1), never as an
``N``-column matrix. Marginals follow ResidualPlanner §2 and §4, range- and
prefix-marginals HDMM §8.1 and ResidualPlanner+ §7.1. A domain is a
:class:`~mmtoolkit.Domain` or a sequence of sizes; attributes are given by name or index.

User guide: docs/guide/workloads.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import combinations

import numpy as np

from . import linalg as la
from .binary_encoding import binary_marginals  # the Datacube paper's binary-encoded marginals
from .census import sf1, sf1_plus  # HDMM's census workloads, exposed here
from .checks import check_bool, check_int, check_positive
from .domain import MAX_VECTOR_SIZE, Domain
from .linalg.base import check_fits_memory

__all__ = [
    "binary_marginals",
    "sf1",
    "sf1_plus",
    "identity",
    "total",
    "prefix",
    "all_range",
    "width_range",
    "permuted",
    "random_predicates",
    "kron",
    "union",
    "marginal",
    "marginals",
    "marginals_list",
    "range_marginals",
    "prefix_marginals",
    "num_queries",
    "domain_size",
    "eigen_design_figure1",
]


# ------------------------------------------------------------------------- helpers
def _as_domain(domain) -> Domain:
    if isinstance(domain, Domain):
        return domain
    if isinstance(domain, (str, bytes)) or not isinstance(domain, Iterable):
        raise ValueError(
            f"expected a Domain or a sequence of attribute sizes, got {type(domain).__name__}"
        )
    return Domain.from_sizes(domain)


def _key(domain: Domain, attrs) -> int:
    """Bitmask of an attribute set: bit i set ⇔ attribute i (0 = first factor) is kept."""
    return sum(1 << i for i in domain.indices(attrs))


def _check_order(domain: Domain, k) -> int:
    d = len(domain)
    k = check_int(k, "k", minimum=0)
    if k > d:
        raise ValueError(f"k: must be <= {d} (the number of attributes), got {k}")
    return k


#: The most attribute sets a marginal-type workload builder enumerates (one product term
#: each): C(100, 3) = 161,700 pass; 2-way marginals of 100,000 attributes (5·10^9) do not.
MAX_ATTRIBUTE_SETS = 10**6


def _attr_sets(d: int, k: int, lower: bool):
    """All attribute sets (tuples of indices) of size k, or of every size ≤ k if lower;
    a :class:`~mmtoolkit.linalg.TooLargeError` before enumerating more than
    :data:`MAX_ATTRIBUTE_SETS`."""
    orders = range(k + 1) if lower else (k,)
    count = sum(math.comb(d, r) for r in orders)
    if count > MAX_ATTRIBUTE_SETS:
        raise la.TooLargeError(
            f"the workload has {count:.3g} marginals ({'≤' if lower else ''}{k}-way over {d} "
            f"attributes), more than MAX_ATTRIBUTE_SETS = {MAX_ATTRIBUTE_SETS:.0e} product "
            "terms; choose fewer attributes or a lower order"
        )
    return (s for r in orders for s in combinations(range(d), r))


def _weights(weights, count: int, what: str) -> list[float]:
    if weights is None:
        return [1.0] * count
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Iterable):
        raise ValueError(f"weights must be a sequence of positive numbers, got {weights!r}")
    weights = list(weights)
    if len(weights) != count:
        raise ValueError(f"got {len(weights)} weights for {count} {what}; give one weight each")
    return [check_positive(w, f"weight {i}") for i, w in enumerate(weights)]


# ----------------------------------------------------------------- 1-D predicate sets
def identity(n: int) -> la.Matrix:
    """``I_n``: one query per value (the histogram; HDMM §3.2 "Identity").
    Spec: ``identity:n=5``; caller's domain: ``identity``.

    Parameters
    ----------
    n : int
        The number of values (cells), ≥ 1.

    Returns
    -------
    Matrix
        ``n x n`` (:class:`~mmtoolkit.linalg.Identity`).

    Raises
    ------
    ValueError
        ``n`` is not an integer ≥ 1.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 3.2.
    """
    return la.Identity(check_int(n, "n", minimum=1))


def total(n: int) -> la.Matrix:
    """``1ᵀ_n``: the single query counting every record (HDMM §3.2 "Total").
    Spec: ``total:n=9``; caller's domain: ``total``.

    Parameters
    ----------
    n : int
        The number of values (cells), ≥ 1.

    Returns
    -------
    Matrix
        ``1 x n`` (:class:`~mmtoolkit.linalg.Total`).

    Raises
    ------
    ValueError
        ``n`` is not an integer ≥ 1.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 3.2.
    """
    return la.Total(check_int(n, "n", minimum=1))


def prefix(n: int) -> la.Matrix:
    """The ``n`` prefix (CDF) queries ``[0, i]``, lower-triangular ones (HDMM §3.2, §8.1).
    Spec: ``prefix:n=7``; caller's domain: ``prefix``.

    Parameters
    ----------
    n : int
        The number of values (cells), ≥ 1.

    Returns
    -------
    Matrix
        ``n x n``, row ``i`` the query ``[0, i]`` (:class:`~mmtoolkit.linalg.Prefix`).

    Raises
    ------
    ValueError
        ``n`` is not an integer ≥ 1.

    References
    ----------
    McKenna et al. 2018, HDMM, Sections 3.2 and 8.1.
    """
    return la.Prefix(check_int(n, "n", minimum=1))


def all_range(n: int) -> la.Matrix:
    """All ``n(n+1)/2`` range queries ``[i, j]``, ``i ≤ j`` (HDMM §3.2 "AllRange", §8.1).
    Spec: ``all_range:n=16``; caller's domain: ``all_range``.

    Parameters
    ----------
    n : int
        The number of values (cells), ≥ 1.

    Returns
    -------
    Matrix
        ``n(n+1)/2 x n``, the ranges in lexicographic order of ``(i, j)``
        (:class:`~mmtoolkit.linalg.AllRange`).

    Raises
    ------
    ValueError
        ``n`` is not an integer ≥ 1.

    References
    ----------
    McKenna et al. 2018, HDMM, Sections 3.2 and 8.1.
    """
    return la.AllRange(check_int(n, "n", minimum=1))


def width_range(n: int, w: int) -> la.Matrix:
    """The ``n − w + 1`` ranges of exactly ``w`` contiguous values (HDMM §8.1 "Width 32 Range").
    Spec: ``width_range:n=10,w=3``; caller's domain: ``width_range:w=4``.

    Parameters
    ----------
    n : int
        The number of values (cells), ≥ 1.
    w : int
        The width of every range, ``1 ≤ w ≤ n``.

    Returns
    -------
    Matrix
        ``(n − w + 1) x n``, row ``i`` the range ``[i, i + w − 1]``.

    Raises
    ------
    ValueError
        ``n`` or ``w`` is not an integer ≥ 1, or ``w > n``.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 8.1.
    """
    n = check_int(n, "n", minimum=1)
    w = check_int(w, "w", minimum=1)
    if w > n:
        raise ValueError(f"width w must satisfy 1 <= w <= n = {n}, got {w}")
    return la.WidthRange(n, w)


def permuted(W, seed, legacy: bool = False) -> la.Matrix:
    """``W`` with its columns shuffled by ``np.random.default_rng(seed).permutation(n)``.

    HDMM §8.1 "Permuted Range" is ``permuted(all_range(n), seed)``: the same queries on a
    randomly re-ordered domain, which defeats strategies that assume locality. Any fixed
    permutation gives the same HDMM error, not the same baseline errors: ``legacy=True``
    draws it from numpy's legacy ``RandomState(seed)`` instead, the generator HDMM's own
    experiments used, so locality-based baselines (Wavelet, GreedyH) can be compared with
    the published cells. Same seed (and ``legacy``) → same workload.
    Spec: ``permuted:workload={kind: all_range, n: 8},seed=3,legacy=true``;
    caller's domain: ``permuted:workload=all_range,seed=0``.

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x n``.
    seed : int
        The permutation's seed, ≥ 0.
    legacy : bool, optional
        Draw the permutation from ``RandomState(seed)`` (HDMM's experiments) instead of
        ``default_rng(seed)``; default False.

    Returns
    -------
    Matrix
        ``m x n``, dense form ``W[:, perm]`` for the permutation ``perm`` drawn
        (:class:`~mmtoolkit.linalg.Permuted`).

    Raises
    ------
    ValueError
        A ``seed`` that is not an integer ≥ 0, or a ``legacy`` that is not a bool.
    TooLargeError
        The permutation (``n`` integers) exceeds ``MAX_VECTOR_SIZE`` or the memory.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 8.1 ("Permuted Range").
    """
    seed = check_int(seed, "seed", minimum=0)
    check_bool(legacy, "legacy")
    W = la.as_matrix(W)
    n = W.shape[1]
    if n > MAX_VECTOR_SIZE:  # the permutation is an array of n integers
        raise la.TooLargeError(
            f"permuted: a permutation of {n:.3g} cells is an array of that size, more than "
            f"MAX_VECTOR_SIZE = {MAX_VECTOR_SIZE:.0e}"
        )
    check_fits_memory(8.0 * n, f"permuted: a permutation of {n:.3g} cells", "use fewer cells")
    if legacy:
        perm = np.random.RandomState(seed).permutation(n)
    else:
        perm = np.random.default_rng(seed).permutation(n)
    return la.Permuted(W, perm)


def random_predicates(n: int, m: int, seed) -> la.Dense:
    """``m`` uniformly sampled predicate queries on ``n`` cells (Li & Miklau, PVLDB 2012, §5.1
    "uniformly sampled predicate queries", Table 2 "Predicate"): 0/1 rows of independent fair
    bits from ``np.random.default_rng(seed)`` (docs/guide/workloads.md). Same ``(n, m,
    seed)`` → same workload; explicit (``m · n`` entries, size-guarded).
    Spec: ``random_predicates:n=6,m=4,seed=0``;
    caller's domain: ``random_predicates:m=5,seed=1``.

    Parameters
    ----------
    n : int
        The number of cells, ≥ 1.
    m : int
        The number of queries, ≥ 1.
    seed : int
        The generator's seed, ≥ 0.

    Returns
    -------
    Dense
        ``m x n`` of zeros and ones.

    Raises
    ------
    ValueError
        ``n``, ``m`` or ``seed`` out of range.
    TooLargeError
        ``m · n`` exceeds ``linalg.MAX_DENSE_ENTRIES``.

    References
    ----------
    Li & Miklau 2012, Eigen-Design, Section 5.1 and Table 2 ("Predicate").
    """
    n = check_int(n, "n", minimum=1)
    m = check_int(m, "m", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    la.check_dense_size(m, n, "random_predicates")
    bits = np.random.default_rng(seed).integers(0, 2, size=(m, n))
    return la.Dense(bits.astype(float))


# ------------------------------------------------------------------- combinators
def kron(factors) -> la.Matrix:
    """The product ``Φ_1 × … × Φ_d`` of per-attribute predicate sets, ``Φ_1 ⊗ … ⊗ Φ_d``.

    HDMM Def. 2 and Thm 2. ``factors`` is a list of Matrices or arrays (first factor = first
    attribute, most significant in the data vector).
    Spec: ``kron:factors=[{kind: prefix, n: 3}, 'identity:n=2']``;
    caller's domain: ``kron:prefix,identity,total``.

    Parameters
    ----------
    factors : list of Matrix or array_like
        The per-attribute predicate sets ``Φ_i`` (``m_i x n_i``), at least one.

    Returns
    -------
    Matrix
        ``(Π m_i) x (Π n_i)`` (:class:`~mmtoolkit.linalg.Kronecker`, never a dense array).

    Raises
    ------
    ValueError
        ``factors`` is not a list (a single Matrix or array is not), or is empty.
    TypeError
        A factor is a string.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 4.2, Definition 2 and Theorem 2.
    """
    if isinstance(factors, (la.Matrix, np.ndarray)) or not isinstance(factors, Iterable):
        raise ValueError("kron needs a list of factors (Matrices or arrays)")
    factors = [la.as_matrix(f) for f in factors]
    if not factors:
        raise ValueError("kron needs at least one factor")
    return la.Kronecker(factors)


def union(workloads, weights=None) -> la.Matrix:
    """The union ``[w_1 W_1; …; w_k W_k]`` of workloads on the same domain (HDMM §3.3, eq. 1).

    A weight expresses how much a block's accuracy matters (HDMM §3.3); weights must be
    positive and finite, one per workload (default 1). Blocks with weight 1 are not wrapped.
    Spec: ``union:workloads=[total:n=4, 'prefix:n=4'],weights=[1, 2]``;
    caller's domain: ``union:workloads=[prefix,total],weights=[1,2]``.

    Parameters
    ----------
    workloads : sequence of Matrix or array_like
        The workloads ``W_j`` (``m_j x n``, one ``n``), at least one.
    weights : sequence of float, optional
        One finite weight > 0 per workload; default all 1.

    Returns
    -------
    Matrix
        ``(Σ m_j) x n``, the blocks in the given order (:class:`~mmtoolkit.linalg.VStack`).

    Raises
    ------
    ValueError
        Not a sequence or empty; workloads on different numbers of cells; weights not one
        positive finite number per workload.
    TypeError
        A workload is a string.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 3.3, equation (1).
    """
    if isinstance(workloads, (la.Matrix, np.ndarray)) or not isinstance(workloads, Sequence):
        raise ValueError("union needs a list of workloads")
    blocks = [la.as_matrix(W) for W in workloads]
    if not blocks:
        raise ValueError("union needs at least one workload")
    ws = _weights(weights, len(blocks), "workloads")
    n = blocks[0].shape[1]
    for i, b in enumerate(blocks):
        if b.shape[1] != n:
            raise ValueError(
                f"union: workload {i} has domain size {b.shape[1]}, workload 0 has {n}; "
                "all workloads must be on the same domain"
            )
    return la.VStack(
        [b if w == 1.0 else la.Weighted(w, b) for b, w in zip(blocks, ws, strict=True)]
    )


# ---------------------------------------------------------------------- marginals
def marginal(domain, attrs) -> la.Matrix:
    """The marginal on ``attrs``: ``Q_A = ⊗_i V_i``, ``V_i = I`` for i ∈ A, else ``1ᵀ``.

    ResidualPlanner §2 (Example 1) and HDMM §3.3. Rows are the cells of the contingency table
    over the kept attributes, in C order and in the domain's attribute order. ``attrs``: names
    or indices (an empty list gives the 0-way total).
    Spec: ``marginal:domain={sizes: [3, 2, 4]},attrs=[a0,a2]``;
    caller's domain: ``marginal:a0,a2``.

    Parameters
    ----------
    domain : Domain or sequence of int
        The domain, or its attributes' sizes (named ``a0, a1, …``).
    attrs : iterable of str or int, or str or int
        The kept attributes, by name or index.

    Returns
    -------
    Matrix
        ``(Π_{i∈A} n_i) x N`` (:class:`~mmtoolkit.linalg.Marginal`).

    Raises
    ------
    ValueError
        A bad domain, or an attribute that is unknown or given twice.

    References
    ----------
    He et al., ResidualPlanner+, Section 2, Example 1; McKenna et al. 2018, HDMM,
    Section 3.3.
    """
    dom = _as_domain(domain)
    key = _key(dom, attrs)
    return la.Marginal(dom.sizes, key)


def marginals(domain, k: int, lower: bool = False, attrs=None) -> la.Matrix:
    """All ``k``-way marginals, or (``lower=True``) all marginals of order ``≤ k``.

    ``lower=True`` includes the 0-way total (ResidualPlanner §8, HDMM Table 5); without it,
    HDMM §8.1's "k-way Marginals" (the paper names: docs/guide/workloads.md). ``attrs``: the
    attributes (names or indices) whose ``k``-subsets are taken (default: every attribute of
    the domain), e.g. AIM's "all 3-way marginals" workload on a subset of the attributes.
    One :class:`~mmtoolkit.linalg.Marginals`, weight 1 per marginal, stacked in ascending
    bitmask order (bit i set ⇔ attribute i kept).
    Spec: ``marginals:domain={sizes: [3, 2, 4]},k=2,lower=true``;
    caller's domain: ``marginals:k=2`` or ``marginals:k=2,attrs=[a0,a2]``.

    Parameters
    ----------
    domain : Domain or sequence of int
        The domain, or its attributes' sizes.
    k : int
        The order, ``0 ≤ k ≤ d`` (``d`` the number of attributes in ``attrs``).
    lower : bool, optional
        Every order ``≤ k`` (default False: exactly ``k``).
    attrs : sequence of str or int, optional
        The attributes whose ``k``-subsets are taken (default None: all of the domain's).

    Returns
    -------
    Matrix
        One row per cell of each marginal (:class:`~mmtoolkit.linalg.Marginals`), ``N``
        columns.

    Raises
    ------
    ValueError
        A bad domain, an unknown or repeated attribute in ``attrs``, or ``k`` not an
        integer in ``0 … d``.
    TooLargeError
        More than ``MAX_ATTRIBUTE_SETS`` marginals.

    References
    ----------
    He et al., ResidualPlanner+, Sections 2 and 8; McKenna et al. 2018, HDMM, Section 8.1
    and Table 5; McKenna, Mullins, Sheldon & Miklau 2022, AIM (VLDB), whose experiments
    use all 3-way marginals.
    """
    dom = _as_domain(domain)
    chosen = range(len(dom)) if attrs is None else dom.indices(attrs)
    k = _check_order(dom.project(chosen), k)
    keys = {
        sum(1 << chosen[i] for i in s): 1.0 for s in _attr_sets(len(chosen), k, bool(lower))
    }
    return la.Marginals(dom.sizes, keys)


def marginals_list(domain, attr_sets, weights=None) -> la.Matrix:
    """An explicit list of (optionally weighted) marginals, as one Marginals workload.

    ``attr_sets``: a list of attribute sets (names or indices each); the same set may not
    appear twice. ``weights``: one positive weight per set (default 1). The blocks are stacked
    in ascending bitmask order (bit i set ⇔ attribute i kept), not in list order.
    Spec: ``marginals_list:domain={sizes: [3, 2, 4]},attr_sets=[[a0],[a1,a2]],weights=[1,2.5]``;
    caller's domain: ``marginals_list:attr_sets=[[a0],[a1,a2]]``.

    Parameters
    ----------
    domain : Domain or sequence of int
        The domain, or its attributes' sizes.
    attr_sets : iterable
        The attribute sets (names or indices each), at least one, no set twice.
    weights : sequence of float, optional
        One finite weight > 0 per set; default all 1.

    Returns
    -------
    Matrix
        One block per set, in ascending bitmask order
        (:class:`~mmtoolkit.linalg.Marginals`), ``N`` columns.

    Raises
    ------
    ValueError
        A bad domain, no sets, a set listed twice, an unknown attribute, or weights not one
        positive finite number per set.

    References
    ----------
    He et al., ResidualPlanner+, Section 4 (weighted marginal workloads).
    """
    dom = _as_domain(domain)
    if isinstance(attr_sets, (str, bytes)) or not isinstance(attr_sets, Iterable):
        raise ValueError(f"attr_sets must be a list of attribute sets, got {attr_sets!r}")
    attr_sets = list(attr_sets)
    if not attr_sets:
        raise ValueError("marginals_list needs at least one attribute set")
    ws = _weights(weights, len(attr_sets), "attribute sets")
    keys: dict[int, float] = {}
    for attrs, w in zip(attr_sets, ws, strict=True):
        key = _key(dom, attrs)
        if key in keys:
            names = [dom.names[i] for i in dom.indices(attrs)]
            raise ValueError(f"the marginal on {names} is listed more than once")
        keys[key] = w
    return la.Marginals(dom.sizes, keys)


def _generalized_marginals(dom: Domain, k, lower: bool, numeric_block, max_cells=None) -> la.Matrix:
    """Union of ``⊗_i V_i`` over attribute sets A: ``V_i`` = ``numeric_block(n_i)`` on numeric
    attributes of A, ``I`` on categorical attributes of A, ``1ᵀ`` outside A (``max_cells``:
    only the sets A whose marginal has at most that many cells, ``Π_{i∈A} n_i``)."""
    k = _check_order(dom, k)
    if max_cells is not None:
        max_cells = check_int(max_cells, "max_cells", minimum=1)
    kept = [
        numeric_block(n) if num else la.Identity(n)
        for n, num in zip(dom.sizes, dom.numeric, strict=True)
    ]
    out = [la.Total(n) for n in dom.sizes]
    blocks = []
    for s in _attr_sets(len(dom), k, bool(lower)):
        if max_cells is not None and math.prod(dom.sizes[i] for i in s) > max_cells:
            continue
        chosen = set(s)
        blocks.append(la.Kronecker([kept[i] if i in chosen else out[i] for i in range(len(dom))]))
    if not blocks:
        raise ValueError(f"no attribute set of the requested orders has at most {max_cells} cells")
    return la.VStack(blocks)


def range_marginals(domain, k: int, lower: bool = False) -> la.Matrix:
    """Range-marginals on every ``k``-attribute set (``lower=True``: every set of size ≤ k).

    On each chosen attribute: all ranges (:func:`all_range`) if it is numeric, the identity
    if categorical; total elsewhere (HDMM §8.1 "2-way Range-Marginals", ResidualPlanner+
    §7.1; the papers' instances: docs/guide/workloads.md). A VStack of Kronecker products,
    in the order of ``itertools.combinations``.
    Spec: ``range_marginals:domain={sizes: [3, 4], numeric: [true, true]},k=1,lower=true``;
    caller's domain: ``range_marginals:1:lower``.

    Parameters
    ----------
    domain : Domain or sequence of int
        The domain (its numeric flags choose ranges or the identity), or its sizes (all
        categorical).
    k : int
        The number of attributes per set, ``0 ≤ k ≤ d``.
    lower : bool, optional
        Every set of size ``≤ k`` (default False: exactly ``k``).

    Returns
    -------
    Matrix
        One Kronecker block per attribute set, ``N`` columns.

    Raises
    ------
    ValueError
        A bad domain, or ``k`` not an integer in ``0 … d``.
    TooLargeError
        More than ``MAX_ATTRIBUTE_SETS`` attribute sets.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 8.1; He et al., ResidualPlanner+, Section 7.1.
    """
    return _generalized_marginals(_as_domain(domain), k, lower, la.AllRange)


def prefix_marginals(domain, k: int, lower: bool = False, max_cells=None) -> la.Matrix:
    """Prefix-marginals on every ``k``-attribute set (``lower=True``: every set of size ≤ k).

    On each chosen attribute: prefix sums (:func:`prefix`) if numeric, the identity if
    categorical; total elsewhere. The "k-way prefix-sum" generalized-marginal workloads of
    ResidualPlanner+ §7.1 and §9.3 (its Tables 8–9 and 12–14). ``max_cells``: leave out the
    sets whose marginal has more cells (``Π n_i``) than that, as the ResidualPlanner+
    max-variance experiments do with 5000 (Table 9; He et al. §8 "small marginals").
    Spec: ``prefix_marginals:domain={sizes: [3, 4], numeric: [true, true]},k=2``;
    caller's domain: ``prefix_marginals:k=3``.

    Parameters
    ----------
    domain : Domain or sequence of int
        The domain (its numeric flags choose prefixes or the identity), or its sizes (all
        categorical).
    k : int
        The number of attributes per set, ``0 ≤ k ≤ d``.
    lower : bool, optional
        Every set of size ``≤ k`` (default False: exactly ``k``).
    max_cells : int, optional
        Leave out the sets whose marginal has more cells; default: keep all.

    Returns
    -------
    Matrix
        One Kronecker block per attribute set kept, ``N`` columns.

    Raises
    ------
    ValueError
        A bad domain, ``k`` not an integer in ``0 … d``, ``max_cells`` not an integer ≥ 1,
        or no set within ``max_cells``.
    TooLargeError
        More than ``MAX_ATTRIBUTE_SETS`` attribute sets.

    References
    ----------
    He et al., ResidualPlanner+, Sections 7.1 and 9.3, Tables 8, 9 and 12-14.
    """
    return _generalized_marginals(_as_domain(domain), k, lower, la.Prefix, max_cells)


# --------------------------------------------------------------------------- sizes
def num_queries(W) -> int:
    """The number of queries (rows) of a workload, an exact Python int.

    Parameters
    ----------
    W : Matrix or numpy.ndarray
        The workload.

    Returns
    -------
    int
        ``m``.
    """
    return int(W.shape[0])


def domain_size(W) -> int:
    """The number of cells (columns) a workload is defined on, an exact Python int.

    Parameters
    ----------
    W : Matrix or numpy.ndarray
        The workload.

    Returns
    -------
    int
        ``N``.
    """
    return int(W.shape[1])


# ------------------------------------------------------------------ paper examples
def eigen_design_figure1() -> la.Dense:
    """The 8-query running example of Li & Miklau 2012, Fig. 1(b) (8 cells: gender × four
    gpa ranges; rank 4): totals, per-gender, per-gpa-half, two conjunctions and a difference.
    Spec: ``eigen_design_figure1``; caller's domain: ``eigen_design_figure1``.

    Returns
    -------
    Dense
        ``8 x 8``.

    References
    ----------
    Li & Miklau 2012, Eigen-Design, Figure 1(b).
    """
    return la.Dense(
        [
            [1, 1, 1, 1, 1, 1, 1, 1],
            [1, 1, 1, 1, 0, 0, 0, 0],
            [0, 0, 0, 0, 1, 1, 1, 1],
            [1, 1, 0, 0, 1, 1, 0, 0],
            [0, 0, 1, 1, 0, 0, 1, 1],
            [0, 0, 0, 0, 0, 0, 1, 1],
            [1, 1, 0, 0, 0, 0, 0, 0],
            [1, 1, 1, 1, -1, -1, -1, -1],
        ]
    )

