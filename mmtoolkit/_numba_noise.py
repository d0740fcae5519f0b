"""The compiled exact samplers of :mod:`mmtoolkit.noise` (numba; imported only through
:func:`mmtoolkit.linalg.kernels.compiled`, never directly).

Every random bit comes from ``w``, a buffer of uniform 64-bit words (int64 view) that the
caller drew from its generator, read as one bit stream of 32-bit units (the low half of each
word, then the high half). The reader keeps ``n`` unread bits in ``acc``, the next one the
highest: ``st = [next unit, acc, n]`` between calls (the kernels keep it in local variables).
When a sample needs more bits than ``w`` holds, the reader goes back to where the sample began
and the fill returns: the caller appends fresh words to the unread ones and calls again, so
each sample is a function of the bit stream alone, whatever the buffer size.

A Bernoulli(p) is decided by comparing the next bits of the stream, read as the binary digits
of a uniform ``U``, with ``p``'s: ``U < p`` iff, at the first digit where they differ, ``p``'s
is 1. :func:`_cmp` compares up to ``prec ≤ 32`` digits at once against ``P = ⌊2^prec p⌋`` and
consumes only the bits up to the first difference (two on average; the bits after it are
independent of the outcome and stay in the stream). When all ``prec`` digits agree
(probability ``2^-prec``) the outcome is not known yet: for a rational ``p`` the kernel goes on
by long division (:func:`_bern_rat`); for ``p = exp(-x)`` — tabulated by the caller, exactly —
the fill returns a ``TIE_*`` code with the sample's state, and the caller decides the rest
exactly from the same stream (:mod:`mmtoolkit.noise`). Nothing is truncated.

No floating-point number anywhere: integers and comparisons of integers only.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

_jit = numba.njit(nogil=True, cache=True)
#: The helpers are inlined into the fills at numba's level (faster than LLVM's calls).
_inline = numba.njit(nogil=True, cache=True, inline="always")

_MASK32 = np.int64(0xFFFFFFFF)
#: Return codes of the fills: every slot filled; the words ran out (call again with more);
#: a discrete-Gaussian candidate whose acceptance needs integers beyond 64 bits; a comparison
#: with a tabulated ``exp(-x)`` whose ``prec`` digits all agreed, in the high or the low part
#: of ``exp(-u/t)`` (Laplace), in a Bernoulli(exp(-1)) of the geometric part, or in the
#: discrete Gaussian's acceptance.
DONE, MORE_WORDS, BIG, TIE_UH, TIE_UL, TIE_V, TIE_G = 0, 1, 2, 3, 4, 5, 6
#: Above this many successes of Bernoulli(exp(-1)) (probability exp(-2^20)) the Laplace
#: value ``u + t v`` could leave int64 for the largest ``t``: the fill refuses, not wraps.
V_LIMIT = 1 << 20
#: ``_cmp``'s outcome when all compared digits agree.
_TIE = 2


@_inline
def bit_length(x):
    """The number of binary digits of ``x ≥ 0`` (0 for 0)."""
    if x == 0:
        return np.int64(0)
    return np.int64(64 - leading_zeros(x))


@_inline
def _refill(w, pos, acc, n):
    """At least 32 unread bits when ``n < 32`` (one more 32-bit unit in ``acc``); past the
    end of ``w``: ``pos = 2 w.size + 1`` (the words ran out)."""
    if n < 32:
        if pos >= 2 * w.size:
            return 2 * w.size + 1, acc, n
        unit = (w[pos >> 1] >> ((pos & 1) * 32)) & _MASK32
        return pos + 1, (acc << 32) | unit, n + 32
    return pos, acc, n


@_inline
def _take(w, pos, acc, n, k):
    """The next ``k`` bits (1 ≤ k ≤ 32) as an integer, first bit highest, and the reader's
    new state; 0 when the words ran out."""
    pos, acc, n = _refill(w, pos, acc, n)
    if n < k:
        return np.int64(0), 2 * w.size + 1, acc, n
    n -= k
    v = acc >> n
    return v, pos, acc & ((np.int64(1) << n) - 1), n


@_inline
def below(w, pos, acc, n, b, k):
    """A uniform integer in ``[0, b)`` (1 ≤ b ≤ 2^62, ``k`` the bit length of ``b - 1``):
    ``k`` bits, rejected while ≥ b (and the reader's new state, as :func:`_take`)."""
    if b == 1:
        return np.int64(0), pos, acc, n
    while True:
        if k > 32:
            hi, pos, acc, n = _take(w, pos, acc, n, k - 32)
            lo, pos, acc, n = _take(w, pos, acc, n, np.int64(32))
            v = (hi << 32) | lo
        else:
            v, pos, acc, n = _take(w, pos, acc, n, k)
        if v < b or pos > 2 * w.size:
            return v, pos, acc, n


@_inline
def _cmp(w, pos, acc, n, P, prec):
    """Compare the uniform ``U`` the next bits spell with ``p``, ``P = ⌊2^prec p⌋``
    (1 ≤ prec ≤ 32; ``P = 2^prec``: ``p = 1``): 1 if ``U < p``, 0 if ``U > p`` (the bits up
    to the first differing digit consumed), :data:`_TIE` when the ``prec`` digits agree (all
    consumed); 0 with ``pos`` past the end when the words ran out."""
    if P >> prec:
        return np.int64(1), pos, acc, n
    pos, acc, n = _refill(w, pos, acc, n)
    if n < prec:
        return np.int64(0), 2 * w.size + 1, acc, n
    x = acc >> (n - prec)
    d = x ^ P
    if d == 0:
        n -= prec
        return np.int64(_TIE), pos, acc & ((np.int64(1) << n) - 1), n
    n -= prec - bit_length(d) + 1  # through the first digit where they differ
    return np.int64(1 if x < P else 0), pos, acc & ((np.int64(1) << n) - 1), n


@_inline
def _bern_rat(w, pos, acc, n, a, b):
    """Bernoulli(a/b) for 0 ≤ a, 1 ≤ b < 2^62, exactly: ``k`` digits of a/b at a time by
    long division (one integer division, ``a·2^k < 2^63``) compared with :func:`_cmp`,
    until they differ."""
    if a >= b:
        return True, pos, acc, n
    k = 63 - bit_length(b)
    if k > 32:
        k = np.int64(32)
    while a != 0 and pos <= 2 * w.size:
        s = a << k
        P = s // b
        c, pos, acc, n = _cmp(w, pos, acc, n, P, k)
        if c != _TIE:
            return c == 1, pos, acc, n
        a = s - P * b
    return False, pos, acc, n  # a/b's digits end here: U is not below it


@_inline
def _bern_exp_unit(w, pos, acc, n, num, den):
    """Bernoulli(exp(-num/den)) for 0 ≤ num ≤ den (CKS Algorithm 1): K counts the leading
    successes of Bernoulli(γ/k), k = 1, 2, …, each drawn as Bernoulli(1/k) and
    Bernoulli(num/den) (independent, so their conjunction has probability γ/k); K odd."""
    k = np.int64(1)
    one = np.int64(1)
    while pos <= 2 * w.size:
        if k > 1:
            a, pos, acc, n = _bern_rat(w, pos, acc, n, one, k)
            if not a:
                break
        a, pos, acc, n = _bern_rat(w, pos, acc, n, num, den)
        if not a:
            break
        k += 1
    return (k & 1) == 1, pos, acc, n


@_inline
def _bern_exp(w, pos, acc, n, num, den):
    """Bernoulli(exp(-num/den)) for 0 ≤ num, 1 ≤ den < 2^62 (CKS Algorithm 1, rationals
    only): ⌊γ⌋ factors Bernoulli(exp(-1)), then one Bernoulli(exp(-(γ - ⌊γ⌋)))."""
    whole = num // den
    one = np.int64(1)
    i = np.int64(0)
    while i < whole:
        a, pos, acc, n = _bern_exp_unit(w, pos, acc, n, one, one)
        if not a or pos > 2 * w.size:
            return False, pos, acc, n
        i += 1
    return _bern_exp_unit(w, pos, acc, n, num - whole * den, den)


@_inline
def _laplace_one(w, pos, acc, n, s, t, kt, elo, ehi, L, e1, prec):
    """One candidate loop of Lap_Z(t/s) (CKS Algorithm 2; ``kt`` the bit length of
    ``t - 1``): ``u`` uniform below ``t`` kept with probability ``exp(-u/t)``, ``v`` the
    successes of Bernoulli(exp(-1)) before a failure (``e1 = ⌊2^32 e^-1⌋``), a sign. With
    tables (``elo.size > 0``): ``exp(-u/t) = ehi[u >> L] · elo[u mod 2^L]``, two independent
    Bernoulli comparisons with ``⌊2^32 exp(-x)⌋``; without, CKS Algorithm 1 on ``u/t``.

    Returns ``(code, y, u, v)`` and the reader's state: :data:`DONE` and the sample ``y``; a
    ``TIE_*`` code and the candidate's ``u``, ``v`` (the reader just after the tied digits);
    the words ran out (``pos`` past the end) or, ``pos = -1``, a counter overflow."""
    one = np.int64(1)
    zero = np.int64(0)
    lmask = (one << L) - 1
    shift = 32 - prec
    while pos <= 2 * w.size:
        u, pos, acc, n = below(w, pos, acc, n, t, kt)
        if elo.size:
            uh = u >> L
            if uh:
                c, pos, acc, n = _cmp(w, pos, acc, n, ehi[uh] >> shift, prec)
                if c == _TIE:
                    return np.int64(TIE_UH), zero, u, zero, pos, acc, n
                if c == 0:
                    continue
            c, pos, acc, n = _cmp(w, pos, acc, n, elo[u & lmask] >> shift, prec)
            if c == _TIE:
                return np.int64(TIE_UL), zero, u, zero, pos, acc, n
            if c == 0:
                continue
        else:
            a, pos, acc, n = _bern_exp_unit(w, pos, acc, n, u, t)
            if not a:
                continue
        v = np.int64(0)
        while True:
            c, pos, acc, n = _cmp(w, pos, acc, n, e1 >> shift, prec)
            if c == _TIE:
                return np.int64(TIE_V), zero, u, v, pos, acc, n
            if c == 0 or pos > 2 * w.size:
                break
            v += 1
            if v > V_LIMIT:  # pragma: no cover - probability exp(-2^20)
                return np.int64(DONE), zero, u, v, np.int64(-1), acc, n
        bit, pos, acc, n = _take(w, pos, acc, n, one)
        y = (u + t * v) // s
        if bit == 1 and y == 0:
            continue
        return np.int64(DONE), (-y if bit == 1 else y), u, v, pos, acc, n
    return np.int64(DONE), zero, zero, zero, pos, acc, n


@_jit
def laplace_fill(out, i, w, st, s, t, elo, ehi, L, e1, prec):
    """Fill ``out[i:]`` with Lap_Z(t/s) samples (1 ≤ s, t ≤ 2^40; tables as
    :func:`_laplace_one`), reading from ``st`` (the reader's state ``[unit, acc, n]``) on.
    Returns ``(next slot, code, u, v)``: :data:`DONE`; :data:`MORE_WORDS` (``st`` at the
    start of the unfinished sample; ``st[0] = -1``: a counter overflow); a ``TIE_*`` code
    (``st`` just after the tie) for the caller to finish that candidate and call again."""
    pos, acc, n = st[0], st[1], st[2]
    kt = bit_length(t - 1)
    zero = np.int64(0)
    while i < out.size:
        code, y, u, v, p, a, m = _laplace_one(w, pos, acc, n, s, t, kt, elo, ehi, L, e1, prec)
        if p > 2 * w.size or p < 0:
            st[0], st[1], st[2] = (pos if p > 0 else p), acc, n
            return i, MORE_WORDS, zero, zero
        pos, acc, n = p, a, m
        if code != DONE:
            st[0], st[1], st[2] = pos, acc, n
            return i, code, u, v
        out[i] = y
        i += 1
    st[0], st[1], st[2] = pos, acc, n
    return i, DONE, zero, zero


@_jit
def gaussian_fill(out, i, w, st, a, b, t, c_limit, elo, ehi, L, e1, gtab, prec):
    """Fill ``out[i:]`` with N_Z(0, a/b) samples (CKS Algorithm 3; ``t = ⌊σ⌋ + 1``,
    ``2 a b t² < 2^62``): a candidate ``y ~ Lap_Z(t)`` (:func:`_laplace_one`) is kept with
    probability ``exp(-(|y| t b - a)² / (2 a b t²))``: for ``|y| < gtab.size`` by comparison
    with ``gtab[|y|]``, its floor times 2^32 (exact, the caller's); beyond, by CKS Algorithm 1
    in rationals. Returns ``(next slot, code, y, u, v)``, the reader's state in ``st`` as
    :func:`laplace_fill`: :data:`BIG` when ``| |y| t b - a | ≥ c_limit`` (≤ 2^31, so that its
    square fits), ``TIE_G`` when the comparison with ``gtab[|y|]`` tied, and the Laplace
    ties, for the caller to decide that candidate (reading on from ``st``) and call again."""
    den = 2 * a * b * t * t
    y_limit = (c_limit + a) // (t * b)  # |y| above it: |y| t b - a > c_limit
    one = np.int64(1)
    zero = np.int64(0)
    shift = 32 - prec
    pos, acc, n = st[0], st[1], st[2]
    kt = bit_length(t - 1)
    while i < out.size:
        code, y, u, v, p, c, m = _laplace_one(w, pos, acc, n, one, t, kt, elo, ehi, L, e1, prec)
        keep = False
        if 0 <= p <= 2 * w.size and code == DONE:
            ay = y if y >= 0 else -y
            if ay < gtab.size:
                k, p, c, m = _cmp(w, p, c, m, gtab[ay] >> shift, prec)
                if k == _TIE:
                    code = np.int64(TIE_G)
                keep = k == 1
            else:
                d = ay * t * b - a if ay <= y_limit else c_limit  # |y| t b may not fit
                if d < 0:
                    d = -d
                if d >= c_limit:
                    st[0], st[1], st[2] = p, c, m
                    return i, BIG, y, zero, zero
                keep, p, c, m = _bern_exp(w, p, c, m, d * d, den)
        if p > 2 * w.size or p < 0:
            st[0], st[1], st[2] = (pos if p > 0 else p), acc, n
            return i, MORE_WORDS, zero, zero, zero
        pos, acc, n = p, c, m
        if code != DONE:
            st[0], st[1], st[2] = pos, acc, n
            return i, code, y, u, v
        if keep:
            out[i] = y
            i += 1
    st[0], st[1], st[2] = pos, acc, n
    return i, DONE, zero, zero, zero


@_jit
def stream_below(w, pos, acc, n, b, k):
    """:func:`below` for the caller (the exact decisions it makes from the same stream)."""
    return below(w, pos, acc, n, b, k)


def prepare() -> None:
    """Compile both fills (a few seconds once; cached on disk afterwards)."""
    w = np.zeros(4, dtype=np.int64)
    out = np.empty(1, dtype=np.int64)
    table = np.ones(1, dtype=np.int64) << 32
    none = np.empty(0, dtype=np.int64)
    for elo in (table, none):
        laplace_fill(out, 0, w, np.zeros(3, dtype=np.int64), 1, 1, elo, table, 0, 1, 32)
        gaussian_fill(out, 0, w, np.zeros(3, dtype=np.int64), 1, 1, 1, 1 << 31, elo, table, 0,
                      1, table, 32)  # fmt: skip
    stream_below(w, 0, 0, 0, 3, 2)
