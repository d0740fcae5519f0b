"""The documentation pages under docs/: every page has a title and is listed in docs/index.md,
every relative link of a page resolves (its anchor included), every ``docs/...md`` pointer in
the package's docstrings names a page that exists, and the modules whose user guide or method
description moved to a page point to it."""

import ast
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
#: A pointer from code to a page, and a Markdown link target.
POINTER = re.compile(r"docs/[\w/.-]+?\.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: Pages and the modules (paths below mmtoolkit/) whose docstring must point to each.
POINTED_FROM = {
    "guide/release.md": ("release_command", "releasing", "saved_plans"),
    "guide/records.md": ("records", "domain", "datasets", "census"),
    "guide/ledger.md": ("ledger",),
    "guide/privacy-and-noise.md": ("privacy", "measurement", "noise", "discrete"),
    "guide/at-scale.md": ("mechanism", "dask_release", "plan"),
    "guide/pgm.md": ("pgm",),
    "guide/configs.md": ("runner/config",),
    "guide/workloads.md": ("workload_specs",),
    "guide/compare.md": ("compare",),
    "guide/testing-kit.md": ("testing",),
    "algorithms/hdmm.md": ("selectors/hdmm/opt0",),
    "algorithms/residual-planner.md": ("selectors/residual_planner/selector",),
    "algorithms/eigen-design.md": (
        "selectors/eigen_design/design",
        "selectors/eigen_design/mm_sdp",
        "selectors/eigen_design/optimum",
    ),
    "algorithms/datacube.md": ("selectors/datacube/bmax",),
    "algorithms/baselines.md": ("selectors/baselines/greedy_h",),
}


def _slug(heading: str) -> str:
    """The anchor of a Markdown heading as the documentation site makes it (Python-Markdown's
    ``toc`` slugify: ASCII, lower case, punctuation dropped, spaces to hyphens)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (a link or heading inside code is not one)."""
    return re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)


def _anchors(page: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+)$", _prose(page), re.M)}


@pytest.mark.parametrize(
    "module, page", sorted((m, page) for page, ms in POINTED_FROM.items() for m in ms)
)
def test_modules_point_to_their_page(module, page):
    doc = ast.get_docstring(ast.parse((ROOT / "mmtoolkit" / f"{module}.py").read_text()))
    assert f"docs/{page}" in " ".join(doc.split())


def test_every_page_the_code_points_to_exists():
    pointed = {
        (path.relative_to(ROOT), ref)
        for path in (ROOT / "mmtoolkit").rglob("*.py")
        for ref in POINTER.findall(path.read_text(encoding="utf-8"))
    }
    assert len(pointed) > 50, "the package's docstrings should point to their pages"
    missing = sorted(f"{p}: {ref}" for p, ref in pointed if not (ROOT / ref).is_file())
    assert not missing, "pointers to missing pages:\n" + "\n".join(missing)


def test_the_index_lists_every_page():
    index = DOCS / "index.md"
    listed = {(DOCS / t.partition("#")[0]).resolve() for t in LINK.findall(_prose(index))}
    unlisted = [p.relative_to(DOCS).as_posix() for p in PAGES if p != index and p not in listed]
    assert not unlisted, f"docs/index.md does not link: {unlisted}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_links_resolve(page):
    text = _prose(page)
    assert text.startswith("# "), f"{page.name} has no title"
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            bad.append(f"{target}: no file {file}")
        elif anchor and anchor not in _anchors(file):
            bad.append(f"{target}: no heading with anchor #{anchor}")
    assert not bad, f"{page.name}: broken links:\n" + "\n".join(bad)
