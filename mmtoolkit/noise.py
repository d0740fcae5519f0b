"""Exact discrete noise samplers with integer/rational arithmetic only.

Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020),
Algorithms 1-3: a Bernoulli(exp(-γ)) sampler for rational γ, the discrete Laplace
``Lap_Z(t/s)`` and the discrete Gaussian ``N_Z(0, σ²)`` for rational σ², by rejection, from
uniform integers only (no floating-point number is sampled or compared: Mironov 2012).
Privacy: :func:`discrete_gaussian_rho` (CKS Thm 4 / Cor 9). ResidualPlanner §5 uses these for
its numerically secure mechanism.

Arrays of samples (``size`` given) take one of two paths, as ``MMTOOLKIT_NUMBA`` says
(:func:`mmtoolkit.linalg.kernels.compiled`):

- **compiled** (numba, the ``fast`` extra; ``mmtoolkit._numba_noise``): the only thing read
  from the caller's generator is uniform 64-bit words, in bulk
  (``rng.integers(0, 2**64, dtype=np.uint64, size=k)``, which every ``numpy.random.Generator``
  has whatever its bit generator, e.g. randomgen's ChaCha or AES counters; ``random_raw`` is
  not used: some bit generators' raw outputs are 32-bit). A kernel reads them as one bit
  stream and runs Algorithms 2-3 one sample after another, in 64-bit integers. Every
  Bernoulli(p) compares the stream's next bits, read as the binary digits of a uniform, with
  p's, up to 32 digits at once, consuming only the bits through the first digit where they
  differ (two on average). The constants of the Laplace part are not drawn by Algorithm 1's
  chains but compared with their exactly known digits: ``⌊2^32 e^{-1}⌋`` for each step of
  the geometric part, and ``exp(-u/t) = exp(-⌊u/2^L⌋ 2^L/t) · exp(-(u mod 2^L)/t)``, two
  tables of at most 2^12 entries, for ``t ≤ 2^24``; the discrete Gaussian's acceptance
  ``exp(-(|y| - σ²/t)²/(2σ²))`` is tabulated for ``|y| ≤ 4t`` when the draw is large enough
  to pay for the table. The digits are computed here with integer interval bounds
  (:func:`_exp_table`, :func:`_exp_floor`: fixed point rounded down and up, each floor
  checked against both bounds). When all 32 digits agree (probability 2^-32 a comparison)
  the kernel hands the candidate back and it is finished here exactly — further digits of
  ``e^{-x}`` against further bits of the same stream (:func:`_tie_bernoulli`), then Python
  integers — so nothing is truncated. Beyond the tables (``t > 2^24``, ``|y| > 4t``, small
  draws) the kernel runs Algorithm 1 with rational Bernoullis, decided digit-block by
  digit-block by long division. A sample is a function of the bit stream alone (and of the
  number of samples drawn, which decides whether the Gaussian's table is used): when the
  words run out mid-sample the kernel rewinds to the sample's start and the words left are
  kept before fresh ones, so the values do not depend on the buffer size. A
  discrete-Gaussian candidate whose acceptance needs integers beyond 64 bits (the far tail)
  is decided here with exact Python integers, reading the same bit stream.
- **numpy** (vectorised over the pending samples): the same algorithms, with uniform
  integers from ``rng.integers(0, bound)`` (exact bounded integers).

Both give samples of exactly the same distribution, but not the same values for a seed: the
two paths consume the generator differently (:func:`array_path` says which is in use; a
seeded release's summary records it). A σ² whose ``2 a b t²`` (``σ² = a/b``) leaves int64
(ResidualPlanner's σ rounded to a multiple of 10^-6) still takes the compiled path, its
candidates off the acceptance table decided here with Python integers; on the numpy path
it, and any parameter too large for 64-bit integers, takes the element-by-element
Python-integer path.

User guide: docs/guide/privacy-and-noise.md (exact integer noise).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from numbers import Integral, Rational

import numpy as np

from .checks import check_float, check_int
from .linalg.kernels import compiled

__all__ = ["as_fraction", "bernoulli", "bernoulli_exp", "discrete_laplace", "discrete_gaussian",
           "discrete_gaussian_pmf", "discrete_gaussian_rho", "rational_ceil_sqrt", "array_path"]

_CHUNK = 1 << 62


def as_fraction(x, name: str = "value") -> Fraction:
    """``x`` as an exact Fraction (ints, Fractions, finite floats; floats convert exactly)."""
    if isinstance(x, Rational) and not isinstance(x, bool):
        return Fraction(x)
    return Fraction(check_float(x, name, finite=True))


def _uniform_below(b: int, rng) -> int:
    """A uniform integer in ``[0, b)`` from ``rng.integers`` only (exact for any b ≥ 1)."""
    if b <= _CHUNK:
        return int(rng.integers(0, b))
    k = b.bit_length()
    chunks = -(-k // 62)
    while True:  # rejection over k random bits
        u = 0
        for _ in range(chunks):
            u = (u << 62) | int(rng.integers(0, _CHUNK))
        u >>= chunks * 62 - k
        if u < b:
            return u


def bernoulli(p: Fraction, rng) -> int:
    """Bernoulli(p) for rational ``0 ≤ p ≤ 1``: ``U < p_num`` with ``U`` uniform below ``p_den``."""
    p = as_fraction(p, "p")
    if not 0 <= p <= 1:
        raise ValueError(f"a Bernoulli probability must lie in [0, 1], got {p}")
    return int(_uniform_below(p.denominator, rng) < p.numerator)


def bernoulli_exp(gamma, rng) -> int:
    """Bernoulli(exp(-γ)) for rational ``γ ≥ 0`` (CKS Algorithm 1)."""
    gamma = as_fraction(gamma, "gamma")
    if gamma < 0:
        raise ValueError(f"gamma must be non-negative, got {gamma}")
    while gamma > 1:  # exp(-γ) = exp(-1)^⌊γ⌋ · exp(-(γ - ⌊γ⌋))
        if not _bernoulli_exp_unit(Fraction(1), rng):
            return 0
        gamma -= 1
    return _bernoulli_exp_unit(gamma, rng)


def _bernoulli_exp_unit(gamma: Fraction, rng) -> int:
    k = 1
    while bernoulli(gamma / k, rng):
        k += 1
    return k % 2


def discrete_laplace(s: int, t: int, rng, size=None):
    """Samples of the discrete Laplace ``Lap_Z(t/s)``, pmf ∝ exp(-|x| s/t) (CKS Alg. 2):
    ``size=None`` gives one Python int, else an int64 array of that shape."""
    s, t = check_int(s, "s", minimum=1), check_int(t, "t", minimum=1)
    if size is not None:
        _check_rng(rng)
        kernel = _kernels() if s <= _KERNEL_LIMIT and t <= _KERNEL_LIMIT else None
        if kernel is not None:
            array = functools.partial(_compiled_laplace, kernel, s, t, rng=rng)
        elif t < _VEC_LIMIT and s < _VEC_LIMIT:
            array = functools.partial(_laplace_array, s, t, rng=rng)
        else:
            array = None
        return _samples(size, array, lambda: discrete_laplace(s, t, rng))
    while True:
        u = _uniform_below(t, rng)
        if bernoulli_exp(Fraction(u, t), rng):
            y = _signed(s, t, u, _geometric(0, rng), rng)
            if y is not None:
                return y


def _geometric(v: int, rng) -> int:
    """``v`` plus the successes of Bernoulli(exp(-1)) before a failure (CKS Alg. 2's V)."""
    while bernoulli_exp(Fraction(1), rng):
        v += 1
    return v


def _signed(s: int, t: int, u: int, v: int, rng):
    """CKS Alg. 2's last step: ``±⌊(u + t v)/s⌋`` with a fair sign, None (rejected) for -0."""
    y = (u + t * v) // s
    b = bernoulli(Fraction(1, 2), rng)
    if b and y == 0:
        return None
    return -y if b else y


def _sigma2(sigma2) -> Fraction:
    s2 = as_fraction(sigma2, "sigma2")
    if s2 <= 0:
        raise ValueError(f"sigma2 must be positive, got {s2}")
    return s2


def _gaussian_gamma(s2: Fraction, t: int, y: int) -> Fraction:
    """CKS Alg. 3's rejection exponent: a candidate ``y`` is kept with probability
    ``exp(-γ)``, ``γ = (|y| - σ²/t)² / (2σ²)``."""
    return (abs(y) - s2 / t) ** 2 / (2 * s2)


def _discrete_gaussian_one(s2: Fraction, t: int, rng) -> int:
    while True:
        y = discrete_laplace(1, t, rng)
        if bernoulli_exp(_gaussian_gamma(s2, t, y), rng):
            return y


def discrete_gaussian(sigma2, size=None, rng=None):
    """Samples of ``N_Z(0, σ²)`` (pmf ∝ exp(-x²/(2σ²)), x ∈ Z) for rational σ² (CKS Alg. 3):
    ``size=None`` gives one Python int, else an int64 array of that shape."""
    _check_rng(rng)
    s2 = _sigma2(sigma2)
    t = math.isqrt(s2.numerator // s2.denominator) + 1  # ⌊σ⌋ + 1
    if size is None:
        return _discrete_gaussian_one(s2, t, rng)
    a, b = s2.numerator, s2.denominator
    kernel = _kernels() if t <= _KERNEL_LIMIT else None
    if kernel is not None:  # its Laplace part needs t ≤ 2^40 (the acceptance: any σ²)
        array = functools.partial(_compiled_gaussian, kernel, s2, t, rng=rng)
    elif 2 * t * t * a * b < _VEC_LIMIT and t * b + a < (1 << 31):
        # the vectorised form needs (|y| t b + a)² and 2 t² a b (times the loop counter) in int64
        array = functools.partial(_gaussian_array, a, b, t, rng=rng)
    else:
        array = None
    return _samples(size, array, lambda: _discrete_gaussian_one(s2, t, rng))


def _check_rng(rng) -> None:
    if rng is None or not hasattr(rng, "integers"):
        raise ValueError(
            "rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )


def _samples(size, array, one) -> np.ndarray:
    """An int64 array of shape ``size``: ``array(count)`` (a vectorised sampler) unless it
    is None, else ``one()`` element by element."""
    shape = (size,) if isinstance(size, Integral) else tuple(size)
    count = math.prod(shape)
    if array is not None:
        return array(count).reshape(shape)
    return np.fromiter((one() for _ in range(count)), np.int64, count).reshape(shape)


# ------------------------------------------------------------------ compiled forms
#: Parameters of the compiled discrete Laplace stay at or below this (``u + t v`` in int64).
_KERNEL_LIMIT = 1 << 40
#: The compiled discrete Gaussian decides a candidate itself while ``| |y| t b - a |`` is below
#: this (its square fits in int64); beyond it, here with Python integers.
_C_LIMIT = 1 << 31
#: Most 64-bit words drawn from the generator at once (512 KB).
_WORDS = 1 << 16
#: Binary digits of a tabulated ``exp(-x)`` the kernels compare at once (at most 32; ties,
#: probability ``2^-_PREC`` a comparison, are finished here exactly: :func:`_tie_bernoulli`).
_PREC = 32
#: The compiled discrete Laplace tabulates ``exp(-u/t)`` (two tables of ``≤ 2^12`` entries)
#: for ``t ≤ 2^_TABLE_BITS``; above, CKS Algorithm 1 in rationals.
_TABLE_BITS = 24
#: The compiled discrete Gaussian tabulates its acceptance probability for the candidates
#: ``|y| ≤ _GAUSS_SPAN t`` (98% of them) when it draws at least ``_GAUSS_USE`` times as many
#: samples as the table has entries (building it costs about a microsecond an entry).
_GAUSS_SPAN = 4
_GAUSS_USE = 16


def _kernels():
    """The compiled samplers (``mmtoolkit._numba_noise``), or None for the numpy path."""
    return compiled("mmtoolkit._numba_noise")


def array_path() -> str:
    """The path that draws arrays of exact samples now, as ``MMTOOLKIT_NUMBA`` says and numba
    allows: ``"compiled"`` or ``"numpy"``. Both draw the same law but not the same values for
    a seed, so a seeded experiment is reproduced on the same path."""
    return "numpy" if _kernels() is None else "compiled"


def _exp_bounds(x: Fraction, q: int) -> tuple[int, int]:
    """Integers ``lo ≤ 2^q e^{-x} ≤ hi`` for rational ``x`` (either sign), a few units apart:
    the series of ``e^{|x|}`` (positive terms) in fixed point, rounded down for ``lo`` and up
    for ``hi``, its remainder bounded by the last term once ``k + 1 ≥ 2|x|`` (then each term
    is at most half the one before); ``e^{-|x|}`` as ``2^{2q}`` over it."""
    p, d = abs(x.numerator), x.denominator
    one = 1 << q
    lo = hi = lo_t = hi_t = one
    k = 0
    while True:
        k += 1
        lo_t = lo_t * p // (d * k)
        hi_t = -(-hi_t * p // (d * k))
        lo, hi = lo + lo_t, hi + hi_t
        if (k + 1) * d >= 2 * p and hi_t <= 1:
            hi += hi_t  # the remainder: at most the last term
            break
    if x <= 0:
        return lo, hi
    return (one * one) // hi, -(-(one * one) // lo)


@functools.lru_cache(maxsize=4096)
def _exp_floor(x: Fraction, bits: int) -> int:
    """``⌊2^bits e^{-x}⌋`` exactly, for rational ``x ≥ 0``: bounds refined until their
    floors agree (they do: ``e^{-x}`` is irrational for rational ``x ≠ 0``, Lindemann)."""
    if x == 0:
        return 1 << bits
    q = bits + 64
    while True:
        lo, hi = _exp_bounds(x, q)
        if lo >> (q - bits) == hi >> (q - bits):
            return lo >> (q - bits)
        q *= 2


@functools.lru_cache(maxsize=64)
def _exp_table(x0: Fraction, d1: Fraction, d2: Fraction, count: int) -> np.ndarray:
    """``⌊2^32 exp(-x_j)⌋`` for ``j < count``, ``x_j = x0 + j d1 + j(j-1)/2 d2 ≥ 0``, exactly
    (int64): ``exp(-x_{j+1}) = exp(-x_j) r_j``, ``r_{j+1} = r_j exp(-d2)``, ``r_0 =
    exp(-d1)``, in fixed-point intervals (``lo`` rounded down, ``hi`` up); an entry whose
    bounds do not fix its floor is computed alone (:func:`_exp_floor`)."""
    q = 96 + 2 * count.bit_length()  # the intervals widen by ~j² units over j steps
    e_lo, e_hi = _exp_bounds(x0, q)
    r_lo, r_hi = _exp_bounds(d1, q)
    s_lo, s_hi = _exp_bounds(d2, q)
    out = np.empty(count, dtype=np.int64)
    shift = q - 32
    for j in range(count):
        f = e_lo >> shift
        if f != e_hi >> shift:  # pragma: no cover - needs a floor within the interval
            f = _exp_floor(x0 + j * d1 + Fraction(j * (j - 1), 2) * d2, 32)
        out[j] = f
        e_lo, e_hi = (e_lo * r_lo) >> q, -((-e_hi * r_hi) >> q)
        r_lo, r_hi = (r_lo * s_lo) >> q, -((-r_hi * s_hi) >> q)
    return out


@functools.lru_cache(maxsize=64)
def _laplace_tables(t: int):
    """The compiled Laplace's ``exp(-u/t)`` tables ``(elo, ehi, L)``: ``elo[j] = exp(-j/t)``,
    ``ehi[j] = exp(-j 2^L/t)`` (floors times 2^32), ``u = (u >> L) 2^L + (u mod 2^L)``; empty
    tables above ``t = 2^_TABLE_BITS`` (CKS Algorithm 1 in the kernel)."""
    kt = (t - 1).bit_length()
    if kt > _TABLE_BITS:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), 0
    L = (kt + 1) // 2
    zero = Fraction(0)
    return (_exp_table(zero, Fraction(1, t), zero, 1 << L),
            _exp_table(zero, Fraction(1 << L, t), zero, 1 << (kt - L)), L)  # fmt: skip


@functools.lru_cache(maxsize=64)
def _gaussian_table(s2: Fraction, t: int, count: int) -> np.ndarray:
    """The acceptance probabilities ``exp(-(y - σ²/t)²/(2σ²))`` of the candidates
    ``y = 0 … count-1`` (floors times 2^32): ``x_y = (y - c)²/(2σ²)``, ``c = σ²/t``, is
    ``c²/(2σ²) + y (1 - 2c)/(2σ²) + y(y-1)/2 · 1/σ²``."""
    c = s2 / t
    return _exp_table(c * c / (2 * s2), (1 - 2 * c) / (2 * s2), 1 / s2, count)


def _e1() -> int:
    """``⌊2^32 e^{-1}⌋``."""
    return _exp_floor(Fraction(1), 32)


def _tie_bernoulli(x: Fraction, prec: int, rng) -> bool:
    """``U < e^{-x}`` for a uniform ``U`` whose first ``prec`` binary digits were found equal
    to ``e^{-x}``'s (a tie of the kernels' comparison): its next digits, 30 at a time from
    ``rng``, against ``e^{-x}``'s (:func:`_exp_floor`) until they differ (exact)."""
    m = prec
    while True:
        m += 30
        digits = _exp_floor(x, m) & ((1 << 30) - 1)
        r = int(rng.integers(0, 1 << 30))
        if r != digits:
            return r < digits


def _bernoulli_exp_digits(x: Fraction, rng) -> bool:
    """Bernoulli(e^{-x}) for rational ``x ≥ 0`` as ⌊x⌋ factors Bernoulli(e^{-1}) (stopping at
    the first failure) and one Bernoulli(e^{-(x - ⌊x⌋)}), each a uniform's digits, 30 at a
    time from ``rng``, against the constant's (:func:`_tie_bernoulli` from the first digit;
    exact, and faster than Algorithm 1 when ``x``'s numerator and denominator are large)."""
    whole = x.numerator // x.denominator
    for _ in range(whole):
        if not _tie_bernoulli(Fraction(1), 0, rng):
            return False
    frac = x - whole
    return frac == 0 or _tie_bernoulli(frac, 0, rng)


class _BitStream:
    """The compiled samplers' bit stream: uniform 64-bit words from ``rng`` (bulk
    ``integers``), read by the kernels from the state ``st = [next 32-bit unit, unread bits,
    how many]`` (``mmtoolkit._numba_noise``). Also an rng with ``integers(low, high)`` reading
    the same stream, for the exact Python decisions (far tails, ties)."""

    def __init__(self, kernel, rng):
        self.kernel, self.rng = kernel, rng
        self.w = np.empty(0, dtype=np.int64)
        self.st = np.zeros(3, dtype=np.int64)

    def refill(self, wanted: int) -> None:
        """Keep the words not yet read, then append fresh ones (about ``wanted`` samples')."""
        if self.st[0] < 0:  # pragma: no cover - probability exp(-2^20)
            raise OverflowError("discrete Laplace counter overflow")
        fresh = self.rng.integers(0, 2**64, dtype=np.uint64, size=min(2 * wanted + 64, _WORDS))
        self.w = np.concatenate([self.w[self.st[0] >> 1 :], fresh.view(np.int64)])
        self.st[0] &= 1

    def integers(self, low, high, size=None):
        """One uniform integer in ``[low, high)`` (``high - low ≤ 2^62``) from the stream."""
        if size is not None:
            raise ValueError("the bit stream draws one integer at a time")
        b = high - low
        while True:
            v, pos, acc, n = self.kernel.stream_below(self.w, *self.st, b, (b - 1).bit_length())
            if pos <= 2 * self.w.size:
                self.st[:] = pos, acc, n
                return low + int(v)
            self.refill(1)


def _finish_laplace(code: int, s: int, t: int, L: int, u: int, v: int, prec: int, stream):
    """The rest of a compiled Laplace candidate whose comparison tied (``code``, a ``TIE_*``
    of the kernel; ``u``, ``v`` its values so far), exactly, from the stream: the sample, or
    None when the candidate is rejected."""
    k = stream.kernel
    if code == k.TIE_UH:
        low = u & ((1 << L) - 1)
        if not (_tie_bernoulli(Fraction(u - low, t), prec, stream)
                and bernoulli_exp(Fraction(low, t), stream)):  # fmt: skip
            return None
    elif code == k.TIE_UL:
        if not _tie_bernoulli(Fraction(u & ((1 << L) - 1), t), prec, stream):
            return None
    elif not _tie_bernoulli(Fraction(1), prec, stream):  # TIE_V: the geometric part ends
        return _signed(s, t, u, v, stream)
    else:
        v += 1
    return _signed(s, t, u, _geometric(v, stream), stream)


def _compiled_laplace(kernel, s: int, t: int, count: int, rng) -> np.ndarray:
    """``count`` samples of ``Lap_Z(t/s)`` by the compiled kernel; the candidates whose
    comparison tied are finished here, exactly, from the same bit stream."""
    out = np.empty(count, dtype=np.int64)
    stream, i = _BitStream(kernel, rng), 0
    elo, ehi, L = _laplace_tables(t)
    e1, prec = _e1(), _PREC
    code = kernel.MORE_WORDS
    while i < count:
        if code == kernel.MORE_WORDS:
            stream.refill(count - i)
        i, code, u, v = kernel.laplace_fill(out, i, stream.w, stream.st, s, t, elo, ehi, L, e1,
                                            prec)  # fmt: skip
        if code not in (kernel.DONE, kernel.MORE_WORDS):
            y = _finish_laplace(code, s, t, L, int(u), int(v), prec, stream)
            if y is not None:
                out[i] = y
                i += 1
    return out


def _compiled_gaussian(kernel, s2: Fraction, t: int, count: int, rng) -> np.ndarray:
    """``count`` samples of ``N_Z(0, σ²)`` by the compiled kernel; the far-tail candidates and
    those whose comparison tied are decided here, exactly, from the same bit stream."""
    out = np.empty(count, dtype=np.int64)
    stream, i = _BitStream(kernel, rng), 0
    a, b, c_limit = s2.numerator, s2.denominator, _C_LIMIT
    if 2 * t * t * a * b >= _I64_SAFE:  # beyond int64: every candidate off the table is BIG
        a, b, c_limit = 1, 1, 0
    elo, ehi, L = _laplace_tables(t)
    span = _GAUSS_SPAN * t + 1
    gtab = (_gaussian_table(s2, t, span) if _GAUSS_SPAN and count >= _GAUSS_USE * span
            else np.empty(0, dtype=np.int64))  # fmt: skip
    e1, prec = _e1(), _PREC
    code = kernel.MORE_WORDS
    while i < count:
        if code == kernel.MORE_WORDS:
            stream.refill(count - i)
        i, code, y, u, v = kernel.gaussian_fill(out, i, stream.w, stream.st, a, b, t, c_limit,
                                                elo, ehi, L, e1, gtab, prec)  # fmt: skip
        if code in (kernel.DONE, kernel.MORE_WORDS):
            continue
        y = int(y)
        if code == kernel.TIE_G:
            keep = _tie_bernoulli(_gaussian_gamma(s2, t, y), prec, stream)
        else:
            if code != kernel.BIG:  # a Laplace comparison tied: finish the candidate
                y = _finish_laplace(code, 1, t, L, int(u), int(v), prec, stream)
            keep = y is not None and _bernoulli_exp_digits(_gaussian_gamma(s2, t, y), stream)
        if keep:
            out[i] = y
            i += 1
    return out


# ------------------------------------------------------------------ vectorised forms
#: Integers handled by the vectorised samplers stay below this bound (int64-safe products).
_VEC_LIMIT = 1 << 50
_I64_SAFE = 1 << 62


def _bern_exp_unit_array(num: np.ndarray, den: np.ndarray, rng) -> np.ndarray:
    """Bernoulli(exp(-num/den)) elementwise for ``0 ≤ num/den ≤ 1`` (CKS Alg. 1, vectorised):
    ``K`` counts the leading successes of Bernoulli(γ/k), k = 1, 2, …, each drawn as
    ``U < num`` with ``U`` uniform below ``den·k``; the output is ``K`` odd."""
    k = np.ones(num.shape, dtype=np.int64)
    active = np.ones(num.shape, dtype=bool)
    while active.any():
        i = np.flatnonzero(active)
        high = den[i] * k[i]
        if np.any(high >= _I64_SAFE):  # pragma: no cover - needs ~2^12 successive successes
            raise OverflowError("Bernoulli(exp(-γ)) counter overflow")
        hit = rng.integers(0, high) < num[i]
        k[i[hit]] += 1
        active[i[~hit]] = False
    return (k % 2).astype(bool)


def _bern_exp_array(num: np.ndarray, den: np.ndarray, rng) -> np.ndarray:
    """Bernoulli(exp(-num/den)) elementwise for rational ``γ = num/den ≥ 0`` (int64 arrays):
    ``⌊γ⌋`` Bernoulli(exp(-1)) factors, then one Bernoulli(exp(-(γ - ⌊γ⌋)))."""
    whole = num // den
    frac = num - whole * den
    alive = np.ones(num.shape, dtype=bool)
    left = whole.copy()
    while True:
        i = np.flatnonzero(alive & (left > 0))
        if i.size == 0:
            break
        one = np.ones(i.size, dtype=np.int64)
        alive[i] = _bern_exp_unit_array(one, one, rng)
        left[i] -= 1
    i = np.flatnonzero(alive)
    alive[i] = _bern_exp_unit_array(frac[i], den[i], rng)
    return alive


def _laplace_array(s: int, t: int, count: int, rng) -> np.ndarray:
    """``count`` samples of ``Lap_Z(t/s)`` (CKS Alg. 2, vectorised over pending samples)."""
    out = np.empty(count, dtype=np.int64)
    pending = np.arange(count)
    while pending.size:
        n = pending.size
        u = rng.integers(0, t, n)
        keep = np.flatnonzero(_bern_exp_array(u, np.full(n, t, dtype=np.int64), rng))
        v = np.zeros(keep.size, dtype=np.int64)
        go = np.ones(keep.size, dtype=bool)
        while go.any():  # V: the number of successes of Bernoulli(exp(-1)) before a failure
            i = np.flatnonzero(go)
            one = np.ones(i.size, dtype=np.int64)
            hit = _bern_exp_unit_array(one, one, rng)
            v[i[hit]] += 1
            go[i[~hit]] = False
        y = (u[keep] + t * v) // s
        neg = rng.integers(0, 2, keep.size).astype(bool)
        ok = ~(neg & (y == 0))
        out[pending[keep[ok]]] = np.where(neg, -y, y)[ok]
        done = np.zeros(n, dtype=bool)
        done[keep[ok]] = True
        pending = pending[~done]
    return out


def _gaussian_array(a: int, b: int, t: int, count: int, rng) -> np.ndarray:
    """``count`` samples of ``N_Z(0, σ²)``, ``σ² = a/b``, ``t = ⌊σ⌋ + 1`` (CKS Alg. 3,
    vectorised): ``Y ~ Lap_Z(t)`` accepted with probability ``exp(-(|Y| - σ²/t)²/(2σ²))``,
    i.e. ``γ = (|Y| t b - a)² / (2 t² a b)``."""
    out = np.empty(count, dtype=np.int64)
    pending = np.arange(count)
    den_value = 2 * t * t * a * b
    while pending.size:
        n = pending.size
        y = _laplace_array(1, t, n, rng)
        big = np.abs(y) * t * b + a >= (1 << 31)
        ok = np.zeros(n, dtype=bool)
        small = np.flatnonzero(~big)
        if small.size:
            num = (np.abs(y[small]) * (t * b) - a) ** 2
            ok[small] = _bern_exp_array(num, np.full(small.size, den_value, np.int64), rng)
        s2 = Fraction(a, b)
        for j in np.flatnonzero(big):  # far tails (probability ~exp(-60)): exact big ints
            ok[j] = bool(bernoulli_exp(_gaussian_gamma(s2, t, int(y[j])), rng))
        out[pending[ok]] = y[ok]
        pending = pending[~ok]
    return out


def discrete_gaussian_pmf(sigma2, support: np.ndarray) -> np.ndarray:
    """The exact pmf of ``N_Z(0, σ²)`` on ``support`` (floating point; for tests and plots)."""
    s2 = float(_sigma2(sigma2))
    span = int(math.ceil(40 * math.sqrt(s2))) + 1
    xs = np.arange(-span, span + 1)
    norm = np.sum(np.exp(-(xs.astype(float) ** 2) / (2 * s2)))
    support = np.asarray(support)
    return np.exp(-(support.astype(float) ** 2) / (2 * s2)) / norm


def discrete_gaussian_rho(sensitivity_sq, sigma2) -> Fraction:
    """zCDP of ``N_Z(0, σ²)`` added to a query of squared L2 sensitivity Δ²: ``Δ²/(2σ²)``
    (CKS Thm 4; exact Fraction)."""
    d2 = as_fraction(sensitivity_sq, "sensitivity_sq")
    if d2 < 0:
        raise ValueError(f"the squared sensitivity must be non-negative, got {d2}")
    return d2 / (2 * _sigma2(sigma2))


def rational_ceil_sqrt(x, denominator: int) -> Fraction:
    """The least ``s/denominator ≥ sqrt(x)`` (exact; ResidualPlanner §5 Eq. 4 rounds σ up)."""
    x = as_fraction(x, "x")
    if x < 0:
        raise ValueError(f"x must be non-negative, got {x}")
    t = check_int(denominator, "denominator", minimum=1)
    # s = ⌈t·sqrt(x)⌉ = ⌈sqrt(t² x)⌉ computed in integers
    num, den = (t * t * x).numerator, (t * t * x).denominator
    s = math.isqrt(num // den)
    while Fraction(s * s) < Fraction(num, den):
        s += 1
    return Fraction(s, t)
