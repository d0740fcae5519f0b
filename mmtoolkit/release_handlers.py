"""Release handlers: what releasing data asks of a strategy kind, in a table.

The algebra (:mod:`mmtoolkit.linalg`) knows nothing about records, privacy or noise. What a
release needs of a kind beyond its algebra — how to measure records, whether it answers a
workload without the N-cell estimate ``x̂``, whether it runs a mechanism of its own — is asked
of the kind's *handler*, registered explicitly per kind (:func:`register_handler`) and found
by the kind's MRO (:func:`handler`). :class:`ReleaseHandler`, registered for
:class:`~mmtoolkit.linalg.Matrix`, is correct for every kind: it measures a histogram by
``A @ x`` and leaves reconstruction to the generic algebra (``pinv_operator()`` / least
squares). A composite kind's handler (:class:`WeightedHandler`) delegates to its part's.

Kinds of the algebra have their handlers here (:class:`MarginalsHandler`); a selector
package registers the handler of its own kind from there (ResidualPlanner's strategy, HDMM's
separate-answering union), since selectors sit above this layer.
"""

from __future__ import annotations

import numpy as np

from .linalg import Marginals, Matrix, Weighted, as_matrix, peel

__all__ = [
    "ReleaseHandler",
    "WeightedHandler",
    "MarginalsHandler",
    "handler",
    "register_handler",
]


class ReleaseHandler:
    """The release operations of a strategy kind ``A`` (each takes the strategy first). This
    generic handler is correct for any kind; a kind's handler overrides what its structure
    does better."""

    def answer_records(self, A: Matrix, records) -> np.ndarray:
        """The true strategy answers ``A x`` from :class:`~mmtoolkit.records.Records`: through
        the records' histogram ``x`` (which the records refuse for a large domain)."""
        if A.shape[1] != records.domain.size:
            raise ValueError(
                f"the records' domain has {records.domain.size} cells but the strategy is "
                f"defined on {A.shape[1]}"
            )
        return A @ records.vector(np.float64)  # one N-sized array

    def workload_answers(self, A: Matrix, W: Matrix, y) -> np.ndarray | None:
        """The workload answers straight from the noisy strategy answers ``y`` (one release
        or ``m x R``) when the kind can avoid the N-cell ``x̂`` or has its own answering
        rule; None: the mechanism reconstructs ``x̂`` and answers ``W x̂``."""
        return None

    def needs_estimate(self, A: Matrix, W: Matrix) -> bool:
        """Whether releasing ``W``'s answers through ``A`` builds the N-cell estimate ``x̂``
        (asked by ``mechanism.check_release_fits`` before any noise is drawn)."""
        return True

    def reads_histogram(self, A: Matrix) -> bool:
        """Whether measuring records through ``A`` forms their N-cell histogram (asked, with
        records, before any noise is drawn and before a ledger charge)."""
        return True

    def discrete_summary(self, A: Matrix, privacy) -> dict | None:
        """A kind with a discrete mechanism of its own describes it (release summaries), or
        raises :class:`~mmtoolkit.linalg.NotSupportedByKindError` when it does not apply;
        None: the generic exact samplers (:mod:`mmtoolkit.discrete`)."""
        return None

    def release_answers(self, A: Matrix, W: Matrix, data, privacy, rng, noise: str):
        """A kind with a mechanism of its own releases ``W``'s answers here from ``data``
        (records or a data vector); None: the mechanism's generic measure → answer."""
        return None

    def marginal_measurements(self, A: Matrix, data, privacy, rng) -> list | None:
        """A kind with a mechanism of its own measures ``data`` for Private-PGM
        (:func:`mmtoolkit.pgm.measure`) as marginal
        :class:`~mmtoolkit.measurement.Measurement` s; None: the generic mechanism."""
        return None


class WeightedHandler(ReleaseHandler):
    """``c · A``: its base's handler, the weight applied (the noise is calibrated to the
    sensitivity and ``A⁺`` undoes the weight, so a weighted strategy releases exactly what
    its base releases)."""

    def answer_records(self, A, records):
        return A.weight * handler(A.base).answer_records(A.base, records)

    def workload_answers(self, A, W, y):
        if A.weight == 0:
            return None
        y = np.asarray(y, dtype=float) / A.weight
        return handler(A.base).workload_answers(A.base, W, y)

    def needs_estimate(self, A, W):
        return handler(A.base).needs_estimate(A.base, W)

    def reads_histogram(self, A):
        return handler(A.base).reads_histogram(A.base)

    def discrete_summary(self, A, privacy):
        return handler(A.base).discrete_summary(A.base, privacy)

    def release_answers(self, A, W, data, privacy, rng, noise):
        return handler(A.base).release_answers(A.base, W, data, privacy, rng, noise)

    def marginal_measurements(self, A, data, privacy, rng):
        # c·A has c times A's sensitivity, so dividing its answers by c gives A's measurements
        return handler(A.base).marginal_measurements(A.base, data, privacy, rng)


class MarginalsHandler(ReleaseHandler):
    """Weighted marginals (HDMM §6.3): measured from the records' marginal tables, and a
    marginals workload answered from ``y`` in the 2^d spectral algebra, without ``x̂``."""

    def answer_records(self, A, records):
        return A.answer_records(records)

    def workload_answers(self, A, W, y):
        return A.workload_answers(W, y)

    def needs_estimate(self, A, W):
        return not isinstance(peel(as_matrix(W))[1], Marginals)  # as workload_answers

    def reads_histogram(self, A):
        return False  # marginal tables


_TABLE: dict[type, ReleaseHandler] = {}


def register_handler(kind: type, release_handler: ReleaseHandler) -> None:
    """Register ``release_handler`` for the strategy kind ``kind`` (a Matrix subclass) and
    its subclasses without a handler of their own."""
    if not (isinstance(kind, type) and issubclass(kind, Matrix)):
        raise TypeError(f"kind must be a Matrix subclass, got {kind!r}")
    if not isinstance(release_handler, ReleaseHandler):
        raise TypeError(f"handler must be a ReleaseHandler, got {type(release_handler).__name__}")
    _TABLE[kind] = release_handler


def handler(A) -> ReleaseHandler:
    """The release handler of ``A``'s kind: the one registered for the nearest class of its
    MRO (:class:`ReleaseHandler` for any Matrix)."""
    for cls in type(as_matrix(A)).__mro__:
        if cls in _TABLE:
            return _TABLE[cls]
    raise TypeError(f"no release handler for {type(A).__name__}")  # pragma: no cover


register_handler(Matrix, ReleaseHandler())
register_handler(Weighted, WeightedHandler())
register_handler(Marginals, MarginalsHandler())
