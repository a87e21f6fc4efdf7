"""What a trial's value is when the pruner speaks: a trial the pruner would stop at its last epoch has run its
whole course, so it completes with its best fitness (docs/tuning.md: the trial's value is the run's best fitness)
instead of being marked pruned with Optuna's value for that, the last fitness. The run is a stand-in that reports
rows as detect.tune.trial_run.run_training does, so this takes no training."""

import pytest

from detect.tune import worker
from detect.tune.options import TuneOptions
from detect.tune.space import parse_space
from detect.tune.trial_run import RunResult

optuna = pytest.importorskip("optuna")


def _options(tmp_path, epochs):
    return TuneOptions(study="p", study_dir=tmp_path, storage="sqlite://", space_file=tmp_path / "space.yaml",
                       space=parse_space({"lr0": {"low": 0.005, "high": 0.05}}), trials=1, epochs=epochs, seed=0,
                       startup_trials=1, pruner="threshold", prune_startup=0, prune_after=0, prune_below=0.3,
                       workers_per_node=1, nproc_per_trial=1, heartbeat_s=10, max_failures=1)


def _trial(tmp_path, monkeypatch, fitness):
    """One trial whose run reports `fitness` epoch by epoch, asking after each report whether to stop."""
    def fake_run(command, run_dir, report, should_stop, env=None):
        result = RunResult(returncode=0)  # train.py exits 0, also on the SIGTERM of a stop
        for epoch, value in enumerate(fitness, start=1):
            result.rows.append((epoch, value))
            report(epoch, value)
            if should_stop():
                result.stopped = True
                break
        return result

    monkeypatch.setattr(worker, "run_training", fake_run)
    opts = _options(tmp_path, len(fitness))
    study = optuna.create_study(direction="maximize", pruner=worker.make_pruner(opts))
    study.optimize(lambda t: worker.objective(t, opts, worker.Attempt()), n_trials=1)
    return study.trials[0]


def test_a_trial_below_the_threshold_at_its_last_epoch_completes_with_its_best_fitness(tmp_path, monkeypatch):
    trial = _trial(tmp_path, monkeypatch, [0.5, 0.45, 0.2])  # below 0.3 at epoch 3 of 3
    assert trial.state == optuna.trial.TrialState.COMPLETE  # was PRUNED with value 0.2
    assert trial.value == 0.5 and trial.user_attrs["epochs"] == 3


def test_a_trial_below_the_threshold_before_its_end_is_pruned_there(tmp_path, monkeypatch):
    trial = _trial(tmp_path, monkeypatch, [0.5, 0.2, 0.6])
    assert trial.state == optuna.trial.TrialState.PRUNED and trial.user_attrs["epochs"] == 2
    assert trial.user_attrs["note"] == "pruned after epoch 2 (fitness 0.2)"
