"""Shared test fixtures, and a loud report of the tests that did not run for want of data.

A test that needs the real Adult records (``adult_dir``) is skipped where they are not
found, and every test marked ``slow`` that is skipped (missing data, missing optional extra)
is listed again at the end of the run — a "did not run" section with each reason, visible
under ``-q`` — so that a command meant to run them (the README's
``python -m pytest -q -m slow tests/test_pgm.py``) never looks like a pass that ran them.
"""

import os
from pathlib import Path

import pytest

#: Start of the skip reason when the Adult records are missing (the report matches on it).
ADULT_MISSING = "Adult records not found"


def adult_path() -> Path:
    """Where the Adult records are looked for: ``MMTOOLKIT_ADULT_DIR``, default
    ``../shared/data/adult`` beside the clone."""
    default = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
    return Path(os.environ.get("MMTOOLKIT_ADULT_DIR", default))


@pytest.fixture(scope="session")
def adult_dir() -> Path:
    """The real Adult records (read in place, never copied into the repository).

    Set ``MMTOOLKIT_ADULT_DIR`` to point elsewhere; default ``../shared/data/adult``.
    """
    path = adult_path()
    if not (path / "adult.csv").exists():
        pytest.skip(
            f"{ADULT_MISSING}: no {path / 'adult.csv'} (the clone is not beside ../shared; "
            "set MMTOOLKIT_ADULT_DIR to the folder of adult.csv and adult-domain.json)"
        )
    return path


class _NotRunReport:
    """Collects skipped tests that were meant to run (marked slow, or needing Adult) and
    lists them, with their reasons, in the terminal summary."""

    def __init__(self):
        self.not_run: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report):
        if not report.skipped or report.when == "teardown":
            return
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        if "slow" in report.keywords or reason.startswith(ADULT_MISSING):
            self.not_run.append((report.nodeid, reason))

    def pytest_terminal_summary(self, terminalreporter):
        if not self.not_run:
            return
        tr = terminalreporter
        tr.write_sep("=", f"{len(self.not_run)} test(s) did not run", yellow=True, bold=True)
        for nodeid, reason in self.not_run:
            tr.write_line(f"DID NOT RUN {nodeid}: {reason}", yellow=True)


def pytest_configure(config):
    config.pluginmanager.register(_NotRunReport(), "mmtoolkit-not-run-report")
