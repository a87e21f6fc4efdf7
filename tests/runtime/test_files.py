"""Atomic writes: the target is whole or untouched, and no temp file is left behind."""

import os

import pytest

from detect.runtime.files import atomic_write, atomic_write_bytes, atomic_write_text


def test_writes_replace_the_file_and_create_its_folder(tmp_path):
    target = tmp_path / "new" / "folder" / "a.txt"
    atomic_write_text(target, "first\n")
    atomic_write_bytes(target, b"second\n")
    assert target.read_bytes() == b"second\n"
    assert os.listdir(target.parent) == ["a.txt"]


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    target = tmp_path / "a.bin"
    atomic_write_bytes(target, b"old")

    def fail_halfway(f):
        f.write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail_halfway)
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["a.bin"]


def test_new_files_get_the_usual_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(umask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
