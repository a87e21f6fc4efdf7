"""The scoring half of `darknet detector map` (detect.evaluation.darknet_map has the rules): each image's entries
(its detections matched to its truths), then the TP / FP counts, the average IoU and the per-class APs over the
score-sorted list of every image. An image matches alone, so the ranks compute their own images' entries and
rank 0 takes them in Darknet's list order (detect.evaluation.darknet_eval)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from detect.evaluation.darknet_map import DarknetDetections, darknet_iou
from detect.evaluation.darknet_map_report import DarknetMapResult


def darknet_map(per_image_detections: Sequence[DarknetDetections],
                per_image_truths: Sequence[tuple[np.ndarray, np.ndarray]], names: Sequence[str], points: int = 0,
                iou_thresh: float = 0.5, conf_thresh: float = 0.25) -> DarknetMapResult:
    """validate_detector_map over images in list order. Detections come from `darknet_nms`; truths are
    (classes, relative cx cy w h) per image as `truths_from_xyxy` gives them. `points`: 0 (area under the
    curve), 11 (VOC 2007) or 101 (COCO)."""
    if len(per_image_detections) != len(per_image_truths):
        raise ValueError(f"{len(per_image_detections)} images of detections but {len(per_image_truths)} of truths")
    _check_points(points)
    offsets = truth_offsets([classes for classes, _ in per_image_truths])
    entries = [image_entries(dets, classes, boxes, offset, len(names), iou_thresh)
               for dets, (classes, boxes), offset in zip(per_image_detections, per_image_truths, offsets)]
    return map_from_entries(entries, [classes for classes, _ in per_image_truths], names, points, iou_thresh,
                            conf_thresh)


def _check_points(points: int) -> None:
    if points < 0 or points == 1:
        raise ValueError(f"points={points}: use 0 (area under the curve) or at least 2 recall points (11, 101)")


def truth_offsets(per_image_truth_classes: Sequence) -> list[int]:
    """Each image's first truth's index in the list's numbering of every truth (what `image_entries` takes)."""
    sizes = [len(np.asarray(c).reshape(-1)) for c in per_image_truth_classes]
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist() if sizes else []


def map_from_entries(entries: Sequence[tuple[np.ndarray, ...]], per_image_truth_classes: Sequence,
                     names: Sequence[str], points: int = 0, iou_thresh: float = 0.5,
                     conf_thresh: float = 0.25) -> DarknetMapResult:
    """The map of every image's entries (`image_entries`, in list order) and truth classes."""
    _check_points(points)
    num_classes = len(names)
    if not num_classes:
        raise ValueError("names is empty: Darknet's mean runs over the class names, one per model class")
    counts = np.zeros(num_classes, dtype=np.int64)
    for classes in per_image_truth_classes:
        np.add.at(counts, np.asarray(classes, dtype=np.int64).reshape(-1), 1)
    parts = [(np.zeros(0, np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool),
              np.zeros(0, np.float32)), *entries]
    score, cls, truth_id, first_match, iou = (np.concatenate(column) for column in zip(*parts))
    above = score > np.float32(conf_thresh)
    class_tp = np.bincount(cls[above & first_match], minlength=num_classes)
    class_fp = np.bincount(cls[above & ~first_match], minlength=num_classes)
    tp, fp, truths = int(class_tp.sum()), int(class_fp.sum()), int(counts.sum())
    iou_sum = np.cumsum(iou[above & first_match], dtype=np.float32)[-1] if tp else np.float32(0)  # float, in order
    average_iou = float(iou_sum / np.float32(tp + fp)) if tp + fp else float(iou_sum)
    ap = _class_aps(score, cls, truth_id, counts, points)
    precision, recall, f1 = _summary(tp, fp, truths)
    return DarknetMapResult(list(names), ap, class_tp, class_fp, counts, float(sum(ap.tolist()) / num_classes),
                            tp, fp, precision, recall, f1, average_iou, len(score), truths, points,
                            float(iou_thresh), float(conf_thresh))


