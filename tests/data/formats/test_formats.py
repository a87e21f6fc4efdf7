"""Both formats on ../shared/data/coco-tiny: the COCO json as given, and converted here to YOLO txt,
give the same records; and the two ground truths agree."""

import json
import os

import numpy as np

from detect.data.formats.sources import open_source
from detect.data.formats.spec import load_data_spec, spec_from_dict
from tests.conftest import ROOT, shared_path


def convert_to_yolo(images_dir, ann_file, out_root):
    """COCO json -> images/val (symlinks) + labels/val/*.txt with contiguous class ids; returns the names."""
    data = json.loads(ann_file.read_text())
    cats = sorted(data["categories"], key=lambda c: c["id"])
    index = {c["id"]: i for i, c in enumerate(cats)}
    (out_root / "images" / "val").mkdir(parents=True)
    (out_root / "labels" / "val").mkdir(parents=True)
    lines = {im["id"]: [] for im in data["images"]}
    sizes = {im["id"]: (im["width"], im["height"]) for im in data["images"]}
    for a in data["annotations"]:
        if a.get("iscrowd"):
            continue
        w, h = sizes[a["image_id"]]
        x, y, bw, bh = a["bbox"]
        lines[a["image_id"]].append(f"{index[a['category_id']]} {(x + bw / 2) / w:.10f} {(y + bh / 2) / h:.10f} "
                                    f"{bw / w:.10f} {bh / h:.10f}")
    for im in data["images"]:
        os.symlink(images_dir / im["file_name"], out_root / "images" / "val" / im["file_name"])
        stem = im["file_name"].rsplit(".", 1)[0]
        (out_root / "labels" / "val" / f"{stem}.txt").write_text("\n".join(lines[im["id"]]) + "\n")
    return [c["name"] for c in cats]


def test_coco_json_and_yolo_txt_give_the_same_boxes(tmp_path):
    root = shared_path("data", "coco-tiny")
    coco_spec = load_data_spec(ROOT / "data" / "coco-tiny.yaml", {"path": str(root)})
    coco = open_source(coco_spec, "val", tmp_path / "cache")
    names = convert_to_yolo(root / "val2017", root / "annotations" / "instances_val2017.json", tmp_path / "yolo")
    yolo_spec = spec_from_dict({"format": "yolo", "path": str(tmp_path / "yolo"), "train": "images/val",
                                "val": "images/val", "names": names}, "coco-tiny-yolo.yaml")
    yolo = open_source(yolo_spec, "val", tmp_path / "cache")
    assert coco.names == yolo.names and len(coco.names) == 80
    assert len(coco.records) == len(yolo.records) == 80
    by_id = {r.image_id: r for r in yolo.records}  # numeric file stems are the COCO image ids
    total = 0
    for rec in coco.records:
        other = by_id[rec.image_id]
        assert (rec.width, rec.height) == (other.width, other.height)
        assert rec.classes.tolist() == other.classes.tolist()
        np.testing.assert_allclose(rec.boxes, other.boxes, atol=1e-3)
        total += len(rec.classes)
    assert total > 700
    gt_coco, gt_yolo = coco.coco_ground_truth(), yolo.coco_ground_truth()
    assert sorted(gt_coco.getImgIds()) == sorted(gt_yolo.getImgIds())
    non_crowd = [a for a in gt_coco.dataset["annotations"] if not a["iscrowd"]]
    assert len(non_crowd) == len(gt_yolo.dataset["annotations"]) == total
    assert coco.category_ids[:3] == [1, 2, 3] and coco.category_ids[-1] == 90


def test_yolo_label_lines_with_a_confidence_column_are_boxes():
    from detect.data.formats.yolo_labels import parse_label_text

    confident = []
    classes, boxes = parse_label_text("0 0.5 0.5 0.2 0.4\n3 0.25 0.75 0.1 0.1 0.87\n\n1 0.1 0.1 0.05 0.05 0.3\n",
                                      confident)
    assert classes.tolist() == [0, 3, 1] and confident == [2, 4]
    assert boxes.tolist() == [[0.5, 0.5, 0.2, 0.4], [0.25, 0.75, 0.1, 0.1], [0.1, 0.1, 0.05, 0.05]]
    import pytest

    with pytest.raises(ValueError, match=r"line 1: 8 values; want 5 \(class cx cy w h\), 6 \(and a confidence"):
        parse_label_text("0 0.5 0.5 0.2 0.4 0.9 0.1 0.2")


def test_yolo_label_lines_of_tracks_are_boxes_and_a_triangle_stays_a_polygon():
    from detect.data.formats.yolo_labels import parse_label_text

    # detect.predict --track --save-conf: class cx cy w h confidence track-id (a bare whole number), also id 1
    extra = []
    classes, boxes = parse_label_text("2 0.5 0.5 0.2 0.4 0.91 1\n0 0.3 0.7 0.1 0.2 0.45 12\n", extra)
    assert classes.tolist() == [2, 0] and extra == [1, 2]
    assert boxes.tolist() == [[0.5, 0.5, 0.2, 0.4], [0.3, 0.7, 0.1, 0.2]]
    assert parse_label_text("0 0.5 0.5 0.2 0.2 0.91 1\n")[1].tolist() == [[0.5, 0.5, 0.2, 0.2]]  # a file of one
    # --track alone: class cx cy w h track-id
    classes, boxes = parse_label_text("1 0.5 0.5 0.2 0.4 7\n")
    assert boxes.tolist() == [[0.5, 0.5, 0.2, 0.4]]
    # a triangle (class x1 y1 x2 y2 x3 y3) is its bounding box
    classes, boxes = parse_label_text("0 0.2 0.1 0.6 0.3 0.4 0.9\n")
    assert np.allclose(boxes, [[0.4, 0.5, 0.4, 0.8]])


def test_a_label_file_with_a_bom_reads_and_an_unreadable_one_is_reported_not_a_crash(tmp_path):
    from detect.data.formats.yolo_labels import read_boxes
    from detect.data.records.images import ImageProbe
    from detect.data.records.records import BadInputReport

    probe, report = ImageProbe(100, 50, ()), BadInputReport()
    label = tmp_path / "a.txt"
    label.write_text("\ufeff0 0.5 0.5 0.2 0.4\n", encoding="utf-8")
    boxes, classes = read_boxes(label, probe, 2, report)
    assert boxes.tolist() == [[40, 15, 60, 35]] and classes.tolist() == [0]
    folder = tmp_path / "b.txt"
    folder.mkdir()  # reading it raises IsADirectoryError, as an unreadable file raises PermissionError
    assert read_boxes(folder, probe, 2, report) is None
    assert report.counts["label_syntax"] == 1
