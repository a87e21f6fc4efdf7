"""Plots and TensorBoard in real runs: a tiny training run's folder, `detect.val --plots`, the event file."""

import math

import pytest
import torch

from detect.engine.options import parse_options
from detect.runtime import dist
from detect.runtime.tensorboard import SCALAR_TAGS, TensorBoardLog
from detect.train import run
from tests.support.training import tiny_options
from tests.support.val_data import val_args, write_coco_dataset, write_tiny_checkpoint


def _scalars(folder) -> dict:
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    events = accumulator.EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_log_writes_the_epoch_scalars(tmp_path):
    pytest.importorskip("tensorboard")
    board = TensorBoardLog(tmp_path)
    board.log_epoch({"epoch": 1, "box": 0.5, "obj": 0.25, "cls": 0.125, "lr": 0.01, "img_s": 40.0, "map": None})
    board.log_epoch({"epoch": 2, "box": 0.4, "obj": 0.2, "cls": 0.1, "lr": 0.005, "img_s": 50.0, "map50": 0.5,
                     "map": 0.25, "time": math.nan})
    board.close()
    scalars = _scalars(tmp_path)
    assert set(scalars) == set(SCALAR_TAGS.values())
    assert scalars["train/box_loss"] == [(1, 0.5), (2, pytest.approx(0.4))]
    assert scalars["val/mAP50-95"] == [(2, 0.25)]  # epoch 1 had no evaluation
    assert scalars["speed/images_per_s"] == [(1, 40.0), (2, 50.0)]


def test_tensorboard_flag_without_the_package_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("detect.engine.options.tensorboard_available", lambda: False)
    with pytest.raises(ValueError, match="--tensorboard needs the tensorboard package"):
        parse_options(["--tensorboard", "--epochs", "1"])


@pytest.mark.slow
def test_training_run_folder_gets_every_plot_and_the_event_file(tmp_path):
    pytest.importorskip("tensorboard")
    ctx = dist.DistContext(0, 1, 0, torch.device("cpu"), None)
    run(tiny_options(tmp_path, epochs=2, tensorboard=True), ctx)
    run_dir = tmp_path / "runs" / "t"
    names = {p.name for p in run_dir.iterdir()}
    assert {"results.png", "labels.png", "train_batch0.jpg", "train_batch1.jpg", "train_batch2.jpg",
            "PR_curve.png", "F1_curve.png", "confusion_matrix.png", "val_batch0_pred.jpg",
            "val_batch0_labels.jpg"} <= names
    assert not [n for n in names if n.endswith(".tmp")]
    scalars = _scalars(run_dir)
    assert set(SCALAR_TAGS.values()) <= set(scalars)
    assert [step for step, _ in scalars["val/mAP50"]] == [1, 2]
    assert all(value > 0 for _, value in scalars["speed/images_per_s"])


def test_val_prints_pycocotools_lines_then_the_table_and_writes_plots(tmp_path, capsys):
    from detect.val import main

    spec = write_coco_dataset(tmp_path / "data")
    weights = write_tiny_checkpoint(tmp_path)
    assert main(val_args(spec, weights, tmp_path, "--name", "p", "--plots", "--conf", "0.0001")) == 0
    out = capsys.readouterr().out.splitlines()
    lines = out[next(i for i, line in enumerate(out) if line.startswith(" Average Precision")):]  # after the log
    assert lines[0].startswith(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = ")
    assert lines[11].startswith(" Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = ")
    assert lines[12] == "COCOeval engine: ultrafast-pycocotools"  # which engine computed the 12 lines
    assert lines[13].split() == ["class", "images", "instances", "AP50", "AP"]
    run_dir = tmp_path / "runs" / "p"
    for name in ("PR_curve.png", "F1_curve.png", "confusion_matrix.png", "val_batch0_pred.jpg",
                 "val_batch0_labels.jpg", "metrics.json"):
        assert (run_dir / name).stat().st_size > 1000, name


def test_a_plot_that_fails_is_a_warning_and_mosaics_only_for_the_first_batches(tmp_path):
    from detect.engine.monitor import RunMonitor
    from tests.support.log_lines import log_lines

    monitor = RunMonitor(tmp_path, ["a"], epochs=1, plots=True)
    images, targets = torch.zeros((1, 3, 32, 32), dtype=torch.uint8), torch.tensor([[0, 0, 0.5, 0.5, 0.2, 0.2]])
    for epoch, index in ((0, 0), (0, 3), (1, 0)):
        monitor.on_batch(epoch, index, images, targets, ["x.jpg"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train_batch0.jpg"]
    with log_lines("detect.engine.monitor") as lines:
        monitor.on_epoch_end({"epoch": 1, "best": True})  # no results.csv to draw from
    assert len(lines) == 1 and lines[0].startswith("could not write results.png: FileNotFoundError")
