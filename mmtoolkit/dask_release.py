"""Measure, reconstruct and release on a chunked ``dask.array`` (past one machine).

The matrix mechanism of HDMM (McKenna et al. 2018, §7.2 and App. A.4–A.5) on data too large
for one machine, through whatever Dask scheduler is active: this module only builds dask
graphs of the strategy kinds' own small operations. Two routes, chosen from the operator's
``kron_terms()``: Kronecker products of small factors (kmatvec, App. A.5, one rechunk per
product) and marginals (partial tables summed per block, ``x̂`` expanded from the small
tables of ``A⁺ y``, App. A.4). :func:`measure`, :func:`reconstruct`, :func:`apply` and
:func:`release` return lazy dask arrays; the noise is the in-memory path's for the same
generator state (one stream over the rows, added block by block by a chain of tasks), so a
Dask release equals the in-memory one. Needs ``pip install 'mmtoolkit[dask]'``;
:mod:`mmtoolkit.mechanism` hands a dask array here.

User guide: docs/guide/at-scale.md.
"""

from __future__ import annotations

import copy
import math
from functools import partial

import numpy as np

from .discrete import integer_answers
from .linalg import Marginals, Matrix, as_matrix, peel
from .linalg.kronecker import group
from .linalg.marginals import expand_tables, key_attrs, marginal_key
from .measurement import integer_noise_stream
from .plan import NoisePlan, check_rng, is_dask_array
from .release_handlers import handler

__all__ = ["BLOCK_CELLS", "is_dask_array", "data_chunks", "apply", "measure", "reconstruct",
           "release", "measure_planned", "release_planned", "noise_std"]

