"""Per-class precision / recall / F1 curves from matched detections (detect.evaluation.matching): the data of
PR_curve.png and F1_curve.png. The precision envelope is sampled on COCO's 101 recall points, so its mean is
COCOeval's AP@0.5. Pure NumPy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RECALL_POINTS = 101  # the recall grid of the PR curve (COCO's 0, 0.01, ..., 1)
CONFIDENCE_POINTS = 1000  # the confidence grid of the F1 curve


@dataclass(frozen=True)
class Curves:
    """Per class k (rows) over a grid; classes without ground truth have `has_truth` False and zero curves."""

    recall_grid: np.ndarray  # [R]
    precision: np.ndarray  # [K, R] precision envelope at each recall
    ap50: np.ndarray  # [K] mean of `precision` over the recall grid
    confidence_grid: np.ndarray  # [C]
    precision_at: np.ndarray  # [K, C] precision of the detections scoring >= each confidence
    recall_at: np.ndarray  # [K, C]
    f1: np.ndarray  # [K, C]
    has_truth: np.ndarray  # bool [K]


def _class_curves(score: np.ndarray, tp: np.ndarray, truth_count: int, recall_grid: np.ndarray,
                  confidence_grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(precision envelope on the recall grid, precision and recall on the confidence grid) of one class whose
    detections are sorted by score, highest first; needs at least one detection."""
    true_cum = np.cumsum(tp)
    recall = true_cum / truth_count
    precision = true_cum / np.arange(1, len(tp) + 1)
    envelope = np.maximum.accumulate(precision[::-1])[::-1]  # the best precision at this recall or beyond
    first = np.searchsorted(recall, recall_grid, side="left")  # first detection reaching each recall
    on_recall = np.where(first < len(tp), envelope[np.minimum(first, len(tp) - 1)], 0.0)
    kept = np.searchsorted(-score, -confidence_grid, side="right")  # detections scoring >= each confidence
    last = np.maximum(kept - 1, 0)
    # above the highest score nothing is kept: precision 1 by convention, recall 0
    return on_recall, np.where(kept > 0, precision[last], 1.0), np.where(kept > 0, recall[last], 0.0)


def pr_curves(scores: np.ndarray, classes: np.ndarray, hits: np.ndarray, truth_counts: np.ndarray) -> Curves:
    """Per-class curves from `match_detections`' output (a class with boxes but no detection stays at 0)."""
    k_total = len(truth_counts)
    recall_grid = np.linspace(0, 1, RECALL_POINTS)
    confidence_grid = np.linspace(0, 1, CONFIDENCE_POINTS)
    precision = np.zeros((k_total, RECALL_POINTS))
    precision_at = np.zeros((k_total, CONFIDENCE_POINTS))
    recall_at = np.zeros((k_total, CONFIDENCE_POINTS))
    for k in np.flatnonzero(truth_counts):
        mine = classes == k
        if not mine.any():
            continue
        order = np.argsort(-scores[mine], kind="stable")
        precision[k], precision_at[k], recall_at[k] = _class_curves(
            scores[mine][order], hits[mine][order], int(truth_counts[k]), recall_grid, confidence_grid)
    f1 = 2 * precision_at * recall_at / np.maximum(precision_at + recall_at, 1e-12)
    return Curves(recall_grid, precision, precision.mean(axis=1), confidence_grid, precision_at, recall_at, f1,
                  truth_counts > 0)
