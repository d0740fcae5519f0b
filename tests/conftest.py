"""Shared test fixtures."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def adult_dir() -> Path:
    """The real Adult records (read in place, never copied into the repository).

    Set ``MMTOOLKIT_ADULT_DIR`` to point elsewhere; default ``../shared/data/adult``.
    """
    default = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
    path = Path(os.environ.get("MMTOOLKIT_ADULT_DIR", default))
    if not (path / "adult.csv").exists():
        pytest.skip(f"Adult records not found at {path} (set MMTOOLKIT_ADULT_DIR)")
    return path
