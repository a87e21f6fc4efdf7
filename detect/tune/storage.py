"""The study's storage: an Optuna RDBStorage (SQLite by default, any SQLAlchemy URL) with heartbeats, and the
checks that fail the trials of workers that are gone, so that their trials are retried.

A running trial is stamped by its worker (Optuna's heartbeat thread) every `heartbeat_s` seconds, on the
database's clock; a trial unstamped for the grace period (3 heartbeats) is failed by whichever worker looks next,
and `RetryFailedTrialCallback` queues a copy with the same parameters (WAITING), which the next `ask` takes. A
live worker keeps stamping, so another worker never fails its trial. On this machine a worker gone is also seen at
once: a trial records its worker's host, boot and process (with the process's start time, so a reused pid does
not pass for it), and a start-up finds a dead one without waiting for the grace period.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
import socket
import time
import warnings
from pathlib import Path

from detect.tune.options import shown_url

log = logging.getLogger(__name__)

WORKER_ATTR = "worker"  # trial user attribute: the worker process running it


def _optuna():
    try:
        import optuna
    except ImportError:
        raise ValueError("python -m detect.tune needs Optuna: pip install -e \".[tune]\" (or pip install "
                         "optuna)") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the tune logs each trial itself
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def open_storage(url: str, heartbeat_s: int, grace_s: int):
    """An RDBStorage with heartbeats and retries of interrupted trials; a SQLite file's folder is made."""
    optuna = _optuna()
    kwargs = {}
    if url.startswith("sqlite:///"):
        from sqlalchemy.engine import make_url

        Path(make_url(url).database).parent.mkdir(parents=True, exist_ok=True)  # the path, unescaped
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}  # workers wait for each other's writes
    # a stale trial is queued again (up to 3 times); Optuna 4.9 renamed the callback, 5.0 RDBStorage's argument
    queue_again = (getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
                   or optuna.storages.RetryFailedTrialCallback)(max_retry=3)

    def retry(study, trial):  # the copy must not name the gone worker: it would look gone again once taken
        trial = copy.deepcopy(trial)
        trial.user_attrs.pop(WORKER_ATTR, None)
        queue_again(study, trial)

    name = ("heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback"
            in inspect.signature(optuna.storages.RDBStorage).parameters else "failed_trial_callback")
    for attempt in range(3):  # workers starting together may race to create the tables
        try:
            return optuna.storages.RDBStorage(url, heartbeat_interval=heartbeat_s, grace_period=grace_s,
                                              **{name: retry}, **kwargs)
        except Exception as e:  # noqa: BLE001 (SQLAlchemy's errors differ by database)
            if attempt == 2 or "already exists" not in str(e) and "locked" not in str(e):
                raise ValueError(f"--storage {shown_url(url)}: cannot open it ({type(e).__name__}: "
                                 f"{str(e).replace(url, shown_url(url))})") from None
            time.sleep(1 + attempt)


def open_study(storage, name: str, sampler=None, pruner=None):
    """The study `name` in `storage` (created by the first worker; the others load it)."""
    optuna = _optuna()
    return optuna.create_study(storage=storage, study_name=name, direction="maximize", sampler=sampler,
                               pruner=pruner, load_if_exists=True)


def retry_callback(storage):
    """The callback that queues a retry of a failed trial (the one the storage was opened with)."""
    get = getattr(storage, "get_heartbeat_stale_trial_callback", None) or storage.get_failed_trial_callback
    return get()


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), None where /proc does not tell."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _pid_namespace(pid: int) -> str:
    """The PID namespace of a process (Linux): containers on one host, sharing its name and boot, number their
    processes each in their own."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def worker_identity(pid: int | None = None) -> dict:
    pid = os.getpid() if pid is None else pid
    return {"host": socket.gethostname(), "boot": _boot_id(), "pidns": _pid_namespace(pid), "pid": pid,
            "start": _start_time(pid)}


def worker_gone(identity: dict) -> bool:
    """True only when the worker ran here (same host, boot and PID namespace) and its process is no longer there."""
    here = worker_identity()
    if not isinstance(identity, dict) or any(identity.get(k) != here[k] for k in ("host", "boot")):
        return False  # another machine: its heartbeat decides
    if identity.get("pidns", here["pidns"]) != here["pidns"]:  # (a record made before pidns was kept: this one)
        return False  # another container on this host: the same
    pid, started = identity.get("pid"), identity.get("start")
    if started is not None and here["start"] is not None:  # /proc: the same pid started at the same tick
        return _start_time(pid) != started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, TypeError):
        return False
    return False


def fail_interrupted_trials(study, storage) -> list[int]:
    """Fail (and queue a retry of) every running trial whose worker is gone: on this machine at once, elsewhere
    once its heartbeat is older than the grace period. The numbers of the trials failed here."""
    optuna = _optuna()
    TrialState = optuna.trial.TrialState
    retry, failed = retry_callback(storage), []
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for trial in running:
        if not worker_gone(trial.user_attrs.get(WORKER_ATTR)):
            continue
        try:  # _trial_id: FrozenTrial's storage key, which storage methods take
            if not storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:  # its worker, or another one, got there first
            continue
        failed.append(trial.number)
        if retry is not None:
            retry(study, storage.get_trial(trial._trial_id))
    optuna.storages.fail_stale_trials(study)  # other machines' workers: by heartbeat (it queues their retries)
    retried = {t.system_attrs["retry_history"][-1] for t in study.get_trials(deepcopy=False)
               if t.system_attrs.get("retry_history")}
    failed += sorted(({t.number for t in running} & retried) - set(failed))
    for number in failed:
        log.warning("trial %d was interrupted (its worker is gone): failed, and queued again with the same "
                    "hyperparameters", number)
    return failed
