"""The audit benchmark's injected errors and its figures (benchmarks.audit_inject)."""

from types import SimpleNamespace

import cv2
import numpy as np

from benchmarks.audit_inject import (
    Injected,
    average_precision,
    box_figures,
    image_ap,
    inject,
    seen_share,
    write_yolo_split,
)
from detect.data.loader import open_split
from detect.ops.boxes_np import box_iou
from tests.support.audit_scenes import scene


def _records(num_images=60):
    boxes, classes = scene(num_images, seed=2)
    return [SimpleNamespace(boxes=b, classes=c, difficult=np.zeros(len(c), bool), width=640, height=480,
                            path=f"/x/{i}.jpg") for i, (b, c) in enumerate(zip(boxes, classes))]


def test_each_kind_is_its_share_of_the_boxes_and_reproducible():
    records = _records()
    corrupted = inject(records, 3, 0.05, seed=7)
    kinds = [e.kind for e in corrupted.errors]
    assert {k: kinds.count(k) for k in set(kinds)} == {"missing": 9, "box": 9, "class": 9, "spurious": 9}
    again = inject(records, 3, 0.05, seed=7)
    assert [e.box for e in again.errors] == [e.box for e in corrupted.errors]
    assert sum(len(c) for c in corrupted.classes) == 180 - 9 + 9
    for e in corrupted.errors:
        original = records[e.image].boxes
        if e.kind == "box":  # moved 35-60% of its size: it overlaps its old place, but less than 0.5
            assert 0.05 < box_iou(np.array([e.box]), original).max() < 0.5
        if e.kind == "class":
            j = int(np.abs(original - np.array(e.box)).max(1).argmin())
            assert records[e.image].classes[j] != e.cls
        if e.kind == "spurious":  # on an empty region: it touches no label but itself
            boxes = corrupted.boxes[e.image]
            others = boxes[np.abs(boxes - np.array(e.box)).max(1) > 0]
            assert box_iou(np.array([e.box]), others).max(initial=0) == 0


def test_one_class_gets_no_relabelling():
    records = _records()
    for r in records:
        r.classes = np.zeros(len(r.classes), np.int64)
    assert "class" not in {e.kind for e in inject(records, 1, 0.05, seed=0).errors}


def test_ranked_figures_count_each_error_once_and_by_kind():
    errors = [Injected(0, "missing", (0, 0, 10, 10), 0), Injected(1, "box", (0, 0, 10, 10), 0)]
    issue = (lambda image, kind, box: SimpleNamespace(image=image, kind=kind, box=box))
    issues = [issue(0, "missing", (0, 0, 10, 11)), issue(0, "missing", (0, 0, 10, 10)),  # the second is a repeat
              issue(1, "class", (0, 0, 10, 10)), issue(1, "box", (0, 0, 10, 10))]
    figures = box_figures(issues, errors)
    assert figures["box_ap"] == (1 / 1 + 2 / 4) / 2
    assert figures["recall_at_n"] == 0.5
    assert average_precision(np.array([True, False, True]), 4) == (1 + 2 / 3) / 4
    assert image_ap(np.array([0.9, 0.5, 0.1]), errors, 3) == 1.0
    assert image_ap(np.array([0.9, 0.1, 0.5]), errors, 3) == (1 + 2 / 3) / 2


def test_the_corrupted_split_reads_back_as_written(tmp_path):
    records = _records(6)
    for i, r in enumerate(records):
        r.path = str(tmp_path / f"src{i}.jpg")
        cv2.imwrite(r.path, np.full((480, 640, 3), 100, np.uint8))
    corrupted = inject(records, 3, 0.1, seed=1)
    spec = write_yolo_split(records, corrupted, ["a", "b", "c"], tmp_path / "copy")
    source = open_split(str(spec), "train", tmp_path / "cache")
    for record, boxes, classes in zip(source.records, corrupted.boxes, corrupted.classes):
        np.testing.assert_allclose(record.boxes, boxes, atol=0.05)
        assert record.classes.tolist() == classes.tolist()


def test_the_ceiling_counts_the_errors_the_detections_give_away():
    records = _records(20)
    corrupted = inject(records, 3, 0.1, seed=3)
    for e in corrupted.errors:  # each error knows the object as it is
        if e.kind == "spurious":
            assert e.truth is None
        else:
            box, cls = e.truth
            j = int(np.abs(records[e.image].boxes - np.array(box)).max(1).argmin())
            assert np.allclose(records[e.image].boxes[j], box) and records[e.image].classes[j] == cls
    # a model that sees every true object at 0.9 and nothing else gives every error away; below 0.95, none but
    # the invented boxes (nothing is seen on them either way)
    detections = [np.concatenate([r.boxes, np.full((len(r.classes), 1), 0.9), r.classes[:, None]], 1)
                  for r in records]
    assert seen_share(corrupted.errors, detections, 0.01) == {k: 1.0 for k in ("missing", "box", "class",
                                                                                "spurious", "all")}
    shares = seen_share(corrupted.errors, detections, 0.95)
    assert shares["missing"] == shares["box"] == shares["class"] == 0.0 and shares["spurious"] == 1.0
    assert shares["all"] == 0.25


def test_resized_box_errors_keep_the_centre_and_change_the_extent():
    records = _records()
    corrupted = inject(records, 3, 0.05, seed=7, resized=True)
    resized = [e for e in corrupted.errors if e.kind == "box"]
    assert len(resized) == 9
    for e in resized:
        box, truth = np.array(e.box), np.array(e.truth[0])
        ratio = (box[2:] - box[:2]) / (truth[2:] - truth[:2])
        inside = (box > 0).all() and box[2] < records[e.image].width and box[3] < records[e.image].height
        if inside:  # not cut by the image's edge: the same centre, each side 0.55-0.7 or 1.45-1.8 times
            np.testing.assert_allclose((box[:2] + box[2:]) / 2, (truth[:2] + truth[2:]) / 2)
            assert np.allclose(ratio, ratio[0]) and (0.55 <= ratio[0] <= 0.7 or 1.45 <= ratio[0] <= 1.8)
        assert box_iou(box[None], truth[None])[0, 0] < 0.5
