"""The compiled loops of :mod:`mmtoolkit.linalg.kernels` (numba; imported only through
:func:`mmtoolkit.linalg.kernels.compiled`, never directly). Arrays come as flat 1-D buffers
with ``g = (offset, stride of a, stride of j)`` in entries.

Results do not depend on the split into pieces or threads: docs/algorithms/implicit-algebra.md
("Compiled kernels").
"""

from __future__ import annotations

import numba
import numpy as np

#: Columns of one block of a middle-axis step: the block's rows stay in the second-level
#: cache and its ``p`` partial sums (``p x WIDTH``) in the first while the block is read
#: twice (contraction, then expansion).
WIDTH = 128

_jit = numba.njit(nogil=True, cache=True, fastmath={"contract"})


@numba.njit(nogil=True, cache=True, fastmath={"contract", "reassoc", "nsz"})
def _dots4(x, w0, w1, w2, w3):
    """``Σ_j w_k[j] x[j]`` for four rows ``w_k`` in one pass over ``x`` (summed in SIMD lanes,
    then the lanes added)."""
    t0 = t1 = t2 = t3 = 0.0
    for j in range(x.size):
        z = x[j]
        t0 += w0[j] * z
        t1 += w1[j] * z
        t2 += w2[j] * z
        t3 += w3[j] * z
    return t0, t1, t2, t3


@_jit
def _row_products(X, xo, xa, A, n, W4):
    """``tv[a, k] = Σ_j W4[k, j] X[xo + a·xa + j]`` for the rows ``a < A`` of the last-axis
    layout and every row of ``W4`` (a multiple of 4), four rows of ``W4`` per pass."""
    tv = np.empty((A, W4.shape[0]))
    for k0 in range(0, W4.shape[0], 4):
        w0, w1, w2, w3 = W4[k0], W4[k0 + 1], W4[k0 + 2], W4[k0 + 3]
        for a in range(A):
            xb = xo + a * xa
            t0, t1, t2, t3 = _dots4(X[xb : xb + n], w0, w1, w2, w3)
            tv[a, k0], tv[a, k0 + 1], tv[a, k0 + 2], tv[a, k0 + 3] = t0, t1, t2, t3
    return tv


@_jit
def _contract(X, base, sj, n, w, W4, t):
    """``t[k, :w] += Σ_{j<n} W4[k, j] X[base + j·sj : … + w]`` for every row ``k`` of ``W4``
    (a multiple of 4): four rows of ``X`` per pass, so each ``t`` row is loaded and stored
    once per four rows of ``X``."""
    n4 = n - n % 4
    for k0 in range(0, W4.shape[0], 4):
        t0, t1, t2, t3 = t[k0], t[k0 + 1], t[k0 + 2], t[k0 + 3]
        for j in range(0, n4, 4):
            b = base + j * sj
            x0 = X[b : b + w]
            x1 = X[b + sj : b + sj + w]
            x2 = X[b + 2 * sj : b + 2 * sj + w]
            x3 = X[b + 3 * sj : b + 3 * sj + w]
            a0, a1, a2, a3 = W4[k0, j], W4[k0, j + 1], W4[k0, j + 2], W4[k0, j + 3]
            b0, b1, b2, b3 = W4[k0 + 1, j], W4[k0 + 1, j + 1], W4[k0 + 1, j + 2], W4[k0 + 1, j + 3]
            c0, c1, c2, c3 = W4[k0 + 2, j], W4[k0 + 2, j + 1], W4[k0 + 2, j + 2], W4[k0 + 2, j + 3]
            d0, d1, d2, d3 = W4[k0 + 3, j], W4[k0 + 3, j + 1], W4[k0 + 3, j + 2], W4[k0 + 3, j + 3]
            for i in range(w):
                z0, z1, z2, z3 = x0[i], x1[i], x2[i], x3[i]
                t0[i] += a0 * z0 + a1 * z1 + a2 * z2 + a3 * z3
                t1[i] += b0 * z0 + b1 * z1 + b2 * z2 + b3 * z3
                t2[i] += c0 * z0 + c1 * z1 + c2 * z2 + c3 * z3
                t3[i] += d0 * z0 + d1 * z1 + d2 * z2 + d3 * z3
        for j in range(n4, n):
            x0 = X[base + j * sj : base + j * sj + w]
            a0, b0, c0, d0 = W4[k0, j], W4[k0 + 1, j], W4[k0 + 2, j], W4[k0 + 3, j]
            for i in range(w):
                z0 = x0[i]
                t0[i] += a0 * z0
                t1[i] += b0 * z0
                t2[i] += c0 * z0
                t3[i] += d0 * z0


