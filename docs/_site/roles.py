"""A griffe extension for the API reference (mkdocs.yml loads it into mkdocstrings).

* The package's docstrings cross-reference in Sphinx roles (``:func:`~.config.quick_config```),
  which Markdown would print as they are: each role becomes the code span of the name it shows
  (after a ``~`` the last component, else the name without its leading dots).
* Its constants are documented by ``#:`` comments above the assignment (the Sphinx
  convention), which griffe does not read: such a comment becomes the constant's docstring.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj):`(~?)\.*([^`]+)`")


def plain(docstring: str) -> str:
    """``docstring`` with every Sphinx cross-reference role replaced by a code span."""
    return ROLE.sub(
        lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", docstring
    )


def comment_above(lines: list[str], lineno: int) -> str | None:
    """The ``#:`` comment block ending on the line above line ``lineno`` (1-based), if any."""
    found = []
    i = lineno - 2
    while i >= 0 and lines[i].lstrip().startswith("#:"):
        found.append(lines[i].lstrip()[2:].strip())
        i -= 1
    return " ".join(reversed(found)) or None


class SphinxRoles(griffe.Extension):
    """Rewrite roles and read ``#:`` comments (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is None and obj.is_attribute and obj.lineno and obj.parent.is_module:
            text = comment_above(obj.module.lines, obj.lineno)
            if text:
                obj.docstring = griffe.Docstring(text, lineno=obj.lineno, parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
