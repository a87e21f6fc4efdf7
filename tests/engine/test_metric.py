"""train --metric: what best.pt follows (detect.engine.setup.make_evaluator), logged beside COCO's."""

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
