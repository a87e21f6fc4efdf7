"""Detections against ground truth at one IoU threshold: per-class precision / recall / F1 curves and the
confusion matrix behind PR_curve.png, F1_curve.png and confusion_matrix.png. Pure numpy.

Inputs are plain per-image data keyed by image id:
- detections: float [n, 6] rows (x1, y1, x2, y2, score, class index);
- ground truth: `ImageTruth(boxes [m, 4] xyxy, classes [m], ignore bool [m], crowd bool [m])`; an ignored box
  (COCO crowd, VOC difficult) is no object to find, and a detection on it is neither right nor wrong.

The matching is COCOeval's at one threshold, so that the PR curve's AP is COCOeval's AP@0.5 (README "Plots"): a
crowd region overlaps a detection by intersection over the detection's area, ignored boxes absorb any number
of detections, and only the 100 best-scoring detections of a class in an image count (its maxDets).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RECALL_POINTS = 101  # the recall grid of the PR curve (COCO's 0, 0.01, ..., 1)
CONFIDENCE_POINTS = 1000  # the confidence grid of the F1 curve
MAX_DETS_PER_CLASS = 100  # COCOeval's largest maxDets: detections per image and class it evaluates


@dataclass(frozen=True)
class ImageTruth:
    boxes: np.ndarray  # float [m, 4] xyxy
    classes: np.ndarray  # int [m]
    ignore: np.ndarray  # bool [m]
    # bool [m]: COCO crowd regions, overlapped by intersection over the detection's area (None: no box). A VOC
    # difficult box is ignored but no crowd region: COCOeval here matches it by IoU (evaluation.cocoeval_engines)
    crowd: np.ndarray | None = None

    def crowd_mask(self) -> np.ndarray:
        return np.zeros(len(self.classes), dtype=bool) if self.crowd is None else self.crowd


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


def box_iou(a: np.ndarray, b: np.ndarray, crowd: np.ndarray | None = None) -> np.ndarray:
    """IoU [N, M] of xyxy boxes; a column flagged in `crowd` [M] gets intersection over a's area instead, as
    COCOeval overlaps a detection with a crowd region (one person inside a crowd overlaps it fully)."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:4], b[None, :, 2:4])
    inter = np.clip(rb - lt, 0, None).prod(axis=2)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    if crowd is not None:
        union = np.where(crowd[None, :], area_a[:, None], union)
    return inter / np.maximum(union, 1e-12)


def _empty_truth() -> ImageTruth:
    return ImageTruth(np.zeros((0, 4)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))


def _best_per_class(det: np.ndarray, limit: int = MAX_DETS_PER_CLASS) -> np.ndarray:
    """Row mask: each class's `limit` best-scoring rows (of equal scores the earlier row), COCOeval's maxDets cut."""
    order = np.lexsort((-det[:, 4], det[:, 5]))  # by class, then score descending; lexsort is stable
    cls = det[order, 5]
    rank = np.arange(len(det)) - np.searchsorted(cls, cls, side="left")
    keep = np.zeros(len(det), dtype=bool)
    keep[order[rank < limit]] = True
    return keep


def _match_image(det: np.ndarray, truth: ImageTruth, iou_thres: float) -> tuple[np.ndarray, np.ndarray]:
    """(true positive, counted) per detection row, COCOeval's matching: in score order, each detection takes the
    free non-ignored box of its class it overlaps most (IoU >= iou_thres; of equal overlaps the later box, as
    COCOeval's loop does); without one, a detection overlapping an ignored box by iou_thres is not counted, and
    the ignored box stays free for the next."""
    n, m = len(det), len(truth.classes)
    tp, counted = np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
    if n == 0 or m == 0:
        return tp, counted
    iou = box_iou(det[:, :4], truth.boxes, truth.crowd_mask())
    iou[det[:, 5].astype(np.int64)[:, None] != truth.classes[None, :]] = -1.0  # never matched, whatever the threshold
    overlapping = iou >= iou_thres
    taken = truth.ignore.copy()  # an ignored box is never "found"
    for i in np.argsort(-det[:, 4], kind="stable"):
        if not overlapping[i].any():  # most detections: a false positive without a loop over boxes
            continue
        free = overlapping[i] & ~taken
        if free.any():
            j = m - 1 - int(np.argmax(np.where(free, iou[i], -1.0)[::-1]))  # the last of the best
            taken[j], tp[i] = True, True
        elif (overlapping[i] & truth.ignore).any():
            counted[i] = False
    return tp, counted


def match_detections(detections: dict, truths: dict, num_classes: int, iou_thres: float = 0.5):
    """(scores [n], classes [n], true positive [n], ground-truth count per class [K]) over every image."""
    scores, classes, hits = [], [], []
    truth_counts = np.zeros(num_classes, dtype=np.int64)
    # images in id order, as COCOeval concatenates them: detections of equal scores keep its order
    for image_id in sorted(set(truths) | set(detections)):
        truth = truths.get(image_id, _empty_truth())
        det = detections.get(image_id, np.zeros((0, 6)))
        det = det[_best_per_class(det)]
        tp, counted = _match_image(det, truth, iou_thres)
        scores.append(det[counted, 4])
        classes.append(det[counted, 5].astype(np.int64))
        hits.append(tp[counted])
        truth_counts += np.bincount(truth.classes[~truth.ignore], minlength=num_classes)[:num_classes]
    if not scores:
        return np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), truth_counts
    return np.concatenate(scores), np.concatenate(classes), np.concatenate(hits), truth_counts


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
        truth = truths.get(image_id, _empty_truth())
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
