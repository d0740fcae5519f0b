"""Measure, reconstruct and release on a chunked ``dask.array`` (issue 17: past one machine).

The matrix mechanism of HDMM (McKenna et al. 2018, §7.2 and App. A.4–A.5) on a data vector
or tensor too large for one machine, through whatever Dask scheduler is active (a
``distributed.Client`` of an existing cluster, or dask's local schedulers): this module only
builds dask graphs of the strategy kinds' own small operations and lets dask run them. It
needs the optional extra ``pip install 'mmtoolkit[dask]'``; :mod:`mmtoolkit.mechanism`
hands a dask array to it (``mechanism.release(W, A, data=dask_array, ...)``, ``measure``,
``reconstruct``).

Routes, chosen from the operator's own ``kron_terms()`` (never from its type):

* **Kronecker products of small factors** (p-Identity, OPT_⊗, any ``A_1 ⊗ ... ⊗ A_d``, and
  unions of them for ``W``): the data is viewed as a tensor over the factors' columns,
  chunked along its first ``k`` axes. The trailing factors ``A_{k+1} ⊗ ... ⊗ A_d`` act inside
  each block (``map_blocks``, kmatvec of HDMM App. A.5); dask then rechunks the result so the
  first ``k`` axes are whole in every block (its all-to-all, no scheduler of ours) and the
  leading factors act along them. The result is chunked along its trailing axes; the
  pseudo-inverse ``A⁺ = ⊗ A_i⁺`` (the kind's ``pinv_operator()``) runs the same steps in the
  other order, so ``x̂`` comes back chunked like the data: one rechunk per product.
* **Marginals** (every term a marginal ``⊗ (I or 1ᵀ)`` and the measurements small): each
  block's marginal tables are summed from one another along ``table_plan`` (the block's own
  ``Marginals``) and placed in zero tables of full size; dask sums these partial answers
  (one task per block, then a tree), so ``y`` is one small chunk. Reconstruction computes
  the small tables of ``A⁺ y`` (``MarginalsPinv.tables``, HDMM App. A.4) once and expands
  ``x̂`` block by block (``expand_tables``); answers of a marginals workload come from ``y``
  alone (the kind's ``workload_answers``), with no ``x̂``.

Noise: one root ``SeedSequence`` is drawn from the caller's generator and block ``b`` of ``y``
(its index in C order over the block grid) draws from ``SeedSequence(root, spawn_key=(b,))``,
so a release is a deterministic function of the seed and the chunking, whatever the
scheduler, the number of workers or the order in which blocks run; computing a lazy result
twice gives the same numbers. (The stream differs from the in-memory path's, which draws all
rows from one generator.) Continuous noise only. Results are lazy dask arrays; the data's
blocks are checked (finite, non-negative) as they are read.
"""

from __future__ import annotations

import math

import numpy as np

from .linalg import Marginals, Matrix, as_matrix, peel
from .linalg.kronecker import group
from .linalg.marginals import expand_tables, key_attrs, marginal_key

__all__ = [
    "BLOCK_CELLS",
    "is_dask_array",
    "data_chunks",
    "apply",
    "measure",
    "reconstruct",
    "release",
]

#: Cells of a block (2^23 float64 = 64 MB) when this module chooses a chunking, and the
#: largest measurement vector treated as small (marginals: computed in one piece).
BLOCK_CELLS = 1 << 23


def is_dask_array(x) -> bool:
    """Whether ``x`` is a dask array (checked without importing dask)."""
    return hasattr(x, "__dask_graph__") and hasattr(x, "chunks") and hasattr(x, "map_blocks")


def _dask():
    try:
        import dask
        import dask.array as da
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "the Dask route needs dask and distributed: pip install 'mmtoolkit[dask]'"
        ) from e
    return dask, da


