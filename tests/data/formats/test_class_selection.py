"""`classes:` in a data spec and --single-cls (detect.data.formats.class_selection) on the real coco-tiny json, and the
optional `test` split of every format."""

import json

import numpy as np
import pytest

from detect.data.formats.class_selection import ClassSelection, class_map, parse_classes
from detect.data.formats.sources import open_source
from detect.data.formats.spec import load_data_spec, spec_from_dict
from tests.conftest import ROOT, shared_path


def coco_tiny_spec(**extra):
    root = shared_path("data", "coco-tiny")
    return load_data_spec(ROOT / "data" / "coco-tiny.yaml", {"path": str(root), **extra})


def test_a_class_subset_keeps_those_boxes_renumbered_and_counts_the_rest_as_chosen(tmp_path):
    whole = open_source(coco_tiny_spec(), "val", tmp_path / "cache")
    subset = open_source(coco_tiny_spec(classes=["car", "person"]), "val", tmp_path / "cache")
    assert subset.names == ["car", "person"] and subset.category_ids == [3, 1]
    assert len(subset.records) == len(whole.records) == 80  # images without a chosen class stay as background
    old = np.concatenate([r.classes for r in whole.records])
    car, person = whole.names.index("car"), whole.names.index("person")
    new = np.concatenate([r.classes for r in subset.records])
    assert (new == 0).sum() == (old == car).sum() > 0 and (new == 1).sum() == (old == person).sum() > 0
    for a, b in zip(whole.records, subset.records):  # the same boxes, in order, of the chosen classes
        chosen = np.isin(a.classes, [car, person])
        np.testing.assert_array_equal(b.boxes, a.boxes[chosen])
    dropped = len(old) - len(new)
    assert subset.report.counts["class_not_chosen"] == dropped > 500
    assert "info: " in subset.report.summary("x", 80, len(new)) and f"{dropped} class_not_chosen" in \
        subset.report.summary("x", 80, len(new))
    assert "class_not_chosen" not in whole.report.counts  # the cached labels are untouched
    # evaluation sees the json's own annotations (ids, areas, crowd) of the chosen categories only
    gt_whole, gt_subset = whole.coco_ground_truth(), subset.coco_ground_truth()
    expected = {a["id"]: a for a in gt_whole.dataset["annotations"] if a["category_id"] in (1, 3)}
    got = {a["id"]: a for a in gt_subset.dataset["annotations"]}
    assert got.keys() == expected.keys() and any(a["iscrowd"] for a in got.values())
    assert all(got[i]["area"] == expected[i]["area"] and got[i]["category_id"] == expected[i]["category_id"]
               for i in got)
    assert sorted(c["id"] for c in gt_subset.dataset["categories"]) == [1, 3]


def test_single_cls_makes_every_class_one(tmp_path):
    whole = open_source(coco_tiny_spec(), "val", tmp_path / "cache")
    one = open_source(coco_tiny_spec().with_single_cls(), "val", tmp_path / "cache")
    assert one.names == ["object"] and one.category_ids == [0] and one.num_classes == 1
    assert sum(len(r.classes) for r in one.records) == sum(len(r.classes) for r in whole.records)
    assert all((r.classes == 0).all() for r in one.records)
    assert "class_not_chosen" not in one.report.counts
    gt = one.coco_ground_truth().dataset
    assert len(gt["annotations"]) == len(whole.coco_ground_truth().dataset["annotations"])
    assert {a["category_id"] for a in gt["annotations"]} == {0}
    dogs = open_source(coco_tiny_spec(classes=["dog"]).with_single_cls(), "val", tmp_path / "cache")
    assert dogs.names == ["dog"]  # one chosen class keeps its name


def test_classes_by_index_and_the_errors_that_name_the_entry():
    names, ids = ["cat", "dog", "bird"], [5, 7, 9]
    m = class_map(names, ids, ClassSelection((2, "cat")), "d.yaml")
    assert m.index.tolist() == [1, -1, 0] and m.names == ("bird", "cat") and m.category_ids == [9, 5]
    assert m.category_map == {9: 9, 5: 5}
    with pytest.raises(ValueError, match=r"d.yaml: `classes` entry 'cow' is not a class .* cat, dog, bird"):
        class_map(names, ids, ClassSelection(("cow",)), "d.yaml")
    with pytest.raises(ValueError, match=r"entry 3 is not a class index of this dataset \(0..2\)"):
        class_map(names, ids, ClassSelection((3,)), "d.yaml")
    with pytest.raises(ValueError, match="lists dog more than once"):
        class_map(names, ids, ClassSelection(("dog", 1)), "d.yaml")
    with pytest.raises(ValueError, match="`classes` must be a list of class names or indices"):
        parse_classes([], "d.yaml")
    with pytest.raises(ValueError, match="`classes` must be a list"):
        spec_from_dict({"format": "synthetic", "classes": {"a": 1}}, "d.yaml")
    assert parse_classes("dog", "d.yaml") == ("dog",)