def image_entries(dets: DarknetDetections, truth_classes, truth_boxes, offset: int, num_classes: int,
                  iou_thresh: float = 0.5) -> tuple[np.ndarray, ...]:
    """One image's entries in Darknet's order (detection by detection, class by class, every score > 0): score,
    class, matched truth's global index (-1: none), whether it is the image's first entry to match that truth
    (what makes a TP at conf_thresh, whatever the earlier entry's score) and the match's IoU. An image matches
    alone, so each rank computes its own images' (offset: `truth_offsets` over the whole list) and
    `map_from_entries` takes them in list order."""
    if not num_classes:
        raise ValueError("names is empty: Darknet's mean runs over the class names, one per model class")
    truth_classes = np.asarray(truth_classes, dtype=np.int64).reshape(-1)
    if dets.probs.shape[1] != num_classes:
        raise ValueError(f"detections score {dets.probs.shape[1]} classes but {num_classes} names were given")
    if len(truth_classes) and (truth_classes.min() < 0 or truth_classes.max() >= num_classes):
        raise ValueError(f"truth class {int(truth_classes.max())} out of range for {num_classes} names")
    row, k = np.nonzero(dets.probs > 0)
    iou = darknet_iou(dets.boxes[row], np.asarray(truth_boxes, dtype=np.float32).reshape(-1, 4))
    valid = (iou > np.float32(iou_thresh)) & (truth_classes[None, :] == k[:, None])
    matched = valid.any(axis=1)
    # the highest IoU of the entry's class, the first truth on ties (Darknet's strict `>` walk)
    best = np.argmax(np.where(valid, iou, -1), axis=1) if len(truth_classes) else np.zeros(len(k), np.int64)
    truth_id = np.where(matched, offset + best, -1)
    first = np.zeros(len(k), dtype=bool)
    first[np.unique(truth_id, return_index=True)[1]] = True
    match_iou = iou[np.arange(len(k)), best] if len(truth_classes) else np.zeros(len(k), np.float32)
    return (dets.probs[row, k], k.astype(np.int64), truth_id.astype(np.int64), matched & first,
            np.where(matched, match_iou, 0).astype(np.float32))


def _summary(tp: int, fp: int, truths: int) -> tuple[float, float, float]:
    """Precision, recall and F1 in float32, 0/0 giving NaN as in C."""
    tp32, fp32, fn32 = np.float32(tp), np.float32(fp), np.float32(truths - tp)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = tp32 / (tp32 + fp32)
        recall = tp32 / (tp32 + fn32)
        f1 = np.float32(2) * precision * recall / (precision + recall)
    return float(precision), float(recall), float(f1)


def _class_aps(score, cls, truth_id, counts, points: int) -> np.ndarray:
    """Per class AP from the score-sorted list (stable: ties keep image and detection order). A detection is a
    TP when it is the first in that list to reach its truth; each class's PR states are its own detections'
    running counts, preceded by the (0, 0) state when its first detection is not at rank 0."""
    order = np.argsort(-score, kind="stable")
    cls, truth_id = cls[order], truth_id[order]
    tp = np.zeros(len(order), dtype=bool)
    matched = np.nonzero(truth_id >= 0)[0]
    tp[matched[np.unique(truth_id[matched], return_index=True)[1]]] = True
    ap = np.zeros(len(counts), dtype=np.float64)
    for k in range(len(counts)):
        ranks = np.nonzero(cls == k)[0]
        if len(ranks) == 0:
            continue  # every state (0, 0): AP 0
        tps = np.cumsum(tp[ranks])
        precision = tps / np.arange(1, len(ranks) + 1, dtype=np.float64)
        recall = tps / float(counts[k]) if counts[k] else np.zeros(len(ranks))
        if ranks[0] > 0:
            precision, recall = np.concatenate([[0.0], precision]), np.concatenate([[0.0], recall])
        ap[k] = _auc(precision, recall) if points == 0 else _recall_points(precision, recall, points)
    return ap


def _auc(precision: np.ndarray, recall: np.ndarray) -> float:
    """Darknet's walk from the last state back to the first: the recall step times the running maximum
    precision (which includes the lower state's own), then the first state's recall times that maximum."""
    total, last_recall, last_precision = 0.0, recall[-1], precision[-1]
    for r, p in zip(recall[-2::-1].tolist(), precision[-2::-1].tolist()):
        delta, last_recall = last_recall - r, r
        last_precision = max(last_precision, p)
        total += delta * last_precision
    return total + last_recall * last_precision


def _recall_points(precision: np.ndarray, recall: np.ndarray, points: int) -> float:
    """The mean over `points` recalls of the best precision at a recall >= it. Darknet is built with -Ofast,
    whose reciprocal math turns `point * 1.0 / (points - 1)` into `point * (1.0 / (points - 1))`: 6 * 0.1 is
    0.6000000000000001, above a recall of 3/5 (its own output shows it: a class at 1.0 precision up to recall
    3/5 and 0.5 after scores 77.27% at 11 points, not 81.82%)."""
    step = 1.0 / (points - 1)
    total = 0.0
    for point in range(points):
        reached = precision[recall >= point * step]
        total += float(reached.max()) if len(reached) else 0.0
    return total / points
