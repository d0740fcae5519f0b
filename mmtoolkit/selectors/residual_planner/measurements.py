"""Measurement and reconstruction for ResidualPlanner(+) (He et al. §4.2-4.3, §5, §7.3-7.4):
:func:`measure` (Algorithm 1 / 5), :func:`measure_discrete` (Algorithm 3), :func:`reconstruct`
and its batched forms (Algorithm 2 / 6), :func:`variances` / :func:`covariance` (Thm 4.4 /
7.2), vectorised over the closure; data: records, a data vector or ``attrs -> marginal``.
User guide: docs/algorithms/residual-planner.md.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ...linalg import check_dense_size
from ...measurement import integer_gaussian, scaled_gaussian
from ...noise import discrete_gaussian_rho, rational_ceil_sqrt
from ...plan import Noise
from ...privacy import Privacy
from ...threads import Ahead
from .plan import ResidualPlan
from .route import product_variances, subsets

#: Entries per vectorised batch (noise draws, marginal tables, index arrays): bounds the
#: memory of measurement and reconstruction beyond the measurements themselves.
MAX_BATCH_CELLS = 1 << 20
#: record codes per ``bincount`` when counting marginals (2 MB of int64 indices: written and
#: read back while still in cache; d = 100, 10,000 records: 2.3 s of counting instead of 2.75)
COUNT_CODES = 1 << 18


# ============================================================================ data access
class MarginalSource:
    """True marginals ``Q_A x`` (row-major over the attributes of A, in attribute order)."""

    def __init__(self, data, sizes):
        self.sizes = tuple(int(n) for n in sizes)
        self._cache: dict = {}
        if callable(data):
            self._fn = data
            self._records = None
            self._x = None
            return
        arr = np.asarray(data)
        self._fn = None
        if arr.ndim == 2 and arr.shape[1] == len(self.sizes):
            if not np.issubdtype(arr.dtype, np.integer):
                raise ValueError("records must be an integer array (one column per attribute)")
            if arr.size and (np.any(arr < 0) or np.any(arr >= np.array(self.sizes))):
                raise ValueError("a record has a value outside its attribute's range 0..n-1")
            self._records = arr.astype(np.int64)
            self._x = None
        elif arr.ndim == 1:
            N = math.prod(self.sizes)
            if arr.size != N:
                raise ValueError(f"data vector has {arr.size} cells, the domain has {N}")
            self._x = arr.reshape(self.sizes)
            self._records = None
        else:
            raise ValueError(
                "data must be records (an int array of shape (r, d)), a data vector of the "
                "domain's size, or a callable attrs -> marginal"
            )

    def __call__(self, attrs: tuple[int, ...]) -> np.ndarray:
        attrs = tuple(attrs)
        if attrs not in self._cache:
            self._cache[attrs] = self._marginal(attrs)
        return self._cache[attrs]

    def _marginal(self, attrs: tuple[int, ...]) -> np.ndarray:
        shape = tuple(self.sizes[i] for i in attrs)
        if self._fn is not None:
            return np.asarray(self._fn(attrs), dtype=float).reshape(shape)
        if self._records is not None:
            if not attrs:
                return np.array(len(self._records))
            idx = np.ravel_multi_index(tuple(self._records[:, i] for i in attrs), shape)
            return np.bincount(idx, minlength=math.prod(shape)).reshape(shape)
        drop = tuple(i for i in range(len(self.sizes)) if i not in attrs)
        return self._x.sum(axis=drop)

    def batch(self, attrs: np.ndarray, buffer: np.ndarray | None = None) -> np.ndarray:
        """The marginals of the ``(S, k)`` sorted attribute sets ``attrs`` (equal sizes per
        position) as ``(S, n_1, ..., n_k)`` floats, not cached; ``buffer``: reused storage."""
        attrs = np.asarray(attrs, dtype=np.int64)
        S, k = attrs.shape
        shape = tuple(self.sizes[i] for i in attrs[0]) if S else ()
        if self._records is None or k == 0 or S == 1:
            return np.stack(
                [np.asarray(self._marginal(tuple(int(a) for a in row)), float) for row in attrs]
            ).reshape((S, *shape))
        return self._count(attrs, shape, buffer).reshape((S, *shape))

    def _count(self, attrs: np.ndarray, shape: tuple[int, ...], buffer=None) -> np.ndarray:
        if not hasattr(self, "_rt"):
            self._rt = np.ascontiguousarray(self._records.T)  # (d, records)
        RT = self._rt
        S, k = attrs.shape
        d, r = RT.shape
        cells = math.prod(shape)
        strides = [math.prod(shape[j + 1 :]) for j in range(k)]
        # bins (c * cells + code) for a last attribute c: one block of `cells` bins per c, so
        # a run over consecutive last attributes is one add of a slice (if it fits)
        shifted = None
        if d * r <= 8 * MAX_BATCH_CELLS:
            shifted = RT + (np.arange(d, dtype=np.int64) * cells)[:, None]
        limit = max(1, min(MAX_BATCH_CELLS, COUNT_CODES) // max(r, 1))
        buf = np.empty(min(limit, d) * r, dtype=np.int64)  # reused: no fresh pages per run
        if buffer is not None and buffer.size >= S * cells:
            out = buffer.reshape(-1)[: S * cells].reshape(S, cells)
        else:
            out = np.empty((S, cells))
        prefixes, inv = np.unique(attrs[:, :-1], axis=0, return_inverse=True)
        inv = inv.ravel()
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(len(prefixes) + 1))
        code = np.empty(r, dtype=np.int64)
        for u, pre in enumerate(prefixes):
            code[:] = 0
            for j, a in enumerate(pre):
                code += RT[a] * strides[j]
            run = order[bounds[u] : bounds[u + 1]]
            for at in range(0, len(run), limit):
                sets = run[at : at + limit]
                last = attrs[sets, -1]
                lo, hi = int(last.min()), int(last.max()) + 1
                if shifted is not None and hi - lo == len(sets):  # a slice, no gather
                    idx = np.add(
                        shifted[lo:hi],
                        code - lo * cells,
                        out=buf[: (hi - lo) * r].reshape(hi - lo, r),
                    )
                    rows = last - lo
                else:
                    idx = np.add(RT[last], code, out=buf[: len(sets) * r].reshape(len(sets), r))
                    idx += (np.arange(len(sets)) * cells)[:, None]
                    lo, hi, rows = 0, len(sets), np.arange(len(sets))
                counts = np.bincount(idx.ravel(), minlength=(hi - lo) * cells)
                block = counts.reshape(hi - lo, cells)
                s0 = int(sets[0])
                if np.array_equal(sets, np.arange(s0, s0 + len(sets))) and np.array_equal(
                    rows, np.arange(len(rows))
                ):
                    out[s0 : s0 + len(sets)] = block  # no gather, no scatter
                else:
                    out[sets] = block[rows]
        return out


def _apply(T: np.ndarray, mats) -> np.ndarray:
    """``(⊗_j mats[j]) vec(T)`` for a tensor ``T`` with one axis per factor (C order)."""
    for ax, M in enumerate(mats):
        if M is None:
            continue
        T = np.moveaxis(np.tensordot(M, T, axes=(1, ax)), 0, ax)
    return T


# ============================================================================ layout
def _apply_batch(T: np.ndarray, mats, out=None) -> np.ndarray:
    """:func:`_apply` on every ``T[s]`` of a stack; ``mats[j]``: a matrix, ``"sub"`` (``x_0 -
    x_{1:}``), ``"pinv"`` (Lemma 1's ``Sub†``) or None; ``out``: where to write the result."""
    last = max((j for j, M in enumerate(mats) if M is not None), default=-1)
    for j, M in enumerate(mats):
        ax = j + 1
        head = (slice(None),) * ax
        if M is None:
            continue
        if isinstance(M, str) and M == "sub":
            dest = out if (j == last and out is not None) else None
            T = np.subtract(T[(*head, slice(0, 1))], T[(*head, slice(1, None))], out=dest)
        elif isinstance(M, str):  # "pinv"
            mean = T.sum(axis=ax, keepdims=True) / (T.shape[ax] + 1)
            T = np.concatenate([mean, mean - T], axis=ax)
        else:
            T = np.moveaxis(np.tensordot(T, M, axes=(ax, 1)), -1, ax)
    if out is not None and T is not out:
        out[...] = T
        return out
    return T


class _Layout:
    """How a plan's measurements are laid out (``ω_A`` of closure set ``k``: ``values[off[k]:off[k +
    1]]``; ``zlen[k]`` noise draws) and batched (``group``: the same basis at every position)."""

    def __init__(self, plan: ResidualPlan):
        bases = plan.bases
        d = len(bases)
        table = self.table = plan.table
        self.sets = table.closure  # (K, kmax), -1 padded, sorted by size
        self.size = table.closure_size
        self.kmax = table.kmax
        keys: dict = {}
        akey = [keys.setdefault(("m", b.n) if b.marginal else id(b), len(keys)) for b in bases]
        self.attr_key = np.array([*akey, -1], dtype=np.int64)
        ext = lambda f: np.array([*[f(b) for b in bases], 1], dtype=np.int64)  # noqa: E731
        self.dims = ext(lambda b: b.sub.shape[0])[self.sets].prod(axis=1)
        self.zlen = ext(lambda b: b.gamma.shape[1])[self.sets].prod(axis=1)
        self.cells = ext(lambda b: b.n)[self.sets].prod(axis=1)
        self.off = np.concatenate([[0], np.cumsum(self.dims)])
        self.group = self.groups(self.sets)
        self.base = d + 1
        self.codes = None
        if self.kmax * math.log2(self.base) < 62:
            self.codes = self._encode(self.sets)
            self.code_order = np.argsort(self.codes)
            self.sorted_codes = self.codes[self.code_order]

    def groups(self, B: np.ndarray) -> np.ndarray:
        """A group index for each row of ``B`` (attribute sets of one size, -1 padded): rows in
        one group have the same basis at every position."""
        if not B.shape[1]:
            return np.zeros(len(B), dtype=np.int64)
        return np.unique(self.attr_key[B], axis=0, return_inverse=True)[1].ravel()

    @functools.cached_property
    def index(self) -> dict:
        """``{closure set (sorted attribute tuple): its closure index}``."""
        return {A: k for k, A in enumerate(self.table.closure_sets())}

    def _encode(self, B: np.ndarray) -> np.ndarray:
        code = np.zeros(len(B), dtype=np.int64)
        for j in range(B.shape[1]):
            code += (B[:, j] + 1) * self.base**j
        return code

    def lookup(self, B: np.ndarray) -> np.ndarray:
        """Closure index of each row of ``B`` (sorted attribute sets), -1 if not measured."""
        if self.codes is None or len(B) <= 8:
            return np.array([self.index.get(tuple(int(a) for a in row), -1) for row in B])
        code = self._encode(B)
        pos = np.minimum(np.searchsorted(self.sorted_codes, code), len(self.codes) - 1)
        return np.where(self.sorted_codes[pos] == code, self.code_order[pos], -1)

    def chunks(self):
        """Contiguous closure ranges of one set size and at most MAX_BATCH_CELLS draws."""
        lo, K = 0, len(self.sets)
        while lo < K:
            hi = int(np.searchsorted(self.size, self.size[lo], side="right"))
            cum = np.cumsum(self.zlen[lo:hi])
            hi = lo + max(1, int(np.searchsorted(cum, MAX_BATCH_CELLS, side="right")))
            yield lo, hi
            lo = hi

    @functools.cached_property
    def batches(self) -> list:
        """Per chunk ``(lo, hi, noise offsets, [(closure indices, attributes)])`` with one
        entry per group of the chunk (what :func:`measure` loops over)."""
        out = []
        for lo, hi in self.chunks():
            k = int(self.size[lo])
            zoff = np.concatenate([[0], np.cumsum(self.zlen[lo:hi])])
            groups = []
            for g in np.unique(self.group[lo:hi]):
                c = lo + np.nonzero(self.group[lo:hi] == g)[0]
                groups.append((c, self.sets[c, :k]))
            out.append((lo, hi, zoff, groups))
        return out

    def rows(self, flat: np.ndarray, off: np.ndarray, c: np.ndarray, length: int) -> np.ndarray:
        """``flat[off[c_s] : off[c_s] + length]`` for every ``s`` as an ``(S, length)`` array."""
        if len(c) == 1:
            return flat[off[c[0]] : off[c[0]] + length][None, :]
        lo, hi = int(c.min()), int(c.max()) + 1
        if _evenly_spaced(off, c, length):  # a reshaped view
            return flat[off[lo] : off[hi]].reshape(hi - lo, length)[c - lo]
        return flat[off[c][:, None] + np.arange(length)]


def _layout(plan: ResidualPlan) -> _Layout:
    if plan._measurement_layout is None:
        plan._measurement_layout = _Layout(plan)
    return plan._measurement_layout


def _residual_factors(bases, attrs, which: str) -> list:
    """Per position the factor of :func:`_apply_batch`: ``Sub_i`` (``which="sub"``), ``Γ_i``
    (``"gamma"``) or ``Sub_i†`` (``"pinv"``), with the marginal-attribute fast paths."""
    out = []
    for a in attrs:
        b = bases[a]
        if which == "gamma":
            out.append("sub" if b.marginal else None)  # Γ = Sub (marginal) or I (§7.2)
        elif b.marginal:
            out.append(which)
        else:
            out.append(b.sub if which == "sub" else b.sub_pinv)
    return out


# ============================================================================ measurement
@dataclass
class Measurements:
    """Noisy residual answers ``ω_A`` in closure order (``values``; ``omega[A]``: a view) and their
    σ²_A: internal state between measuring and reconstructing (not exported)."""

    plan: ResidualPlan
    values: np.ndarray
    sigma2: np.ndarray
    rho: float | Fraction | None = None
    extra: dict = field(default_factory=dict)
    #: reconstruction's shared residual estimates (:func:`_residual_estimates`)
    _lower: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @functools.cached_property
    def omega(self) -> dict:
        off = _layout(self.plan).off
        return {A: self.values[off[k] : off[k + 1]] for k, A in enumerate(self.plan.closure_sets())}


#: numbers per slice of a stack transformed at once by :func:`measure` (256 KB of floats)
CACHE_CELLS = 1 << 15


def measure(plan: ResidualPlan, data, noise, rng) -> Measurements:
    """Algorithm 1 / 5 for every closure set, ``ω_A = (⊗ Sub_i) v_A + σ_A (⊗ Γ_i) z``, σ²_A
    calibrated to ``noise`` (a :class:`~mmtoolkit.plan.Noise` or a Gaussian privacy definition)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    src = data if isinstance(data, MarginalSource) else MarginalSource(data, plan.sizes)
    if isinstance(noise, Privacy):
        noise = Noise.of(noise)
    if noise.family != "gaussian":
        raise ValueError(f"ResidualPlanner adds Gaussian noise: privacy must be ZCDP or "
                         f"ApproxDP, got {noise.guarantee}")  # fmt: skip
    sigma2 = plan.sigma2_at(noise.unit_variance)
    sigma = np.sqrt(sigma2)
    bases = plan.bases
    lay = _layout(plan)
    values = np.empty(int(lay.off[-1]))
    batches = lay.batches
    zmax = max(int(zoff[-1]) for _, _, zoff, _ in batches)
    zbufs = (np.empty(zmax), np.empty(zmax))
    vbuf = np.empty(  # the counts of the largest group, reused by every group
        max(
            (len(c) * math.prod(plan.sizes[a] for a in attrs[0]) for *_, groups in batches
             for c, attrs in groups),
            default=0,
        )
    )  # fmt: skip

    def draw(i: int) -> np.ndarray:
        """Chunk i's noise σ_A z_A (the stream of one call per set), each set's part scaled."""
        lo, hi, zoff, _ = batches[i]
        return scaled_gaussian(rng, zbufs[i % 2][: int(zoff[-1])], sigma[lo:hi], lay.zlen[lo:hi])

    # the next chunk's noise is drawn on a second thread while this one is counted (both
    # release the GIL); one thread draws every chunk in order: the stream is unchanged
    ahead = Ahead(draw, len(batches))
    try:
        for lo, _, zoff, groups in batches:
            z = ahead.next()
            for c, attrs in groups:
                v = src.batch(attrs, vbuf)
                zs = lay.rows(z, zoff, c - lo, int(lay.zlen[c[0]]))  # a view of z, or a copy
                zs = zs.reshape((len(c), *(bases[a].gamma.shape[1] for a in attrs[0])))
                dest = _row_view(values, lay.off, c)
                if dest is not None:
                    dest = dest.reshape((len(c), *(bases[a].n - 1 for a in attrs[0])))
                if all(bases[a].marginal for a in attrs[0]) and dest is not None:
                    # (⊗Sub)(v + σz), a cache-sized slice of the stack at a time (the stack's
                    # temporaries would otherwise be fresh pages, several times the slice's size)
                    factors = _residual_factors(bases, attrs[0], "sub")
                    step = max(1, CACHE_CELLS // max(1, v[0].size))
                    for s0 in range(0, len(c), step):
                        part = v[s0 : s0 + step]
                        part += zs[s0 : s0 + step]
                        _apply_batch(part, factors, out=dest[s0 : s0 + step])
                    omega = dest
                elif all(bases[a].marginal for a in attrs[0]):
                    v += zs  # (⊗Sub)(v + σz)
                    omega = _apply_batch(v, _residual_factors(bases, attrs[0], "sub"), out=dest)
                else:
                    omega = _apply_batch(v, _residual_factors(bases, attrs[0], "sub"), out=dest)
                    omega += _apply_batch(zs, _residual_factors(bases, attrs[0], "gamma"))
                if dest is None:
                    _write_rows(values, lay.off, c, omega.reshape(len(c), -1))
    finally:
        ahead.close()
    return Measurements(plan, values, sigma2, noise.rho)


def _row_view(flat, off, c):
    """``flat[off[c_0] : off[c_{-1} + 1]]`` when ``c`` is a run of consecutive closure sets
    (then their parts are that contiguous slice), else None."""
    lo, hi = int(c[0]), int(c[-1]) + 1
    if hi - lo != len(c):
        return None
    return flat[off[lo] : off[hi]]


def _evenly_spaced(off, c, length: int) -> bool:
    """Whether every part ``c_s`` starts at ``off[min c] + (c_s − min c)·length`` (rows of one
    reshaped view); the span alone does not tell (sizes (4, 3, 4, 5, 4), 1-way marginals)."""
    lo, hi = int(c.min()), int(c.max()) + 1
    return off[hi] - off[lo] == (hi - lo) * length and bool(
        np.all(off[c] == off[lo] + (c - lo) * length)
    )


def _write_rows(flat, off, c, block) -> None:
    lo, hi, length = int(c.min()), int(c.max()) + 1, block.shape[1]
    if _evenly_spaced(off, c, length):
        flat[off[lo] : off[hi]].reshape(hi - lo, length)[c - lo] = block
    else:
        flat[off[c][:, None] + np.arange(length)] = block


def discrete_sigma(plan: ResidualPlan, rho, denominator: int = 10**6) -> tuple:
    """Algorithm 3's noise scales at zCDP ``rho``: the continuous ``σ²`` of each closure set
    (an array) and its ``σ̄``, ``σ`` rounded up to a multiple of ``1/denominator`` (§5 Eq. 4,
    Fractions); the discrete noise of set ``k`` is ``N_Z(0, σ̄_k² Π n_i²)``."""
    sigma2 = plan.sigma2 / plan.pcost() / (2.0 * float(Fraction(rho)))
    return sigma2, [rational_ceil_sqrt(Fraction(s2), denominator) for s2 in sigma2]


def measure_discrete(
    plan: ResidualPlan, data, rho, rng, *, denominator: int = 10**6
) -> Measurements:
    """Algorithm 3 (§5, Eq. 4, 6, 7, Thm 5.1): exact discrete-Gaussian measurement, σ rounded up
    to a multiple of ``1/denominator``; ``extra["rho_exact"]``: ``Σ_A ρ_A ≤ rho``, a Fraction."""
    if not plan.workload.all_marginal:
        raise ValueError(
            "the discrete-Gaussian mechanism (§5) is defined for marginal attributes only"
        )
    if not hasattr(rng, "integers"):
        raise ValueError("rng must be a numpy.random.Generator")
    rho_f = Fraction(rho)
    if rho_f <= 0:
        raise ValueError(f"rho must be positive, got {rho}")
    src = data if isinstance(data, MarginalSource) else MarginalSource(data, plan.sizes)
    bases = plan.bases
    sigma2, rounded = discrete_sigma(plan, rho_f, denominator)
    off = _layout(plan).off
    values, used, total = np.empty(int(off[-1])), np.empty_like(sigma2), Fraction(0)
    for k, (A, sbar) in enumerate(zip(plan.closure_sets(), rounded, strict=True)):
        sizes = [bases[i].n for i in A]
        gamma2 = sbar * sbar * math.prod(n * n for n in sizes)
        v = np.asarray(src(A))
        if not np.all(np.equal(np.mod(v, 1), 0)):
            raise ValueError("the discrete mechanism needs integer counts")
        v = v.astype(np.int64)
        H = [n * np.eye(n, dtype=np.int64) - np.ones((n, n), dtype=np.int64) for n in sizes]
        Hv = _apply(v, H)
        z = integer_gaussian(gamma2, Hv.shape if Hv.shape else None, rng)
        y = Hv + z
        Ydag = [bases[i].sub / bases[i].n for i in A]
        values[off[k] : off[k + 1]] = _apply(np.asarray(y, dtype=float), Ydag).ravel()
        used[k] = float(sbar * sbar)
        total += discrete_gaussian_rho(math.prod(n * (n - 1) for n in sizes), gamma2)
    return Measurements(plan, values, used, float(total), {"rho_exact": total})


# ============================================================================ reconstruction
def _check_target(plan: ResidualPlan, attrs) -> tuple[int, ...]:
    ((_, T),) = _target_arrays([tuple(attrs)], len(plan.bases))
    t = tuple(int(a) for a in T[0])
    idx = _layout(plan).index
    for _, B in subsets(t):
        if B not in idx and all(plan.bases[i].n > 1 for i in B):
            raise ValueError(
                f"the marginal on {list(t)} cannot be reconstructed: the residual of {list(B)} "
                "was not measured (not in the closure of the workload)"
            )
    return t


def _residual_estimates(meas: Measurements, c: np.ndarray, size: int) -> np.ndarray:
    """``(⊗_{i∈B} Sub_i†) ω_B`` for the closure sets ``c`` (one size, the same bases) as an
    ``(S, Π n_i)`` array; those below the largest size are computed once and kept."""
    lay = _layout(meas.plan)
    bases = meas.plan.bases

    def compute(cs):
        attrs = lay.sets[cs[0], :size]
        w = lay.rows(meas.values, lay.off, cs, int(lay.dims[cs[0]]))
        w = w.reshape((len(cs), *(bases[a].n - 1 for a in attrs)))
        return _apply_batch(w, _residual_factors(bases, attrs, "pinv")).reshape(len(cs), -1)

    if size == lay.kmax:
        return compute(c)
    if meas._lower is None:
        cells = np.where(lay.size < lay.kmax, lay.cells, 0)
        off = np.concatenate([[0], np.cumsum(cells)])
        meas._lower = (np.empty(int(off[-1])), off, np.zeros(len(off) - 1, dtype=bool))
    flat, off, done = meas._lower
    need = np.unique(c[~done[c]])
    if len(need):
        _write_rows(flat, off, need, compute(need))
        done[need] = True
    return lay.rows(flat, off, c, int(lay.cells[c[0]]))


def _estimate_batch(meas: Measurements, targets: np.ndarray, answers: bool) -> np.ndarray:
    """Algorithm 2 / 6 for a stack of sorted target sets with the same bases at every position, one
    row per target: ``q`` (then ``⊗ W_i q`` if ``answers``)."""
    plan = meas.plan
    bases = plan.bases
    lay = _layout(plan)
    S, k = targets.shape
    first = [int(a) for a in targets[0]]
    shape = tuple(bases[a].n for a in first)
    q = np.zeros((S, *shape))
    for pat in range(1 << k):
        pos = [j for j in range(k) if (pat >> j) & 1]
        c = lay.lookup(targets[:, pos])
        if np.any(c < 0):
            if any(shape[j] == 1 for j in pos):  # an attribute of size 1 has no residual
                continue
            bad = np.argmax(c < 0)
            raise ValueError(
                f"the marginal on {targets[bad].tolist()} cannot be reconstructed: the residual "
                f"of {targets[bad, pos].tolist()} was not measured (not in the closure of the "
                "workload)"
            )
        u = _residual_estimates(meas, c, len(pos))
        # the averaged attributes Ã \ A' are broadcast axes of value 1/n
        full = u.reshape((S, *(shape[j] if j in pos else 1 for j in range(k))))
        scale = 1.0 / math.prod(shape[j] for j in range(k) if j not in pos)
        q += scale * full
    if answers:
        W = [None if bases[a].marginal else bases[a].workload.dense() for a in first]
        q = _apply_batch(q, W)
    return q.reshape(S, -1)


def _target_arrays(sets, d: int):
    """``(indices, sorted (S, k) int array)`` per set size, the attributes checked."""
    by_size: dict = {}
    for j, attrs in enumerate(sets):
        by_size.setdefault(len(attrs), []).append(j)
    for k, idx in by_size.items():
        idx = np.array(idx)
        T = np.array([list(sets[j]) for j in idx], dtype=np.int64).reshape(len(idx), k)
        T = np.sort(T, axis=1)
        bad = (T < 0) | (T >= d)
        if bad.any():
            raise ValueError(
                f"attribute {int(T[bad][0])} is outside the domain (attributes 0..{d - 1})"
            )
        if k > 1 and np.any(np.diff(T, axis=1) == 0):
            j = int(idx[np.argmax((np.diff(T, axis=1) == 0).any(axis=1))])
            raise ValueError(f"attributes repeated in {list(sets[j])}")
        yield idx, T


def iter_reconstruct(measurements: Measurements, sets, *, answers: bool = True):
    """Algorithm 2 / 6 for many attribute sets, vectorised: yields ``(j, estimate of
    sets[j])`` batch by batch (at most MAX_BATCH_CELLS numbers), not holding them all."""
    plan = measurements.plan
    lay = _layout(plan)
    for idx, T in _target_arrays(sets, len(plan.bases)):
        group = lay.groups(T)
        for g in np.unique(group):
            rows = np.nonzero(group == g)[0]
            first = T[rows[0]]
            size = max(
                math.prod(plan.bases[a].n for a in first),
                math.prod(plan.bases[a].rows for a in first) if answers else 1,
            )
            step = max(1, MAX_BATCH_CELLS // size)
            for at in range(0, len(rows), step):
                part = rows[at : at + step]
                out = _estimate_batch(measurements, T[part], answers)
                yield from zip(idx[part].tolist(), out, strict=True)


def reconstruct_sets(measurements: Measurements, sets, *, answers: bool = True) -> list:
    """:func:`reconstruct` of every set of ``sets``, in order (vectorised,
    :func:`iter_reconstruct`)."""
    out: list = [None] * len(sets)
    for j, est in iter_reconstruct(measurements, sets, answers=answers):
        out[j] = est
    return out


def reconstruct(measurements: Measurements, attrs, *, answers: bool = True) -> np.ndarray:
    """Algorithm 2 / 6: the unbiased estimate of the (generalized) marginal on ``attrs``: its
    answers ``⊗_{i∈Ã} W_i q`` or (``answers=False``) the flattened table ``Q_Ã x``."""
    ((_, T),) = _target_arrays([tuple(attrs)], len(measurements.plan.bases))
    return _estimate_batch(measurements, T, answers)[0]


def variances(plan: ResidualPlan, attrs, privacy: Privacy | None = None) -> np.ndarray:
    """Per-query variances of the reconstructed ``attrs`` answers (Thm 4.4 / Thm 7.2),
    in the answers' order; at pcost 1 (ρ = 1/2) unless ``privacy`` is given."""
    t = _check_target(plan, attrs)
    s2 = plan.sigma2 / plan.pcost() if privacy is None else plan.scaled_sigma2(privacy)
    coef = {B: s2[k] for B, k in _layout(plan).index.items()}
    return product_variances(coef, t, [(plan.bases[i].row_h, plan.bases[i].row_s) for i in t])


def covariance(plan: ResidualPlan, attrs, privacy: Privacy | None = None) -> np.ndarray:
    """Full covariance of the reconstructed ``attrs`` answers (Thm 4.4 / 7.2; digest §2.4)."""
    t = _check_target(plan, attrs)
    s2 = plan.sigma2 / plan.pcost() if privacy is None else plan.scaled_sigma2(privacy)
    bases = plan.bases
    idx = _layout(plan).index
    rows = math.prod(bases[i].rows for i in t)
    check_dense_size(rows, rows, "a covariance matrix")
    K_in, K_out = [], []
    for i in t:
        Wd = bases[i].workload.dense()
        K_in.append(Wd @ bases[i].H @ Wd.T)
        w1 = Wd.sum(axis=1)
        K_out.append(np.outer(w1, w1) / bases[i].n ** 2)
    out = np.zeros((rows, rows))
    for pat, B in subsets(t):
        if B not in idx:
            continue
        M = np.array([[s2[idx[B]]]])
        for j in range(len(t)):
            M = np.kron(M, K_in[j] if (pat >> j) & 1 else K_out[j])
        out += M
    return out


def reconstruct_workload(measurements: Measurements) -> list[np.ndarray]:
    """Answers to every set of the plan's workload, in workload order (Algorithm 2 / 6)."""
    return reconstruct_sets(measurements, measurements.plan.workload.sets)


__all__ = [
    "MarginalSource",
    "covariance",
    "discrete_sigma",
    "iter_reconstruct",
    "measure",
    "measure_discrete",
    "reconstruct",
    "reconstruct_sets",
    "reconstruct_workload",
    "variances",
]
