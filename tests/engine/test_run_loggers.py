"""The run-logger interface (detect.engine.run_loggers): the fan-out switches a failing logger off after one
warning, an epoch's row comes before its evaluation at the same step, and a real run tells a logger everything
in order: start, rows, evaluations, plots, checkpoints, status."""

import csv
from pathlib import Path

import pytest
import torch

from detect.engine import setup as engine_setup
from detect.engine.monitor import ResultsCsv, make_loggers
from detect.engine.run_loggers import FINISHED, RunInfo, RunLogger, RunLoggers, evaluation_metrics
from detect.evaluation.coco import ClassAP
from detect.evaluation.evaluator import EvalResult
from detect.runtime import dist
from detect.train import run
from tests.support.log_lines import log_lines
from tests.support.training import tiny_options


class Recorder(RunLogger):
    """Every call, as (method, arguments)."""

    name = "recorder"

    def __init__(self):
        self.calls = []

    def start(self, info):
        self.calls.append(("start", info))

    def log_epoch(self, step, row):
        self.calls.append(("log_epoch", step, dict(row)))

    def log_evaluation(self, step, metrics, per_class):
        self.calls.append(("log_evaluation", step, metrics, per_class))

    def log_plot(self, path):
        self.calls.append(("log_plot", path))

    def log_checkpoints(self, best, last):
        self.calls.append(("log_checkpoints", best, last))

    def finish(self, status, note=""):
        self.calls.append(("finish", status, note))

    def of(self, method):
        return [c[1:] for c in self.calls if c[0] == method]


class BrokenAtEpoch(RunLogger):
    """Fails in its second log_epoch; counts what reaches it."""

    name = "broken"

    def __init__(self):
        self.epochs = 0
        self.after = 0  # calls that reached it once it had failed

    def log_epoch(self, step, row):
        self.epochs += 1
        if self.epochs == 2:
            raise ConnectionError("tracking server went away")

    def log_plot(self, path):
        self.after += self.epochs >= 2

    def finish(self, status, note=""):
        self.finished = (status, note)  # still told how the run ended, and why it stopped logging


def _eval_result():
    stats = [0.25, 0.5, 0.125, 0.0, 0.1, 0.3, 0.2, 0.35, 0.4, 0.0, 0.15, 0.45]
    return EvalResult(stats=stats, map=0.25, map50=0.5, timings={}, num_images=4,
                      per_class=[ClassAP("circle", 3, 4, 0.75, 0.375), ClassAP("square", 2, 2, 0.25, 0.125)])


def test_a_failing_logger_warns_once_and_the_others_get_every_call(tmp_path):
    recorder, broken = Recorder(), BrokenAtEpoch()
    loggers = RunLoggers([broken, recorder])
    with log_lines("detect.engine.run_loggers") as lines:
        for epoch in (1, 2, 3):
            loggers.on_epoch_end({"epoch": epoch, "box": 0.5 / epoch})
            loggers.log_plot(tmp_path / "results.png")
        loggers.finish(FINISHED)
    assert len(lines) == 1
    assert lines[0].startswith("broken logger failed in log_epoch (ConnectionError: tracking server went away)")
    assert broken.epochs == 2 and broken.after == 0  # switched off: no report after its failure reached it
    assert broken.finished == (FINISHED, "broken logging stopped in log_epoch (ConnectionError: tracking server went "
                                         "away)")
    assert [(step, row["box"]) for step, row in recorder.of("log_epoch")] == [(1, 0.5), (2, 0.25), (3, 0.5 / 3)]
    assert recorder.of("log_plot") == [(tmp_path / "results.png",)] * 3 and recorder.of("finish") == [(FINISHED, "")]


def test_a_logger_that_fails_to_finish_is_asked_once():
    class FailsToFinish(RunLogger):
        name = "fragile"
        calls = 0

        def finish(self, status, note=""):
            self.calls += 1
            raise ConnectionError("no server")

    fragile = FailsToFinish()
    with log_lines("detect.engine.run_loggers") as lines:
        RunLoggers([fragile]).finish(FINISHED)
    assert fragile.calls == 1 and lines == ["fragile logger failed in finish (ConnectionError: no server)"]


