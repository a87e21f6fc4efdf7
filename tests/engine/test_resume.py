"""detect.engine.resume through train.py's entry: what --resume takes from the command line and what it refuses,
a run resumed from another working folder, and no run folder left by a run that failed before training."""

import os

import pytest
import torch

from detect.train import main
from tests.support.training import QUIET_HYP, TINY_DATA, train_tiny


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working folder with a tiny generated dataset and hyp, named by relative paths as a user would."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "tiny.yaml").write_text(TINY_DATA.replace("path: gen", f"path: {tmp_path / 'gen'}"))
    (tmp_path / "work" / "hyp.yaml").write_text(QUIET_HYP)
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return tmp_path


def _said(capsys) -> str:
    out = capsys.readouterr()
    return out.out + out.err


def test_resume_refuses_ignored_flags_extends_and_runs_from_anywhere(workdir, monkeypatch, capsys):
    assert train_tiny("--epochs", "1") == 0
    last = workdir / "work" / "runs" / "r" / "last.pt"
    saved = torch.load(last, weights_only=True)["opts"]
    assert saved["data"] == str(workdir / "work" / "tiny.yaml") and os.path.isabs(saved["cache_dir"])
    (workdir / "elsewhere").mkdir()
    monkeypatch.chdir(workdir / "elsewhere")  # the relative paths of the first command mean nothing here
    capsys.readouterr()

    assert main(["--resume", str(last), "--device", "cpu"]) == 2  # finished: nothing to resume
    assert "the run finished all 1 epochs, there is nothing to resume; --epochs N (more than 1) extends it" in \
        _said(capsys)
    assert main(["--resume", str(last), "--batch-size", "16", "--epochs", "2"]) == 2
    assert "--batch-size 16 (the run's: 4) was given: leave it out, or start a new run from it" in _said(capsys)
    assert main(["--resume", str(last), "--epochs", "1"]) == 2
    assert "the run has done 1 of its 1 epochs; give more than 1 to extend it" in _said(capsys)

    assert main(["--resume", str(last), "--epochs", "2", "--device", "cpu", "--workers", "0"]) == 0
    ckpt = torch.load(last, weights_only=True)
    assert ckpt["epoch"] == 2 and ckpt["opts"]["epochs"] == 2 and ckpt["batch_in_epoch"] == 0
    assert "--epochs 2: the run ends after epoch 2 instead of 1; the learning-rate schedule is recomputed" in \
        _said(capsys)
    assert not (workdir / "elsewhere" / "runs").exists()  # the run went on in its own folder


def test_a_run_that_fails_before_training_leaves_no_folder(workdir, capsys):
    (workdir / "work" / "bad.cfg").write_text("[net]\nwidth=64\nheight=64\n[convolutional]\nfilters=x\n")
    assert train_tiny("--epochs", "1", "--cfg", "bad.cfg") == 2
    assert "bad.cfg" in _said(capsys)
    assert not (workdir / "work" / "runs" / "r").exists()
    assert train_tiny("--epochs", "1", "--max-batches", "1") == 0
    assert [p.name for p in (workdir / "work" / "runs").iterdir()] == ["r"]  # the numbering did not move


def test_an_early_stopped_run_is_not_resumed():
    from pathlib import Path

    from detect.engine.options import TrainOptions
    from detect.engine.resume import resumed_options

    ckpt = {"opts": TrainOptions(epochs=10, patience=3).to_dict(), "epoch": 5, "batch_in_epoch": 0,
            "stopped_early": True}
    with pytest.raises(ValueError, match=r"stopped early after epoch 5 of 10 \(--patience\), there is nothing to "
                                         r"resume; fine-tune from its best.pt"):
        resumed_options(TrainOptions(resume="x"), ckpt, Path("runs/x/last.pt"))
    ckpt["stopped_early"] = False
    assert resumed_options(TrainOptions(resume="x"), ckpt, Path("runs/x/last.pt")).epochs == 10


def test_a_resume_with_another_world_size_says_it_is_not_exact(workdir, capsys):
    """A run of 2 processes (its checkpoint holds 2 RNG states) resumed by `python train.py`: one process, so
    the batches are dealt and accumulated differently; the log used to say only that the RNG streams start afresh,
    while --resume promises an exact continuation."""
    assert train_tiny("--epochs", "1") == 0
    last = workdir / "work" / "runs" / "r" / "last.pt"
    ckpt = torch.load(last, weights_only=True)
    ckpt["rng"] = [ckpt["rng"][0], ckpt["rng"][0]]  # as torchrun --nproc_per_node=2 saves it
    torch.save(ckpt, last)
    _said(capsys)
    assert train_tiny("--epochs", "2", "--resume", str(last)) == 0
    said = _said(capsys)
    # batch 4, nbs 8: 2 processes accumulated 1 micro-batch per step, one accumulates 2
    assert ("this resume is not exact: the run trained as 2 processes x batch 4 x 1 accumulated and goes on as 1 "
            "processes x batch 4 x 2 accumulated, so each epoch's batches are dealt differently and the random "
            "streams differ; it will not reproduce the uninterrupted run (resume with 2 processes for that)") in said
    assert train_tiny("--epochs", "3", "--resume", str(last)) == 0  # its own world size again: nothing said
    assert "not exact" not in _said(capsys)
