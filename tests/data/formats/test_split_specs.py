"""A spec with only a val split is evaluated by detect.val; training on it says that `train` is missing. A COCO
json with more classes than the spec names says that `classes:` selects them."""

import json

import pytest

from detect.data.formats.sources import open_source
from detect.data.formats.spec import load_data_spec, spec_from_dict
from tests.support.val_data import NAMES, write_tiny_checkpoint
from tests.support.yolo_trees import write_images


def test_detect_val_evaluates_a_yolo_spec_with_only_val(tmp_path):
    from detect.val import main as val_main

    write_images(tmp_path / "ds" / "images" / "val", tmp_path / "ds" / "labels" / "val")
    spec = tmp_path / "ds" / "val-only.yaml"
    spec.write_text(f"path: .\nval: images/val\nnames: {NAMES}\n")  # before: missing key(s) train
    weights = write_tiny_checkpoint(tmp_path)
    assert val_main(["--data", str(spec), "--weights", str(weights), "--img-size", "64", "--device", "cpu",
                     "--workers", "0", "--project", str(tmp_path / "runs"), "--name", "v", "--cache-dir",
                     str(tmp_path / "cache")]) == 0
    metrics = json.loads((tmp_path / "runs" / "v" / "metrics.json").read_text())
    assert metrics["num_images"] == 3 and sum(c["instances"] for c in metrics["per_class"]) == 6
    with pytest.raises(ValueError, match=r"val-only.yaml: no `train` split \(format yolo\): training needs the "
                                         r"images to train on; add `train:` to .*val-only.yaml \(detect.val "
                                         r"evaluates a spec with only `val:` as it is\)"):
        open_source(load_data_spec(spec), "train", tmp_path / "cache")


def test_coco_and_voc_specs_with_only_val(tmp_path):
    coco = spec_from_dict({"format": "coco", "path": str(tmp_path), "val": "images", "val_annotations": "v.json"},
                          "coco-val.yaml")
    assert coco.has_split("val") and not coco.has_split("train")
    with pytest.raises(ValueError, match="format coco takes `train` and `train_annotations` together"):
        spec_from_dict({"format": "coco", "path": str(tmp_path), "val": "images", "val_annotations": "v.json",
                        "train_annotations": "t.json"}, "coco-half.yaml")
    voc = spec_from_dict({"format": "voc", "path": str(tmp_path), "val": "val.txt"}, "voc-val.yaml")
    assert voc.has_split("val") and not voc.has_split("train")
    with pytest.raises(ValueError, match=r"voc-val.yaml: no `train` split \(format voc\)"):
        voc.images("train")
    with pytest.raises(ValueError, match=r"y.yaml: missing key\(s\) train, val for format yolo: give `val`"):
        spec_from_dict({"format": "yolo", "path": str(tmp_path), "names": ["a"]}, "y.yaml")


def test_a_coco_json_with_more_classes_than_names_says_classes_selects_them(tmp_path):
    (tmp_path / "images").mkdir()
    cats = [{"id": i + 1, "name": n} for i, n in enumerate(["person", "bicycle", "car", "dog"])]
    (tmp_path / "val.json").write_text(json.dumps({"images": [{"id": 1, "file_name": "a.jpg", "width": 8,
                                                               "height": 8}], "annotations": [],
                                                   "categories": cats}))
    spec = spec_from_dict({"format": "coco", "path": str(tmp_path), "val": "images", "val_annotations": "val.json",
                           "names": ["person", "car"]}, "two.yaml")
    with pytest.raises(ValueError) as error:
        open_source(spec, "val", tmp_path / "cache")
    assert str(error.value).endswith(
        "has 4 classes (category ids 1, 2, 3, 4) but the spec lists 2 names. `names` must name all 4 classes in "
        "category id order, or be left out (the json names them); to use 2 of its 4 classes, list them as "
        "`classes:` in the spec (e.g. `classes: [person, bicycle]`; detect.data.formats.class_selection)")
