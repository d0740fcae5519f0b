"""Binary encoding of a domain, and marginal workloads on it (Cormode et al., ICDE 2013, §4.1, §5).

The datacube paper's Fourier strategy and its experiments work on **binary** attributes:
Adult's 8 attributes become 23 bits, and a marginal on a set of original attributes is the
marginal on all of their bits (§5, "encoded as binary attributes"). :class:`BinaryEncoding`
is that encoding: attribute ``a`` with ``n_a`` values becomes ``⌈log2 n_a⌉`` binary
attributes (most significant bit first, value ``v`` ↦ its binary code; codes ``≥ n_a`` are
cells no record occupies and are released with noise like every other cell, as in the
paper's binary treatment; a 1-value attribute has no bit). It maps the domain, attribute
sets (:meth:`~BinaryEncoding.attribute_key`, :meth:`~BinaryEncoding.marginals`) and data
vectors (:meth:`~BinaryEncoding.encode`); nothing in it is specific to one selector.

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
:func:`workload_attribute_sets` gives the attribute sets of Q1–Q3 alone.
"""

from __future__ import annotations

from itertools import combinations
from numbers import Integral

import numpy as np

from .checks import check_int
from .domain import Domain
from .linalg import Marginals, check_dense_size

__all__ = ["BinaryEncoding", "binary_marginals", "workload_attribute_sets"]


class BinaryEncoding:
    """Binary encoding of a domain (Cormode et al. §4.1 and §5; module docstring): the bits
    of attribute ``a`` are named ``a.b0`` (most significant) …; the binary domain has ``2^D``
    cells, ``D = Σ_a ⌈log2 n_a⌉``."""

    def __init__(self, domain: Domain):
        if not isinstance(domain, Domain):
            raise ValueError(f"BinaryEncoding needs a Domain, got {type(domain).__name__}")
        self.domain = domain
        self.bits = tuple(max(0, (n - 1).bit_length()) for n in domain.sizes)
        self.offsets = tuple(int(o) for o in np.cumsum((0,) + self.bits[:-1]))
        names = [f"{a}.b{j}" for a, nb in zip(domain.names, self.bits) for j in range(nb)]
        if not names:
            raise ValueError("every attribute has a single value: nothing to encode")
        self.binary = Domain(names, [2] * len(names))

    @property
    def d(self) -> int:
        """The number of binary attributes ``D``."""
        return len(self.binary)

    def attribute_key(self, attrs) -> int:
        """The binary-domain bitmask of a set of original attributes (names or indices)."""
        return sum(((1 << self.bits[i]) - 1) << self.offsets[i] for i in self.domain.indices(attrs))

    def marginals(self, attr_sets, weights=None) -> Marginals:
        """The marginals on the original attribute sets, as one binary-domain Marginals."""
        attr_sets = list(attr_sets)
        if not attr_sets:
            raise ValueError("need at least one attribute set")
        ws = [1.0] * len(attr_sets) if weights is None else [float(w) for w in weights]
        if len(ws) != len(attr_sets):
            raise ValueError(f"{len(ws)} weights for {len(attr_sets)} attribute sets")
        out: dict[int, float] = {}
        for attrs, w in zip(attr_sets, ws):
            key = self.attribute_key(attrs)
            if key in out:
                raise ValueError(f"the marginal on {attrs!r} is listed twice")
            out[key] = w
        return Marginals(self.binary.sizes, out)

    def encode(self, x) -> np.ndarray:
        """The binary-domain data vector of an original-domain data vector ``x``."""
        x = np.asarray(x, dtype=float).ravel()
        if x.size != self.domain.size:
            raise ValueError(f"x has {x.size} cells, the domain has {self.domain.size}")
        check_dense_size(1 << self.d, 1, "BinaryEncoding.encode")
        T = x.reshape(self.domain.sizes)
        pad = [(0, (1 << nb) - n) for n, nb in zip(self.domain.sizes, self.bits)]
        return np.pad(T, pad).ravel()

    def __repr__(self):
        return f"BinaryEncoding({len(self.domain)} attributes -> {self.d} bits)"


VARIANTS = ("Q1", "Q2", "Q3")


def workload_attribute_sets(
    d: int, k: int, variant: str = "Q1", seed: int = 0, fixed: int | None = None, lower=False
) -> list[list[int]]:
    """The attribute sets (indices into ``d`` attributes) of the paper's workloads Q1–Q3 at
    order ``k`` (§5; see the module docstring). ``lower=True`` adds every order below ``k``
    (including the 0-way total)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    k = check_int(k, "k", minimum=0)
    if k > d:
        raise ValueError(f"k: must be <= d = {d}, got {k}")
    if variant != "Q1" and k >= d:
        raise ValueError(f"{variant} adds (k+1)-way marginals: k must be < d = {d}, got {k}")
    orders = range(0, k + 1) if lower else (k,)
    base = [list(c) for j in orders for c in combinations(range(d), j)]
    if variant == "Q1":
        return base
    upper = [list(c) for c in combinations(range(d), k + 1)]
    if variant == "Q2":
        rng = np.random.default_rng(check_int(seed, "seed"))
        pick = np.sort(rng.choice(len(upper), size=len(upper) // 2, replace=False))
        return base + [upper[i] for i in pick]
    f = d - 1 if fixed is None else check_int(fixed, "fixed", minimum=0)
    if f >= d:
        raise ValueError(f"fixed: attribute {f} is outside the {d} attributes")
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
    Spec: ``binary_marginals:domain={sizes: [3, 2, 4]},k=1``;
    caller's domain: ``binary_marginals:k=1``.

    Parameters
    ----------
    domain : Domain or str
        The original domain, or a dataset preset name (:func:`mmtoolkit.datasets.domain`).
    k : int
        The order, ``0 ≤ k ≤ d`` (``k < d`` for Q2 and Q3, which add (k+1)-way marginals).
    lower : bool, optional
        Every order ``≤ k`` in the base (Q1) part, the 0-way total included; default False.
    variant : str, optional
        ``"Q1"`` (default), ``"Q2"`` or ``"Q3"`` (module docstring).
    seed : int, optional
        Q2's seed for the half of the (k+1)-way marginals; default 0.
    fixed : str or int, optional
        Q3's attribute (name or index); default the last.
    over : str, optional
        ``"attributes"`` (default) or ``"bits"``.

    Returns
    -------
    Marginals
        On the binary domain of ``2^D`` cells, weight 1 per marginal.

    Raises
    ------
    ValueError
        A bad domain, ``k``, ``variant``, ``seed``, ``fixed`` or ``over``; an attribute set
        of 1-value attributes only, or two sets with the same bits.

    References
    ----------
    Cormode et al. 2013, datacubes, Sections 4.1 and 5.
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
