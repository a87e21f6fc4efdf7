"""Stopping a run on purpose: Ctrl-C saves last.pt mid-epoch as SIGTERM does and says how to resume; the resumed
epoch's row in results.csv covers the whole epoch, as the uninterrupted run's. Under torchrun: the terminal's Ctrl-C
(each rank gets it twice) saves, and SIGTERM to the ranks stops the job without torchrun's traceback."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from detect import train as train_module
from detect.engine.setup import build_trainer
from detect.runtime import dist
from tests.conftest import ROOT
from tests.support.training import StopAtStep, tiny_options


def _rows(path):
    """results.csv rows as (epoch, box, obj, cls) strings: the logged losses, as written."""
    return [line.split(",")[:4] for line in path.read_text().splitlines()[1:]]


def _fit(tmp, name, stop_at=None, resume=None):
    trainer = build_trainer(tiny_options(tmp, name=name, epochs=3, resume=resume, workers=0), dist.init_distributed(
        "cpu"), StopAtStep)
    trainer.stop_at = stop_at
    try:
        return trainer.fit()
    finally:
        trainer.setup.train_loader.close()


def test_a_resumed_epoch_logs_the_losses_of_the_whole_epoch(tmp_path):
    _fit(tmp_path, "straight")
    stopped = _fit(tmp_path, "cut", stop_at=2)  # 4 batches of 4 per epoch, nbs 8: 2 steps an epoch
    # flagged after step 2 (the end of epoch 1), agreed at the next micro-batch: stops after 2 batches of epoch 2
    assert stopped.stop_requested and stopped.epoch == 1 and stopped.batch_in_epoch == 2
    saved = torch.load(tmp_path / "runs" / "cut" / "last.pt", weights_only=True)
    (partial,) = saved["epoch_partial"]
    assert partial["counted"] == 2 and partial["images"] == 8 and len(partial["sums"]) == 3
    _fit(tmp_path, "cut", resume=str(tmp_path / "runs" / "cut" / "last.pt"))
    straight, resumed = _rows(tmp_path / "runs" / "straight" / "results.csv"), _rows(
        tmp_path / "runs" / "cut" / "results.csv")
    assert len(resumed) == len(straight) == 3
    assert resumed == straight  # epoch 2 included: its first two batches were trained before the stop


@pytest.mark.slow
def test_ctrl_c_saves_last_pt_says_how_to_resume_and_the_run_resumes(tmp_path):
    opts = tiny_options(tmp_path, epochs=60)  # an epoch takes a fraction of a second: the signal lands inside one
    args = ["train.py", "--data", opts.data, "--hyp", opts.hyp, "--img-size", "64", "--batch-size", "2", "--nbs", "2",
            "--epochs", "60", "--workers", "1", "--device", "cpu", "--project", opts.project, "--name", "c",
            "--cache-dir", opts.cache_dir, "--no-plots"]
    results = tmp_path / "runs" / "c" / "results.csv"
    log = tmp_path / "train.log"
    with open(log, "w") as out:  # its own session: Ctrl-C reaches the process group, as a terminal's does
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        deadline = time.monotonic() + 240
        while not (results.exists() and len(results.read_text().splitlines()) >= 2):  # epoch 1 done
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=120)
    text = log.read_text()
    last = tmp_path / "runs" / "c" / "last.pt"
    assert code == 130, text[-3000:]
    assert "stop requested (Ctrl-C): saving" in text and f"continue it with --resume {last}" in text, text[-3000:]
    assert "Traceback" not in text and "done:" not in text
    ckpt = torch.load(last, weights_only=True)
    assert ckpt["epoch"] >= 1 and ckpt["batch_in_epoch"] > 0  # saved inside an epoch after the first
    more = ["--epochs", str(ckpt["epoch"] + 1)]  # finish the interrupted epoch only
    resumed = subprocess.run([sys.executable, *args, *more, "--resume", str(last)], cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert torch.load(last, weights_only=True)["epoch"] == ckpt["epoch"] + 1


def test_the_same_signal_twice_at_once_is_one_stop_and_again_later_stops_at_once(monkeypatch):
    """Under torchrun a terminal's Ctrl-C reaches each rank twice within milliseconds (from the terminal and passed
    on by torchrun): that is one stop that saves; it used to count as the second Ctrl-C, stopping without saving."""
    class Flags:
        stop_signal, stop_reason = False, None

    clock = [100.0]
    monkeypatch.setattr(train_module.time, "monotonic", lambda: clock[0])
    trainer = Flags()
    handle = train_module._stop_handler(trainer)
    handle(signal.SIGINT, None)
    clock[0] += 0.01
    handle(signal.SIGINT, None)  # the copy torchrun passes on: nothing more
    assert trainer.stop_signal and trainer.stop_reason == "Ctrl-C"
    clock[0] += train_module.REPEAT_GRACE_S
    with pytest.raises(KeyboardInterrupt):  # the user's second Ctrl-C
        handle(signal.SIGINT, None)


def _torchrun_job(tmp_path):
    """A 2-rank torchrun job in its own session (as a terminal's job), its log, and its results.csv."""
    opts = tiny_options(tmp_path, epochs=60)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "train.py",
           "--data", opts.data, "--hyp", opts.hyp, "--img-size", "64", "--batch-size", "2", "--nbs", "2",
           "--epochs", "60", "--workers", "1", "--device", "cpu", "--project", opts.project, "--name", "c",
           "--cache-dir", opts.cache_dir, "--no-plots"]
    log = tmp_path / "torchrun.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
    results = tmp_path / "runs" / "c" / "results.csv"
    deadline = time.monotonic() + 240
    while not (results.exists() and len(results.read_text().splitlines()) >= 2):  # the marker: epoch 1's row
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)
    return proc, log, tmp_path / "runs" / "c" / "last.pt"


@pytest.mark.slow
def test_ctrl_c_under_torchrun_saves_on_every_rank_and_torchrun_ends_as_docs_say(tmp_path):
    """docs/training.md: the ranks save and exit 130; torchrun itself then raises its SignalException (its
    traceback, exit status 1), which the project cannot change."""
    proc, log, last = _torchrun_job(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: torchrun and both ranks get it
    code = proc.wait(timeout=120)
    text = log.read_text()
    for rank in (0, 1):
        assert f"[rank {rank}] stopped (Ctrl-C) in epoch 2 of 60" in text, text[-3000:]
    assert "interrupted (Ctrl-C, twice" not in text and "training failed" not in text  # not taken for a second one
    assert torch.load(last, weights_only=True)["batch_in_epoch"] > 0
    assert code == 1 and "SignalException: Process" in text and "got signal: 2" in text


@pytest.mark.slow
def test_sigterm_to_the_ranks_stops_a_torchrun_job_cleanly(tmp_path):
    """The clean stop docs/training.md gives for torchrun: SIGTERM to its child processes (the ranks)."""
    proc, log, last = _torchrun_job(tmp_path)
    subprocess.run(["pkill", "-TERM", "-P", str(proc.pid)], check=True)
    code = proc.wait(timeout=120)
    text = log.read_text()
    assert code == 0 and "Traceback" not in text, text[-3000:]
    assert f"continue it with --resume {last}" in text and torch.load(last, weights_only=True)["batch_in_epoch"] > 0
