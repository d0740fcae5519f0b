"""mmtoolkit.atomic: all-or-nothing file output."""

import os

import pytest

from mmtoolkit.atomic import write_atomic, write_files_atomic


def test_write_atomic_replaces_and_leaves_no_temporaries(tmp_path):
    path = tmp_path / "sub" / "a.csv"
    write_atomic(path, "x\r\ny\n")
    write_atomic(path, "new\n")
    assert path.read_bytes() == b"new\n"
    write_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(os.listdir(path.parent)) == ["a.csv"]


def test_a_failure_leaves_every_target_untouched(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("old a")
    with pytest.raises(TypeError):
        write_files_atomic({a: "new a", b: object()})  # the second file cannot be encoded
    assert a.read_text() == "old a" and not b.exists()
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]
