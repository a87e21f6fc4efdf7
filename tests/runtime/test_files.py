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


def test_exclusive_lock_keeps_a_second_process_out_until_released(tmp_path):
    import subprocess
    import sys

    from detect.runtime.files import exclusive_lock

    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
             "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)")  # raises BlockingIOError while another holds it
    lock = tmp_path / "sub" / ".x.lock"
    with exclusive_lock(lock):
        held = subprocess.run([sys.executable, "-c", probe, str(lock)], capture_output=True, text=True)
    free = subprocess.run([sys.executable, "-c", probe, str(lock)], capture_output=True, text=True)
    assert held.returncode != 0 and "BlockingIOError" in held.stderr
    assert free.returncode == 0, free.stderr


def test_two_processes_asking_for_one_synthetic_dataset_generate_it_once(tmp_path, monkeypatch):
    """A second job (here a thread: flock separates open files, not only processes) that asks while the first
    generates waits for it and keeps its dataset, instead of replacing the folder under the first one's reads."""
    import threading
    import time

    from detect.data.formats import synthetic
    from detect.runtime.files import exclusive_lock

    cfg, folder = synthetic.SyntheticConfig(seed=1, train_images=2, val_images=1), tmp_path / "gen"
    calls = []
    real_generate = synthetic.generate
    monkeypatch.setattr(synthetic, "generate", lambda *a: calls.append(a) or real_generate(*a))
    with exclusive_lock(tmp_path / ".gen.lock"):  # the first job, generating
        second = threading.Thread(target=synthetic.ensure_synthetic, args=(cfg, folder))
        second.start()
        time.sleep(0.3)  # it reaches the lock and waits (were it later, it would find the dataset: the same verdict)
        real_generate(folder, cfg)
        marker = (folder / synthetic.DONE_MARKER).stat().st_ino
    second.join(timeout=60)
    assert not second.is_alive() and calls == []
    assert (folder / synthetic.DONE_MARKER).stat().st_ino == marker
