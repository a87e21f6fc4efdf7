"""MLflow behind the run-logger interface, against a real tracking store (a SQLite backend store and artifact
folders in a temporary folder, one per module): everything a run logs read back through MlflowClient, the
statuses a run ends with, --resume continuing the same MLflow run, a store that fails mid-run, and one MLflow run
from two torchrun processes."""

import csv
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from detect import train as train_module
from detect.engine.mlflow_logger import MlflowLogger, class_metric_keys, flatten, git_commit, metric_key
from detect.engine.monitor import make_loggers
from detect.engine.options import DEFAULT_CFG, parse_options
from detect.engine.run_loggers import RunInfo
from detect.engine.setup import build_trainer
from detect.engine.trainer import Trainer
from detect.runtime import dist
from detect.train import run
from tests.conftest import ROOT
from tests.support.log_lines import log_lines
from tests.support.mlflow_store import MlflowStore
from tests.support.training import StopAtStep, tiny_options


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return MlflowStore.create(tmp_path_factory.mktemp("mlflow"))


@pytest.fixture
def tracked(store, monkeypatch):
    """The store as MLFLOW_TRACKING_URI: enough to turn MLflow on, as for a user."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.uri)
    return store


def _ctx():
    return dist.DistContext(0, 1, 0, torch.device("cpu"), None)


def _results(run_dir):
    with open(run_dir / "results.csv") as f:
        return list(csv.DictReader(f))


def _checkout_commit():
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def test_params_are_flattened_as_text_and_class_names_made_metric_safe(tmp_path):
    flat = flatten({"opts": {"epochs": 3, "cfg": None, "nested": {"a": [1, 2]}}, "hyp": {"lr0": 0.02}})
    assert flat == {"opts.epochs": "3", "opts.cfg": "None", "opts.nested.a": "[1, 2]", "hyp.lr0": "0.02"}
    assert len(flatten({"long": "x" * 900})["long"]) == 500
    assert metric_key("traffic light (red)+1") == "traffic light _red__1"
    # names MLflow would refuse (the whole batch of metrics with them): slashes, dots only, too long; and two
    # names that clean up alike keep apart
    names = ["a//b", "sign/", "/person", ".", "..", "x" * 300, "a(b", "a)b", "person"]
    keys = class_metric_keys(names)
    assert keys["a//b"] == "a__b" and keys["."] == "_" and keys["a(b"] == "a_b_6" and keys["a)b"] == "a_b_7"
    assert len(set(keys.values())) == len(names) and keys["person"] == "person"
    assert len(set(class_metric_keys(["a/b", "a_b", "a_b_1", "", " "]).values())) == 5
    validate = pytest.importorskip("mlflow.utils.validation")._validate_metric_name
    for key in keys.values():
        validate(f"class_AP50/{key}")
    assert git_commit(tmp_path) is None and git_commit(None) is None  # not a checkout: no tag, no failure


def test_a_run_logs_params_metrics_tags_artifacts_and_its_status(tmp_path, tracked):
    name = tracked.experiment("whole")
    run(tiny_options(tmp_path, epochs=2, max_batches=2, mlflow_experiment=name), _ctx())
    (logged,) = tracked.runs(name)
    run_id, run_dir = logged.info.run_id, tmp_path / "runs" / "t"
    assert logged.info.status == "FINISHED" and logged.info.run_name == "t"
    assert json.loads((run_dir / "mlflow.json").read_text()) == {"tracking_uri": tracked.uri, "run_id": run_id}
    params = logged.data.params
    assert params["opts.epochs"] == "2" and params["opts.batch_size"] == "4" and params["opts.nbs"] == "8"
    assert params["hyp.lr0"] == "0.02" and params["hyp.mosaic"] == "0.0" and params["opts.mlflow_experiment"] == name
    rows = _results(run_dir)
    for metric, column in (("train/box_loss", "box"), ("train/obj_loss", "obj"), ("train/lr", "lr"),
                           ("val/mAP50", "map50"), ("val/mAP50-95", "map"), ("val/fitness", "fitness")):
        history = tracked.history(run_id, metric)
        assert [step for step, _ in history] == [1, 2], metric
        assert [value for _, value in history] == pytest.approx([float(r[column]) for r in rows], rel=1e-5,
                                                                abs=1e-9), metric
    assert tracked.history(run_id, "coco/AP") == tracked.history(run_id, "val/mAP50-95")
    class_metrics = [k for k in logged.data.metrics if k.startswith("class_AP50/")]
    assert class_metrics and {k.split("/")[1] for k in class_metrics} <= {"circle", "square", "triangle", "cross"}
    assert [step for step, _ in tracked.history(run_id, class_metrics[0])] == [1, 2]
    tags = logged.data.tags
    assert tags["cfg"] == str(DEFAULT_CFG) and tags["data"] == str(tmp_path / "tiny.yaml")
    assert tags["world_size"] == "1" and tags["run_dir"] == str(run_dir) and tags["last_pt"] == str(run_dir / "last.pt")
    assert tags.get("mlflow.source.git.commit") == _checkout_commit()
    assert "note" not in tags
    artifacts = tracked.artifacts(run_id)
    assert {"best.pt", "results.png", "labels.png", "train_batch0.jpg", "PR_curve.png"} <= artifacts
    assert "last.pt" not in artifacts  # about 3x best.pt, and --resume reads it from the run folder
    copy = tracked.client.download_artifacts(run_id, "best.pt", str(tmp_path))
    assert open(copy, "rb").read() == (run_dir / "best.pt").read_bytes()


def test_a_stopped_run_is_killed_and_resume_continues_the_same_mlflow_run(tmp_path, tracked, monkeypatch):
    class StopInEpoch2(StopAtStep):
        stop_at = 2  # 2 steps an epoch: flagged at the end of epoch 1, the ranks stop inside epoch 2

    name = tracked.experiment("resume")
    monkeypatch.setattr(train_module, "build_trainer", lambda opts, ctx: build_trainer(opts, ctx, StopInEpoch2))
    opts = tiny_options(tmp_path, epochs=3, plots=False, mlflow=True, mlflow_experiment=name)
    assert run(opts, _ctx()).stop_requested
    (stopped,) = tracked.runs(name)
    run_id, last = stopped.info.run_id, tmp_path / "runs" / "t" / "last.pt"
    assert stopped.info.status == "KILLED"
    assert stopped.data.tags["note"].startswith("stopped (asked on another rank) in epoch 2 of 3, after 2 of its "
                                                f"batches: {last} holds the run")
    assert [step for step, _ in tracked.history(run_id, "train/box_loss")] == [1]

    monkeypatch.setattr(train_module, "build_trainer", build_trainer)
    run(replace(opts, resume=str(last)), _ctx())
    (resumed,) = tracked.runs(name)  # the same MLflow run, not a second one
    assert resumed.info.run_id == run_id and resumed.info.status == "FINISHED"
    assert "note" not in resumed.data.tags  # the stop's note went with the stop
    assert [step for step, _ in tracked.history(run_id, "train/box_loss")] == [1, 2, 3]
    assert [step for step, _ in tracked.history(run_id, "val/mAP50")] == [1, 2, 3]
    assert resumed.data.params["opts.resume"] == "None"  # params stay as the run began
    assert resumed.data.tags["resumed.opts.resume"] == str(last)


def test_resume_in_a_new_shell_continues_the_run_in_the_store_its_mlflow_json_records(tmp_path, tracked,
                                                                                      monkeypatch):
    """The first part logged with MLFLOW_TRACKING_URI set; `train.py --resume` in a new process without the variable,
    from another folder: the same MLflow run gets the later epochs and ends FINISHED (it used to go to a new run in
    ./mlflow.db, the first left KILLED)."""
    class StopInEpoch2(StopAtStep):
        stop_at = 2

    name = tracked.experiment("new-shell")
    monkeypatch.setattr(train_module, "build_trainer", lambda opts, ctx: build_trainer(opts, ctx, StopInEpoch2))
    opts = tiny_options(tmp_path, epochs=2, plots=False, mlflow_experiment=name)  # the variable alone turns it on
    assert run(opts, _ctx()).stop_requested
    (stopped,) = tracked.runs(name)
    assert stopped.info.status == "KILLED"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")} | {"OMP_NUM_THREADS": "1"}
    last = tmp_path / "runs" / "t" / "last.pt"
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--resume", str(last)], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (resumed,) = tracked.runs(name)
    assert resumed.info.run_id == stopped.info.run_id and resumed.info.status == "FINISHED"
    assert [step for step, _ in tracked.history(resumed.info.run_id, "train/box_loss")] == [1, 2]
    assert not (elsewhere / "mlflow.db").exists() and not (elsewhere / "mlruns").exists()


def test_a_given_store_other_than_the_recorded_one_is_used_and_said_in_one_line(tmp_path, monkeypatch):
    from detect.engine.mlflow_logger import RUN_FILE

    (tmp_path / RUN_FILE).write_text(json.dumps({"tracking_uri": "sqlite:////old/place.db", "run_id": "abc"}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///new.db")
    logger = MlflowLogger()
    with log_lines("detect.engine.mlflow_logger") as lines:
        assert logger._store(logger._recorded(tmp_path)) == "sqlite:///new.db"
    assert lines == ["MLflow: MLFLOW_TRACKING_URI sqlite:///new.db is used, not the store sqlite:////old/place.db "
                     "that this run's mlflow.json records (its run abc continues only if it is in sqlite:///new.db; "
                     "unset the variable to go on in the recorded store)"]
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert logger._store(logger._recorded(tmp_path)) == "sqlite:////old/place.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///sub/../x.db")
    (tmp_path / RUN_FILE).write_text(json.dumps({"tracking_uri": f"sqlite:///{tmp_path / 'x.db'}", "run_id": "a"}))
    with log_lines("detect.engine.mlflow_logger") as lines:
        logger._store(logger._recorded(tmp_path))
    assert lines == []  # the same file, written another way: nothing to say


def test_an_unreachable_tracking_server_is_one_warning_within_seconds_and_training_goes_on(tmp_path, monkeypatch):
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    start = time.monotonic()
    with log_lines("detect.engine.run_loggers") as lines:
        loggers = make_loggers(tiny_options(tmp_path), tmp_path)
        loggers.start(RunInfo(tmp_path, {}, {}, 1, resumed=False))
    seconds = time.monotonic() - start
    assert seconds < 30, seconds  # MLflow's client alone retried for about 4 minutes; designed for ~0 s (refused)
    assert [type(logger).__name__ for logger in loggers.loggers] == ["ResultsCsv"]
    (line,) = lines
    assert line.startswith(f"MLflow logger failed in start (ConnectionError: the MLflow tracking server {uri} did "
                           "not answer within 5 s (")
    assert line.endswith("); check MLFLOW_TRACKING_URI or start the server); it is switched off for the rest of the "
                         "run, training goes on")
    state = run(tiny_options(tmp_path, epochs=1, max_batches=1, plots=False), _ctx())
    assert state.epoch == 1


def test_a_failed_run_is_failed_with_its_error_line_and_keeps_its_best_pt(tmp_path, tracked, monkeypatch):
    class FailInEpoch2(Trainer):
        def train_epoch(self):
            if self.state.epoch == 1:
                raise RuntimeError("injected failure in epoch 2")
            return super().train_epoch()

    name = tracked.experiment("failed")
    monkeypatch.setattr(train_module, "build_trainer", lambda opts, ctx: build_trainer(opts, ctx, FailInEpoch2))
    with pytest.raises(RuntimeError, match="injected failure"):
        run(tiny_options(tmp_path, epochs=3, max_batches=2, plots=False, mlflow=True, mlflow_experiment=name),
            _ctx())
    (failed,) = tracked.runs(name)
    assert failed.info.status == "FAILED"
    assert failed.data.tags["note"] == "RuntimeError: injected failure in epoch 2"
    assert [step for step, _ in tracked.history(failed.info.run_id, "train/box_loss")] == [1]
    assert "best.pt" in tracked.artifacts(failed.info.run_id)  # epoch 1's


def test_a_store_that_fails_mid_run_warns_once_and_training_completes(tmp_path, tracked, monkeypatch):
    name = tracked.experiment("broken")
    original = MlflowLogger.log_epoch

    def flaky(self, step, row):
        if step == 2:
            raise ConnectionError("tracking server went away")
        original(self, step, row)

    monkeypatch.setattr(MlflowLogger, "log_epoch", flaky)
    with log_lines("detect.engine.run_loggers") as lines:
        state = run(tiny_options(tmp_path, epochs=2, max_batches=2, plots=False, mlflow=True, mlflow_experiment=name),
                    _ctx())
    assert state.epoch == 2 and [r["epoch"] for r in _results(tmp_path / "runs" / "t")] == ["1", "2"]
    assert lines == ["MLflow logger failed in log_epoch (ConnectionError: tracking server went away); it is switched "
                     "off for the rest of the run, training goes on"]
    (logged,) = tracked.runs(name)
    assert [step for step, _ in tracked.history(logged.info.run_id, "train/box_loss")] == [1]
    assert "best.pt" not in tracked.artifacts(logged.info.run_id)  # nothing after the failure reached it


def test_the_flag_without_the_package_is_one_clear_error_and_the_variable_alone_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr("detect.engine.options.mlflow_available", lambda: False)
    with pytest.raises(ValueError, match=r'--mlflow needs the mlflow-skinny package: pip install -e "\.\[mlflow\]"'):
        parse_options(["--mlflow", "--epochs", "1"])
    monkeypatch.setattr("detect.engine.mlflow_logger.mlflow_available", lambda: False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///elsewhere.db")
    with log_lines("detect.engine.monitor") as lines:
        loggers = make_loggers(tiny_options(tmp_path), tmp_path)
    assert [type(logger).__name__ for logger in loggers.loggers] == ["ResultsCsv"]
    assert lines == ['MLFLOW_TRACKING_URI is set (or the resumed run logged to MLflow) but mlflow is not installed: '
                     'this run is not logged to MLflow (pip install -e ".[mlflow]")']


@pytest.mark.slow
def test_two_torchrun_processes_make_one_mlflow_run(tmp_path, store):
    name = store.experiment("torchrun")
    o = tiny_options(tmp_path)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "train.py",
           "--data", o.data, "--hyp", o.hyp, "--img-size", "64", "--batch-size", "4", "--nbs", "8", "--epochs", "2",
           "--max-batches", "1", "--workers", "0", "--project", o.project, "--name", "dist", "--device", "cpu",
           "--cache-dir", o.cache_dir, "--no-plots", "--mlflow", "--mlflow-experiment", name]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": store.uri}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (logged,) = store.runs(name)  # rank 1 never talks to MLflow
    assert logged.info.status == "FINISHED" and logged.data.tags["world_size"] == "2"
    assert [step for step, _ in store.history(logged.info.run_id, "train/box_loss")] == [1, 2]
    assert "best.pt" in store.artifacts(logged.info.run_id)
