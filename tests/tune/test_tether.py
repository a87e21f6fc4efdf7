"""The tie between a tune worker and its train.py: a worker that dies (SIGKILL, with threads running, as Optuna's
heartbeat thread runs) gives the command exactly one SIGTERM, so it saves and exits; a tether that is killed takes
the command with it; and the run folder's lock is held while the command runs."""

import os
import signal
import subprocess
import sys
import time

from tests.support.tuning import wait_for

# the command: notes each SIGTERM, "saves" for half a second after the first, then exits 0
COMMAND = r"""
import os, signal, sys, time
log = sys.argv[1]
def note(text):
    with open(log, "a") as f:
        f.write(text + "\n")
def stop(signum, frame):
    note(f"sigterm {signum}")
    if sum(line.startswith("sigterm") for line in open(log)) == 1:
        time.sleep(0.5)
        note("saved")
        sys.exit(0)
signal.signal(signal.SIGTERM, stop)
note(f"pid {os.getpid()}")
time.sleep(30)
"""

# a worker: several threads, the tether started from the main thread, then it waits
WORKER = r"""
import os, subprocess, sys, threading, time
for _ in range(8):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
subprocess.Popen([sys.executable, "-m", "detect.tune.tether", str(os.getpid()), sys.argv[1], "--", sys.executable,
                  "-c", sys.argv[2], sys.argv[3]], start_new_session=True)
time.sleep(60)
"""


def _pid(log) -> int:
    line = wait_for(lambda: log.exists() and next((x for x in log.read_text().splitlines() if x.startswith("pid")),
                                                   None), timeout=60, what="the command's start")
    return int(line.split()[1])


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie waiting for init counts as gone
    except FileNotFoundError:
        return True


def test_a_dying_worker_gives_the_command_one_sigterm(tmp_path):
    log, lock = tmp_path / "command.log", tmp_path / ".trial.lock"
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(lock), COMMAND, str(log)], start_new_session=True)
    pid = _pid(log)
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
    wait_for(lambda: _gone(pid), timeout=30, what="the command's exit")
    time.sleep(0.3)
    assert log.read_text().splitlines()[1:] == ["sigterm 15", "saved"]


def test_a_killed_tether_takes_the_command_with_it(tmp_path):
    log, lock = tmp_path / "command.log", tmp_path / ".trial.lock"
    tether = subprocess.Popen([sys.executable, "-m", "detect.tune.tether", str(os.getpid()), str(lock), "--",
                               sys.executable, "-c", COMMAND, str(log)])
    pid = _pid(log)
    tether.kill()
    tether.wait()
    wait_for(lambda: _gone(pid), timeout=30, what="the command's death")
    assert log.read_text().splitlines()[1:] == []  # SIGKILL: no chance to note anything


def test_one_sigterm_to_the_tether_is_one_to_the_command_and_its_status_comes_back(tmp_path):
    log, lock = tmp_path / "command.log", tmp_path / ".trial.lock"
    tether = subprocess.Popen([sys.executable, "-m", "detect.tune.tether", str(os.getpid()), str(lock), "--",
                               sys.executable, "-c", COMMAND, str(log)])
    _pid(log)
    tether.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    tether.send_signal(signal.SIGTERM)  # a second one is not passed on: the command still saves
    assert tether.wait(30) == 0
    assert log.read_text().splitlines()[1:] == ["sigterm 15", "saved"]
