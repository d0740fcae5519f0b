"""The documentation site (mkdocs.yml, docs/_site/, docs/reference/, docs/tutorials/; how it is
built: docs/guide/docs-site.md): every public name has an API entry, the navigation read from
docs/index.md holds every page, links leaving docs/ reach the repository's files served in the
site, and the strict build fails on a tutorial that raises."""

import importlib
import importlib.util
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import mmtoolkit

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: An mkdocstrings entry: ``::: dotted.path`` at the start of a line.
ENTRY = re.compile(r"^::: ([\w.]+)\s*$", re.M)


def _entries() -> set[str]:
    pages = (DOCS / "reference").glob("*.md")
    return {name for page in pages for name in ENTRY.findall(page.read_text(encoding="utf-8"))}


def _public_packages() -> list[str]:
    """``mmtoolkit`` and every subpackage without a private component that has ``__all__``."""
    found = ["mmtoolkit"]
    for info in pkgutil.walk_packages(mmtoolkit.__path__, "mmtoolkit."):
        if info.ispkg and not any(p.startswith("_") for p in info.name.split(".")):
            if hasattr(importlib.import_module(info.name), "__all__"):
                found.append(info.name)
    return found


def _hooks():
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("site_hooks", DOCS / "_site" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_has_a_reference_entry():
    packages = _public_packages()
    assert {"mmtoolkit", "mmtoolkit.linalg", "mmtoolkit.evaluate"} <= set(packages)
    entries = _entries()
    missing = []
    for pkg in packages:
        module = importlib.import_module(pkg)
        for name in module.__all__:
            obj = getattr(module, name)
            # where it is defined: a function named like its module (mmtoolkit.compare) needs
            # its full path, or the site renders the module instead of the function
            home = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
            if f"{pkg}.{name}" not in entries and home not in entries:
                missing.append(f"{pkg}.{name}")
    assert not missing, (
        "public names without an API entry (a '::: NAME' line on a page under docs/reference/):"
        "\n" + "\n".join(missing)
    )


#: A numpydoc section heading: its name, then a line of dashes.
SECTION = re.compile(r"^(\w[\w ]*)\n-{3,}\n(.*?)(?=^\w[\w ]*\n-{3,}\n|\Z)", re.M | re.S)
#: A documented name inside a section: ``name : type`` or ``a, b : type`` at the left margin.
ITEM = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::|$)", re.M)


def _documented(doc: str, section: str) -> set[str] | None:
    """The names a numpydoc section lists (None when the docstring has no such section)."""
    for title, body in SECTION.findall(doc):
        if title.strip() == section:
            return {n.strip().lstrip("*") for m in ITEM.findall(body) for n in m.split(",")}
    return None


def _numpydoc_gaps(obj) -> list[str]:
    """What a public function's or class's docstring leaves out: a Parameters section listing
    every parameter of its signature (a class's constructor's, in the class docstring or the
    constructor's, as mkdocstrings merges them), and a Returns (or Yields) section for a
    function that returns a value."""
    doc = inspect.getdoc(obj) or ""
    if inspect.isclass(obj):
        doc += "\n" + ((inspect.getdoc(obj.__init__) or "") if "__init__" in vars(obj) else "")
    try:
        # a class's documented signature is its constructor's (as griffe reads it, also when
        # the class defines __new__ as well)
        init = inspect.isclass(obj) and inspect.isfunction(obj.__init__)
        signature = inspect.signature(obj.__init__ if init else obj)
    except (TypeError, ValueError):
        return []
    gaps = []
    wanted = [p for p in signature.parameters if p not in ("self", "cls")]
    listed = _documented(doc, "Parameters")
    if wanted and listed is None:
        gaps.append("no Parameters section")
    elif wanted:
        gaps += [f"parameter {p!r} not documented" for p in wanted if p not in listed]
    returns = signature.return_annotation
    if not inspect.isclass(obj) and returns not in (None, "None"):
        if _documented(doc, "Returns") is None and _documented(doc, "Yields") is None:
            gaps.append("no Returns section")
    return gaps


def _public_callables():
    """``(dotted name, object)`` of every public function and class but typing.Protocols
    (never constructed: their signature is Protocol's own)."""
    for pkg in _public_packages():
        module = importlib.import_module(pkg)
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and not getattr(obj, "_is_protocol", False):
                yield f"{pkg}.{name}", obj


def test_every_public_name_documents_its_parameters_and_returns():
    gaps = []
    for name, obj in _public_callables():
        gaps += [f"{name}: {gap}" for gap in _numpydoc_gaps(obj)]
    assert not gaps, "numpydoc sections missing on the public API:\n" + "\n".join(gaps)


