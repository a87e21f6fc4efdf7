"""One rule for a box past the image's edge in every format: up to 10% of the image's side it is clipped to the
image; further out it is reported (`outside_image`) and dropped. A 100x50 image: 10 px across, 5 px down."""

import json
from pathlib import Path

import cv2
import numpy as np

from detect.data.formats.sources import open_source
from detect.data.formats.spec import spec_from_dict

W, H = 100, 50
CLIPPED = [[0, 0, 100, 25], [20, 30, 40, 50]]  # from x -5..105 (5% past both sides) and y 30..54.5 (9% past)


def write_image(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), np.full((H, W, 3), 100, np.uint8))


def check(source) -> None:
    (record,) = source.records
    np.testing.assert_allclose(record.boxes, CLIPPED, atol=1e-4)  # before: both dropped (tolerance 1%)
    assert source.report.counts["clipped"] == 2 and source.report.counts["outside_image"] == 1
    (entry,) = [e for e in source.report.entries if e[1] == "outside_image"]
    assert "more than 10% of the image's side beyond the 100x50 image (up to 10% is clipped)" in entry[2]


def test_yolo_boxes(tmp_path):
    write_image(tmp_path / "images" / "a.jpg")
    (tmp_path / "labels").mkdir()
    # x -5..105 (clipped); y 30..54.5 (clipped); x -15..35 (15% past: dropped)
    (tmp_path / "labels" / "a.txt").write_text("0 0.5 0.25 1.1 0.5\n0 0.3 0.845 0.2 0.49\n0 0.1 0.5 0.5 0.2\n")
    spec = spec_from_dict({"format": "yolo", "path": str(tmp_path), "train": "images", "val": "images",
                           "names": ["x"]}, "edges.yaml")
    check(open_source(spec, "val", tmp_path / "cache"))


def test_coco_boxes(tmp_path):
    write_image(tmp_path / "images" / "a.jpg")
    anns = [[-5, 0, 110, 25], [20, 30, 20, 24.5], [-15, 20, 50, 10]]
    (tmp_path / "val.json").write_text(json.dumps({
        "images": [{"id": 1, "file_name": "a.jpg", "width": W, "height": H}],
        "annotations": [{"id": i + 1, "image_id": 1, "category_id": 1, "bbox": b, "area": b[2] * b[3], "iscrowd": 0}
                        for i, b in enumerate(anns)],
        "categories": [{"id": 1, "name": "x"}]}))
    spec = spec_from_dict({"format": "coco", "path": str(tmp_path), "train": "images", "val": "images",
                           "train_annotations": "val.json", "val_annotations": "val.json"}, "edges.yaml")
    source = open_source(spec, "val", tmp_path / "cache")
    check(source)
    truth = source.coco_ground_truth().dataset["annotations"]
    assert [a["bbox"] for a in truth] == [[0.0, 0.0, 100.0, 25.0], [20.0, 30.0, 20.0, 20.0]]  # scored clipped


def test_voc_boxes(tmp_path):
    write_image(tmp_path / "images" / "a.jpg")
    (tmp_path / "annotations").mkdir()
    boxes = [(-4, 1, 105, 25), (21, 31, 40, 54.5), (-14, 21, 35, 30)]  # 1-based inclusive: corners minus 1
    objects = "".join(f"<object><name>x</name><bndbox><xmin>{a}</xmin><ymin>{b}</ymin><xmax>{c}</xmax>"
                      f"<ymax>{d}</ymax></bndbox></object>" for a, b, c, d in boxes)
    (tmp_path / "annotations" / "a.xml").write_text(f"<annotation><size><width>{W}</width><height>{H}</height>"
                                                    f"</size>{objects}</annotation>")
    (tmp_path / "all.txt").write_text("a\n")
    spec = spec_from_dict({"format": "voc", "path": str(tmp_path), "train": "all.txt", "val": "all.txt"},
                          "edges.yaml")
    check(open_source(spec, "val", tmp_path / "cache"))