# ============================================================================ routes
def _route(M: Matrix, kron_only: bool = False):
    """``("marginals", sizes, [(θ_t, key_t)])`` when every Kronecker term of ``M`` is a
    marginal over the same attributes and ``M`` has at most :data:`BLOCK_CELLS` rows (not with
    ``kron_only``: a product of identities and totals is also a Kronecker product);
    ``("kron", [(w_t, factors_t)])`` when every term is a product of at least two factors (or
    one small one); else a ValueError. Term weights are the roots of ``kron_terms``' squared
    weights with the sign of ``M``'s outer weight (a negative weight inside ``M``, which no
    selector builds, flips the sign of its rows' measurements but not the release's
    distribution: the noise is symmetric)."""
    sign = math.copysign(1.0, peel(M)[0])
    terms = M.kron_terms()
    keys = [marginal_key(factors) for _, factors in terms]
    sizes = tuple(f.shape[1] for f in terms[0][1])
    if (
        not kron_only
        and M.shape[0] <= BLOCK_CELLS
        and None not in keys
        and all(tuple(f.shape[1] for f in fs) == sizes for _, fs in terms)
    ):
        return "marginals", sizes, [(sign * math.sqrt(c), k) for (c, _), k in zip(terms, keys)]
    if all(len(fs) >= 2 or math.prod(fs[0].shape) <= BLOCK_CELLS for _, fs in terms):
        return "kron", [(sign * math.sqrt(c), fs) for c, fs in terms]
    raise ValueError(
        f"the Dask route needs a Kronecker product of small factors or marginals; "
        f"{type(peel(M)[1]).__name__} of shape {M.shape} is neither"
    )


