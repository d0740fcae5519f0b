"""Atomic file output: readers see the old file or the new one, never a partial write.

Every file goes to a temporary sibling (same directory, so ``os.replace`` is a rename on one
file system), is flushed and fsynced, and is then renamed into place; on any error the
temporaries are removed and no target is touched. Used by the runner (results tables, job
store, scoreboard, figures) and by ``mmtoolkit release``; :func:`write_png` writes a
matplotlib figure. :func:`same_file` is how the commands tell that an output would overwrite
an input.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["same_file", "write_atomic", "write_files_atomic", "write_png"]


def write_files_atomic(files: Mapping[str | os.PathLike, str | bytes]) -> None:
    """Write each ``path -> data`` (text is UTF-8, newlines untranslated); all files are
    complete before the first rename, so an error leaves every target as it was."""
    umask = os.umask(0)
    os.umask(umask)
    temps: list[tuple[str, Path]] = []
    try:
        for target, data in files.items():
            path = Path(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            raw = data.encode("utf-8") if isinstance(data, str) else data
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; use the usual mode
        for tmp, path in temps:
            os.replace(tmp, path)
    finally:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write one file atomically (see :func:`write_files_atomic`)."""
    write_files_atomic({path: data})


def write_png(path: str | os.PathLike, fig, dpi: int) -> None:
    """Write the matplotlib figure ``fig`` as a PNG at ``dpi``, atomically, without the
    "Software" text chunk (the matplotlib version), so the same figure gives the same bytes
    under any matplotlib version."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    write_atomic(path, buf.getvalue())


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` are one file: the same path once symbolic links are resolved,
    or (both existing) the same inode — a hard link."""
    if os.path.realpath(a) == os.path.realpath(b):  # (a symlink loop stays as it is)
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False
