"""The selectors' method descriptions live on the pages under docs/algorithms/: every module of
``mmtoolkit.selectors`` that points to a page (``User guide: docs/...md``) points to one that
exists, and every relative link on those pages resolves."""

import ast
import re
from pathlib import Path

import pytest

import mmtoolkit.selectors

ROOT = Path(__file__).resolve().parents[2]
SELECTORS = Path(mmtoolkit.selectors.__file__).resolve().parent
PAGES = sorted((ROOT / "docs" / "algorithms").glob("*.md"))
POINTER = re.compile(r"User guide: (docs/[\w./-]+\.md)")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _pointers():
    for path in sorted(SELECTORS.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        for target in POINTER.findall(doc):
            yield path.relative_to(ROOT).as_posix(), target


def test_the_algorithm_pages_exist():
    names = {p.name for p in PAGES}
    assert {
        "hdmm.md",
        "residual-planner.md",
        "eigen-design.md",
        "datacube.md",
        "baselines.md",
    } <= names


def test_every_registered_selector_module_points_to_a_page():
    pointed = {module for module, _ in _pointers()}
    for sub in ("hdmm", "residual_planner", "eigen_design", "datacube", "baselines"):
        assert any(m.startswith(f"mmtoolkit/selectors/{sub}/") for m in pointed), sub


@pytest.mark.parametrize(("module", "target"), list(_pointers()))
def test_module_pointer_resolves(module, target):
    assert (ROOT / target).is_file(), f"{module} points to {target}, which does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_links_resolve(page):
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# "), f"{page.name} has no title"
    for link in LINK.findall(text):
        if "://" in link:
            continue
        assert (page.parent / link).resolve().exists(), f"{page.name}: broken link {link}"
