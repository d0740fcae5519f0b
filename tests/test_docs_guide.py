"""The user guide under docs/guide: the release-side modules point to their pages, every page
a module points to exists, and every relative link of a page resolves (its anchor included)."""

import ast
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide"
#: A pointer from code to a page, and a Markdown link target.
POINTER = re.compile(r"docs/guide/[\w.-]+\.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: The guide pages and the release-side modules whose docstrings point to each.
RELEASE_SIDE = {
    "release": ("release_command", "releasing", "saved_plans"),
    "records": ("records", "domain", "datasets", "census"),
    "ledger": ("ledger",),
    "privacy-and-noise": ("privacy", "measurement", "noise", "discrete"),
    "at-scale": ("mechanism", "dask_release", "plan"),
    "pgm": ("pgm",),
}


def _slug(heading: str) -> str:
    """The anchor of a Markdown heading as the documentation site makes it (Python-Markdown's
    ``toc`` slugify: ASCII, lower case, punctuation dropped, spaces to hyphens)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+)$", text, re.M)}


@pytest.mark.parametrize(
    "module, page", sorted((m, page) for page, ms in RELEASE_SIDE.items() for m in ms)
)
def test_release_side_modules_point_to_their_page(module, page):
    doc = ast.get_docstring(ast.parse((ROOT / "mmtoolkit" / f"{module}.py").read_text()))
    assert f"User guide: docs/guide/{page}.md" in " ".join(doc.split())


def test_every_page_the_code_points_to_exists():
    pointed = {
        (path.relative_to(ROOT), ref)
        for path in (ROOT / "mmtoolkit").rglob("*.py")
        for ref in POINTER.findall(path.read_text(encoding="utf-8"))
    }
    assert pointed, "no module points to a guide page"
    missing = sorted(f"{p}: {ref}" for p, ref in pointed if not (ROOT / ref).is_file())
    assert not missing, "pointers to missing pages:\n" + "\n".join(missing)


@pytest.mark.parametrize("page", sorted(GUIDE.glob("*.md")), ids=lambda p: p.name)
def test_guide_links_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
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
