"""detect.evaluation's own matching at IoU 0.5 (the data of PR_curve.png, F1_curve.png, confusion_matrix.png):
confusion counts and PR / F1 curves on constructed cases, the PR curve's AP against COCOeval's."""

import numpy as np
import pytest
from pycocotools.coco import COCO

from detect.evaluation.confusion import confusion_matrix, normalise_columns
from detect.evaluation.matching import match_detections
from detect.evaluation.per_image import ImageTruth
from detect.evaluation.pr_curves import pr_curves
from tests.support.coco_oracles import coco_evaluate

NAMES = ["cat", "dog", "bird"]


def _truth(boxes, classes, ignore=None):
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    ignore = np.zeros(len(boxes), bool) if ignore is None else np.asarray(ignore, bool)
    return ImageTruth(boxes, np.asarray(classes, np.int64), ignore)


def _det(*rows):
    return np.asarray(rows, dtype=np.float64).reshape(-1, 6)


def test_confusion_matrix_counts_on_a_constructed_case():
    truths = {
        # a cat found as a cat, a dog found as a bird, a bird missed
        1: _truth([[0, 0, 10, 10], [20, 20, 40, 40], [50, 50, 60, 60]], [0, 1, 2]),
        # two detections on one cat: the better overlap pairs, the other is a false alarm; a crowd box
        2: _truth([[0, 0, 20, 20], [100, 100, 150, 150]], [0, 0], ignore=[False, True]),
        3: _truth([], []),  # background only
    }
    detections = {
        1: _det([0, 0, 10, 10, 0.9, 0], [21, 21, 40, 40, 0.8, 2], [50, 50, 60, 60, 0.2, 2]),  # last: below 0.25
        2: _det([0, 0, 20, 20, 0.9, 0], [1, 1, 20, 20, 0.95, 0], [100, 100, 150, 150, 0.9, 1]),  # on the crowd
        3: _det([5, 5, 30, 30, 0.5, 1]),
    }
    counts = confusion_matrix(detections, truths, 3, conf_thres=0.25, iou_thres=0.5)
    expected = np.zeros((4, 4), np.int64)
    expected[0, 0] = 2  # cats found (image 1, image 2's best overlap)
    expected[2, 1] = 1  # the dog predicted as a bird
    expected[3, 2] = 1  # the missed bird (its only detection scores below the threshold)
    expected[0, 3] = 1  # the second detection on image 2's cat
    expected[1, 3] = 1  # the dog on an empty image (the one on the crowd box is not counted)
    np.testing.assert_array_equal(counts, expected)
    share = normalise_columns(counts)
    np.testing.assert_allclose(share[:, 3], [0.5, 0.5, 0, 0])
    np.testing.assert_allclose(share.sum(axis=0), [1, 1, 1, 1])


def test_pr_and_f1_curves_of_a_constructed_case_agree_with_cocoeval():
    # cats: two boxes in two images; detections by score: hit, miss, hit
    truths = {1: _truth([[0, 0, 50, 50]], [0]), 2: _truth([[10, 10, 60, 60]], [0])}
    detections = {1: _det([0, 0, 50, 50, 0.9, 0], [100, 100, 150, 150, 0.8, 0]), 2: _det([10, 10, 60, 60, 0.7, 0])}
    scores, classes, hits, truth_counts = match_detections(detections, truths, 3)
    assert truth_counts.tolist() == [2, 0, 0]
    assert sorted(zip(scores.tolist(), hits.tolist())) == [(0.7, True), (0.8, False), (0.9, True)]
    curves = pr_curves(scores, classes, hits, truth_counts)
    assert curves.has_truth.tolist() == [True, False, False]
    # precision 1 up to recall 0.5 (51 grid points), then 2/3 up to recall 1 (50 points)
    assert curves.ap50[0] == pytest.approx((51 + 50 * 2 / 3) / 101)
    f1_at = {c: curves.f1[0][np.searchsorted(curves.confidence_grid, c)] for c in (0.5, 0.75, 0.85, 0.95)}
    assert f1_at[0.85] == pytest.approx(2 / 3)  # P 1, R 0.5
    assert f1_at[0.75] == pytest.approx(0.5)  # P 0.5, R 0.5
    assert f1_at[0.5] == pytest.approx(0.8)  # P 2/3, R 1
    assert f1_at[0.95] == 0.0
    # the same 101-point interpolation as COCOeval's AP@0.5
    gt = COCO()
    gt.dataset = {"images": [{"id": 1, "width": 200, "height": 200}, {"id": 2, "width": 200, "height": 200}],
                  "annotations": [{"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": b, "area": 2500,
                                   "iscrowd": 0} for i, b in enumerate([[0, 0, 50, 50], [10, 10, 50, 50]])],
                  "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}, {"id": 3, "name": "bird"}]}
    gt.createIndex()
    results = [{"image_id": i, "category_id": 1, "bbox": [r[0], r[1], r[2] - r[0], r[3] - r[1]], "score": r[4]}
               for i, rows in detections.items() for r in rows.tolist()]
    stats, _ = coco_evaluate(gt, results, [1, 2], NAMES, [1, 2, 3])
    assert stats[1] == pytest.approx(curves.ap50[0])
