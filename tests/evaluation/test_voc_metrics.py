"""VOC AP@0.5 (11-point and all-point) and Darknet's counts, on cases worked out by hand."""

import numpy as np
import pytest

from detect.evaluation.per_image import ImageTruth
from detect.evaluation.voc_metrics import (
    average_precision,
    format_darknet_summary,
    match_class,
    voc_evaluate,
)


def truth(boxes, classes, ignore=None):
    boxes = np.array(boxes, dtype=float).reshape(-1, 4)
    return ImageTruth(boxes, np.array(classes, dtype=np.int64),
                      np.array(ignore if ignore is not None else [False] * len(boxes), dtype=bool))


def row(image_id, box, score, category_id):
    x1, y1, x2, y2 = box
    return [image_id, x1, y1, x2 - x1, y2 - y1, score, category_id]


A, B, C = (0, 0, 10, 10), (20, 20, 30, 30), (40, 40, 50, 50)


def test_eleven_point_and_all_point_by_hand():
    """Two positives; detections TP (0.9), FP (0.8), TP (0.7): precision 1, 1/2, 2/3 at recall 1/2, 1/2, 1.
    All-point: 1/2 * 1 + 1/2 * 2/3 = 5/6. 11-point: recall 0..0.5 (6 points) at 1, 0.6..1 (5 points) at 2/3:
    (6 + 10/3) / 11 = 28/33."""
    truths = {1: truth([A, B], [7, 7])}
    rows = np.array([row(1, A, 0.9, 7), row(1, C, 0.8, 7), row(1, B, 0.7, 7)])
    assert voc_evaluate(rows, truths, ["cat"], [7], "voc12").map50 == pytest.approx(5 / 6, abs=1e-12)
    assert voc_evaluate(rows, truths, ["cat"], [7], "voc07").map50 == pytest.approx(28 / 33, abs=1e-12)


def test_duplicates_and_low_iou_are_false_positives_ties_keep_input_order():
    truths = {1: truth([A], [1])}
    rows = np.array([row(1, A, 0.5, 1), row(1, A, 0.5, 1), row(1, (0, 0, 10, 30), 0.4, 1)])  # IoU 1/3
    _, tp, fp, ious = match_class(rows, truths, 1)
    assert tp.tolist() == [True, False, False] and fp.tolist() == [False, True, True]
    assert ious[0] == 1.0
    assert average_precision(tp, fp, 1, "voc12") == 1.0  # the first detection already has recall 1


def test_difficult_boxes_are_neither_found_nor_missed_and_empty_classes_are_left_out():
    """Image 1: a cat and a difficult cat, both detected: AP 1 (the difficult one is no false positive) and one
    positive. Image 2: only a difficult dog, not detected: the dog class has no positive and is left out of the
    mean, as is a class with neither boxes nor detections; a class with boxes and no detection scores 0."""
    truths = {1: truth([A, B], [1, 1], [False, True]), 2: truth([C], [2], [True]), 3: truth([A], [4])}
    rows = np.array([row(1, B, 0.95, 1), row(1, A, 0.9, 1)])
    result = voc_evaluate(rows, truths, ["cat", "dog", "cow", "owl"], [1, 2, 3, 4])
    assert [(c.name, c.positives, c.ap) for c in result.per_class] == [
        ("cat", 1, 1.0), ("dog", 0, 0.0), ("cow", 0, 0.0), ("owl", 1, 0.0)]
    assert result.map50 == pytest.approx(0.5)  # (cat 1 + owl 0) / 2


def test_darknet_counts_at_conf_025_and_its_summary_lines():
    truths = {1: truth([A, B], [1, 1]), 2: truth([C], [1])}
    rows = np.array([row(1, A, 0.9, 1), row(1, (20, 20, 30, 35), 0.6, 1),  # IoU 2/3 with B
                     row(2, (0, 0, 5, 5), 0.5, 1), row(2, C, 0.2, 1)])  # a false positive; a TP below 0.25
    result = voc_evaluate(rows, truths, ["cat"], [1])
    assert (result.tp, result.fp, result.fn) == (2, 1, 1)
    assert result.average_iou == pytest.approx((1 + 2 / 3) / 2)
    text = format_darknet_summary(result)
    assert "class_id = 0, name = cat, ap = " in text and "(TP = 2, FP = 1)" in text
    assert "for conf_thresh = 0.25, precision = 0.67, recall = 0.67, F1-score = 0.67" in text
    assert "TP = 2, FP = 1, FN = 1, average IoU = 83.33 %" in text
    assert f"mean average precision (mAP@0.50) = {result.map50:.6f}" in text


def test_an_unknown_metric_is_refused():
    with pytest.raises(ValueError, match="--metric must be one of coco, voc07, voc12, got 'voc10'"):
        voc_evaluate(np.zeros((0, 7)), {}, [], [], "voc10")
