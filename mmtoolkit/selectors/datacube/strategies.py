"""The datacube paper's strategies with uniform or optimal noise budgets, and Fourier.

Cormode, Procopiuc, Srivastava & Yaroslavtsev, "Accurate and Efficient Private Release of
Datacubes and Contingency Tables" (ICDE 2013), §3–§5. On a workload of marginals over
**binary** attributes (the paper's §4.1 encoding; encode other domains with
:class:`mmtoolkit.binary.BinaryEncoding` first), ``datacube`` builds one of four fixed
strategies and budgets its row groups:

* ``I`` — base counts (one group, C = 1: the optimal budget is the uniform one);
* ``Q`` — the workload marginals themselves (one group per marginal, C = 1, R = I, so
  ``b_α = w_α² 2^{|α|}``);
* ``F`` — the parity coefficients the marginals need (Barak et al.; one group per
  coefficient ``β``, C = 1 with ±1 rows, ``b_β = Σ_{α ∋ β} w_α² 2^{-|α|}``);
* ``C`` — Ding et al.'s cuboids from BMAX (:mod:`.bmax`; one group per cuboid
  ``κ``, R aggregates each workload marginal from its cuboid, ``b_κ = 2^{|κ|} Σ_{α→κ} w_α²``).

``budget="uniform"`` gives the paper's I, Q, F, C; ``budget="optimal"`` the closed-form
budgets of Cor. 3.3 (PureDP) / App. A (ApproxDP, zCDP): Q+, F+, C+. The strategy is the
row-weighted matrix ``diag(λ) S`` (``Marginals`` or ``Fourier`` with weights ``λ``), so the
shared evaluator scores it with the GLS recovery of §3.2. ``Strategy.loss`` is the budget
objective ``Σ_k b_k / λ_k²`` for the initial recovery R (per unit noise variance).

``fourier`` is the Fourier baseline of the Eigen-Design comparisons (Li & Miklau 2012, §5
"Competing techniques": the cell counts are transformed with the Fourier (Walsh–Hadamard)
transform and the queries are computed from the Fourier parameters; "when the workload is
not full rank, the unnecessary queries of the Fourier basis are removed"), i.e. F with
uniform budgets by default. It runs on any workload on ``2^d`` cells
(:func:`fourier_coefficients`): a Kronecker term on attributes of power-of-two sizes is read
on the bits of its attributes (row-major order of sizes ``2^{b_1} × 2^{b_2} × …`` is the cell
order of ``b_1 + b_2 + …`` binary attributes, most significant first), and it keeps the
coefficients ``β`` whose character ``χ_β`` is not orthogonal to the workload's row space
(``W χ_β ≠ 0``). For marginals these are the downset of §4.1; for a full-rank range factor
(AllRange, Prefix, Identity) every coefficient inside the attribute's bits; for a full-rank
workload the whole Hadamard basis.
"""

from __future__ import annotations

import math

import numpy as np

from ...linalg import (
    Dense,
    Fourier,
    Identity,
    Kronecker,
    Marginals,
    Matrix,
    Ones,
    VStack,
    Weighted,
    check_dense_size,
)
from ...linalg.fourier import downset, fwht, submasks
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register
from .bmax import CANDIDATES, bmax
from .budgets import (
    budget_objective,
    marginal_keys,
    optimal_budgets,
    uniform_budgets,
    workload_sizes,
)

STRATEGIES = ("I", "Q", "F", "C")
BUDGETS = ("uniform", "optimal")
COEFFICIENTS = ("needed", "attributes", "all")

#: Largest number of Fourier coefficients one workload term may need (2^26).
MAX_COEFFICIENTS = 1 << 26


