"""`--folds K`: folds dealt by path, written as COCO jsons that give back the split's own labels, and the whole
loop (train.py per fold, each fold audited by the model that did not see it)."""

import csv

import numpy as np
import pytest

from detect.audit.folds import assign_folds, check_fold_train_args, write_fold_specs
from detect.data.loader import open_split
from tests.support.training import QUIET_HYP, TINY_DATA


def test_folds_are_balanced_and_the_same_on_every_run():
    paths = [f"/data/img{i}.jpg" for i in range(103)]
    fold = assign_folds(paths, 4)
    assert sorted(np.bincount(fold).tolist()) == [25, 26, 26, 26]
    assert (assign_folds(list(reversed(paths)), 4)[::-1] == fold).all()  # by path, not by position
    with pytest.raises(ValueError, match="at least 4 images"):
        assign_folds(paths[:3], 4)


def test_train_flags_the_folds_set_themselves_are_refused():
    check_fold_train_args(("--epochs", "3", "--weights", "w.pt"))
    for given in (("--data", "x"), ("--project=x",), ("--name", "x"), ("--proj", "x"), ("--exist-ok",)):
        with pytest.raises(ValueError, match="each fold's train.py run sets"):  # --proj: train.py reads --project
            check_fold_train_args(given)
    with pytest.raises(ValueError, match="not valid"):
        check_fold_train_args(("--epochs", "many"))


def test_fold_specs_hold_the_splits_own_labels(tmp_path):
    from tests.support.val_data import write_coco_dataset

    spec = write_coco_dataset(tmp_path / "d", sizes=((48, 64), (64, 40), (64, 64), (40, 40)))
    source = open_split(str(spec), "val", tmp_path / "cache")
    fold = assign_folds([r.path for r in source.records], 2)
    specs = write_fold_specs(source, fold, tmp_path / "folds")
    for k, fold_spec in enumerate(specs):
        held_out = open_split(str(fold_spec), "val", tmp_path / "cache")
        trained = open_split(str(fold_spec), "train", tmp_path / "cache")
        assert sorted(r.image_id for r in held_out.records) == np.flatnonzero(fold == k).tolist()
        assert len(trained.records) + len(held_out.records) == len(source.records)
        assert held_out.names == source.names
        for record in held_out.records:  # image ids are the positions in the split
            original = source.records[record.image_id]
            assert record.path == original.path or record.path.endswith(original.path.split("/")[-1])
            np.testing.assert_allclose(record.boxes, original.boxes, atol=1e-3)
            assert record.classes.tolist() == original.classes.tolist()


@pytest.mark.slow
def test_folds_train_one_model_per_fold_and_audit_every_image(tmp_path, monkeypatch, capsys):
    from detect.audit.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY_DATA)
    (tmp_path / "hyp.yaml").write_text(QUIET_HYP)
    code = main(["--data", "tiny.yaml", "--split", "train", "--folds", "2", "--img", "64", "--device", "cpu",
                 "--workers", "0", "--project", "runs", "--name", "f", "--cache-dir", "cache", "--min-score", "0",
                 "--", "--hyp", "hyp.yaml", "--img-size", "64", "--batch-size", "4", "--nbs", "8", "--epochs", "1",
                 "--workers", "0", "--device", "cpu", "--cache-dir", "cache", "--no-plots"])
    assert code == 0
    run = tmp_path / "runs" / "f"
    assert (run / "folds" / "fold0" / "best.pt").is_file() and (run / "folds" / "fold1" / "best.pt").is_file()
    rows = list(csv.DictReader((run / "issues.csv").open()))
    assert rows  # a one-epoch model disagrees with much
    assert "--folds K audits" not in capsys.readouterr().out  # no note: every image was audited by a fold model