def test_an_epoch_row_comes_first_then_its_evaluation_at_the_same_step():
    recorder = Recorder()
    loggers = RunLoggers([recorder])
    loggers.on_epoch_end({"epoch": 1})  # no evaluation this epoch
    loggers.on_evaluation(_eval_result())
    loggers.on_epoch_end({"epoch": 2, "map50": 0.5})
    assert [c[0] for c in recorder.calls] == ["log_epoch", "log_epoch", "log_evaluation"]
    step, metrics, per_class = recorder.of("log_evaluation")[0]
    assert step == 2
    assert metrics["map50"] == 0.5 and metrics["map"] == 0.25 and metrics["AP75"] == 0.125
    assert metrics["AR100"] == 0.4 and metrics["ARl"] == 0.45 and len(metrics) == 14  # no VOC metric
    assert per_class == {"circle": {"ap50": 0.75, "ap": 0.375}, "square": {"ap50": 0.25, "ap": 0.125}}
    assert evaluation_metrics(_eval_result())[0] == metrics


def test_end_reports_the_checkpoints_that_exist_then_the_status(tmp_path):
    recorder = Recorder()
    (tmp_path / "last.pt").write_bytes(b"x")
    RunLoggers([recorder]).end(tmp_path, "KILLED", "stopped (SIGTERM) in epoch 2 of 3")
    assert recorder.calls == [("log_checkpoints", None, tmp_path / "last.pt"),
                              ("finish", "KILLED", "stopped (SIGTERM) in epoch 2 of 3")]


def test_results_csv_and_tensorboard_are_loggers_of_the_interface(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    loggers = make_loggers(tiny_options(tmp_path, tensorboard=True), tmp_path).loggers
    assert [type(logger).__name__ for logger in loggers] == ["ResultsCsv", "TensorBoardLogger"]
    csv_logger = loggers[0]
    csv_logger.log_epoch(1, {"epoch": 1, "box": 0.125, "obj": 0.5, "cls": 0.25, "lr": 0.01, "time": 2.0})
    assert (tmp_path / "results.csv").read_text().splitlines()[1].startswith("1,0.125,0.5,0.25,0.01,")
    assert isinstance(csv_logger, ResultsCsv)


def test_a_run_reports_each_step_to_its_loggers_and_survives_one_that_fails(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    recorder, broken = Recorder(), BrokenAtEpoch()
    real = engine_setup.make_loggers
    monkeypatch.setattr(engine_setup, "make_loggers",
                        lambda opts, run_dir: RunLoggers([*real(opts, run_dir).loggers, broken, recorder]))
    ctx = dist.DistContext(0, 1, 0, torch.device("cpu"), None)
    with log_lines("detect.engine.run_loggers") as lines:
        state = run(tiny_options(tmp_path, epochs=2, max_batches=2), ctx)
    assert state.epoch == 2
    assert lines == ["broken logger failed in log_epoch (ConnectionError: tracking server went away); it is switched "
                     "off for the rest of the run, training goes on"]
    run_dir = Path(tmp_path / "runs" / "t")
    (info,) = recorder.of("start")
    assert info[0] == RunInfo(run_dir, info[0].options, info[0].hyp, 1, False)
    assert info[0].options["epochs"] == 2 and info[0].hyp["lr0"] == 0.02
    with open(run_dir / "results.csv") as f:
        rows = list(csv.DictReader(f))
    epochs = recorder.of("log_epoch")
    assert [step for step, _ in epochs] == [1, 2]
    for (step, row), written in zip(epochs, rows):  # the row results.csv wrote, number for number
        assert int(written["epoch"]) == step
        assert float(written["box"]) == pytest.approx(row["box"], rel=1e-5)
        assert float(written["map"]) == pytest.approx(row["map"], rel=1e-5, abs=1e-9)
    evaluations = recorder.of("log_evaluation")
    assert [step for step, *_ in evaluations] == [1, 2]
    assert [m["map50"] for _, m, _ in evaluations] == [row["map50"] for _, row in epochs]
    assert set(evaluations[-1][2]) <= {"circle", "square", "triangle", "cross"} and evaluations[-1][2]
    plots = {path.name for (path,) in recorder.of("log_plot")}
    assert {"labels.png", "results.png", "train_batch0.jpg", "PR_curve.png", "confusion_matrix.png"} <= plots
    assert all(path.parent == run_dir and path.is_file() for (path,) in recorder.of("log_plot"))
    assert recorder.of("log_checkpoints") == [(run_dir / "best.pt", run_dir / "last.pt")]
    assert recorder.calls[-1] == ("finish", FINISHED, "")