def binary_workload(workload: Matrix, encode: bool = False) -> tuple[int, dict[int, float]]:
    """``(d, {key: weight})`` of a marginals workload on binary attributes; a clear error
    names the first non-binary attribute.

    ``encode=True`` also accepts attributes whose sizes are all powers of two, through their
    binary encoding (Cormode et al. §4.1): attribute ``i`` of size ``2^{b_i}`` becomes bits
    ``o_i … o_i + b_i - 1`` (``o_i = b_0 + … + b_{i-1}``, most significant bit first), which
    leaves the row-major cell order unchanged, and a marginal key covers all bits of its
    attributes. A size that is not a power of two is refused.
    """
    keys = marginal_keys(workload)
    sizes = workload_sizes(workload)
    if encode:
        bits = []
        for i, n in enumerate(sizes):
            if n < 1 or n & (n - 1):
                raise ValueError(
                    f"the Fourier basis needs attribute sizes that are powers of two, but "
                    f"attribute {i} has {n} values"
                )
            bits.append(n.bit_length() - 1)
        offsets = np.cumsum([0] + bits[:-1]).tolist()
        out: dict[int, float] = {}
        for key, w in keys.items():
            bkey = 0
            for i, (o, b) in enumerate(zip(offsets, bits)):
                if (key >> i) & 1:
                    bkey |= ((1 << b) - 1) << o
            if bkey in out:  # two attributes of size 1 make the same bit key
                out[bkey] = math.sqrt(out[bkey] ** 2 + w * w)
            else:
                out[bkey] = w
        return int(sum(bits)), out
    for i, n in enumerate(sizes):
        if n != 2:
            raise ValueError(
                f"datacube works on binary attributes, but attribute {i} has {n} values; "
                "encode the workload first (mmtoolkit.binary.BinaryEncoding(domain)"
                ".marginals(attribute_sets))"
            )
    return len(sizes), keys


