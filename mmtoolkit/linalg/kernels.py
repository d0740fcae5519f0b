"""Compiled kernels for the hot loops of a large release (optional: the ``fast`` extra).

:func:`compiled` gives the numba loops (p-Identity steps of a Kronecker product, marginal
tables that drop or add back one attribute) or None for the numpy path, as
``MMTOOLKIT_NUMBA`` says; :func:`along_views` prepares a step's arrays for them.

User guide: docs/algorithms/implicit-algebra.md ("Compiled kernels").
"""

from __future__ import annotations

import importlib
import os

import numpy as np

__all__ = ["COMPILED_MODULES", "ENV", "along_views", "compiled", "flat_view", "prepare"]

#: Chooses the path: unset (kernels when numba imports), ``0`` (numpy), ``1`` (required).
ENV = "MMTOOLKIT_NUMBA"

#: module name -> (module or None, why not), once its import was tried
_loaded: dict = {}


def compiled(module: str = "mmtoolkit.linalg._numba_kernels"):
    """The compiled kernels ``module`` (the algebra's loops by default; the exact noise
    samplers' are ``mmtoolkit._numba_noise``), or None for the numpy path, as
    ``MMTOOLKIT_NUMBA`` says; ValueError for another value, or for ``1`` when the kernels
    cannot be had (with the reason)."""
    value = os.environ.get(ENV)
    if value not in (None, "0", "1"):
        raise ValueError(f"{ENV} must be 0 or 1, got {value!r}")
    if value == "0":
        return None
    if module not in _loaded:
        try:
            _loaded[module] = (importlib.import_module(module), "")
        except Exception as exc:  # not installed, or an install that does not work here
            _loaded[module] = (None, f"{type(exc).__name__}: {exc}")
    found, why = _loaded[module]
    if found is None and value == "1":
        raise ValueError(
            f"{ENV}=1 needs numba (pip install 'mmtoolkit[fast]'), which cannot be used: {why}"
        )
    return found


#: Every module of compiled kernels: the algebra's and the exact noise samplers'.
COMPILED_MODULES = ("mmtoolkit.linalg._numba_kernels", "mmtoolkit._numba_noise")


def prepare() -> bool:
    """Compile every compiled kernel (:data:`COMPILED_MODULES`) ahead of first use, if they are
    in use (seconds once, then cached on disk), so that no timed or time-limited call pays
    for it; returns whether they are."""
    modules = [compiled(name) for name in COMPILED_MODULES]
    for fast in modules:
        if fast is not None:
            fast.prepare()
    return all(fast is not None for fast in modules)


def flat_view(X: np.ndarray):
    """``(buffer, (offset, stride of axis 0, stride of axis 1))`` of a 3-D array, in entries of a
    flat 1-D view of its memory; None when the kernels cannot read it."""
    if X.dtype not in (np.float64, np.float32) or X.ndim != 3 or X.size == 0:
        return None
    item = X.itemsize
    sa, sj, sb = X.strides
    if sa < 0 or sj < 0 or sb < 0 or sa % item or sj % item or sb % item:
        return None
    sa, sj, sb = sa // item, sj // item, sb // item
    if X.shape[2] > 1 and sb != 1 or X.shape[2] == 1 and X.shape[1] > 1 and sj != 1:
        return None
    if X.flags.c_contiguous:
        return X.reshape(-1), (0, sa, sj)
    root = X.base
    if isinstance(root, np.ndarray) and root.dtype == X.dtype and root.flags.c_contiguous:
        offset = X.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        if offset >= 0 and offset % item == 0:
            return root.reshape(-1), (offset // item, sa, sj)
    span = 1 + sum((n - 1) * s for n, s in zip(X.shape, (sa, sj, sb)))
    flat = np.lib.stride_tricks.as_strided(X, shape=(span,), strides=(item,))
    return flat, (0, sa, sj)


def along_views(X: np.ndarray, out: np.ndarray):
    """The kernels' views ``(X buffer, X geometry, out buffer, out geometry, in place)`` of a step
    (:meth:`Matrix.apply_along`), or None when the numpy path must run."""
    if X.dtype != out.dtype or X.shape[0] != out.shape[0] or X.shape[2] != out.shape[2]:
        return None
    vx, vo = flat_view(X), flat_view(out)
    if vx is None or vo is None:
        return None
    inplace = False
    if np.may_share_memory(X, out):
        inplace = X.__array_interface__["data"][0] == out.__array_interface__["data"][0]
        if not (inplace and X.strides[:2] == out.strides[:2]):
            return None
    return (*vx, *vo, inplace)