#: Cells of a block (2^23 float64 = 64 MB) when this module chooses a chunking, and the
#: largest measurement vector treated as small (marginals: computed in one piece).
BLOCK_CELLS = 1 << 23


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
    marginal over the same attributes and ``M`` has at most :data:`BLOCK_CELLS` rows (not
    with ``kron_only``), ``("kron", [(w_t, factors_t)])`` when every term is a product of
    at least two factors (or one small one), else a ValueError. Term weights are
    ``sign_t · √c_t`` (``kron_terms(signed=True)``'s signs), so the terms' rows are ``M``'s."""
    terms = M.kron_terms()
    signs = [math.copysign(1.0, w) for w, _ in M.kron_terms(signed=True)]
    keys = [marginal_key(factors) for _, factors in terms]
    sizes = tuple(f.shape[1] for f in terms[0][1])
    if (
        not kron_only
        and M.shape[0] <= BLOCK_CELLS
        and None not in keys
        and all(tuple(f.shape[1] for f in fs) == sizes for _, fs in terms)
    ):
        weights = [sg * math.sqrt(c) for (c, _), sg in zip(terms, signs, strict=True)]
        return "marginals", sizes, list(zip(weights, keys, strict=True))
    if all(len(fs) >= 2 or math.prod(fs[0].shape) <= BLOCK_CELLS for _, fs in terms):
        return "kron", [(sg * math.sqrt(c), fs) for (c, fs), sg in zip(terms, signs, strict=True)]
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
    split so that the rest fits a block of about ``cells`` cells (:func:`reconstruct`'s
    default for ``x̂``)."""
    sizes = tuple(int(n) for n in sizes)
    return _split(sizes, 0, _lead_axes(sizes, cells), cells)


def _as_tensor(X, sizes, r: int | None = None):
    """``X`` (a dask array of ``Π sizes`` cells, any shape; with ``r`` columns: ``Π sizes x r``
    entries, the columns last) viewed as a ``sizes`` tensor (``sizes + (r,)``), the columns
    in one chunk."""
    sizes = tuple(int(n) for n in sizes)
    cells = math.prod(sizes)
    if X.size != cells * (r or 1) or (r is not None and X.shape[-1] != r):
        raise ValueError(
            f"the dask array has {X.size} cells (shape {X.shape}) but the operator is defined "
            f"on {cells}" + ("" if r is None else f" (x {r} releases)")
        )
    shape = sizes + (() if r is None else (r,))
    if r is not None and len(X.chunks[-1]) > 1:
        X = X.rechunk({X.ndim - 1: -1})
    return X if tuple(X.shape) == shape else X.reshape(shape)


def _columns(X, M: Matrix, rows: bool = False) -> int | None:
    """The number of releases (columns) of ``X``, an array of ``M``'s columns (``rows``: of
    its rows): its last dimension when the others hold the cells (``N x R``, ``N x 1``
    included, or the first product's tensor with a last axis of ``R``), else None."""
    cells = M.shape[0 if rows else 1]
    if X.ndim < 2 or math.prod(X.shape[:-1]) != cells:
        return None
    sizes = tuple(f.shape[0 if rows else 1] for f in M.kron_terms()[0][1])
    if tuple(X.shape) == sizes:  # a tensor of the cells whose last axis is 1
        return None
    return int(X.shape[-1])


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
    """``R`` on the trailing axes ``k .. k + len(out_sizes)`` of a block in which they are
    whole (a last axis of releases, if any, rides along)."""
    if check:
        block = _check_block(block)
    lead, rest = block.shape[:k], block.shape[k + len(out_sizes) :]
    L, B = math.prod(lead), math.prod(rest)
    X = block.reshape(L, -1, B).transpose(1, 0, 2).reshape(-1, L * B)
    Y = R.matvec(X).reshape(-1, L, B).transpose(1, 0, 2)
    Y = Y.reshape(lead + tuple(out_sizes) + rest)
    return Y * weight if weight != 1.0 else Y


def _lead_block(block, G: Matrix, k: int, out_sizes, weight: float, check: bool):
    """``G`` along the first ``k`` axes of a block in which they are whole."""
    if check:
        block = _check_block(block)
    Y = G.matvec(block.reshape(math.prod(block.shape[:k]), -1))
    Y = Y.reshape(tuple(out_sizes) + block.shape[k:])
    return Y * weight if weight != 1.0 else Y


def _kron_apply(weight: float, factors, X, cells: int, check: bool, r: int | None = None):
    """``weight · (⊗ factors) X`` lazily, ``X`` a dask tensor (see the module docstring); with
    ``r`` releases, ``X`` has a last axis of ``r`` columns, whole in every block."""
    n = tuple(f.shape[1] for f in factors)
    m = tuple(f.shape[0] for f in factors)
    d = len(factors)
    X = _as_tensor(X, n, r)
    bt, bc = ((), ()) if r is None else ((r,), ((r,),))
    cells = max(1, cells // (r or 1))
    meta = np.empty((0,) * (d + len(bt)))
    if d == 1:  # one small factor: one block
        return X.rechunk({0: -1}).map_blocks(
            _lead_block, factors[0], 1, m, weight, check, chunks=((m[0],),) + bc, meta=meta
        )
    blocks = [len(c) for c in X.chunks[:d]]
    if blocks[0] == 1 and max(blocks) > 1:  # chunked along trailing axes: first axes first
        k = next(j for j, b in enumerate(blocks) if b > 1)
        G, R = group(factors[:k]), group(factors[k:])
        whole = tuple((s,) for s in m[:k])
        Y = X.map_blocks(
            _lead_block, G, k, m[:k], 1.0, check, chunks=whole + X.chunks[k:], meta=meta
        )
        Y = Y.rechunk(_split(m[:k] + n[k:], 0, k, cells) + bt)
        return Y.map_blocks(
            _trailing_block, R, k, m[k:], weight, False,
            chunks=Y.chunks[:k] + tuple((s,) for s in m[k:]) + bc, meta=meta,
        )  # fmt: skip
    chunked = [j for j, b in enumerate(blocks) if b > 1]
    k = chunked[-1] + 1 if chunked else _lead_axes(n, cells)
    if k >= d:  # the last axis is chunked: make the trailing axes whole
        k = _lead_axes(n, cells)
        X = X.rechunk(data_chunks(n, cells) + bt)
    G, R = group(factors[:k]), group(factors[k:])
    Y = X.map_blocks(
        _trailing_block, R, k, m[k:], 1.0, check,
        chunks=X.chunks[:k] + tuple((s,) for s in m[k:]) + bc, meta=meta,
    )  # fmt: skip
    Y = Y.rechunk(_split(n[:k] + m[k:], k, d, cells) + bt)
    return Y.map_blocks(
        _lead_block, G, k, m[:k], weight, False,
        chunks=tuple((s,) for s in m[:k]) + Y.chunks[k:], meta=meta,
    )  # fmt: skip


# ============================================================================ marginals route
def _block_answers(block, terms, sizes, check: bool, block_info=None):
    """One block's share of ``[θ_t Q_{a_t} x]_t``: the block's marginal tables (its own
    ``Marginals``, summed from one another along ``table_plan``) placed at the block's
    position in zero tables of full size, packed in term order (shape ``(1,)*d + (m,)``, or
    ``(1,)*d + (m, r)`` for a block with a last axis of ``r`` releases)."""
    if check:
        block = _check_block(block)
    loc = block_info[0]["array-location"]
    d = len(sizes)
    rest = block.shape[d:]
    M = Marginals(block.shape[:d], dict.fromkeys((k for _, k in terms), 1.0))
    flat = M.matvec(block.reshape(M.shape[1], -1))
    tables, off = {}, 0
    for key in M.keys:
        shape = tuple(block.shape[i] for i in key_attrs(key, d))
        tables[key] = flat[off : off + math.prod(shape)].reshape(shape + rest)
        off += math.prod(shape)
    out = []
    for theta, key in terms:
        attrs = key_attrs(key, d)
        full = np.zeros(tuple(sizes[i] for i in attrs) + rest)
        full[tuple(slice(*loc[i]) for i in attrs)] = tables[key]
        out.append((theta * full).reshape((-1,) + rest))
    return np.concatenate(out).reshape((1,) * d + (-1,) + rest)


def _marginal_answers(sizes, terms, X, check: bool, r: int | None = None):
    """``[θ_t Q_{a_t} X]_t`` (1-D, or ``m x r``; one chunk): per-block partial answers summed
    by dask."""
    X = _as_tensor(X, sizes, r)
    d = len(sizes)
    bc = () if r is None else ((r,),)
    m = sum(math.prod(sizes[i] for i in key_attrs(k, d)) for _, k in terms)
    parts = X.map_blocks(
        _block_answers, terms, sizes, check, new_axis=d, meta=np.empty((0,) * X.ndim + (0,)),
        chunks=tuple((1,) * b for b in X.numblocks[:d]) + ((m,),) + bc,
    )  # fmt: skip
    return parts.sum(axis=tuple(range(d)))


def _expand_block(tables, sizes, scale: float, batch: bool, block_info=None):
    """One block of ``x̂ = Σ_a Q_aᵀ t_a``: the tables cut to the block, expanded (with
    ``batch``, the tables' columns kept as a last axis)."""
    loc = block_info[None]["array-location"][: len(sizes)]
    part = {
        key: t[tuple(slice(*loc[i]) for i in key_attrs(key, len(sizes))) + (slice(None),)]
        for key, t in tables.items()
    }
    out = expand_tables(tuple(e - s for s, e in loc), part)
    out = out if batch else out[..., 0]
    return out * scale if scale != 1.0 else out


# ============================================================================ noise
def _contiguous(chunks) -> bool:
    """Whether every block of this chunking is one run of consecutive entries in C order:
    the axes before the last split one are cut into single indices."""
    split = [j for j, c in enumerate(chunks) if len(c) > 1]
    return not split or all(max(c) == 1 for c in chunks[: split[-1]])


def _in_row_order(Y, cells: int):
    """``Y`` (a product's result) rechunked, if needed, so that its blocks are runs of
    consecutive rows (:func:`data_chunks`): the noise stream is then added block after block."""
    return Y if _contiguous(Y.chunks) else Y.rechunk(data_chunks(Y.shape, cells))


def _flat(Y, r: int | None):
    """``Y`` (blocks in row order, :func:`_in_row_order`; with ``r`` releases a last axis) as
    ``(rows,)`` or ``(rows, r)``: its blocks raveled and concatenated, no rechunk."""
    _, da = _dask()
    nd = Y.ndim - (r is not None)
    if nd == 1:
        return Y
    tail = () if r is None else (r,)
    grid = Y.numblocks[:nd]
    return da.concatenate(
        [Y.blocks[idx + (0,) * (r is not None)].reshape((-1,) + tail) for idx in np.ndindex(grid)]
    )


def _own_generator(rng: np.random.Generator) -> np.random.Generator:
    """A copy of ``rng`` for the lazy graph (its draws are the in-memory path's); once the
    whole graph is built (every refusal made), :func:`_jump` moves ``rng`` itself past it."""
    bg = rng.bit_generator
    if not hasattr(bg, "jumped"):
        raise ValueError(
            "rng: the Dask route draws its noise from a copy of the generator and then jumps "
            "the generator past it, which needs a bit generator with jumped() (PCG64 as in "
            f"np.random.default_rng, PCG64DXSM, MT19937, Philox), not {type(bg).__name__}"
        )
    return copy.deepcopy(rng)


def _jump(rng: np.random.Generator) -> None:
    """``rng`` jumped far ahead (``bit_generator.jumped()``), so that later draws of the
    caller never repeat the release's noise (its copy draws it)."""
    bg = rng.bit_generator
    assert hasattr(bg, "jumped")  # _own_generator refused a bit generator without it
    bg.state = bg.jumped().state


def _noisy_block(block, stream, offset: int, r: int | None):
    """A block of ``A x`` plus the stream's next values (continuous noise; a copy of the
    stream continues, so computing a result twice gives the same release)."""
    stream = copy.deepcopy(stream)
    out = np.array(block, dtype=float, order="C")  # a copy whose ravel is a view
    if r is not None:
        out = np.repeat(out[..., None], r, axis=-1)
    stream.add(out.reshape(-1))
    return out, stream


def _discrete_block(block, stream, offset: int, r: int | None, scales_of):
    """A block of ``d (B x + z)`` with ``z`` the stream's next integers (exact; see
    :func:`mmtoolkit.discrete.integer_answers`)."""
    stream = copy.deepcopy(stream)
    lo = offset // (r or 1)
    scales = scales_of(lo, lo + block.size).reshape(block.shape)
    noisy = np.ascontiguousarray(integer_answers(np.asarray(block, dtype=float), scales))
    if r is not None:
        noisy, scales = np.repeat(noisy[..., None], r, axis=-1), scales[..., None]
    stream.add(noisy.reshape(-1))
    return noisy * scales, stream


def _chain(Ax, stream, step, r: int | None):
    """``step`` on the blocks of ``Ax`` (in row order) one after the other, each continuing
    the noise stream where the previous one left it (a chain of ``dask.delayed`` tasks): the
    noise of every row is the value the in-memory path draws for it."""
    dask, da = _dask()
    parts = Ax.to_delayed(optimize_graph=False)  # keys shared with other results
    tail = () if r is None else (r,)
    grid = np.empty(parts.shape, dtype=object)
    offset = 0
    for idx in np.ndindex(parts.shape):
        shape = tuple(c[i] for c, i in zip(Ax.chunks, idx)) + tail
        out, stream = dask.delayed(step, nout=2)(parts[idx], stream, offset)
        block = da.from_delayed(out, shape, dtype=float, meta=np.empty((0,) * len(shape)))
        grid[idx] = block if r is None else [block]
        offset += math.prod(shape)
    return da.block(grid.tolist())


def _std_block(param_at, std, block_info=None):
    lo, hi = block_info[None]["array-location"][0]
    return std[param_at(lo, hi)]


def noise_std(plan, cells: int = BLOCK_CELLS):
    """Each row's noise standard deviation under a :class:`~mmtoolkit.plan.NoisePlan`: the
    plan's (continuous), or the calibrated rows' as a lazy array in blocks of ``cells`` rows
    (exact integer noise; no array over all rows on the client)."""
    if plan.noise != "discrete":
        return plan.std()
    _, da = _dask()
    _, param_at, _, _, var, _ = plan.row_scale_parts
    chunks = da.core.normalize_chunks(cells, (plan.A.shape[0],))
    return da.map_blocks(
        _std_block, param_at, np.sqrt(var), chunks=chunks, dtype=float,
        meta=np.empty((0,)),
    )  # fmt: skip


# ============================================================================ public
def apply(M, X, cells: int = BLOCK_CELLS, check: bool = False):
    """``M X`` lazily for a dask data array ``X`` (the cells, or ``R`` releases as a last
    axis: docs/guide/at-scale.md): a dask array in ``M``'s row order, 1-D or ``m x R`` — the
    linear part of :func:`measure` and :func:`release`'s ``W x̂``. ``check``: refuse blocks
    holding negative or non-finite counts as they are read."""
    M = as_matrix(M)
    r = _columns(X, M)
    return _apply(M, X, cells, check, r).reshape((-1,) if r is None else (-1, r))


def _apply(M: Matrix, X, cells: int, check: bool, r: int | None = None):
    """:func:`apply` keeping a single Kronecker product's result as a tensor (chunked along
    its trailing axes: what its pseudo-inverse reads without a rechunk)."""
    _, da = _dask()
    route = _route(M)
    if route[0] == "marginals":
        return _marginal_answers(route[1], route[2], X, check, r)
    terms = route[1]
    if len(terms) == 1:
        weight, factors = terms[0]
        return _kron_apply(weight, factors, X, cells, check, r)
    tail = () if r is None else (r,)
    return da.concatenate(
        [_kron_apply(w, fs, X, cells, check, r).reshape((-1,) + tail) for w, fs in terms]
    )


def _measure(plan, X, rng, r: int | None, cells: int):
    """``A x + z`` as a tensor (a single Kronecker product) or 1-D, blocks in row order,
    drawn from a copy of ``rng`` (the caller jumps ``rng`` once the graph is built) with the
    noise of ``plan`` (a :class:`~mmtoolkit.plan.NoisePlan`)."""
    A = plan.A
    Ax = _in_row_order(_apply(A, X, cells, check=True), cells)
    if plan.noise == "continuous":
        stream = plan.noise_stream(_own_generator(rng), A.shape[0] * (r or 1))
        return _chain(Ax, stream, partial(_noisy_block, r=r), r)
    scales_of, param_at, kind, params, _, _ = plan.row_scale_parts
    stream = integer_noise_stream(kind, params, _own_generator(rng), A.shape[0], r or 1,
                                  param_at)  # fmt: skip
    return _chain(Ax, stream, partial(_discrete_block, r=r, scales_of=scales_of), r)


def measure(A, X, privacy, rng: np.random.Generator, noise: str = "continuous",
            releases: int | None = None, cells: int = BLOCK_CELLS):  # fmt: skip
    """Noisy strategy answers ``y = A x + z`` (HDMM Table 1b, Thm 7) for a dask data array
    ``X``: lazy, in ``A``'s row order, 1-D or ``m x R`` for ``releases=R``, with the noise
    :func:`mmtoolkit.mechanism.measure` draws from the same generator state (continuous or
    ``noise="discrete"``); :func:`measure_planned` of the plan of ``A``."""
    return measure_planned(NoisePlan(A, privacy, noise), X, rng, releases, cells)


def measure_planned(plan, X, rng: np.random.Generator, releases: int | None = None,
                    cells: int = BLOCK_CELLS):  # fmt: skip
    """:func:`measure` by a :class:`~mmtoolkit.plan.NoisePlan`."""
    check_rng(rng)
    y = _flat(_measure(plan, X, rng, releases, cells), releases)
    _jump(rng)
    return y


def _no_pinv(A: Matrix) -> ValueError:
    return ValueError(
        f"the Dask route reconstructs with the strategy's structured pseudo-inverse; "
        f"{type(peel(A)[1]).__name__} has none (pinv_operator() is None; the in-memory path "
        "solves least squares, which needs the whole vector)"
    )


def reconstruct(A, y, chunks=None, cells: int = BLOCK_CELLS):
    """``x̂ = A⁺ y`` lazily (HDMM §7.2) by the kind's ``pinv_operator()``: a Kronecker
    product factor by factor (``y`` dask, 1-D or this module's tensor), marginals from the
    small tables of ``A⁺ y`` expanded block by block (``y`` numpy or dask; ``chunks`` of
    ``x̂``'s cells, default blocks of about ``cells``). ``y`` may hold ``R`` releases.
    Returns ``x̂`` as a dask tensor (a last axis of ``R`` releases; ``.reshape(-1)`` /
    ``.reshape(-1, R)`` gives the C-order vectors)."""
    A = as_matrix(A)
    return _reconstruct(A, y, chunks, cells, _columns(y, A, rows=True))


def _reconstruct(A: Matrix, y, chunks, cells: int, r: int | None):
    """:func:`reconstruct` for ``y`` with ``r`` releases (None: one, ``y`` 1-D or the tensor
    :func:`_measure` keeps)."""
    P = A.pinv_operator()
    if P is None:
        raise _no_pinv(A)
    route = _route(A)
    scale, base = peel(P)
    tables_of = getattr(base, "tables", None)  # MarginalsPinv: A⁺ y as small tables
    if route[0] == "marginals" and tables_of is None:
        route = _route(A, kron_only=True)  # e.g. identities ⊗ totals: a product's pinv
    if route[0] == "kron":
        if not is_dask_array(y):
            raise ValueError("reconstruct on the Dask route needs y as a dask array")
        terms = _route(P, kron_only=True)
        if terms[0] != "kron" or len(terms[1]) != 1:
            raise ValueError("the pseudo-inverse of a Kronecker strategy is not one product")
        weight, factors = terms[1][0]
        return _kron_apply(weight, factors, y, cells, False, r)
    dask, da = _dask()
    sizes = route[1]
    if y.shape != (A.shape[0],) + (() if r is None else (r,)):
        raise ValueError(f"y has shape {y.shape}, the strategy has {A.shape[0]} rows")
    tables = dask.delayed(tables_of)(y.reshape(-1, r or 1))
    if chunks is None:
        chunks = data_chunks(sizes, max(1, cells // (r or 1)))
    chunks = da.core.normalize_chunks(chunks, sizes, dtype=float)
    chunks = tuple(chunks) + (() if r is None else ((r,),))
    return da.map_blocks(
        _expand_block, tables, sizes, scale, r is not None, chunks=chunks, dtype=float,
        meta=np.empty((0,) * len(chunks)),
    )  # fmt: skip


def release(W, A, X, privacy, rng: np.random.Generator, noise: str = "continuous",
            cells: int = BLOCK_CELLS, measurements: bool = False):  # fmt: skip
    """Noisy answers to ``W`` from the strategy ``A`` on the dask data array ``X`` (HDMM
    Table 1b): :func:`measure`, then the kind's ``workload_answers`` from ``y`` alone
    (marginals, HDMM App. A.4) or :func:`reconstruct` and :func:`apply` of ``W``. Lazy,
    1-D, in ``W``'s row order: for the same generator state, the in-memory
    :func:`mmtoolkit.mechanism.release`'s answers. ``measurements``: return ``(answers,
    y)``. A kind with a mechanism of its own (ResidualPlanner) is refused."""
    plan = NoisePlan(A, privacy, noise, workload=W, fits=False)
    out, y = release_planned(plan, X, rng, cells)
    return (out, y) if measurements else out


def release_planned(plan, X, rng: np.random.Generator, cells: int = BLOCK_CELLS) -> tuple:
    """:func:`release` by a :class:`~mmtoolkit.plan.NoisePlan` with a
    workload: ``(answers, y)``, both lazy."""
    dask, da = _dask()
    check_rng(rng)
    W, A = plan.W, plan.A
    if plan.route == "own":
        raise ValueError(
            f"{type(peel(A)[1]).__name__} releases by a mechanism of its own (release_answers), "
            "which the Dask route does not run; release it in memory (records or a data "
            "vector), or use mechanism.measure / reconstruct on the dask array"
        )
    # the kind says whether it answers W from y alone (asked on zeros: no data is read)
    direct = A.shape[0] <= BLOCK_CELLS
    direct = direct and handler(A).workload_answers(A, W, np.zeros(A.shape[0])) is not None
    if not direct and A.pinv_operator() is None:
        raise _no_pinv(A)  # before any noise is drawn
    # the whole graph is built before rng moves, so every refusal leaves it untouched
    y = _measure(plan, X, rng, None, cells)
    if direct:
        out = dask.delayed(handler(A).workload_answers)(A, W, _flat(y, None))
        out = da.from_delayed(out, (W.shape[0],), dtype=float, meta=np.empty((0,)))
    else:
        route = _route(A)
        same = route[0] == "marginals" and tuple(X.shape) == route[1]
        xhat = _reconstruct(A, y, X.chunks if same else None, cells, None)  # x̂ like X
        out = _apply(W, xhat, cells, False).reshape(-1)
    _jump(rng)
    return out, _flat(y, None)