def _log2(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(
            f"the Fourier (Walsh–Hadamard) basis needs a power-of-two domain, but {what} has "
            f"{n} cells"
        )
    return n.bit_length() - 1


def _is_total(f: Matrix) -> bool:
    return isinstance(f, Ones) and f.shape[0] == 1


def _terms(W: Matrix, w: float = 1.0):
    """Yield ``(factors, w)``: the workload as weighted Kronecker terms (a non-Kronecker
    block is one term with a single factor on all cells)."""
    if isinstance(W, Weighted):
        yield from _terms(W.base, w * W.weight)
    elif isinstance(W, VStack):
        for blk in W.blocks:
            yield from _terms(blk, w)
    elif isinstance(W, Marginals):
        for key, t in W.weights.items():
            fac = [Identity(n) if (key >> i) & 1 else Ones(1, n) for i, n in enumerate(W.sizes)]
            yield fac, w * t
    elif isinstance(W, Kronecker):  # includes Marginal
        yield list(W.factors), w
    else:
        yield [W], w


def _factor_norms(f: Matrix) -> np.ndarray:
    """``v[l] = ‖f h_l‖² / n²`` for the rows ``h_l`` of the ``n``-point Hadamard matrix
    (Sylvester / C order): the squared norm of column ``l`` of ``f Hᵀ / n``."""
    n = int(f.shape[1])
    if isinstance(f, Identity):
        return np.full(n, 1.0 / n)
    if _is_total(f):
        v = np.zeros(n)
        v[0] = 1.0
        return v
    if isinstance(f, Dense) and f.shape[0] <= n:  # (f Hᵀ)ᵀ = H fᵀ: m·n entries, like f
        A = fwht(f.dense().T)
        return np.sum(A * A, axis=1) / float(n * n)
    check_dense_size(n, n, "fourier: the Gram matrix of a workload factor")
    G = f.gram().dense()
    HGH = fwht(fwht(G).T)  # G symmetric: H G H
    return np.maximum(np.diag(HGH), 0.0) / float(n * n)


def fourier_coefficients(
    workload: Matrix, coefficients: str = "needed", rtol: float = 1e-9
) -> tuple[int, dict[int, float]]:
    """``(d, {β: b_β})``: the parity coefficients the Fourier strategy keeps for a workload
    on ``2^d`` cells, with ``b_β = ‖W χ_β‖² / 4^d`` (the squared norm of the recovery column
    of ``β`` when the rows are ``χ_β``; Cormode et al. §3.2, §3.6).

    The workload is read as weighted Kronecker terms; the factor on cells of size ``2^{b}``
    occupies the next ``b`` bits (most significant first). ``W χ_β`` factorises over the
    factors, so ``b_β`` is a product of per-factor Hadamard column norms (no ``2^d``-sized
    array beyond the kept coefficients; a factor that is neither Identity, a 1-row total nor
    a Dense with no more rows than columns is read through its ``n × n`` Gram, size-guarded).

    ``coefficients``: ``"needed"`` — those with ``b_β > 0`` (Li & Miklau §5: the unnecessary
    queries of the Fourier basis removed; all of them when ``W`` has full column rank);
    ``"attributes"`` — every coefficient supported inside the bits of the attributes a term
    uses (a non-total factor keeps all of its ``2^b`` local coefficients); ``"all"`` — the
    full Hadamard basis. Pure marginal workloads give the downset of §4.1 with
    ``b_β = Σ_{α ∋ β} w_α² 2^{-|α|}`` (:func:`fourier_b`).
    """
    if coefficients not in COEFFICIENTS:
        raise ValueError(f"coefficients must be one of {COEFFICIENTS}, got {coefficients!r}")
    if not isinstance(workload, Matrix):
        raise ValueError(f"the workload must be a Matrix, got {type(workload).__name__}")
    d = _log2(int(workload.shape[1]), "the workload")
    if d == 0:
        raise ValueError("the workload has a single cell: there is no Fourier basis to use")
    out: dict[int, float] = {}
    for factors, w in _terms(workload):
        masks = np.zeros(1, dtype=np.int64)
        vals = np.ones(1)
        offset = 0
        for f in factors:
            b = _log2(int(f.shape[1]), f"a workload factor ({type(f).__name__})")
            v = _factor_norms(f)
            if coefficients == "needed":
                keep = np.flatnonzero(v > rtol * max(float(v.max()), 1e-300))
            elif _is_total(f):
                keep = np.zeros(1, dtype=np.int64)
            else:
                keep = np.arange(v.size)
            if masks.size * keep.size > MAX_COEFFICIENTS:
                raise ValueError(
                    f"a workload term needs more than {MAX_COEFFICIENTS} Fourier coefficients"
                )
            local = np.zeros(keep.size, dtype=np.int64)  # C-order local index -> bit mask
            for t in range(b):
                local |= ((keep >> (b - 1 - t)) & 1) << (offset + t)
            masks = (masks[:, None] | local[None, :]).ravel()
            vals = (vals[:, None] * v[keep][None, :]).ravel()
            offset += b
        for m, val in zip(masks.tolist(), (w * w * vals).tolist()):
            out[m] = out.get(m, 0.0) + val
    if coefficients == "all":
        if d > 26:
            raise ValueError(f"coefficients='all' needs 2^{d} coefficients (> 2^26)")
        out = {beta: out.get(beta, 0.0) for beta in range(1 << d)}
    return d, dict(sorted(out.items()))


def fourier_b(keys: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """``(F, b)``: the needed coefficients and ``b_β = Σ_{α ∋ β} w_α² 2^{-|α|}`` (§3.6)."""
    F = downset(keys)
    b = np.zeros(F.size)
    for key, w in keys.items():
        sub = submasks(key)
        b[np.searchsorted(F, sub)] += w * w * 2.0 ** (-bin(key).count("1"))
    return F, b


def plan(d: int, keys: dict[int, float], strategy: str, budget: str, norm: int, **ding):
    """The budget plan for one strategy: ``(groups, b, C, λ, metadata)`` (groups: marginal
    keys for Q/C, coefficients for F, ``[None]`` for I)."""
    if strategy == "I":
        return (
            [None],
            np.array([float(sum(w * w for w in keys.values()) * 2**d)]),
            np.ones(1),
            np.ones(1),
            {},
        )
    if strategy == "Q":
        groups = sorted(keys)
        b = np.array([keys[k] ** 2 * 2.0 ** bin(k).count("1") for k in groups])
        meta = {}
    elif strategy == "F":
        F, b = fourier_b(keys)
        groups = [int(x) for x in F]
        meta = {"coefficients": len(groups)}
    else:  # C
        res = bmax(
            list(keys),
            (2,) * d,
            p=ding.get("p") or norm,
            candidates=ding.get("candidates", "lattice"),
            weights=list(keys.values()),
        )
        groups = list(dict.fromkeys(res.centroids))
        b = np.zeros(len(groups))
        for c, kappa in res.assignment.items():
            b[groups.index(kappa)] += keys[c] ** 2 * 2.0 ** bin(kappa).count("1")
        meta = {"assignment": res.assignment, "theta": res.theta, "candidates": res.candidates}
    C = np.ones(len(groups))
    if budget == "uniform":
        lam = uniform_budgets(C, norm)
    else:
        lam, _ = optimal_budgets(b, C, norm)
    return groups, b, C, lam, meta


@register
class DataCube(Selector):
    """Datacube strategies I, Q, F, C with ``budget`` "uniform" or "optimal" (Cormode et al.
    2013). Parameters: ``strategy`` (I | Q | F | C), ``budget`` (uniform | optimal), and for C
    ``candidates`` (lattice | workload) and ``p`` (BMAX exponent; default from the privacy).
    """

    name = "datacube"

    def __init__(
        self,
        strategy: str = "F",
        budget: str = "optimal",
        candidates: str = "lattice",
        p: int | None = None,
    ):
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if budget not in BUDGETS:
            raise ValueError(f"budget must be one of {BUDGETS}, got {budget!r}")
        if candidates not in CANDIDATES:
            raise ValueError(f"candidates must be one of {CANDIDATES}, got {candidates!r}")
        if p is not None and p not in (1, 2):
            raise ValueError(f"p must be 1, 2 or None, got {p!r}")
        self.params = {"strategy": strategy, "budget": budget, "candidates": candidates, "p": p}

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        d, keys = binary_workload(workload)
        s, budget = self.params["strategy"], self.params["budget"]
        groups, b, C, lam, meta = plan(
            d,
            keys,
            s,
            budget,
            privacy.norm,
            p=self.params["p"],
            candidates=self.params["candidates"],
        )
        if s == "I":
            matrix = Identity(1 << d)
        elif s == "F":
            matrix = Fourier(d, dict(zip(groups, lam.tolist())))
        else:
            matrix = Marginals((2,) * d, dict(zip(groups, lam.tolist())))
        meta.update(
            {
                "strategy": s + ("+" if budget == "optimal" and s != "I" else ""),
                "groups": len(groups),
                "budgets": dict(zip(groups, lam.tolist())) if s != "F" else None,
            }
        )
        return Strategy(
            matrix=matrix, selector=self.name, metadata=meta, loss=budget_objective(b, lam)
        )


@register
class FourierSelector(Selector):
    """Barak et al.'s Fourier strategy, the Fourier baseline of Li & Miklau 2012 §5 and the
    "F" of Cormode et al. §4: parity rows ``χ_β`` for the coefficients of
    :func:`fourier_coefficients`, on any workload over ``2^d`` cells.

    Parameters: ``coefficients`` ("needed" — drop the unnecessary coefficients, the default;
    "attributes"; "all" — the full Hadamard basis) and ``budget`` ("uniform" — the standard
    mechanism on the kept rows, the default; "optimal" — Cormode et al.'s closed-form
    per-coefficient budgets, F+).
    """

    name = "fourier"

    def __init__(self, coefficients: str = "needed", budget: str = "uniform"):
        if coefficients not in COEFFICIENTS:
            raise ValueError(f"coefficients must be one of {COEFFICIENTS}, got {coefficients!r}")
        if budget not in BUDGETS:
            raise ValueError(f"budget must be one of {BUDGETS}, got {budget!r}")
        self.params = {"coefficients": coefficients, "budget": budget}

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        mode = self.params["coefficients"]
        try:  # pure marginals on power-of-two attributes: the downset of §4.1 directly
            d, keys = binary_workload(workload, encode=True)
        except ValueError:
            keys = None
        if keys is not None and mode == "needed":
            F, b = fourier_b(keys)
            groups = [int(x) for x in F]
        else:
            d, coef = fourier_coefficients(workload, mode)
            groups, b = list(coef), np.array(list(coef.values()))
        C = np.ones(len(groups))
        if self.params["budget"] == "uniform":
            lam = uniform_budgets(C, privacy.norm)
        else:
            lam, _ = optimal_budgets(b, C, privacy.norm)
        kept = {g: lam_g for g, lam_g in zip(groups, lam.tolist()) if lam_g > 0}
        return Strategy(
            matrix=Fourier(d, kept),
            selector=self.name,
            metadata={"coefficients": len(kept), "mode": mode, "bits": d},
            loss=budget_objective(b, lam),
        )


def workload_sets(d: int, k: int, variant: str = "Q1", seed: int = 0, fixed: int | None = None):
    """The attribute sets of the paper's workloads (§5) over ``d`` attributes (indices):

    * ``Q1`` — all k-way marginals;
    * ``Q2`` — all k-way plus half of the (k+1)-way marginals, the half drawn with
      ``numpy.random.default_rng(seed)`` (the paper does not say which half);
    * ``Q3`` — all k-way plus the (k+1)-way marginals containing attribute ``fixed``
      (default: the last attribute; the paper does not say which).

    See :func:`mmtoolkit.binary.workload_attribute_sets` (this requires ``k < d``).
    """
    from ...binary import workload_attribute_sets

    if not 0 <= k < d:
        raise ValueError(f"k must satisfy 0 <= k < d = {d}, got {k}")
    return workload_attribute_sets(d, k, variant, seed, fixed)
