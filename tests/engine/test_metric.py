"""train --metric: what best.pt follows (detect.engine.fitness.make_evaluator), logged beside COCO's."""

import csv

import pytest

from tests.support.training import TINY_DATA, train_tiny


def test_voc_metric_is_the_fitness_and_is_logged(tmp_path, monkeypatch, capsys):
    import re

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY_DATA.replace("path: gen", f"path: {tmp_path / 'gen'}"))
    (tmp_path / "hyp.yaml").write_text("")
    assert train_tiny("--epochs", "2", "--max-batches", "1", "--metric", "voc12") == 0
    out = capsys.readouterr().out
    logged = [float(v) for v in re.findall(r"VOC12 mAP@0\.5 ([0-9.]+)", out)]
    rows = list(csv.DictReader(open(tmp_path / "runs" / "r" / "results.csv")))
    assert len(logged) == 2 == len(rows)
    assert [float(r["fitness"]) for r in rows] == pytest.approx(logged, abs=1e-4)


def test_darknet_metric_is_the_fitness_and_detect_val_repeats_it_on_best_pt(tmp_path, monkeypatch, capsys):
    """train --metric darknet: each evaluation's Darknet map (its own reading and resize, on the model's device)
    is results.csv's fitness, and detect.val --metric darknet gives best.pt the same figure."""
    import json
    import re

    from detect.val import main as val_main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY_DATA.replace("path: gen", f"path: {tmp_path / 'gen'}"))
    (tmp_path / "hyp.yaml").write_text("")
    assert train_tiny("--epochs", "2", "--max-batches", "1", "--metric", "darknet") == 0
    logged = [float(v) for v in re.findall(r"Darknet mAP@0\.50 ([0-9.]+)", capsys.readouterr().out)]
    rows = list(csv.DictReader(open(tmp_path / "runs" / "r" / "results.csv")))
    assert len(logged) == 2 == len(rows)
    assert [float(r["fitness"]) for r in rows] == pytest.approx(logged, abs=1e-4)
    assert val_main(["--weights", "runs/r/best.pt", "--data", "tiny.yaml", "--metric", "darknet", "--device", "cpu",
                     "--project", "val", "--name", "v"]) == 0
    again = json.loads((tmp_path / "val" / "v" / "metrics.json").read_text())["darknet"]["map50"]
    assert again == pytest.approx(max(logged), abs=1e-4)