# ============================================================================ layouts
def _split(shape, lo: int, hi: int, cells: int) -> tuple[int, ...]:
    """Chunk sizes for ``shape``: axes outside ``[lo, hi)`` whole, the axes inside split
    front first so that a block has about ``cells`` cells (at least one row of each)."""
    out = list(shape)
    budget = max(1, cells // max(1, math.prod(shape[:lo]) * math.prod(shape[hi:])))
    for j in range(lo, hi):
        rest = math.prod(shape[j + 1 : hi])
        if rest >= budget:
            out[j] = 1
        else:
            out[j] = max(1, min(shape[j], budget // rest))
            break
    return tuple(out)


def _lead_axes(sizes, cells: int) -> int:
    """The fewest leading axes (at least 1, at most d − 1) whose complement fits a block."""
    for k in range(1, len(sizes)):
        if math.prod(sizes[k:]) <= cells:
            return k
    return max(1, len(sizes) - 1)


def data_chunks(sizes, cells: int = BLOCK_CELLS) -> tuple[int, ...]:
    """The chunking this module gives a data tensor of shape ``sizes``: the fewest first axes
    split (front first) so that the rest fits a block of about ``cells`` cells (what
    :func:`reconstruct` gives ``x̂`` by default; a good chunking for data made block by
    block)."""
    sizes = tuple(int(n) for n in sizes)
    return _split(sizes, 0, _lead_axes(sizes, cells), cells)


def _as_tensor(X, sizes):
    """``X`` (a dask array of ``Π sizes`` cells, any shape) viewed as a ``sizes`` tensor."""
    sizes = tuple(int(n) for n in sizes)
    if X.size != math.prod(sizes):
        raise ValueError(
            f"the dask array has {X.size} cells (shape {X.shape}) but the operator is defined "
            f"on {math.prod(sizes)}"
        )
    return X if tuple(X.shape) == sizes else X.reshape(sizes)


def _check_block(block) -> np.ndarray:
    """A data block as float64, refused unless it holds finite, non-negative counts."""
    block = np.asarray(block, dtype=float)
    if block.size and not (np.isfinite(block.max()) and block.min() >= 0):
        bad = ~np.isfinite(block) | (block < 0)
        at = np.unravel_index(int(np.argmax(bad)), block.shape)
        raise ValueError(
            f"data: cell {at} of a block of shape {block.shape} is {block[at]}; counts must "
            "be finite and non-negative"
        )
    return block


# ============================================================================ Kronecker route
def _trailing_block(block, R: Matrix, k: int, out_sizes, weight: float, check: bool):
    """``R`` on the trailing axes of a block whose axes ``k..`` are whole."""
    if check:
        block = _check_block(block)
    lead = block.shape[:k]
    X = block.reshape(math.prod(lead), -1)
    Y = R.matvec(X.T).T.reshape(lead + tuple(out_sizes))
    return Y * weight if weight != 1.0 else Y


def _lead_block(block, G: Matrix, k: int, out_sizes, weight: float, check: bool):
    """``G`` along the first ``k`` axes of a block in which they are whole."""
    if check:
        block = _check_block(block)
    Y = G.matvec(block.reshape(math.prod(block.shape[:k]), -1))
    Y = Y.reshape(tuple(out_sizes) + block.shape[k:])
    return Y * weight if weight != 1.0 else Y


def _kron_apply(weight: float, factors, X, cells: int, check: bool):
    """``weight · (⊗ factors) X`` lazily, ``X`` a dask tensor (see the module docstring)."""
    n = tuple(f.shape[1] for f in factors)
    m = tuple(f.shape[0] for f in factors)
    d = len(factors)
    X = _as_tensor(X, n)
    meta = np.empty((0,) * d)
    if d == 1:  # one small factor: one block
        return X.rechunk(-1).map_blocks(
            _lead_block, factors[0], 1, m, weight, check, chunks=((m[0],),), meta=meta
        )
    blocks = [len(c) for c in X.chunks]
    if blocks[0] == 1 and max(blocks) > 1:  # chunked along trailing axes: first axes first
        k = next(j for j, b in enumerate(blocks) if b > 1)
        G, R = group(factors[:k]), group(factors[k:])
        whole = tuple((s,) for s in m[:k])
        Y = X.map_blocks(
            _lead_block, G, k, m[:k], 1.0, check, chunks=whole + X.chunks[k:], meta=meta
        )
        Y = Y.rechunk(_split(m[:k] + n[k:], 0, k, cells))
        return Y.map_blocks(
            _trailing_block, R, k, m[k:], weight, False,
            chunks=Y.chunks[:k] + tuple((s,) for s in m[k:]), meta=meta,
        )  # fmt: skip
    chunked = [j for j, b in enumerate(blocks) if b > 1]
    k = chunked[-1] + 1 if chunked else _lead_axes(n, cells)
    if k >= d:  # the last axis is chunked: make the trailing axes whole
        k = _lead_axes(n, cells)
        X = X.rechunk(data_chunks(n, cells))
    G, R = group(factors[:k]), group(factors[k:])
    Y = X.map_blocks(
        _trailing_block, R, k, m[k:], 1.0, check,
        chunks=X.chunks[:k] + tuple((s,) for s in m[k:]), meta=meta,
    )  # fmt: skip
    Y = Y.rechunk(_split(n[:k] + m[k:], k, d, cells))
    return Y.map_blocks(
        _lead_block, G, k, m[:k], weight, False,
        chunks=tuple((s,) for s in m[:k]) + Y.chunks[k:], meta=meta,
    )  # fmt: skip


# ============================================================================ marginals route
def _block_answers(block, terms, sizes, check: bool, block_info=None):
    """One block's share of ``[θ_t Q_{a_t} x]_t``: the block's marginal tables (its own
    ``Marginals``, summed from one another along ``table_plan``) placed at the block's
    position in zero tables of full size, packed in term order (shape ``(1,)*d + (m,)``)."""
    if check:
        block = _check_block(block)
    loc = block_info[0]["array-location"]
    d = len(sizes)
    M = Marginals(block.shape, dict.fromkeys((k for _, k in terms), 1.0))
    flat = M.matvec(block.reshape(-1))
    tables, off = {}, 0
    for key in M.keys:
        shape = tuple(block.shape[i] for i in key_attrs(key, d))
        tables[key] = flat[off : off + math.prod(shape)].reshape(shape)
        off += math.prod(shape)
    out = []
    for theta, key in terms:
        attrs = key_attrs(key, d)
        full = np.zeros(tuple(sizes[i] for i in attrs))
        full[tuple(slice(*loc[i]) for i in attrs)] = tables[key]
        out.append((theta * full).ravel())
    return np.concatenate(out).reshape((1,) * d + (-1,))


def _marginal_answers(sizes, terms, X, check: bool):
    """``[θ_t Q_{a_t} X]_t`` (1-D, one chunk): per-block partial answers summed by dask."""
    X = _as_tensor(X, sizes)
    d = len(sizes)
    m = sum(math.prod(sizes[i] for i in key_attrs(k, d)) for _, k in terms)
    parts = X.map_blocks(
        _block_answers, terms, sizes, check, new_axis=d, meta=np.empty((0,) * (d + 1)),
        chunks=tuple((1,) * b for b in X.numblocks) + ((m,),),
    )  # fmt: skip
    return parts.sum(axis=tuple(range(d)))


def _expand_block(tables, sizes, scale: float, block_info=None):
    """One block of ``x̂ = Σ_a Q_aᵀ t_a``: the tables cut to the block, expanded."""
    loc = block_info[None]["array-location"]
    part = {
        key: t[tuple(slice(*loc[i]) for i in key_attrs(key, len(sizes))) + (slice(None),)]
        for key, t in tables.items()
    }
    out = expand_tables(tuple(e - s for s, e in loc), part)[..., 0]
    return out * scale if scale != 1.0 else out


# ============================================================================ public
def apply(M, X, cells: int = BLOCK_CELLS, check: bool = False):
    """``M X`` lazily for a dask data array ``X`` (a vector or a tensor of ``M.shape[1]``
    cells): a 1-D dask array in ``M``'s row order — the linear part of :func:`measure`,
    and :func:`release`'s answering step (``W x̂``). ``check``: refuse blocks holding
    negative or non-finite counts as they are read."""
    return _apply(as_matrix(M), X, cells, check).reshape(-1)


def _apply(M: Matrix, X, cells: int, check: bool):
    """:func:`apply` keeping a single Kronecker product's result as a tensor (chunked along
    its trailing axes: what its pseudo-inverse reads without a rechunk)."""
    _, da = _dask()
    route = _route(M)
    if route[0] == "marginals":
        return _marginal_answers(route[1], route[2], X, check)
    terms = route[1]
    if len(terms) == 1:
        return _kron_apply(*terms[0], X, cells, check)
    return da.concatenate([_kron_apply(w, fs, X, cells, check).reshape(-1) for w, fs in terms])


def _noise_block(block, entropy, numblocks, privacy, sens: float, block_info=None):
    b = int(np.ravel_multi_index(block_info[0]["chunk-location"], numblocks))
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(b,)))
    return block + privacy.sample(rng, block.shape, sens)


def _measure(A: Matrix, X, privacy, rng, noise: str, cells: int):
    if noise != "continuous":
        raise ValueError(
            f"the Dask route draws continuous noise only, got noise={noise!r} (use "
            "noise='continuous', or the in-memory path for discrete noise)"
        )
    entropy = [int(v) for v in rng.integers(0, 2**63, size=2)]  # the root of the blocks' seeds
    Ax = _apply(A, X, cells, check=True)
    return Ax.map_blocks(
        _noise_block, entropy, Ax.numblocks, privacy, A.sensitivity(privacy.norm),
        meta=np.empty((0,) * Ax.ndim),
    )  # fmt: skip


def measure(A, X, privacy, rng: np.random.Generator, noise: str = "continuous",
            releases: int | None = None, cells: int = BLOCK_CELLS):  # fmt: skip
    """Noisy strategy answers ``y = A x + z`` (HDMM Table 1b, Thm 7) for a dask data array
    ``X``: a lazy 1-D dask array in ``A``'s row order. ``z`` is calibrated as in
    :func:`mmtoolkit.mechanism.measure` and drawn per block (module docstring). ``releases``
    must be None (one release). :mod:`mmtoolkit.mechanism` checks the other arguments."""
    if releases is not None:
        raise ValueError("the Dask route draws one release at a time (releases=None)")
    return _measure(as_matrix(A), X, privacy, rng, noise, cells).reshape(-1)


def reconstruct(A, y, chunks=None, cells: int = BLOCK_CELLS):
    """``x̂ = A⁺ y`` lazily (HDMM §7.2) by the strategy kind's ``pinv_operator()``: a
    Kronecker product factor by factor (``y`` a dask array: 1-D, or the tensor a measure of
    this module keeps), marginals from the small tables of ``A⁺ y`` expanded block by block
    (``y`` numpy or dask; ``chunks``: the chunking of ``x̂``, default along the first axes in
    blocks of about ``cells`` cells). Returns ``x̂`` as a dask tensor (``.reshape(-1)`` gives
    the C-order vector)."""
    A = as_matrix(A)
    P = A.pinv_operator()
    if P is None:
        raise ValueError(
            f"the Dask route reconstructs with the strategy's structured pseudo-inverse; "
            f"{type(peel(A)[1]).__name__} has none (pinv_operator() is None)"
        )
    route = _route(A)
    scale, base = peel(P)
    if route[0] == "marginals" and not hasattr(base, "tables"):
        route = _route(A, kron_only=True)  # e.g. identities ⊗ totals: a product's pinv
    if route[0] == "kron":
        if not is_dask_array(y):
            raise ValueError("reconstruct on the Dask route needs y as a dask array")
        terms = _route(P, kron_only=True)
        if terms[0] != "kron" or len(terms[1]) != 1:
            raise ValueError("the pseudo-inverse of a Kronecker strategy is not one product")
        return _kron_apply(*terms[1][0], y, cells, check=False)
    dask, da = _dask()
    sizes = route[1]
    if y.shape != (A.shape[0],):
        raise ValueError(f"y has shape {y.shape}, the strategy has {A.shape[0]} rows")
    tables = dask.delayed(base.tables)(y.reshape(-1, 1))
    if chunks is None:
        chunks = data_chunks(sizes, cells)
    chunks = da.core.normalize_chunks(chunks, sizes, dtype=float)
    return da.map_blocks(
        _expand_block, tables, sizes, scale, chunks=chunks, dtype=float,
        meta=np.empty((0,) * len(sizes)),
    )  # fmt: skip


def release(W, A, X, privacy, rng: np.random.Generator, noise: str = "continuous",
            cells: int = BLOCK_CELLS):  # fmt: skip
    """Noisy answers to the workload ``W`` from the strategy ``A`` on the dask data array
    ``X`` (HDMM Table 1b): :func:`measure`, then — if the kind answers ``W`` from ``y`` alone
    (marginals: ``workload_answers``, HDMM App. A.4) — those answers, else :func:`reconstruct`
    and :func:`apply` of ``W`` (a union of Kronecker products or marginals). A lazy 1-D dask
    array in ``W``'s row order; nothing runs until it is computed."""
    dask, da = _dask()
    W, A = as_matrix(W), as_matrix(A)
    if A.shape[1] != W.shape[1]:
        raise ValueError(
            f"the workload is defined on {W.shape[1]} cells, the strategy on {A.shape[1]}"
        )
    y = _measure(A, X, privacy, rng, noise, cells)
    small = y.ndim == 1 and A.shape[0] <= BLOCK_CELLS
    # the kind says whether it answers W from y alone (asked on zeros: no data is read)
    if small and A.workload_answers(W, np.zeros(A.shape[0])) is not None:
        out = dask.delayed(A.workload_answers)(W, y)
        return da.from_delayed(out, (W.shape[0],), dtype=float, meta=np.empty((0,)))
    route = _route(A)
    same = route[0] == "marginals" and tuple(X.shape) == route[1]
    xhat = reconstruct(A, y, chunks=X.chunks if same else None, cells=cells)  # x̂ like X
    return apply(W, xhat, cells)