def test_every_public_name_is_annotated():
    """``py.typed`` promises annotations: every parameter of every public function and
    constructor has one, and every public function its return type."""
    gaps = []
    for name, obj in _public_callables():
        cls = inspect.isclass(obj)
        if cls and not inspect.isfunction(obj.__init__):
            continue  # no constructor of its own (an exception, a plain container)
        signature = inspect.signature(obj.__init__ if cls else obj)
        gaps += [f"{name}: parameter {p!r}" for p, v in signature.parameters.items()
                 if p not in ("self", "cls") and v.annotation is inspect.Parameter.empty]
        if not cls and signature.return_annotation is inspect.Signature.empty:
            gaps.append(f"{name}: return")
    assert not gaps, "public names without annotations:\n" + "\n".join(gaps)


def test_the_numpydoc_check_reads_sections():
    def documented(a, b=1):
        """Add.

        Parameters
        ----------
        a, b : int
            Terms.

        Returns
        -------
        int
        """
        return a + b

    def undocumented(a, b=1):
        """Add.

        Parameters
        ----------
        a : int
        """
        return a + b

    assert _numpydoc_gaps(documented) == []
    assert _numpydoc_gaps(undocumented) == [
        "parameter 'b' not documented",
        "no Returns section",
    ]


def test_nav_lists_every_page_once():
    hooks = _hooks()
    nav = hooks.nav_from_index((DOCS / "index.md").read_text(encoding="utf-8"))
    listed = [p if isinstance(p, str) else next(iter(p.values()))
              for section in nav for pages in section.values()
              for p in ([pages] if isinstance(pages, str) else pages)]  # fmt: skip
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages <= set(listed), sorted(pages - set(listed))
    served = {f"{hooks.MOUNT}/{rel}" for rel in hooks.served_files(ROOT)}
    outside = {p for p in listed if p not in pages}
    assert outside and outside <= served, sorted(outside - served)
    for generated in ("README.md", "ARCHITECTURE.md", "results/README.md", "benchmarks/README.md"):
        assert f"{hooks.MOUNT}/{generated}" in outside
    assert {"README": f"{hooks.MOUNT}/README.md"} in nav[-1]["The project"]


def test_links_are_pointed_at_the_served_files():
    hooks = _hooks()
    assert hooks.site_path("../../ARCHITECTURE.md#layers", "guide/x.md") == (
        "../project/ARCHITECTURE.md#layers"
    )
    assert hooks.site_path("../README.md", "index.md") == "project/README.md"
    assert hooks.site_path("docs/guide/cli.md#commands", "project/README.md") == (
        "../guide/cli.md#commands"
    )
    assert hooks.site_path("results/hdmm/table3.md", "project/README.md") is None
    assert hooks.site_path("cli.md", "guide/release.md") is None
    assert hooks.site_path("https://example.org/a.md", "index.md") is None
    text = "[a](../README.md)\n```\n[b](../README.md)\n```\n"
    assert hooks.rewrite_links(text, "index.md") == text.replace("(../README.md)\n```",
                                                                 "(project/README.md)\n```", 1)


def test_no_local_results_are_served(tmp_path):
    hooks = _hooks()
    for rel in ("README.md", "results/a/t.md", "results/quick/a/t.md", "results/a/.jobs/t.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("# t\n")
    assert hooks.served_files(tmp_path) == ["README.md", "results/a/t.md"]


def test_griffe_roles_become_code_and_comments_document_constants():
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location("site_roles", DOCS / "_site" / "roles.py")
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    text = "See :func:`~.config.quick_config`, :class:`mmtoolkit.Domain` and :mod:`.store`."
    assert roles.plain(text) == "See `quick_config`, `mmtoolkit.Domain` and `store`."
    lines = ["x = 1", "#: the first line", "#: and the second", "LIMIT = 3"]
    assert roles.comment_above(lines, 4) == "the first line and the second"
    assert roles.comment_above(lines, 1) is None


@pytest.mark.parametrize("code, fails", [("raise ValueError('a tutorial bug')", True),
                                         ("print(1 + 1)", False)])  # fmt: skip
def test_strict_build_fails_on_a_tutorial_that_raises(tmp_path, code, fails):
    """The site's own configuration, on a docs directory holding one executed page."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("markdown_exec")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config["plugins"] = [p for p in config["plugins"] if p in ("search", "markdown-exec")]
    config |= {"docs_dir": str(tmp_path / "docs"), "site_dir": str(tmp_path / "site"),
               "hooks": [str(DOCS / "_site" / "hooks.py")]}  # fmt: skip
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(
        "# Home\n\n## Tutorials\n\n- [One](one.md)\n"
    )
    (tmp_path / "docs" / "one.md").write_text(
        f'# One\n\n```python exec="on" result="text"\n{code}\n```\n'
    )
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "mkdocs", "build", "-f", str(tmp_path / "mkdocs.yml")]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (run.returncode != 0) == fails, run.stderr[-2000:]
    if fails:
        assert "exited with errors" in run.stderr and "a tutorial bug" in run.stderr