def _yolo_folder(root, name, rows):
    (root / name / "images").mkdir(parents=True)
    (root / name / "labels").mkdir(parents=True)
    import cv2

    for i, row in enumerate(rows):
        cv2.imwrite(str(root / name / "images" / f"{name}{i}.jpg"), np.full((32, 48, 3), 100, np.uint8))
        (root / name / "labels" / f"{name}{i}.txt").write_text(row + "\n")


def test_a_test_split_in_yolo_and_coco_specs(tmp_path):
    _yolo_folder(tmp_path, "tr", ["0 0.5 0.5 0.2 0.2"] * 3)
    _yolo_folder(tmp_path, "te", ["1 0.5 0.5 0.4 0.4", "0 0.3 0.3 0.2 0.2"])
    spec = spec_from_dict({"format": "yolo", "path": str(tmp_path), "train": "tr/images", "val": "tr/images",
                           "test": "te/images", "names": ["a", "b"]}, "y.yaml")
    test = open_source(spec, "test", tmp_path / "cache")
    assert [r.classes.tolist() for r in test.records] == [[1], [0]] and spec.has_split("test")
    no_test = spec_from_dict({"format": "yolo", "path": str(tmp_path), "train": "tr/images", "val": "tr/images",
                              "names": ["a", "b"]}, "y.yaml")
    assert not no_test.has_split("test")
    with pytest.raises(ValueError, match=r"y.yaml: key 'test' is missing .*optional split"):
        open_source(no_test, "test", tmp_path / "cache")
    root = shared_path("data", "coco-tiny")
    coco = coco_tiny_spec(test="val2017", test_annotations="annotations/instances_val2017.json")
    assert len(open_source(coco, "test", tmp_path / "cache").records) == 80
    with pytest.raises(ValueError, match="takes `test` and `test_annotations` together"):
        load_data_spec(ROOT / "data" / "coco-tiny.yaml", {"path": str(root), "test": "val2017"})
    assert json.loads((root / "annotations" / "instances_val2017.json").read_text())["images"]


def test_a_voc_test_split_is_kept_out_of_a_val_fraction_pool(tmp_path):
    import cv2

    (tmp_path / "images").mkdir()
    (tmp_path / "annots").mkdir()
    for i in range(30):
        cv2.imwrite(str(tmp_path / "images" / f"im{i:02d}.jpg"), np.full((40, 40, 3), 90, np.uint8))
        (tmp_path / "annots" / f"im{i:02d}.xml").write_text(
            f"<annotation><filename>im{i:02d}.jpg</filename><size><width>40</width><height>40</height>"
            f"<depth>3</depth></size><object><name>{'ab'[i % 2]}</name><bndbox><xmin>5</xmin><ymin>5</ymin>"
            f"<xmax>20</xmax><ymax>25</ymax></bndbox></object></annotation>")
    (tmp_path / "test.txt").write_text("".join(f"im{i:02d}\n" for i in range(0, 30, 5)))
    spec = spec_from_dict({"format": "voc", "path": str(tmp_path), "val_fraction": 0.3, "test": "test.txt"}, "v.yaml")
    splits = {s: {r.path.rsplit("/", 1)[1] for r in open_source(spec, s, tmp_path / "cache").records}
              for s in ("train", "val", "test")}
    assert splits["test"] == {f"im{i:02d}.jpg" for i in range(0, 30, 5)}
    assert not splits["test"] & (splits["train"] | splits["val"]) and len(splits["train"] | splits["val"]) == 24
    without = spec_from_dict({"format": "voc", "path": str(tmp_path), "val_fraction": 0.3}, "v.yaml")
    with pytest.raises(ValueError, match="key 'test' is missing"):
        open_source(without, "test", tmp_path / "cache")


def test_a_synthetic_spec_generates_a_test_split_when_asked(tmp_path):
    from detect.data.loader import open_split

    spec = spec_from_dict({"format": "synthetic", "seed": 2, "train_images": 3, "val_images": 2,
                           "test_images": 4, "path": str(tmp_path / "gen")}, "s.yaml")
    assert spec.has_split("test")
    test = open_split(spec, "test", tmp_path / "cache")
    val = open_split(spec, "val", tmp_path / "cache")
    assert len(test.records) == 4 and len(val.records) == 2
    assert {r.path for r in test.records}.isdisjoint(r.path for r in val.records)
    plain = spec_from_dict({"format": "synthetic", "train_images": 3, "val_images": 2}, "s.yaml")
    assert not plain.has_split("test")
