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
        return self.matrix.shape
