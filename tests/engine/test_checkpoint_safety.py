"""Checkpoints against bad disks and interruptions: the previous good checkpoint is kept until a new one is written
and read back; a full disk leaves it in place; a corrupt last.pt on resume falls back to it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from detect.engine import checkpoint
from detect.engine.checkpoint import previous_path, save_checkpoint
from detect.engine.monitor import ResultsCsv
from detect.engine.resume import load_resumable
from tests.conftest import ROOT
from tests.support.checkpoints import fake_checkpoint
from tests.support.log_lines import log_lines
from tests.support.training import tiny_options


def _epoch(path) -> int:
    return torch.load(path, weights_only=True)["epoch"]


def test_each_save_keeps_the_previous_one(tmp_path):
    last = tmp_path / "last.pt"
    for epoch in (1, 2, 3):
        assert save_checkpoint(fake_checkpoint(epoch), last)
    assert previous_path(last).name == "last.prev.pt"
    assert (_epoch(last), _epoch(previous_path(last))) == (3, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.prev.pt", "last.pt"]  # no temp file left


def test_a_checkpoint_that_reads_back_wrong_replaces_nothing(tmp_path, monkeypatch):
    last = tmp_path / "last.pt"
    save_checkpoint(fake_checkpoint(1), last)
    save_checkpoint(fake_checkpoint(2), last)
    monkeypatch.setattr(checkpoint, "file_crc32", lambda path: 0)  # the disk returns other bytes
    with pytest.raises(OSError, match="bytes read back differ"):
        save_checkpoint(fake_checkpoint(3), last)
    assert (_epoch(last), _epoch(previous_path(last))) == (2, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.prev.pt", "last.pt"]


FULL_DISK = """
import resource, signal, sys, torch
from detect.engine.checkpoint import save_checkpoint
from tests.support.checkpoints import fake_checkpoint
last = sys.argv[1]
save_checkpoint(fake_checkpoint(1), last)
save_checkpoint(fake_checkpoint(2), last)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, resource.RLIM_INFINITY))
try:
    save_checkpoint(fake_checkpoint(3, size=100000), last)
except OSError as e:
    print("OSError", e.errno)
"""


@pytest.mark.slow
def test_a_full_disk_leaves_both_checkpoints_intact(tmp_path):
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path / "last.pt")], cwd=ROOT, check=False,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.strip() == "OSError 27", proc.stdout + proc.stderr  # EFBIG
    assert (_epoch(tmp_path / "last.pt"), _epoch(tmp_path / "last.prev.pt")) == (2, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.prev.pt", "last.pt"]


def test_resume_falls_back_to_the_previous_checkpoint(tmp_path):
    last = tmp_path / "last.pt"
    save_checkpoint(fake_checkpoint(1), last)
    save_checkpoint(fake_checkpoint(2), last)
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])  # truncated
    with log_lines("detect.engine.resume") as lines:
        path, ckpt = load_resumable(last)
    assert path == previous_path(last) and ckpt["epoch"] == 1
    assert len(lines) == 1 and f"{last} is not a readable PyTorch checkpoint" in lines[0]
    assert f"resuming from the previous checkpoint {previous_path(last)} (epoch 1) instead" in lines[0]
    # the bad file is set aside, so that the next save cannot rotate it into last.prev.pt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.corrupt.pt", "last.prev.pt"]
    (tmp_path / "other.pt").write_bytes(b"junk")
    with pytest.raises(ValueError, match="other.pt"):
        load_resumable(tmp_path / "other.pt")  # nothing to fall back to: the original error


def test_results_csv_on_a_full_disk_warns_and_keeps_the_file(tmp_path, monkeypatch):
    csv = ResultsCsv(tmp_path / "results.csv")
    row = {"epoch": 1, "box": 0.1, "obj": 0.2, "cls": 0.3, "lr": 0.01, "time": 1.0}
    csv.log_epoch(1, row)

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("detect.engine.monitor.atomic_write_text", full)
    with log_lines("detect.engine.monitor") as lines:
        csv.log_epoch(2, {**row, "epoch": 2})
    assert any("results.csv not updated" in line and "No space left" in line for line in lines)
    assert len((tmp_path / "results.csv").read_text().splitlines()) == 2  # header + epoch 1


@pytest.mark.slow
def test_training_stops_cleanly_on_a_full_disk_and_resumes_past_a_corrupt_last_pt(tmp_path):
    """Epochs 1 and 2 saved; before epoch 3 the process may write no file over 20 kB: the save fails, the run stops
    with a message, last.pt (epoch 2) and last.prev.pt (epoch 1) intact. Then last.pt is cut short: --resume says
    so and continues from last.prev.pt to the end."""
    o = tiny_options(tmp_path, name="disk")
    args = [sys.executable, str(ROOT / "tests" / "support" / "train_hooks.py"), "--data", o.data, "--hyp", o.hyp, "--img-size",
            "64", "--batch-size", "4", "--nbs", "8", "--epochs", "3", "--workers", "0", "--device", "cpu",
            "--project", o.project, "--name", "disk", "--exist-ok", "--cache-dir", o.cache_dir]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "DETECT_TEST_FSIZE_AFTER_EPOCH": "2:20000"}
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env, timeout=200, check=False)
    run_dir = Path(o.project) / "disk"
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (f"training failed: CheckpointWriteError: could not write {run_dir / 'last.pt'} (OSError: [Errno 27] "
            f"File too large)") in proc.stdout, proc.stdout[-3000:]
    assert f"is as it was: free space (or fix the disk) and resume with --resume {run_dir / 'last.pt'}" in proc.stdout
    assert (_epoch(run_dir / "last.pt"), _epoch(run_dir / "last.prev.pt")) == (2, 1)
    assert not list(run_dir.glob(".*"))  # no temp file left
    data = (run_dir / "last.pt").read_bytes()
    (run_dir / "last.pt").write_bytes(data[: len(data) // 3])
    env.pop("DETECT_TEST_FSIZE_AFTER_EPOCH")
    resumed = subprocess.run([*args, "--resume", str(run_dir / "last.pt")], cwd=ROOT, capture_output=True,
                             text=True, env=env, timeout=200, check=False)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"resuming from the previous checkpoint {run_dir / 'last.prev.pt'} (epoch 1) instead" in resumed.stdout
    assert _epoch(run_dir / "last.pt") == 3 and (run_dir / "last.corrupt.pt").is_file()
