"""The confusion matrix behind confusion_matrix.png: detections above a confidence paired one to one with the
boxes of their image, whatever the class, with a background row (missed objects) and column (false alarms).
Pure NumPy; inputs per image id as in detect.evaluation.per_image."""

from __future__ import annotations

import numpy as np

from detect.evaluation.per_image import ImageTruth
from detect.ops.boxes_np import box_iou


def confusion_matrix(detections: dict, truths: dict, num_classes: int, conf_thres: float = 0.25,
                     iou_thres: float = 0.5) -> np.ndarray:
    """Counts [K+1, K+1]: rows the predicted class, columns the true class, index K the background.

    Per image, the detections scoring >= conf_thres and the boxes are paired one to one whatever their class,
    highest IoU first, pairs with IoU >= iou_thres: a pair counts at (predicted, true); an unpaired box at
    (background, true) (missed); an unpaired detection at (predicted, background) (false alarm), unless it
    overlaps an ignored box by iou_thres (a crowd region by intersection over its own area), then it is not
    counted.
    """
    k = num_classes
    counts = np.zeros((k + 1, k + 1), dtype=np.int64)
    for image_id in set(truths) | set(detections):
        truth = truths.get(image_id, ImageTruth.empty())
        det = detections.get(image_id, np.zeros((0, 6)))
        det = det[det[:, 4] >= conf_thres]
        kept = ~truth.ignore
        boxes, true_cls = truth.boxes[kept], truth.classes[kept]
        pred_cls = det[:, 5].astype(np.int64)
        paired_det, paired_box = _pair_by_iou(box_iou(det[:, :4], boxes), iou_thres)
        np.add.at(counts, (pred_cls[paired_det], true_cls[paired_box]), 1)
        np.add.at(counts, (k, np.delete(true_cls, paired_box)), 1)
        alarms = np.setdiff1d(np.arange(len(det)), paired_det)
        if truth.ignore.any() and len(alarms):
            ignored = truth.boxes[truth.ignore]
            overlap = box_iou(det[alarms, :4], ignored, truth.crowd_mask()[truth.ignore])
            on_ignored = (overlap >= iou_thres).any(axis=1)
            alarms = alarms[~on_ignored]
        np.add.at(counts, (pred_cls[alarms], k), 1)
    return counts


def _pair_by_iou(iou: np.ndarray, iou_thres: float) -> tuple[np.ndarray, np.ndarray]:
    """Greedy one-to-one pairs (row indices, column indices), highest IoU first, IoU >= iou_thres."""
    rows, cols = np.nonzero(iou >= iou_thres)
    order = np.argsort(-iou[rows, cols], kind="stable")
    used_rows, used_cols, pairs = set(), set(), []
    for r, c in zip(rows[order], cols[order]):
        if r not in used_rows and c not in used_cols:
            used_rows.add(r)
            used_cols.add(c)
            pairs.append((r, c))
    if not pairs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    paired = np.asarray(pairs, dtype=np.int64)
    return paired[:, 0], paired[:, 1]


def normalise_columns(counts: np.ndarray) -> np.ndarray:
    """Each column divided by its sum (the share of each true class, or of the false alarms, per prediction)."""
    totals = counts.sum(axis=0, keepdims=True)
    return np.divide(counts, totals, out=np.zeros(counts.shape), where=totals > 0)
