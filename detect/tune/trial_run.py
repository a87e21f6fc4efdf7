"""One trial as an ordinary train.py run, watched: its command, its process, and its results.csv read as rows
appear, each evaluated epoch's fitness handed to the caller, who may ask to stop the run.

Nothing here knows Optuna: `report(epoch, fitness)` and `should_stop()` are the trial's. A stop is one SIGTERM,
on which train.py finishes the step, saves last.pt and exits 0; a run that does not exit within `stop_timeout_s`
is killed.
"""

from __future__ import annotations

import csv
import fcntl
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from detect.runtime.commands import train_launcher

log = logging.getLogger(__name__)

LOCK_NAME = ".trial.lock"  # in the run folder: held while a train.py runs in it (detect.tune.tether)


@dataclass
class RunResult:
    rows: list[tuple[int, float]] = field(default_factory=list)  # (epoch, fitness) of each evaluated epoch
    returncode: int | None = None
    stopped: bool = False  # the caller asked for the stop (pruning)
    note: str = ""  # results.csv's last note (an early stop says why)


def read_fitness(path: Path) -> tuple[list[tuple[int, float]], str]:
    """(epoch, fitness) of every evaluated row of a results.csv (epochs without an evaluation leave the fitness
    empty), and the last row's note. The file is rewritten whole and atomically, so a read never sees half a row."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return [], ""
    rows = list(csv.DictReader(text.splitlines()))
    if rows and "fitness" not in rows[0]:
        raise ValueError(f"{path}: no fitness column (columns: {', '.join(rows[0])})")
    found = [(int(r["epoch"]), float(r["fitness"])) for r in rows if r.get("fitness") not in (None, "")]
    return found, (rows[-1].get("note") or "") if rows else ""


def train_command(nproc: int, run_dir: Path, hyp_file: Path, epochs: int, train_args, device_args,
                  resume: bool = False) -> list[str]:
    """The trial's train.py command: a new run in `run_dir`, or (`resume`) the continuation of its last.pt, which
    carries every other option, to `epochs` (a search restarted with another --epochs moves the run's end)."""
    if resume:
        return [*train_launcher(nproc), "--resume", str(run_dir / "last.pt"), "--epochs", str(epochs), *device_args]
    return [*train_launcher(nproc), *train_args, "--hyp", str(hyp_file), "--epochs", str(epochs), "--project",
            str(run_dir.parent), "--name", run_dir.name, "--exist-ok", *device_args]


def wait_for_folder(run_dir: Path, poll_s: float = 2.0) -> None:
    """Block while an earlier train.py still runs in `run_dir` (an interrupted trial's, saving its last.pt)."""
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if not said:
                    log.info("%s: waiting for the interrupted train.py there to exit", run_dir)
                    said = True
                time.sleep(poll_s)
    finally:
        os.close(fd)  # the lock goes with it; the tether takes it again


def stop(proc: subprocess.Popen, timeout_s: float) -> None:
    """One SIGTERM (train.py saves last.pt and exits), then SIGKILL if it is still there after `timeout_s`."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        log.warning("train.py (pid %d) did not exit %.0f s after SIGTERM: killed", proc.pid, timeout_s)
        proc.kill()
        proc.wait()


def run_training(command: list[str], run_dir: Path, report: Callable[[int, float], None],
                 should_stop: Callable[[], bool], env: dict | None = None, poll_s: float = 0.5,
                 stop_timeout_s: float = 300.0) -> RunResult:
    """Run `command` (output appended to run_dir/train.log), report each new evaluated epoch of its results.csv,
    and stop it when `should_stop()` says so after a report. Any exception here (Ctrl-C, SIGTERM) stops the run the
    same way before it goes on."""
    run_dir.mkdir(parents=True, exist_ok=True)
    wait_for_folder(run_dir)
    results, result = run_dir / "results.csv", RunResult()
    reported: set[int] = set()  # a resumed run's earlier epochs are reported too: the retry is a new trial
    tether = [sys.executable, "-m", "detect.tune.tether", str(os.getpid()), str(run_dir / LOCK_NAME), "--"]
    with open(run_dir / "train.log", "ab") as out:
        out.write(f"$ {shlex.join(command)}\n".encode())
        out.flush()
        proc = subprocess.Popen([*tether, *command], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            while True:
                finished = proc.poll() is not None
                rows, result.note = read_fitness(results)
                for epoch, fitness in rows:
                    if epoch in reported:
                        continue
                    reported.add(epoch)
                    result.rows.append((epoch, fitness))
                    report(epoch, fitness)
                    if not finished and should_stop():
                        result.stopped = True
                        stop(proc, stop_timeout_s)
                        break
                if finished or result.stopped:
                    break
                try:
                    proc.wait(poll_s)  # returns as soon as the run ends
                except subprocess.TimeoutExpired:
                    pass
        except BaseException:
            try:
                stop(proc, stop_timeout_s)
            except BaseException:  # a second Ctrl-C: at once
                proc.kill()
                raise
            raise
    result.returncode = proc.returncode
    return result