@_jit
def pidentity_along(X, xg, out, og, A, n, B, d, dtheta4, p, inplace):
    """``[I; Θ] D`` along the middle axis: ``X`` is ``A x n x B`` at ``xg`` of its flat
    buffer, ``out`` ``A x (n + p) x B`` at ``og``; ``out_j = d_j X_j`` and
    ``out_{n+k} = Σ_j (ΘD)_kj X_j`` (``dtheta4``: ``ΘD`` padded with zero rows to a multiple
    of 4). ``inplace``: ``out`` is ``X``'s memory at the same positions (each block of ``X``
    is read in full before its rows are written)."""
    xo, xa, xj = xg
    oo, oa, oj = og
    P4 = dtheta4.shape[0]
    if B == 1:  # the last axis: the rows of X (consecutive entries) are the vectors
        tv = _row_products(X, xo, xa, A, n, dtheta4)
        row = np.empty(n)
        for a in range(A):
            xb, ob = xo + a * xa, oo + a * oa
            x = X[xb : xb + n]
            for j in range(n):
                row[j] = d[j] * x[j]
            o = out[ob : ob + n + p]
            for j in range(n):
                o[j] = row[j]
            for k in range(p):
                o[n + k] = tv[a, k]
        return
    t = np.empty((P4, WIDTH))
    for a in range(A):
        for c in range(0, B, WIDTH):
            w = min(WIDTH, B - c)
            xb, ob = xo + a * xa + c, oo + a * oa + c
            t[:, :w] = 0.0
            _contract(X, xb, xj, n, w, dtheta4, t)
            for j in range(n):
                o = out[ob + j * oj : ob + j * oj + w]
                dj = d[j]
                if inplace:  # one slice read and written (two would defeat vectorisation)
                    for i in range(w):
                        o[i] *= dj
                else:
                    x = X[xb + j * xj : xb + j * xj + w]
                    for i in range(w):
                        o[i] = dj * x[i]
            for k in range(p):
                o = out[ob + (n + k) * oj : ob + (n + k) * oj + w]
                tk = t[k]
                for i in range(w):
                    o[i] = tk[i]


@_jit
def pidentity_pinv_along(X, xg, out, og, A, n, B, s, theta4, sTM4, p, inplace):
    """``A⁺ = (AᵀA)⁻¹Aᵀ`` of ``A = [I; Θ] D`` along the middle axis: ``X`` is
    ``A x (n + p) x B`` at ``xg``, ``out`` ``A x n x B`` at ``og``; ``out = s ∘ X_I +
    (sΘᵀM)(X_Θ − Θ X_I)`` (``theta4``: ``Θ``, ``sTM4``: ``(sΘᵀM)ᵀ``, both ``p x n`` padded
    with zero rows to a multiple of 4), contraction, scaling and expansion in one pass over
    each block of columns. ``inplace``: ``out`` is ``X``'s memory at the same positions."""
    xo, xa, xj = xg
    oo, oa, oj = og
    P4 = theta4.shape[0]
    if B == 1:
        tv = _row_products(X, xo, xa, A, n, theta4)  # Θ X_I
        e = np.zeros(P4)
        row = np.empty(n)
        for a in range(A):
            xb, ob = xo + a * xa, oo + a * oa
            for k in range(p):
                e[k] = X[xb + n + k] - tv[a, k]
            x = X[xb : xb + n]
            for k0 in range(0, P4, 4):
                e0, e1, e2, e3 = e[k0], e[k0 + 1], e[k0 + 2], e[k0 + 3]
                g0, g1, g2, g3 = sTM4[k0], sTM4[k0 + 1], sTM4[k0 + 2], sTM4[k0 + 3]
                if k0 == 0:
                    for j in range(n):
                        row[j] = s[j] * x[j] + (g0[j] * e0 + g1[j] * e1 + g2[j] * e2 + g3[j] * e3)
                else:
                    for j in range(n):
                        row[j] += g0[j] * e0 + g1[j] * e1 + g2[j] * e2 + g3[j] * e3
            o = out[ob : ob + n]
            for j in range(n):
                o[j] = row[j]
        return
    t = np.empty((P4, WIDTH))
    for a in range(A):
        for c in range(0, B, WIDTH):
            w = min(WIDTH, B - c)
            xb, ob = xo + a * xa + c, oo + a * oa + c
            for k in range(P4):  # t = Θ X_I − X_Θ (the negated t, negated back below)
                tk = t[k]
                if k < p:
                    x = X[xb + (n + k) * xj : xb + (n + k) * xj + w]
                    for i in range(w):
                        tk[i] = -x[i]
                else:
                    tk[:w] = 0.0
            _contract(X, xb, xj, n, w, theta4, t)
            for j in range(n):
                o = out[ob + j * oj : ob + j * oj + w]
                sj = s[j]
                for k0 in range(0, P4, 4):
                    g0, g1, g2, g3 = sTM4[k0, j], sTM4[k0 + 1, j], sTM4[k0 + 2, j], sTM4[k0 + 3, j]
                    t0, t1, t2, t3 = t[k0], t[k0 + 1], t[k0 + 2], t[k0 + 3]
                    if k0 > 0:
                        for i in range(w):
                            o[i] -= g0 * t0[i] + g1 * t1[i] + g2 * t2[i] + g3 * t3[i]
                    elif inplace:  # the row read through the slice it is written through
                        for i in range(w):  # (two slices of one memory defeat vectorisation)
                            o[i] = sj * o[i] - (g0 * t0[i] + g1 * t1[i] + g2 * t2[i] + g3 * t3[i])
                    else:
                        x = X[xb + j * xj : xb + j * xj + w]
                        for i in range(w):
                            o[i] = sj * x[i] - (g0 * t0[i] + g1 * t1[i] + g2 * t2[i] + g3 * t3[i])


