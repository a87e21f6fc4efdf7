"""detect.evaluation.thresholds: per-class thresholds chosen on hand-made detections (exact best-F1 cuts, the
global threshold off the mean F1 curve, the shrinkage of a rare class), counts at thresholds, EvalResult rows."""

import numpy as np
import pytest

from detect.evaluation.matching import match_detections
from detect.evaluation.per_image import ImageTruth
from detect.evaluation.split_match import detections_from_rows
from detect.evaluation.thresholds import (
    best_f1_threshold,
    choose_thresholds,
    count_at,
)

# class 0: 4 boxes; detections 0.9 TP, 0.8 TP, 0.7 FP, 0.6 TP, 0.3 FP, 0.2 FP. Keeping the best i gives
# F1 = 2 TP / (i + 4): 0.4, 0.667, 0.571, 0.75, 0.667, 0.6: the best keeps four, cut between 0.6 and 0.3.
# class 1: 1 box; 0.95 TP, 0.5 FP: the best keeps one, cut between 0.95 and 0.5.
# class 2: no box, one detection. class 3: 2 boxes, only false positives.
SCORES = np.array([0.9, 0.8, 0.7, 0.6, 0.3, 0.2, 0.95, 0.5, 0.4, 0.85, 0.35])
CLASSES = np.array([0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 3])
HITS = np.array([1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0], dtype=bool)
TRUTHS = np.array([4, 1, 0, 2])
# the mean F1 of classes 0, 1 and 3 (class 3's F1 is 0 everywhere) peaks at (0.75 + 1 + 0) / 3 for thresholds in
# (0.5, 0.6]: grid points 500/999 .. 599/999 of the 1000-point confidence grid, whose middle is 549/999
GLOBAL = 549 / 999


def test_each_class_gets_its_exact_best_f1_cut_and_the_global_one_the_mean_curves_peak():
    choice = choose_thresholds(SCORES, CLASSES, HITS, TRUTHS, shrink=0)
    assert choice.global_conf == pytest.approx(GLOBAL, abs=1e-12)
    # classes without evidence (no box; no true positive) take the global threshold
    assert choice.best.tolist() == pytest.approx([0.45, 0.725, GLOBAL, GLOBAL], abs=1e-12)
    assert choice.conf.tolist() == pytest.approx(choice.best.tolist(), abs=1e-12)  # k = 0: no shrinkage
    assert choice.instances.tolist() == [4, 1, 0, 2]


def test_shrinkage_keeps_a_rare_class_near_the_global_threshold():
    choice = choose_thresholds(SCORES, CLASSES, HITS, TRUTHS, shrink=10)
    expected = [(4 * 0.45 + 10 * GLOBAL) / 14, (1 * 0.725 + 10 * GLOBAL) / 11, GLOBAL, GLOBAL]
    assert choice.conf.tolist() == pytest.approx(expected, abs=1e-12)
    # the one-box class moves 1/11 of the way from the global threshold toward its own best
    assert abs(choice.conf[1] - GLOBAL) == pytest.approx((0.725 - GLOBAL) / 11, abs=1e-12)
    # a class seen 1000 times keeps (almost) its own threshold
    many = choose_thresholds(np.array([0.9, 0.6]), np.array([0, 0]), np.array([True, False]), np.array([1000]),
                             shrink=10)
    assert many.best[0] == 0.75 and many.conf[0] == pytest.approx((1000 * 0.75 + 10 * many.global_conf) / 1010)
    with pytest.raises(ValueError, match="shrinkage k must be 0 or more"):
        choose_thresholds(SCORES, CLASSES, HITS, TRUTHS, shrink=-1)


def test_a_cut_never_separates_equal_scores():
    # 0.8 TP and 0.8 FP, one box: keeping one alone (F1 1) is no threshold; keeping both (0.667) is, at 0.8
    assert best_f1_threshold(np.array([0.8, 0.8, 0.1]), np.array([True, False, False]), 1) == pytest.approx(0.45)
    assert best_f1_threshold(np.array([0.8, 0.8]), np.array([False, True]), 1) == pytest.approx(0.8)
    assert best_f1_threshold(np.array([0.8]), np.array([False]), 1) is None
    assert best_f1_threshold(np.zeros(0), np.zeros(0, bool), 3) is None


def test_counts_at_per_class_and_one_threshold():
    at_classes = count_at(SCORES, CLASSES, HITS, TRUTHS, np.array([0.45, 0.725, 0.5, 0.9]))
    assert at_classes.tp.tolist() == [3, 1, 0, 0] and at_classes.fp.tolist() == [1, 0, 0, 0]
    assert at_classes.fn.tolist() == [1, 0, 0, 2]
    assert at_classes.f1().tolist() == pytest.approx([0.75, 1.0, 0.0, 0.0])
    assert at_classes.f1(total=True) == pytest.approx(2 * 4 / (2 * 4 + 1 + 3))  # micro: sums over the classes
    assert at_classes.precision(total=True) == pytest.approx(0.8) and at_classes.recall(total=True) == 4 / 7
    # one threshold keeps score > it (--conf's rule), per-class ones score >= theirs
    assert count_at(SCORES, CLASSES, HITS, TRUTHS, 0.6).tp.tolist() == [2, 1, 0, 0]
    assert count_at(SCORES, CLASSES, HITS, TRUTHS, np.full(4, 0.6)).tp.tolist() == [3, 1, 0, 0]


def test_thresholds_from_matched_boxes_and_eval_rows():
    # rows as EvalResult holds them: image id, x, y, w, h, score, category id (categories 7 and 3 = classes 0, 1)
    rows = np.array([[1, 0, 0, 10, 10, 0.9, 7], [1, 50, 50, 10, 10, 0.6, 7], [2, 0, 0, 10, 10, 0.8, 3],
                     [2, 20, 20, 10, 10, 0.3, 3]])
    detections = detections_from_rows(rows, [7, 3])
    assert sorted(detections) == [1, 2]
    np.testing.assert_array_equal(detections[2], [[0, 0, 10, 10, 0.8, 1], [20, 20, 30, 30, 0.3, 1]])
    assert detections_from_rows(np.zeros((0, 7)), [7, 3]) == {}
    truths = {1: ImageTruth(np.array([[0, 0, 10, 10.0]]), np.array([0]), np.zeros(1, bool)),
              2: ImageTruth(np.array([[0, 0, 10, 10.0], [21, 21, 30, 30]]), np.array([1, 1]), np.zeros(2, bool))}
    matched = match_detections(detections, truths, 2)
    choice = choose_thresholds(*matched, shrink=0)
    # class 0: 0.9 TP then 0.6 FP: cut at 0.75; class 1: both hit (IoU 81/100): keep both, at 0.3
    assert choice.best.tolist() == pytest.approx([0.75, 0.3])
