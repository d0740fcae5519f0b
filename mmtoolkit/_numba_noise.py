"""The compiled exact samplers of :mod:`mmtoolkit.noise` (numba; imported only through
:func:`mmtoolkit.linalg.kernels.compiled`, never directly).

Every random bit comes from ``w``, a buffer of uniform 64-bit words (int64 view) that the
caller drew from its generator, read as one bit stream: the low 63 bits of each word, lowest
first (the top bit is dropped so that all arithmetic stays in signed 64-bit integers). ``st``
holds the reader's state between calls: ``[next word, unread bits, how many]`` (the kernels
keep it in local variables). When a sample needs more bits than ``w`` holds, the reader state
goes back to where the sample began and the fill returns: the caller appends fresh words to
the unread ones and calls again, so each sample is a function of the bit stream alone,
whatever the buffer size.

No floating-point number anywhere: integers and comparisons of integers only.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(nogil=True, cache=True)
#: The helpers are inlined into the fills at numba's level (~15% faster than LLVM's calls).
_inline = numba.njit(nogil=True, cache=True, inline="always")

_LOW63 = np.int64(0x7FFFFFFFFFFFFFFF)
#: Return codes of the fills: every slot filled; the words ran out (call again with more);
#: a discrete-Gaussian candidate whose acceptance needs integers beyond 64 bits.
DONE, MORE_WORDS, BIG = 0, 1, 2
#: Above this many successes of Bernoulli(exp(-1)) (probability exp(-2^20)) the Laplace
#: value ``u + t v`` could leave int64 for the largest ``t``: the fill refuses, not wraps.
V_LIMIT = 1 << 20


@_inline
def bit_length(x):
    """The number of binary digits of ``x ≥ 0`` (0 for 0)."""
    k = np.int64(0)
    while x:
        k += 1
        x >>= 1
    return k


@_inline
def _bits(w, pos, cur, n, k):
    """The next ``k`` bits (1 ≤ k ≤ 62) of the stream as an integer, and the reader's new
    state ``pos, cur, n`` (next word, unread bits, how many); past the end of ``w``: 0 and
    ``pos = w.size + 1`` (the words ran out)."""
    if n >= k:
        return cur & ((np.int64(1) << k) - 1), pos, cur >> k, n - k
    if pos >= w.size:
        return np.int64(0), w.size + 1, cur, n
    new = w[pos] & _LOW63
    need = k - n
    return cur | ((new & ((np.int64(1) << need) - 1)) << n), pos + 1, new >> need, 63 - need


@_inline
def below(w, pos, cur, n, b, k):
    """A uniform integer in ``[0, b)`` (1 ≤ b ≤ 2^62, ``k`` the bit length of ``b - 1``):
    ``k`` bits, rejected while ≥ b (and the reader's new state, as :func:`_bits`)."""
    if b == 1:
        return np.int64(0), pos, cur, n
    while True:
        v, pos, cur, n = _bits(w, pos, cur, n, k)
        if v < b or pos > w.size:
            return v, pos, cur, n


@_inline
def _bernoulli(w, pos, cur, n, num, den):
    """Bernoulli(num/den) for 0 ≤ num ≤ den ≤ 2^62: the uniform's bits against the binary
    digits of num/den (long division), until the first digit where they differ (2 bits on
    average)."""
    if num >= den:
        return True, pos, cur, n
    r = num
    while r:
        r <<= 1
        digit = r >= den
        if digit:
            r -= den
        if n == 0:  # one bit, inline
            if pos >= w.size:
                return False, w.size + 1, cur, n
            cur = w[pos] & _LOW63
            pos += 1
            n = 63
        bit = (cur & 1) == 1
        cur >>= 1
        n -= 1
        if bit != digit:
            return digit, pos, cur, n  # the uniform is below num/den iff its differing bit is 0
    return False, pos, cur, n  # num/den's digits end here: the uniform is not below it


@_inline
def _bernoulli_exp_unit(w, pos, cur, n, num, den):
    """Bernoulli(exp(-num/den)) for 0 ≤ num ≤ den (CKS Algorithm 1): K counts the leading
    successes of Bernoulli(γ/k), k = 1, 2, …, each drawn as Bernoulli(1/k) and
    Bernoulli(num/den) (independent, so their conjunction has probability γ/k); K odd."""
    k = np.int64(1)
    while pos <= w.size:
        if k > 1:
            a, pos, cur, n = _bernoulli(w, pos, cur, n, np.int64(1), k)
            if not a:
                break
        a, pos, cur, n = _bernoulli(w, pos, cur, n, num, den)
        if not a:
            break
        k += 1
    return (k & 1) == 1, pos, cur, n


@_inline
def _bernoulli_exp(w, pos, cur, n, num, den):
    """Bernoulli(exp(-num/den)) for 0 ≤ num, 1 ≤ den ≤ 2^62: ⌊γ⌋ factors Bernoulli(exp(-1)),
    then one Bernoulli(exp(-(γ - ⌊γ⌋)))."""
    whole = num // den
    one = np.int64(1)
    i = np.int64(0)
    while i < whole:
        a, pos, cur, n = _bernoulli_exp_unit(w, pos, cur, n, one, one)
        if not a or pos > w.size:
            return False, pos, cur, n
        i += 1
    return _bernoulli_exp_unit(w, pos, cur, n, num - whole * den, den)


@_inline
def _laplace_one(w, pos, cur, n, s, t, kt):
    """One sample of Lap_Z(t/s) (CKS Algorithm 2; ``kt`` the bit length of ``t - 1``) and the
    reader's state; 0 when the words ran out (``pos > w.size``), or with ``pos = -1`` on a
    counter overflow."""
    one = np.int64(1)
    while pos <= w.size:
        u, pos, cur, n = below(w, pos, cur, n, t, kt)
        a, pos, cur, n = _bernoulli_exp_unit(w, pos, cur, n, u, t)
        if not a:
            continue
        v = np.int64(0)
        while True:
            a, pos, cur, n = _bernoulli_exp_unit(w, pos, cur, n, one, one)
            if not a or pos > w.size:
                break
            v += 1
            if v > V_LIMIT:  # pragma: no cover - probability exp(-2^20)
                return np.int64(0), np.int64(-1), cur, n
        y = (u + t * v) // s
        bit, pos, cur, n = _bits(w, pos, cur, n, one)
        if bit == 1 and y == 0:
            continue
        return (-y if bit == 1 else y), pos, cur, n
    return np.int64(0), pos, cur, n


@_jit
def laplace_fill(out, i, w, st, s, t):
    """Fill ``out[i:]`` with Lap_Z(t/s) samples (1 ≤ s, t ≤ 2^40), reading from ``st`` (the
    reader's state ``[pos, cur, n]``) on; returns ``(next slot, code)`` (:data:`DONE`,
    :data:`MORE_WORDS`; ``st[0] = -1``: a counter overflow)."""
    pos, cur, n = st[0], st[1], st[2]
    kt = bit_length(t - 1)
    while i < out.size:
        y, p, c, m = _laplace_one(w, pos, cur, n, s, t, kt)
        if p > w.size or p < 0:
            st[0], st[1], st[2] = (pos if p > 0 else p), cur, n
            return i, MORE_WORDS
        pos, cur, n = p, c, m
        out[i] = y
        i += 1
    st[0], st[1], st[2] = pos, cur, n
    return i, DONE


@_jit
def gaussian_fill(out, i, w, st, a, b, t, c_limit):
    """Fill ``out[i:]`` with N_Z(0, a/b) samples (CKS Algorithm 3; ``t = ⌊σ⌋ + 1``,
    ``2 a b t² ≤ 2^62``): a candidate ``y ~ Lap_Z(t)`` is kept with probability
    ``exp(-(|y| t b - a)² / (2 a b t²))``. Returns ``(next slot, code, y)``, the reader's
    state in ``st`` as :func:`laplace_fill`: :data:`BIG` when ``| |y| t b - a | ≥ c_limit``
    (≤ 2^31, so that its square fits), for the caller to decide ``y`` exactly (reading on from
    ``st``) and call again."""
    den = 2 * a * b * t * t
    y_limit = (c_limit + a) // (t * b)  # |y| above it: |y| t b - a > c_limit
    one = np.int64(1)
    pos, cur, n = st[0], st[1], st[2]
    kt = bit_length(t - 1)
    while i < out.size:
        y, p, c, m = _laplace_one(w, pos, cur, n, one, t, kt)
        keep = False
        if 0 <= p <= w.size:
            ay = y if y >= 0 else -y
            d = ay * t * b - a if ay <= y_limit else c_limit  # |y| t b may not fit in int64
            if d < 0:
                d = -d
            if d >= c_limit:
                st[0], st[1], st[2] = p, c, m
                return i, BIG, y
            keep, p, c, m = _bernoulli_exp(w, p, c, m, d * d, den)
        if p > w.size or p < 0:
            st[0], st[1], st[2] = (pos if p > 0 else p), cur, n
            return i, MORE_WORDS, np.int64(0)
        pos, cur, n = p, c, m
        if keep:
            out[i] = y
            i += 1
    st[0], st[1], st[2] = pos, cur, n
    return i, DONE, np.int64(0)


def prepare() -> None:
    """Compile both fills (a few seconds once; cached on disk afterwards)."""
    w = np.zeros(4, dtype=np.int64)
    out = np.empty(1, dtype=np.int64)
    laplace_fill(out, 0, w, np.zeros(3, dtype=np.int64), 1, 1)
    gaussian_fill(out, 0, w, np.zeros(3, dtype=np.int64), 1, 1, 1, 1 << 31)