@_jit
def drop_sums(X, inner, geo, outs, o0, o1):
    """The tables that each drop one axis of a table, in one pass over it: the table ``X``
    (flat) is ``outer x inner``; child ``q`` sees a chunk of ``inner`` entries as
    ``geo[q] = (a, n, b)`` and sums its middle axis, so ``outs[q][(o·a + i)·b + l] =
    Σ_k X[o·inner + (i·n + k)·b + l]`` (``k`` ascending), for the chunks ``o0 ≤ o < o1``.
    Each chunk is read once for all the children, while it is in cache."""
    for o in range(o0, o1):
        base = o * inner
        for q in range(len(outs)):
            out = outs[q]
            a, n, b = geo[q, 0], geo[q, 1], geo[q, 2]
            ob = o * a * b
            if b == 1:  # the last axis: sums of consecutive entries, four at a time
                a4 = a - a % 4
                for i in range(0, a4, 4):
                    src = X[base + i * n : base + (i + 4) * n]
                    c0 = c1 = c2 = c3 = 0.0
                    for k in range(n):
                        c0 += src[k]
                        c1 += src[n + k]
                        c2 += src[2 * n + k]
                        c3 += src[3 * n + k]
                    out[ob + i], out[ob + i + 1], out[ob + i + 2], out[ob + i + 3] = c0, c1, c2, c3
                for i in range(a4, a):
                    src = X[base + i * n : base + (i + 1) * n]
                    c0 = 0.0
                    for k in range(n):
                        c0 += src[k]
                    out[ob + i] = c0
                continue
            for i in range(a):
                dst = out[ob + i * b : ob + (i + 1) * b]
                s0 = base + i * n * b
                src = X[s0 : s0 + b]
                for l in range(b):
                    dst[l] = src[l]
                for k in range(1, n):
                    src = X[s0 + k * b : s0 + (k + 1) * b]
                    for l in range(b):
                        dst[l] += src[l]


@_jit
def add_expanded(X, inner, geo, tables, o0, o1, fresh):
    """The reverse of :func:`drop_sums`: each table ``q`` (one axis of ``X`` dropped, the
    same ``geo``) added to ``X`` broadcast along its dropped axis, ``X[o·inner + (i·n + k)·b
    + l] += tables[q][(o·a + i)·b + l]`` in the order of the tables, for the chunks ``o0 ≤ o
    < o1``; ``fresh``: ``X`` holds nothing yet, the first table writes it. Each chunk is
    written in one pass while it is in cache."""
    for o in range(o0, o1):
        base = o * inner
        for q in range(len(tables)):
            t = tables[q]
            a, n, b = geo[q, 0], geo[q, 1], geo[q, 2]
            tb = o * a * b
            first = fresh and q == 0
            if b == 1:  # the last axis: one value over consecutive entries
                for i in range(a):
                    v = t[tb + i]
                    dst = X[base + i * n : base + (i + 1) * n]
                    if first:
                        for k in range(n):
                            dst[k] = v
                    else:
                        for k in range(n):
                            dst[k] += v
                continue
            for i in range(a):
                src = t[tb + i * b : tb + (i + 1) * b]
                for k in range(n):
                    s0 = base + (i * n + k) * b
                    dst = X[s0 : s0 + b]
                    if first:
                        for l in range(b):
                            dst[l] = src[l]
                    else:
                        for l in range(b):
                            dst[l] += src[l]


def prepare(max_tables: int = 4) -> None:
    """Compile (or load from numba's cache) every kernel for float64 arrays, writeable or read-only
    data, and the marginal kernels for groups of 1 to ``max_tables`` tables, on small inputs."""
    theta = np.zeros((4, 3))
    out = np.zeros(12)
    g = (0, 3, 1)
    data = np.zeros(12)
    for _ in range(2):  # writeable, then read-only data
        pidentity_along(data, g, out, (0, 4, 1), 2, 3, 1, np.ones(3), theta, 1, False)
        data.flags.writeable = False
    pidentity_pinv_along(out, (0, 4, 1), np.zeros(12), g, 2, 3, 1, np.ones(3), theta, theta, 1,
                         False)  # fmt: skip
    for q in range(1, max_tables + 1):
        geo = np.ones((q, 3), dtype=np.int64)
        tables = tuple(np.zeros(1) for _ in range(q))
        data = np.zeros(1)
        for _ in range(2):  # writeable, then read-only data (the data's own table)
            drop_sums(data, 1, geo, tables, 0, 1)
            data.flags.writeable = False
        add_expanded(np.zeros(1), 1, geo, tables, 0, 1, True)
