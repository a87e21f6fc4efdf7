"""Tiny searches the tune tests share: a folder with the tiny synthetic dataset, quiet hyperparameters and a small
space; `python -m detect.tune` run in it as a user types it; the study read back from its SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.training import QUIET_HYP, TINY_DATA

SPACE = ("lr0: {low: 0.005, high: 0.05, log: true}\nmomentum: {low: 0.8, high: 0.95}\n"
         "mosaic: {choices: [0.0, 1.0]}\n")
# every trial's train.py: one batch per epoch of 4 images at 64 px, 4 images evaluated
TINY_TRAIN = ("--data", "tiny.yaml", "--hyp", "hyp.yaml", "--img-size", "64", "--batch-size", "4", "--nbs", "8",
              "--workers", "0", "--cache-dir", "cache", "--no-plots", "--max-batches", "1")
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # a shared 2-core machine


def tune_folder(tmp: Path) -> Path:
    (tmp / "tiny.yaml").write_text(TINY_DATA)
    (tmp / "hyp.yaml").write_text(QUIET_HYP)
    (tmp / "space.yaml").write_text(SPACE)
    return tmp


def tune_command(study: str, *flags: str) -> list[str]:
    # heartbeats serve other machines only (this machine's gone workers are seen at once); 10 s leaves a 30 s grace
    # period, which a live worker's heartbeat thread keeps on a loaded machine (at 2 s, a 6 s stall on a busy CI
    # machine failed a live trial)
    return [sys.executable, "-m", "detect.tune", "--study", study, "--space", "space.yaml", "--heartbeat", "10",
            *flags, "--", *TINY_TRAIN]


def run_tune(tmp: Path, study: str, *flags: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(tune_command(study, *flags), cwd=tmp, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def start_tune(tmp: Path, study: str, *flags: str) -> subprocess.Popen:
    """The search in a process group of its own (as a shell starts a job), output in tmp/<study>.out."""
    with open(tmp / f"{study}.out", "w") as out:  # the child keeps its own descriptor
        return subprocess.Popen(tune_command(study, *flags), cwd=tmp, env=ENV, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def wait_for(condition, timeout: float = 120, poll: float = 0.1, what: str = "the condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if found := condition():
            return found
        time.sleep(poll)
    raise AssertionError(f"{what} did not happen within {timeout:.0f} s")


def study_dir(tmp: Path, study: str) -> Path:
    return tmp / "runs" / "tune" / study


def load_trials(tmp: Path, study: str):
    """The study's trials as the storage holds them (FrozenTrials by number)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    loaded = optuna.load_study(study_name=study, storage=f"sqlite:///{study_dir(tmp, study) / 'study.db'}")
    return sorted(loaded.get_trials(deepcopy=False), key=lambda t: t.number)


def output(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout[-4000:] + proc.stderr[-4000:]
