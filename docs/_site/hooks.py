"""MkDocs hooks of the documentation site (mkdocs.yml; how to build it: docs/guide/docs-site.md).

* The navigation is read from docs/index.md: one section per ``## `` heading of that page,
  holding the pages its links name, in order. A page is added to the site by linking it there
  (``tests/test_docs.py`` requires every page to be linked from the index anyway).
* The repository's own Markdown that lives outside docs/ — README.md (with the generated
  reproduction status), ARCHITECTURE.md, benchmarks/README.md (the benchmarks' numbers) and
  the committed reproduction record under results/ with the configs it links — is read in
  place and served under ``project/`` at its path in the repository, so nothing is copied into
  docs/ and the pages stay the files the generators write.
* Links are rewritten to match: a docs page's link that leaves docs/ (``../README.md``) points
  to the served copy, and a served file's link into docs/ points to the docs page.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

#: Where the repository's files are served in the site.
MOUNT = "project"
#: The repository's files served (globs relative to the repository's root).
SERVED = (
    "README.md",
    "ARCHITECTURE.md",
    "benchmarks/README.md",
    "results/**/*.md",
    "results/**/*.png",
    "results/**/*.csv",
    "results/**/*.json",
    "configs/**/*.yaml",
)
#: Local outputs under results/ that are not part of the record (git-ignored).
LOCAL = ("quick", ".jobs")
#: A Markdown link or image target, outside code spans.
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
TEXT_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
FENCE = re.compile(r"(^```.*?^```)", re.S | re.M)


def _root(config) -> Path:
    return Path(config.config_file_path).resolve().parent


def served_files(root: Path) -> list[str]:
    """The repository-relative paths of the files the site serves under ``project/``."""
    found = set()
    for pattern in SERVED:
        for path in root.glob(pattern):
            rel = path.relative_to(root)
            if path.is_file() and not any(part in LOCAL for part in rel.parts[1:]):
                found.add(rel.as_posix())
    return sorted(found)


def site_path(target: str, page_uri: str) -> str | None:
    """Where a link ``target`` of the page ``page_uri`` (both site paths) points in the site,
    when it differs from the target's own resolution: None for links that need no change."""
    if re.match(r"[a-z]+:", target) or target.startswith("#"):
        return None
    path, hash_, anchor = target.partition("#")
    base = posixpath.dirname(page_uri)
    joined = posixpath.normpath(posixpath.join(base, path))
    if joined.startswith("../") and not page_uri.startswith(f"{MOUNT}/"):
        new = f"{MOUNT}/{joined[3:]}"  # a docs page's link to the repository
    elif joined.startswith(f"{MOUNT}/docs/"):
        new = joined[len(f"{MOUNT}/docs/") :]  # a served file's link into docs/
    else:
        return None
    return posixpath.relpath(new, base or ".") + hash_ + anchor


def rewrite_links(markdown: str, page_uri: str) -> str:
    """``markdown`` with its links pointed at the site's copies (see :func:`site_path`)."""

    def link(m: re.Match) -> str:
        new = site_path(m.group(2), page_uri)
        return m.group(0) if new is None else m.group(1) + new + m.group(3)

    parts = FENCE.split(markdown)
    return "".join(p if p.startswith("```") else LINK.sub(link, p) for p in parts)


def nav_from_index(index: str) -> list:
    """The site's navigation from docs/index.md: Home, then one section per ``## `` heading
    with the pages linked in it (the index's own introduction is not a section). A docs
    page is titled by its own heading; a served repository file by the link's text (its
    heading was written for reading it in the repository: the README's is "mmtoolkit")."""
    nav: list = [{"Home": "index.md"}]
    for block in re.split(r"^## ", FENCE.sub("", index), flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        pages: list = []
        for text, target in TEXT_LINK.findall(body):
            served = site_path(target, "index.md")
            page = (served or target).partition("#")[0]
            if not page or "://" in page or page in pages or {text: page} in pages:
                continue
            pages.append({text: page} if served else page)
        nav.append({title.strip(): pages})
    return nav


def on_config(config):
    """Set the navigation from docs/index.md."""
    index = Path(config.docs_dir) / "index.md"
    config.nav = nav_from_index(index.read_text(encoding="utf-8"))
    return config


def on_files(files: Files, config) -> Files:
    """Serve the repository's files under ``project/`` (read in place, never copied)."""
    root = _root(config)
    for rel in served_files(root):
        files.append(File.generated(config, f"{MOUNT}/{rel}", abs_src_path=str(root / rel)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Point the page's links at the site's copies."""
    return rewrite_links(markdown, page.file.src_uri)
