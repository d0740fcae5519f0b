"""The result of strategy selection (ARCHITECTURE.md, "Layers")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .checks import check_option
from .linalg import Matrix

#: How the noisy strategy answers become workload answers.
INFERENCES = ("least_squares", "none")


@dataclass
class Strategy:
    """A selected strategy ``A`` and how it was chosen.

    ``inference="least_squares"`` is the matrix mechanism (answers ``W A⁺ y``;
    Li et al. 2010, Prop. 3). ``inference="none"`` means the noisy answers of ``A`` are
    released as the workload answers themselves (the Laplace/Gaussian mechanism on ``W``,
    the "LM" baseline of HDMM Table 3), so ``A`` must be the workload.

    Parameters
    ----------
    matrix : Matrix
        The strategy ``A``, ``p x N`` on the workload's ``N`` cells (any strategy kind).
    selector : str
        The name of the selector that chose it (``Selector.select`` sets it).
    params : dict, optional
        The selector's parameters, every one (``select`` sets them); default empty.
    metadata : dict, optional
        What the selector reports about its choice (e.g. the operator, iterations);
        default empty.
    loss : float, optional
        The selector's own objective at this strategy, in its own units (None: none
        reported); the evaluator's error is :func:`mmtoolkit.evaluate.expected_error`.
    seconds : float, optional
        The selection's wall time in seconds (``select`` sets it); default 0.
    seed : int, optional
        The selector's ``seed`` parameter, None when it takes none.
    inference : str, optional
        ``"least_squares"`` (default) or ``"none"``, as above.

    Raises
    ------
    TypeError
        ``matrix`` is not a :class:`~mmtoolkit.linalg.Matrix`.
    ValueError
        ``inference`` is not one of :data:`INFERENCES`.

    References
    ----------
    Li et al. 2010, the Matrix Mechanism, Section 3, Proposition 3; McKenna et al. 2018,
    HDMM, Section 8, Table 3 (LM).
    """

    matrix: Matrix
    selector: str
    params: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    loss: float | None = None
    seconds: float = 0.0
    seed: int | None = None
    inference: str = "least_squares"

    def __post_init__(self):
        if not isinstance(self.matrix, Matrix):
            raise TypeError(f"Strategy.matrix must be a linalg.Matrix, got {type(self.matrix)}")
        check_option(self.inference, "inference", INFERENCES)

    @property
    def shape(self) -> tuple[int, int]:
        """The strategy matrix's shape ``(p, N)``."""
        return self.matrix.shape
