"""Interrupted trials in the storage: a worker gone on this machine is seen at once, one on another machine once
its heartbeat is older than the grace period; both trials are failed and queued again with their parameters, while
the trials of live workers, here or elsewhere, are left alone. And the counting that shares --trials."""

import subprocess
import sys
import time

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from detect.tune.storage import (
    WORKER_ATTR,
    fail_interrupted_trials,
    open_storage,
    open_study,
    worker_gone,
    worker_identity,
)
from detect.tune.worker import is_surplus, next_move


def _dead_identity() -> dict:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    identity = worker_identity(proc.pid)
    proc.kill()
    proc.wait()
    return identity


def test_worker_identity_tells_gone_from_alive_and_leaves_other_machines_to_the_heartbeat():
    assert not worker_gone(worker_identity())
    assert worker_gone(_dead_identity())
    assert not worker_gone({**_dead_identity(), "host": "elsewhere"})  # not ours to judge
    # another container on this host (its own PID namespace): its pids are not ours to look up
    assert not worker_gone({**_dead_identity(), "pidns": "pid:[1]"})
    reused = {**worker_identity(), "start": "1"}  # this pid, but a process that started at another tick
    assert worker_gone(reused)
    assert not worker_gone(None)


def _running(study, storage, worker: dict) -> int:
    """A running trial of `worker` that has stamped its heartbeat once."""
    trial = study.ask({"x": FloatDistribution(0, 1)})
    trial.set_user_attr(WORKER_ATTR, worker)
    storage.record_heartbeat(trial._trial_id)
    return trial.number


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_gone_workers_trials_are_failed_and_queued_again_live_ones_are_not(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat_s=1, grace_s=2)
    study = open_study(storage, "s")
    elsewhere = {**worker_identity(), "host": "other-machine"}
    dead_here = _running(study, storage, _dead_identity())
    alive_here = _running(study, storage, worker_identity())
    stale_elsewhere = _running(study, storage, elsewhere)
    fresh_elsewhere = _running(study, storage, elsewhere)
    assert fail_interrupted_trials(study, storage) == [dead_here]  # at once: no grace period to wait for
    time.sleep(3.2)  # SQLite's clock has whole seconds: past the 2 s grace period for the stale one
    for number in (alive_here, fresh_elsewhere):  # the live workers' heartbeats
        storage.record_heartbeat(study.get_trials()[number]._trial_id)
    assert fail_interrupted_trials(study, storage) == [stale_elsewhere]
    states = {t.number: t.state for t in study.get_trials()}
    assert states[dead_here] == states[stale_elsewhere] == TrialState.FAIL
    assert states[alive_here] == states[fresh_elsewhere] == TrialState.RUNNING  # live workers keep their trials
    trials = study.get_trials()
    retries = [t for t in trials if t.state == TrialState.WAITING]
    assert [(t.system_attrs["failed_trial"], t.params) for t in retries] == [
        (dead_here, trials[dead_here].params), (stale_elsewhere, trials[stale_elsewhere].params)]
    assert all(WORKER_ATTR not in t.user_attrs for t in retries)  # taken by a live worker, it names that one


def _study_with(states):
    study = optuna.create_study(direction="maximize")
    for state in states:
        study.add_trial(create_trial(state=state, value=0.5 if state == TrialState.COMPLETE else None,
                                     params={"x": 0.5}, distributions={"x": FloatDistribution(0, 1)},
                                     intermediate_values={1: 0.1} if state == TrialState.PRUNED else None))
    return study


def test_finished_trials_count_failed_ones_do_not_and_running_ones_hold_a_place():
    C, P, R, F, W = TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.FAIL, TrialState.WAITING
    assert next_move(_study_with([C, P, F]), 3) == "run"  # a failed trial leaves its place to another
    assert next_move(_study_with([C, R, F, W]), 3) == "run"  # the queued retry is taken
    assert next_move(_study_with([C, R, R]), 3) == "wait"  # someone else's trials: wait, they may turn stale
    assert next_move(_study_with([C, P, C, R]), 3) == "done"
    assert next_move(_study_with([C, P, F]), 2) == "done"
    study = _study_with([C, R, R, R])  # two workers asked at once for the last place: the later number gives way
    assert not is_surplus(study, 2, 3) and is_surplus(study, 3, 3)


def test_a_new_trials_folder_with_an_earlier_searchs_run_is_set_aside(tmp_path):
    from detect.tune.worker import set_aside_earlier_run

    run_dir = tmp_path / "trial_000"
    assert set_aside_earlier_run(run_dir) is None  # nothing there
    run_dir.mkdir()
    (run_dir / "results.csv").write_text("epoch,fitness\n1,0.91\n")
    aside = set_aside_earlier_run(run_dir)
    assert not run_dir.exists() and (aside / "results.csv").read_text().endswith("1,0.91\n")
    assert aside.name.startswith("trial_000.earlier-")
