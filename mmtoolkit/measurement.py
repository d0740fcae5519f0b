"""The noise added to measurements, and the one type of noisy measurement.

Every value of noise that a release adds to a measurement is drawn here (the exact integer
samplers themselves live in :mod:`mmtoolkit.noise`): the continuous stream
(:class:`NoiseStream`, :func:`continuous_stream`: Laplace or Gaussian, drawn in blocks at
fixed offsets, optionally ahead on a second thread), the exact integer stream
(:class:`DiscreteNoiseStream`, Canonne, Kamath & Steinke 2020), and the two primitives a
strategy kind with a mechanism of its own draws through (:func:`scaled_gaussian`,
:func:`integer_gaussian`: ResidualPlanner's measurements, He et al. Alg. 1, 3, 5).
:class:`Measurement` is what every route hands back of what it measured.

User guide: docs/guide/privacy-and-noise.md.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .linalg import Identity, Marginals, Matrix, check_dense_size, peel
from .linalg.marginals import key_attrs
from .noise import discrete_gaussian, discrete_laplace
from .threads import Ahead, InOrder, worker_threads

__all__ = ["NOISE_BLOCK", "PREFETCH_CHUNK", "DISCRETE_BLOCK", "BLOCK_KEY_WORDS", "FORMS",
           "Measurement", "marginal_layout", "marginal_measurements", "NoiseStream",
           "DiscreteNoiseStream", "continuous_stream", "integer_noise_stream", "block_generator",
           "scaled_gaussian", "integer_gaussian"]

# ============================================================================ measurement
#: How a :class:`Measurement`'s values were formed.
FORMS = ("strategy", "marginal", "reconstructed")


@dataclass(frozen=True)
class Measurement:
    """Noisy measurements, as post-processing (Private-PGM, :mod:`mmtoolkit.pgm`) and release
    results read them: ``form`` one of :data:`FORMS` (``"strategy"``: ``y = A x + z`` of
    ``query``; ``"marginal"``: ``Q μ_C + z`` of the marginal on ``attrs``;
    ``"reconstructed"``: a least-squares marginal, its noise correlated across marginals),
    ``attrs`` names or domain indices, ``values``, ``std`` (a float or an array of
    ``values``' shape) and ``distribution``. Each form is described in docs/guide/pgm.md.
    """

    form: str
    attrs: tuple | None
    values: np.ndarray
    std: np.ndarray | float
    distribution: str
    query: Matrix | None = None

    def __post_init__(self):
        if self.form not in FORMS:
            raise ValueError(f"Measurement form must be one of {FORMS}, got {self.form!r}")

    def _attrs(self) -> tuple:
        """``attrs`` of a measurement on attributes (TypeError for a strategy measurement)."""
        if self.attrs is None:
            raise TypeError(f"a {self.form!r} measurement is on no attributes")
        return self.attrs

    def factors(self) -> tuple:
        """The query's factor on each attribute of ``attrs`` of a marginal measurement, a
        dense array, or None for the identity: all None when ``query`` is None, else the
        factors of the Kronecker product ``query``."""
        attrs = self._attrs()
        if self.query is None:
            return (None,) * len(attrs)
        terms = self.query.kron_terms()
        if len(terms) != 1 or terms[0][0] != 1.0 or len(terms[0][1]) != len(attrs):
            raise ValueError(
                f"measurement on attributes {self.attrs}: its query is not one Kronecker "
                "product with a factor per attribute"
            )
        return tuple(f.dense() for f in terms[0][1])

    def query_matrix(self, sizes) -> np.ndarray:
        """The dense query over the cells of a marginal measurement's attributes (``sizes``:
        the domain's attribute sizes; size-guarded)."""
        mats = [np.eye(sizes[i]) if f is None else f
                for i, f in zip(self._attrs(), self.factors(), strict=True)]  # fmt: skip
        check_dense_size(
            math.prod(m.shape[0] for m in mats), math.prod(m.shape[1] for m in mats),
            "the dense query of a marginal measurement",
        )  # fmt: skip
        return functools.reduce(np.kron, mats, np.ones((1, 1)))


def marginal_layout(A: Matrix, sizes=None) -> list | None:
    """How the rows of a marginal-type strategy ``A`` measure marginals of a domain of
    attribute ``sizes`` (None: the strategy's own, a marginals strategy's sizes or one
    attribute): ``[(attrs, shape, weight)]`` in row order, one per measured marginal (its
    rows are ``weight`` times the table on ``attrs``, attribute indices), for a (weighted)
    marginals strategy (HDMM §6.3's weighted marginals) or a (weighted) identity (the whole
    table); None for any other strategy."""
    c, base = peel(A)
    if isinstance(base, Marginals):
        if sizes is not None and tuple(base.sizes) != tuple(sizes):
            return None
        out = []
        for key, theta in base.weights.items():
            attrs = key_attrs(key, len(base.sizes))
            out.append((attrs, tuple(base.sizes[i] for i in attrs), c * theta))
        return out
    sizes = (A.shape[1],) if sizes is None else tuple(sizes)
    if isinstance(base, Identity) and base.shape[1] == int(np.prod(sizes, dtype=np.int64)):
        return [(tuple(range(len(sizes))), sizes, c)]
    return None


def marginal_measurements(A: Matrix, y, std, distribution: str, sizes=None) -> list | None:
    """The noisy answers ``y`` of a marginal-type strategy ``A`` (:func:`marginal_layout`;
    ``std`` the noise standard deviation per row, a float or an array) as marginal
    :class:`Measurement` s, one per measured marginal, the block's weight divided out, values
    and std shaped as the tables (attribute indices); None for any other strategy."""
    layout = marginal_layout(A, sizes)
    if layout is None:
        return None
    std, out, row = np.asarray(std, dtype=float), [], 0
    for attrs, shape, w in layout:
        k = int(np.prod(shape, dtype=np.int64))
        sd = std / abs(w) if std.ndim == 0 else (std[row : row + k] / abs(w)).reshape(shape)
        out.append(Measurement("marginal", attrs, (y[row : row + k] / w).reshape(shape), sd,
                               distribution))  # fmt: skip
        row += k
    return out


# ============================================================================ continuous noise
#: Values of noise drawn at once by a :class:`NoiseStream` (a cache-sized buffer).
NOISE_BLOCK = 1 << 16
#: Values a prefetching :class:`NoiseStream` draws ahead on its thread at once (16 MB; two
#: such buffers). Large, so that handing a chunk over costs little beside drawing it.
PREFETCH_CHUNK = 1 << 21


def _laplace_into(z, u, rng: np.random.Generator, b: float) -> None:
    """Laplace(0, b) variates written into ``z`` by the inverse CDF of uniforms ``U`` drawn
    into ``u`` (scratch of the same size): ``t = min(2U, (2 − U) − U)`` is ``rng.laplace``'s
    ``2U`` below 1/2 and ``2 − U − U`` above, and the variate is ``b·log t`` with the sign of
    ``U − 1/2`` (no masked operations: they are several times slower)."""
    rng.random(out=u)
    zero = np.flatnonzero(u == 0.0)
    while zero.size:  # log(0) is excluded, as rng.laplace rejects U = 0
        u[zero] = rng.random(zero.size)
        zero = zero[u[zero] == 0.0]
    np.subtract(2.0, u, out=z)
    z -= u
    np.minimum(z, u + u, out=z)
    np.log(z, out=z)
    z *= b
    u -= 0.5
    np.copysign(z, u, out=z)


class NoiseStream:
    """``size`` i.i.d. noise values (``family`` "laplace" or "gaussian", scale ``b`` / ``σ``)
    added in order to consecutive pieces of the answers (:func:`continuous_stream`).

    Drawn in blocks of :data:`NOISE_BLOCK` at fixed offsets (a piece may end inside a block:
    the rest is kept for the next piece), into one cache-sized buffer; with ``prefetch`` (and
    at least two :data:`PREFETCH_CHUNK`), a second thread draws the next chunk — the same
    values — into the buffer the caller is not reading (docs/guide/privacy-and-noise.md).
    The thread starts at :meth:`start` or the first :meth:`add` (the generator is untouched
    until then) and ends with the stream or :meth:`close`."""

    def __init__(
        self, family: str, scale: float, rng: np.random.Generator, size: int,
        prefetch: bool = False,
    ):  # fmt: skip
        self.family, self.scale, self.rng = family, float(scale), rng
        self.left = int(size)  # values not yet added
        self.undrawn = self.left  # values not yet drawn
        self.u = np.empty(min(NOISE_BLOCK, self.left)) if family == "laplace" else None
        self.pos = self.end = 0  # buf[pos:end]: drawn, not yet added
        self.closed = False
        self._ahead = None  # the chunks drawn ahead on a thread (prefetch)
        if prefetch and self.scale != 0.0 and self.left >= 2 * PREFETCH_CHUNK:
            if worker_threads() > 1:
                chunk = max(1, PREFETCH_CHUNK // NOISE_BLOCK) * NOISE_BLOCK  # whole blocks
                bufs, size = [np.empty(chunk), np.empty(chunk)], self.left
                draw = functools.partial(_draw_noise, family, self.scale, rng, self.u)

                def task(i):  # chunk i into the buffer the caller is not reading
                    return draw(bufs[i % 2][: min(chunk, size - i * chunk)])

                self._ahead = Ahead(task, -(-size // chunk))
        if self._ahead is None:
            self._block = np.empty(min(NOISE_BLOCK, self.left))

    def add(self, piece: np.ndarray) -> None:
        """Add the next ``piece.size`` values to ``piece`` (a 1-D float64 or float32 array,
        in place)."""
        if piece.ndim != 1:
            raise ValueError(f"noise pieces are 1-D (consecutive answers), got {piece.shape}")
        if self.closed:
            raise ValueError("the noise stream was closed; draw a new one")
        k = piece.size
        if k > self.left:
            raise ValueError(f"the noise stream has {self.left} values left, not {k}")
        self.left -= k
        if self.scale == 0.0:
            return
        done = 0
        while done < k:
            if self.pos == self.end:
                self._next()
            take = min(self.end - self.pos, k - done)
            piece[done : done + take] += self.buf[self.pos : self.pos + take]
            self.pos += take
            done += take

    def start(self) -> None:
        """Start drawing ahead now (a prefetched stream; otherwise nothing): the caller
        commits to adding the stream, so the generator may move from here."""
        if self._ahead is not None:
            self._ahead.start()

    def close(self) -> None:
        """Finish the stream: no more :meth:`add`; the drawing thread, if any, ends (after the
        chunk it is drawing). Closed before its last value (a product that failed), a
        prefetched stream leaves the generator up to two chunks further on than the values
        added — do not rely on ``rng``'s state after a failed measure."""
        self.closed = True
        if self._ahead is not None:
            self._ahead.close()

    def _next(self) -> None:
        """Make the next drawn values current (``buf[pos:end]``)."""
        if self._ahead is None:
            k = min(NOISE_BLOCK, self.undrawn)
            self.buf = _draw_noise(self.family, self.scale, self.rng, self.u, self._block[:k])
            self.undrawn -= k
        else:
            self.buf = self._ahead.next()
        self.pos, self.end = 0, self.buf.size


def _draw_noise(family, scale, rng, u, z: np.ndarray) -> np.ndarray:
    """Fill ``z`` with the next ``z.size`` values of a :class:`NoiseStream` (``u``: its
    uniforms' scratch, Laplace), block by block; returns ``z``."""
    for s in range(0, z.size, NOISE_BLOCK):
        part = z[s : s + NOISE_BLOCK]
        if family == "laplace":
            _laplace_into(part, u[: part.size], rng, scale)
        else:
            rng.standard_normal(out=part)
            part *= scale
    return z



def continuous_stream(family: str, scale: float, rng: np.random.Generator, size: int,
                      prefetch: bool = False) -> NoiseStream:  # fmt: skip
    """The continuous noise of one draw of ``size`` values as a :class:`NoiseStream` of
    ``family`` (``"laplace"`` or ``"gaussian"``) and ``scale`` (Laplace ``b``, Gaussian
    ``σ``): what the noise plan opens with the scale it computed. The values equal
    ``rng.laplace`` / ``rng.normal``'s, whatever the pieces (docs/guide/privacy-and-noise.md);
    the caller must not use ``rng`` until the stream is used up or closed."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    return NoiseStream(family, scale, rng, size, prefetch)


def scaled_gaussian(rng: np.random.Generator, out: np.ndarray, scales: np.ndarray,
                    counts: np.ndarray) -> np.ndarray:  # fmt: skip
    """Gaussian noise of per-run standard deviations: ``out`` (1-D, ``Σ counts`` values)
    filled by one ``rng.standard_normal`` draw, run ``k`` (``counts[k]`` consecutive values)
    scaled by ``scales[k]``; returns ``out``. The primitive a kind with a mechanism of its
    own draws its chunks of rows through (ResidualPlanner: the closure sets of a chunk, one
    ``σ_A`` each)."""
    z = rng.standard_normal(out=out)
    if np.all(counts == counts[0]):  # runs of equal length: rows of a view
        rows = z.reshape(len(counts), int(counts[0]))
        rows *= scales[:, None]
    else:
        z *= np.repeat(scales, counts)
    return z


def integer_gaussian(sigma2, shape, rng: np.random.Generator):
    """Exact discrete-Gaussian noise ``N_Z(0, sigma2)`` of ``shape`` (None: one value) from
    ``rng`` (:func:`mmtoolkit.noise.discrete_gaussian`): the integer noise of a kind with a
    discrete mechanism of its own (ResidualPlanner's Algorithm 3)."""
    return discrete_gaussian(sigma2, shape, rng)


# ============================================================================ integer noise
#: Values of the discrete noise stream drawn at once (at fixed offsets of the stream): each
#: block takes one call of the exact sampler per noise parameter present in it, so a block
#: much larger than the continuous stream's keeps strategies with many distinct row scales
#: fast (2^20 int64 = 8 MB).
DISCRETE_BLOCK = 1 << 20
_NO_VALUES = np.empty(0, dtype=np.int64)


#: 64-bit words of the caller's generator that key one block's generator (256 bits).
BLOCK_KEY_WORDS = 4


def block_generator(rng: np.random.Generator, key: np.ndarray) -> np.random.Generator:
    """The generator of one block of a :class:`DiscreteNoiseStream`: a fresh generator over
    a bit generator of ``rng``'s type keyed by ``key`` (:data:`BLOCK_KEY_WORDS` uint64 words
    drawn from ``rng``). randomgen's ``ChaCha`` (the private mode's) takes the 256 bits as
    its key, with ``rng``'s rounds; every other bit generator (numpy's PCG64, Philox, ...)
    is seeded by ``SeedSequence(key)``."""
    bg = rng.bit_generator
    kind = type(bg)
    if kind.__module__.startswith("randomgen") and kind.__name__ == "ChaCha":
        rounds = bg.state["state"]["rounds"]
        # randomgen's ChaCha takes key= and rounds=: mypy sees numpy's BitGenerator type
        return np.random.Generator(kind(key=int.from_bytes(key.astype("<u8").tobytes(),  # type: ignore[call-arg]
                                                           "little"), rounds=rounds))  # fmt: skip
    return np.random.Generator(kind(np.random.SeedSequence([int(w) for w in key])))


class DiscreteNoiseStream:
    """The integer noise of ``rows x releases`` answers (C order: a row's ``releases`` values
    together), added in order to consecutive pieces (:meth:`add`), exact samplers only.

    Drawn :data:`DISCRETE_BLOCK` at a time at fixed offsets, one vectorised draw per noise
    parameter within a block, so the values do not depend on how the answers are cut (the
    Dask route gets the in-memory values). Block ``i`` is drawn from its own generator
    (:func:`block_generator`) keyed by the ``i``-th :data:`BLOCK_KEY_WORDS` words drawn from
    ``rng``, so the blocks are drawn on :func:`~mmtoolkit.threads.worker_threads` threads at
    once (:class:`~mmtoolkit.threads.InOrder`) and the values depend on ``rng``'s state and
    the block index only. ``param_at(lo, hi)``: the parameter index (into ``params``) of
    rows ``lo..hi-1``, so the stream never needs an array over all rows. The caller must not
    use ``rng`` until the stream is used up or closed."""

    def __init__(self, kind: str, params, rng: np.random.Generator, rows: int, releases: int,
                 param_at):  # fmt: skip
        self.kind, self.params, self.rng, self.param_at = kind, list(params), rng, param_at
        self.r = int(releases)
        self.size = int(rows) * self.r
        self.start = 0  # stream position of buf[0]
        self.buf = _NO_VALUES
        self.pos = 0  # buf[pos:]: drawn, not yet added
        self._blocks: InOrder | None = None  # the blocks, from the first draw on

    @property
    def left(self) -> int:
        """Values not yet added."""
        return self.size - self.start - self.pos

    def add(self, piece: np.ndarray) -> None:
        """Add the next ``piece.size`` values to ``piece`` (1-D int64, in place)."""
        if piece.ndim != 1 or piece.dtype != np.int64:
            raise ValueError(f"noise pieces are 1-D int64, got {piece.dtype} {piece.shape}")
        k = piece.size
        if k > self.left:
            raise ValueError(f"the noise stream has {self.left} values left, not {k}")
        done = 0
        while done < k:
            if self.pos == self.buf.size:
                self._draw()
            take = min(self.buf.size - self.pos, k - done)
            piece[done : done + take] += self.buf[self.pos : self.pos + take]
            self.pos += take
            done += take

    def close(self) -> None:
        """Finish the stream early (a product that failed): blocks drawn ahead are dropped
        and the drawing threads end."""
        if self._blocks is not None:
            self._blocks.close()

    def _draw(self) -> None:
        a = self.start + self.buf.size
        self.buf = _NO_VALUES  # used up: freed before the next block is drawn
        if self._blocks is None:
            count = -(-self.size // DISCRETE_BLOCK)
            self._blocks = InOrder(self._task, count, worker_threads())
        self.start, self.buf, self.pos = a, self._blocks.next(), 0

    def _task(self, i: int):
        """The task drawing block ``i`` (made in block order: its key is drawn here)."""
        key = self.rng.integers(0, 2**64, dtype=np.uint64, size=BLOCK_KEY_WORDS)
        return functools.partial(self._block, i * DISCRETE_BLOCK, block_generator(self.rng, key))

    def _block(self, a: int, rng: np.random.Generator) -> np.ndarray:
        """The values at stream positions ``a..`` of one block, drawn from ``rng``."""
        b = min(a + DISCRETE_BLOCK, self.size)
        if len(self.params) == 1:
            return self._sample(self.params[0], b - a, rng)
        z = np.empty(b - a, dtype=np.int64)
        lo, hi = a // self.r, (b - 1) // self.r + 1
        p = np.asarray(self.param_at(lo, hi))
        if self.r > 1:
            p = p[np.arange(a, b) // self.r - lo]
        # the positions of each parameter in increasing order, parameters in order
        order = np.argsort(p, kind="stable")
        ends = np.cumsum(np.bincount(p, minlength=len(self.params)))
        start = 0
        for k, end in enumerate(ends):
            if end > start:
                z[order[start:end]] = self._sample(self.params[k], int(end - start), rng)
            start = end
        return z

    def _sample(self, p, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "laplace":
            return discrete_laplace(p[1], p[2], rng, size=n)
        return discrete_gaussian(p[1], n, rng)


def integer_noise_stream(kind: str, params, rng: np.random.Generator, rows: int, releases: int,
                         param_at) -> DiscreteNoiseStream:  # fmt: skip
    """The exact integer noise of ``rows x releases`` answers as a
    :class:`DiscreteNoiseStream` (``kind``, ``params``: a calibration's,
    :func:`mmtoolkit.discrete.discrete_calibration`; ``param_at(lo, hi)``: the parameter
    index of rows ``lo..hi-1``): what both mechanisms (in memory and Dask) add."""
    return DiscreteNoiseStream(kind, params, rng, rows, releases, param_at)
