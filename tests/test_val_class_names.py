"""detect.val compares the model's class names with the dataset's: the official weights (COCO's 80 assumed) on a
YOLO copy of coco-tiny val whose classes are listed alphabetically (Label Studio's classes.txt) score as on the
copy in COCO's order; a subset of the classes is mapped; a class the model lacks is refused in one line."""

import json

import pytest

from detect.val import main
from tests.support.coco_to_yolo import write_yolo_copy
from tests.support.log_lines import log_lines
from tests.support.val_data import val_args, write_coco_dataset, write_tiny_checkpoint

IMAGES = 24  # a subset of coco-tiny val, at a small size: the figures only have to be compared


@pytest.fixture(autouse=True)
def _label_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))


def _official_args(shared, spec, tmp_path, name):
    return ["--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")), "--weights",
            str(shared("weights", "yolov3-tiny.weights")), "--data", str(spec), "--img", "320", "--device", "cpu",
            "--workers", "0", "--project", str(tmp_path / "runs"), "--name", name]


def _copy(shared, tmp_path, order, keep=None):
    root = shared("data", "coco-tiny")
    return write_yolo_copy(root / "val2017", root / "annotations" / "instances_val2017.json",
                           tmp_path / f"yolo-{order}-{len(keep or ())}", order, IMAGES, keep)


def _metrics(tmp_path, name):
    return json.loads((tmp_path / "runs" / name / "metrics.json").read_text())


def test_alphabetical_classes_score_as_cocos_order(shared, tmp_path):
    coco, alphabetical = _copy(shared, tmp_path, "coco"), _copy(shared, tmp_path, "alphabetical")
    assert main(_official_args(shared, coco, tmp_path, "coco")) == 0
    with log_lines("detect.evaluation.class_order") as lines:
        assert main(_official_args(shared, alphabetical, tmp_path, "alphabetical")) == 0
    assert any("the model's classes are" in line and "in another order" in line for line in lines)
    a, b = _metrics(tmp_path, "coco"), _metrics(tmp_path, "alphabetical")
    assert a["map50"] > 0.2  # non-trivial: before the mapping the alphabetical copy scored about 0
    assert b["map50"] == pytest.approx(a["map50"], abs=1e-9) and b["map"] == pytest.approx(a["map"], abs=1e-9)
    assert sorted((c["name"], c["ap"]) for c in a["per_class"]) == \
        sorted((c["name"], c["ap"]) for c in b["per_class"])


def test_a_subset_of_the_classes_is_mapped_and_the_rest_dropped(shared, tmp_path):
    keep = {"person", "tv", "dog", "airplane"}
    spec = _copy(shared, tmp_path, "alphabetical", keep)
    with log_lines("detect.evaluation.class_order") as lines:
        assert main(_official_args(shared, spec, tmp_path, "subset")) == 0
    assert any("has 4 of the model's 80 classes (airplane, dog, person, tv)" in line and
               "the other 76 classes dropped" in line for line in lines)
    metrics = _metrics(tmp_path, "subset")
    assert [c["name"] for c in metrics["per_class"]] == ["person", "tv"]  # the classes these images have
    assert metrics["map50"] > 0.2


def test_a_dataset_class_the_model_lacks_is_refused_in_one_line(tmp_path, capsys):
    spec = write_coco_dataset(tmp_path / "data")  # classes red, green, blue
    weights = write_tiny_checkpoint(tmp_path, names=["green", "Red", "yellow"])
    assert main(val_args(spec, weights, tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{spec}'s class 2 'blue' is not a class of --weights {weights} (green, Red, yellow)" in err
    assert "`classes:`" in err


def test_a_nameless_model_is_matched_by_index_and_more_classes_point_to_classes(tmp_path, capsys):
    spec = write_coco_dataset(tmp_path / "data")
    weights = write_tiny_checkpoint(tmp_path, names=["0", "1"])  # class ids: no names to match
    assert main(val_args(spec, weights, tmp_path)) == 2
    err = capsys.readouterr().err
    assert "predicts 2 classes but" in err and "has 3" in err
    assert f"list 2 of its classes under `classes:` in {spec}" in err
    assert main(val_args(spec, write_tiny_checkpoint(tmp_path, names=["0", "1", "2"]), tmp_path)) == 0


def test_metric_darknet_maps_the_classes_too(shared, tmp_path):
    coco, alphabetical = _copy(shared, tmp_path, "coco"), _copy(shared, tmp_path, "alphabetical")
    for spec, name in ((coco, "dc"), (alphabetical, "da")):
        assert main([*_official_args(shared, spec, tmp_path, name), "--metric", "darknet"]) == 0
    a, b = (_metrics(tmp_path, name)["darknet"] for name in ("dc", "da"))
    assert a["map50"] > 0.2 and b["map50"] == pytest.approx(a["map50"], abs=1e-9)
    assert {n: c["ap"] for n, c in a["per_class"].items() if c["ap"]} == \
        {n: c["ap"] for n, c in b["per_class"].items() if c["ap"]}
