"""`python -m detect.audit` end to end: its files on a real COCO subset, and the inputs it refuses in one line."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from detect.audit.cli import TRAINED_ON_IT, main
from detect.audit.report import COLUMNS
from detect.audit.scoring import PRIOR
from tests.support.val_data import write_coco_dataset, write_tiny_checkpoint

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
WEIGHTS = SHARED / "weights" / "yolov3-tiny.weights"
needs_shared = pytest.mark.skipif(not WEIGHTS.is_file(), reason="needs ../shared (official weights, coco-tiny)")


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@needs_shared
def test_coco_tiny_audit_writes_ranked_issues_pictures_and_label_places(tmp_path, capsys):
    cfg = SHARED / "darknet-cfg" / "yolov3-tiny.cfg"
    args = ["--weights", str(WEIGHTS), "--cfg", str(cfg), "--data", "data/coco-tiny.yaml", "--img", "416",
            "--device", "cpu", "--workers", "0", "--project", str(tmp_path), "--name", "a", "--save-images", "2",
            "--top", "12", "--slice", "off"]
    assert main(args) == 0
    out = capsys.readouterr().out
    run = tmp_path / "a"
    rows = list(csv.DictReader((run / "issues.csv").open()))
    assert tuple(rows[0]) == COLUMNS
    listed = json.loads((run / "issues.json").read_text())
    assert len(listed) == len(rows) > 20
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores, reverse=True) and all(PRIOR <= s <= 1 for s in scores)
    assert {r["kind"] for r in rows} <= {"missing", "box", "class", "spurious"}
    from detect.data.loader import open_split

    source = open_split("data/coco-tiny.yaml", "val")
    by_name = {Path(r.path).name: r for r in source.records}
    for row in rows:
        record = by_name[row["image"]]  # the json's file_name
        box = np.array([float(row[k]) for k in ("x1", "y1", "x2", "y2")])
        if row["kind"] != "missing":  # the label's own box, of its own class
            assert np.abs(record.boxes - box).max(1).min() < 0.01
            assert row["label_file"].endswith("instances_val2017.json")
        if row["kind"] == "class":
            assert row["suggested_class"] and row["suggested_class"] != row["class"]
        if row["kind"] in ("missing", "box", "class"):
            assert len(row["suggested_box"].split()) == 4
    assert "evidence" in listed[0] and listed[0]["rank"] == 1
    assert (run / "issues_sheet.jpg").stat().st_size > 10_000
    assert len(list((run / "issues").glob("*.jpg"))) == 2
    assert "suspected label errors in 80 images" in out and TRAINED_ON_IT not in out


@needs_shared
def test_the_train_split_without_folds_says_what_it_hides(tmp_path, capsys):
    cfg = SHARED / "darknet-cfg" / "yolov3-tiny.cfg"
    assert main(["--weights", str(WEIGHTS), "--cfg", str(cfg), "--data", "data/coco-tiny.yaml", "--split", "train",
                 "--img", "320", "--device", "cpu", "--workers", "0", "--project", str(tmp_path), "--top", "0",
                 "--slice", "off", "--close-look", "off"]) == 0
    assert capsys.readouterr().out.count(TRAINED_ON_IT) == 1


def _audit_tiny(tmp_path, names=None, drop_labels=False, *extra) -> tuple[int, object, object]:
    """(exit code, spec, weights) of an audit of the tiny COCO set by the tiny random model."""
    spec = write_coco_dataset(tmp_path / "d")
    if drop_labels:
        data = json.loads((tmp_path / "d" / "val.json").read_text())
        (tmp_path / "d" / "val.json").write_text(json.dumps({**data, "annotations": []}))
    weights = write_tiny_checkpoint(tmp_path, **({"names": names} if names else {}))
    code = main(["--weights", str(weights), "--data", str(spec), "--img", "64", "--device", "cpu", "--workers", "0",
                 "--project", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"), *extra])
    return code, spec, weights


def test_a_split_without_labels_is_refused_in_one_line(tmp_path, capsys):
    code, spec, _ = _audit_tiny(tmp_path, drop_labels=True)
    line = _one_error_line(capsys)
    assert code == 2 and "no labelled box" in line and str(spec) in line


def test_weights_of_other_classes_are_refused_in_one_line(tmp_path, capsys):
    code, _, weights = _audit_tiny(tmp_path, names=["cat", "dog", "bird"])
    line = _one_error_line(capsys)
    assert code == 2 and "red" in line and str(weights) in line


def test_an_audit_of_a_random_model_still_writes_its_files(tmp_path):
    assert _audit_tiny(tmp_path, None, False, "--min-score", "0")[0] == 0
    rows = list(csv.DictReader((tmp_path / "runs" / "exp" / "issues.csv").open()))
    assert rows and {r["kind"] for r in rows} <= {"missing", "box", "class", "spurious"}
    assert all(r["label_file"].endswith("val.json") for r in rows)


def test_a_second_opinion_of_other_classes_is_read_into_the_missing_issues(tmp_path):
    (tmp_path / "second").mkdir()
    second = write_tiny_checkpoint(tmp_path / "second", names=["cat", "dog", "bird", "fish"])
    assert _audit_tiny(tmp_path, None, False, "--min-score", "0", "--second-opinion", str(second))[0] == 0
    listed = json.loads((tmp_path / "runs" / "exp" / "issues.json").read_text())
    missing = [issue for issue in listed if issue["kind"] == "missing"]
    assert missing and all(issue["evidence"]["appearance"] > 0 for issue in missing)


def test_folds_take_their_starting_weights_as_second_opinion_only_when_of_other_classes(tmp_path):
    from detect.audit.cli import parse_args, second_opinion, starting_weights
    from detect.audit.detections import ModelRun
    from detect.data.loader import open_split
    from detect.inference.options import InferenceOptions
    from detect.runtime import dist

    assert starting_weights(["--epochs", "3", "--weights=w.weights", "--cfg", "c.cfg"]) == ("w.weights", "c.cfg")
    assert starting_weights(["--weight", "w.pt"]) == ("w.pt", None)  # train.py's parser takes --weight as --weights
    spec = write_coco_dataset(tmp_path / "d")
    source = open_split(str(spec), "val", tmp_path / "cache")
    (tmp_path / "coco").mkdir()
    general = write_tiny_checkpoint(tmp_path / "coco", names=["cat", "dog", "bird", "fish"])
    own = write_tiny_checkpoint(tmp_path)  # the dataset's classes: maybe trained on these very labels
    run = ModelRun("", None, str(spec), "val", InferenceOptions(img_size=64), 0, tmp_path / "cache")
    ctx = dist.init_distributed("cpu")

    def opinion(*argv):
        return second_opinion(parse_args(["--data", str(spec), *argv]), source, run, ctx)

    found = opinion("--folds", "2", "--", "--weights", str(general), "--epochs", "1")
    assert sorted(found) == list(range(len(source.records)))
    assert opinion("--folds", "2", "--", "--weights", str(own)) is None
    assert opinion("--folds", "2", "--second-opinion", "none", "--", "--weights", str(general)) is None
    assert opinion("--folds", "2", "--", "--epochs", "1") is None
    # starting weights the fold runs' cfg cannot read: the audit goes on without a second opinion
    unreadable = tmp_path / "unreadable.weights"
    unreadable.write_bytes(b"\0" * 64)
    assert opinion("--folds", "2", "--", "--weights", str(unreadable), "--cfg", "yolov3-tiny.cfg") is None
    assert opinion("--weights", str(own)) is None  # without --folds, only when asked
    assert sorted(opinion("--weights", str(own), "--second-opinion", str(own))) == sorted(found)


@pytest.mark.parametrize("argv, words", [
    (["--data", "d.yaml"], "--weights is required"),
    (["--data", "d.yaml", "--weights", "w.pt", "--", "--epochs", "3"], "give --folds K"),
    (["--data", "d.yaml", "--folds", "1"], "at least 2"),
    (["--data", "d.yaml", "--folds", "2", "--", "--proj", "x"], "--project after `--`: each fold's train.py run"),
    (["--data", "d.yaml", "--folds", "2", "--", "--weights", "nope.pt"], "--weights nope.pt: no such file"),
    (["--data", "d.yaml", "--folds", "2", "--", "--epochs", "0"], "--epochs must be"),
    (["--data", "d.yaml", "--weights", "w.pt", "--min-score", "2"], "in [0, 1]"),
    (["--data", "d.yaml", "--weights", "w.pt", "--second-cfg", "c.cfg"], "give --second-opinion"),
    (["--data", "d.yaml", "--weights", "w.pt", "--second-opinion", "d.weights"], "--second-cfg is required: d.weights"),
    (["--data", "d.yaml", "--weights", "w.pt", "--slice", "big"], "invalid tile size"),
    (["--data", "d.yaml", "--weights", "w.pt", "--slice", "0"], "invalid tile size"),
    (["--data", "d.yaml", "--weights", "w.pt", "--close-look", "all"], "invalid choice: 'all'"),
])
def test_flag_mistakes_are_refused_by_the_parser(argv, words, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert words in capsys.readouterr().err


@pytest.mark.parametrize("given, slice_size", [([], None), (["--slice", "auto"], None), (["--slice", "off"], None),
                                               (["--slice", "320"], 320)])
def test_slice_is_auto_unless_turned_off_or_sized(given, slice_size):
    from detect.audit.cli import parse_args
    from detect.inference.cli_flags import inference_options

    args = parse_args(["--data", "d.yaml", "--weights", "w.pt", *given])
    assert args.slice == (given[1] if given and given[1] != "320" else ("auto" if not given else 320))
    assert inference_options(args).slice_size == slice_size


def test_small_boxes_get_a_closer_look_unless_turned_off():
    from detect.audit.cli import parse_args

    assert parse_args(["--data", "d.yaml", "--weights", "w.pt"]).close_look == "small"
    assert parse_args(["--data", "d.yaml", "--weights", "w.pt", "--close-look", "off"]).close_look == "off"
