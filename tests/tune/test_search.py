"""`python -m detect.tune` end to end on the tiny synthetic dataset, each trial a real train.py run (one batch an
epoch): a search and its report, a search killed mid-trial and resumed, two workers sharing one study, and a
trial pruned by SIGTERM."""

import csv
import os
import signal

import cv2
import pytest
import yaml

from detect.engine.config import load_hyp
from detect.engine.options import parse_options
from detect.tune.trial_run import read_fitness
from tests.support.tuning import load_trials, output, run_tune, start_tune, study_dir, tune_folder, wait_for

pytestmark = pytest.mark.slow


def _states(trials) -> list[str]:
    return [t.state.name for t in trials]


def test_a_search_writes_the_best_hyp_the_table_and_the_pictures(tmp_path):
    proc = run_tune(tune_folder(tmp_path), "s", "--trials", "2", "--epochs", "2", "--pruner", "none")
    assert proc.returncode == 0, output(proc)
    trials, folder = load_trials(tmp_path, "s"), study_dir(tmp_path, "s")
    assert _states(trials) == ["COMPLETE", "COMPLETE"]
    for t in trials:  # a trial's value is its run's best evaluated epoch
        rows, _ = read_fitness(folder / f"trial_{t.number:03d}" / "results.csv")
        assert [e for e, _ in rows] == sorted(t.intermediate_values) == [1, 2]
        assert t.value == pytest.approx(max(f for _, f in rows), rel=1e-5)
        trial_hyp = yaml.safe_load((folder / f"trial_{t.number:03d}" / "trial_hyp.yaml").read_text())
        assert trial_hyp["lr0"] == t.params["lr0"] and trial_hyp["warmup_min_steps"] == 1  # hyp.yaml's, kept
    best = max(trials, key=lambda t: t.value)
    hyp_file = folder / "hyp.yaml"
    opts = parse_options(["--hyp", str(hyp_file), "--data", str(tmp_path / "tiny.yaml")])  # train.py takes it
    hyp = load_hyp(opts.hyp)
    assert (hyp.optim.lr0, hyp.optim.momentum, hyp.augment.mosaic) == (
        pytest.approx(best.params["lr0"]), pytest.approx(best.params["momentum"]), best.params["mosaic"])
    assert hyp.optim.warmup_min_steps == 1 and hyp.ema.tau == 5  # the base hyp's other keys
    with open(folder / "trials.csv") as f:
        table = list(csv.DictReader(f))
    assert [(r["number"], r["state"], r["epochs"]) for r in table] == [("0", "complete", "2"), ("1", "complete", "2")]
    assert [float(r["lr0"]) for r in table] == pytest.approx([t.params["lr0"] for t in trials])
    assert all(float(r["seconds"]) > 0 for r in table)
    assert f"best: trial {best.number}, fitness {best.value:.4g}" in proc.stdout
    for name, size in (("history.png", (675, 1800)), ("importance.png", (264, 1050))):
        image = cv2.imread(str(folder / name))
        assert image is not None and image.shape[:2] == size and image.std() > 10, name


def test_a_killed_search_resumes_retrying_the_interrupted_trial(tmp_path):
    flags = ("--trials", "2", "--epochs", "8", "--pruner", "none")  # the kill lands well before trial 1's end
    proc = start_tune(tune_folder(tmp_path), "r", *flags)
    interrupted = study_dir(tmp_path, "r") / "trial_001"
    wait_for(lambda: read_fitness(interrupted / "results.csv")[0], timeout=240, what="trial 1's first epoch")
    os.killpg(proc.pid, signal.SIGKILL)  # the tune and its worker, as a lost machine or `kill -9`
    proc.wait()
    again = run_tune(tmp_path, "r", *flags)
    assert again.returncode == 0, output(again)
    trials = load_trials(tmp_path, "r")
    assert _states(trials) == ["COMPLETE", "FAIL", "COMPLETE"]  # trial 0 counted, 1 failed and retried as 2
    assert "trial 1 was interrupted (its worker is gone)" in again.stdout
    retry = trials[2]
    assert retry.system_attrs["failed_trial"] == 1 and retry.params == trials[1].params
    assert retry.user_attrs["run_dir"] == str(interrupted) and sorted(retry.intermediate_values) == list(range(1, 9))
    log = (interrupted / "train.log").read_text()
    assert "stopped (SIGTERM)" in log  # the worker's death reached train.py, which saved last.pt ...
    assert f"--resume {interrupted / 'last.pt'}" in log  # ... and the retry went on from it
    assert read_fitness(interrupted / "results.csv")[0][-1][0] == 8


def test_two_workers_share_the_trials_of_one_study(tmp_path):
    proc = run_tune(tune_folder(tmp_path), "w", "--trials", "3", "--epochs", "2", "--pruner", "none",
                    "--workers-per-node", "2")
    assert proc.returncode == 0, output(proc)
    # two workers asking for the last place at the same moment: the later trial gives way without training
    surplus = [t for t in load_trials(tmp_path, "w") if t.user_attrs.get("note", "").startswith("not run")]
    assert all(t.state.name == "FAIL" for t in surplus) and len(surplus) <= 1
    trials = [t for t in load_trials(tmp_path, "w") if t.number not in {t.number for t in surplus}]
    assert len(trials) == 3 and _states(trials) == ["COMPLETE"] * 3
    assert len({t.user_attrs["worker"]["pid"] for t in trials}) == 2
    assert len({t.user_attrs["run_dir"] for t in trials}) == 3
    first, second = sorted(trials[:2], key=lambda t: t.datetime_start)
    assert second.datetime_start < first.datetime_complete  # the first two ran at the same time
    assert "[worker 0]" in proc.stdout and "[worker 1]" in proc.stdout
    assert (study_dir(tmp_path, "w") / "trials.csv").read_text().count("\n") == 4 + len(surplus)


def test_a_pruned_trial_is_stopped_by_sigterm_and_marked_pruned(tmp_path):
    # 20 epochs of a fraction of a second: the stop always lands mid-run
    proc = run_tune(tune_folder(tmp_path), "p", "--trials", "1", "--epochs", "20", "--pruner", "threshold",
                    "--prune-below", "0.9", "--prune-after", "1")
    assert proc.returncode == 0, output(proc)
    (trial,) = load_trials(tmp_path, "p")
    assert trial.state.name == "PRUNED" and list(trial.intermediate_values) == [1]
    run = study_dir(tmp_path, "p") / "trial_000"
    assert "stopped (SIGTERM)" in (run / "train.log").read_text() and (run / "last.pt").is_file()
    assert len(read_fitness(run / "results.csv")[0]) < 20
    assert trial.user_attrs["note"].startswith("pruned after epoch 1 (fitness ")
    assert "no complete trial yet: no hyp.yaml" in proc.stdout and not (study_dir(tmp_path, "p") / "hyp.yaml").exists()
    assert (study_dir(tmp_path, "p") / "history.png").is_file()

