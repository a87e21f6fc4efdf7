"""Pascal VOC's AP@0.5 (VOC2007's 11-point and VOC2010+'s all-point interpolation) and Darknet's `detector map`
summary, computed from the same coco rows the COCO path uses.

Matching, per class, detections in descending score order (stable): each takes the ground-truth box of its
class in its image with the highest IoU (continuous coordinates, as Darknet computes it); above 0.5 it is a
true positive if that box is still free, else a false positive (a duplicate), and below 0.5 a false positive.
A detection whose best box is `difficult` is neither (VOC devkit); difficult boxes are no positives to find.
COCO crowd regions are treated the same way (ignored, overlapped by IoU: Darknet has no crowd rule). AP: the
area under the precision envelope at every recall the detections reach (all-point, VOC2010+, Darknet's
default) or the mean of the envelope's maximum at recall 0, 0.1, ..., 1 (VOC2007). The mean is over the
classes with at least one positive. The ground truth is `truths_from_coco(coco_gt, image_ids)`
(detect.evaluation.per_image): its `classes` are the category ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detect.evaluation.per_image import ImageTruth
from detect.ops.boxes_np import box_iou

METRICS = ("coco", "voc07", "voc12")
IOU_THRESHOLD = 0.5
DARKNET_CONF = 0.25  # the threshold of Darknet's TP / FP / FN / precision / recall / F1 / average IoU lines


@dataclass
class VocClass:
    name: str
    positives: int  # non-difficult ground truth
    ap: float
    tp: int  # at DARKNET_CONF
    fp: int


@dataclass
class VocResult:
    metric: str
    map50: float
    per_class: list[VocClass]
    tp: int  # at DARKNET_CONF, all classes
    fp: int
    fn: int
    average_iou: float  # mean IoU of those true positives


def check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"--metric must be one of {', '.join(METRICS)}, got {metric!r}")
    return metric


def match_class(rows: np.ndarray, truths: dict[int, ImageTruth], category_id: int) -> tuple[np.ndarray, ...]:
    """Detections of one category (coco rows), matched in descending score order (stable): (scores, tp, fp, iou)
    in the rows' own order, tp/fp booleans (both False for a detection on a difficult box) and the IoU of each
    true positive. A box is taken within its image only, so the rows of any set of whole images match alike."""
    tp, fp, ious = (np.zeros(len(rows), bool), np.zeros(len(rows), bool), np.zeros(len(rows)))
    taken: dict[int, np.ndarray] = {}
    for i in np.argsort(-rows[:, 5], kind="stable"):
        row = rows[i]
        truth = truths.get(int(row[0]))
        keep = truth.classes == category_id if truth is not None else None
        if truth is None or not keep.any():
            fp[i] = True
            continue
        box = np.array([[row[1], row[2], row[1] + row[3], row[2] + row[4]]])
        overlap = box_iou(box, truth.boxes[keep])[0]
        best = int(np.argmax(overlap))
        if overlap[best] < IOU_THRESHOLD:
            fp[i] = True
        elif truth.ignore[keep][best]:
            continue  # on a difficult box: neither
        else:
            used = taken.setdefault(int(row[0]), np.zeros(int(keep.sum()), bool))
            if used[best]:
                fp[i] = True
            else:
                used[best], tp[i], ious[i] = True, True, overlap[best]
    return rows[:, 5], tp, fp, ious


@dataclass
class VocMatches:
    """VOC's matching of a set of whole images' detections (the rows' order: image by image), and the positives
    (non-difficult boxes) per category among those images: what a rank computes of its own images."""

    image_ids: np.ndarray  # int64 [n]
    scores: np.ndarray  # [n]
    category_ids: np.ndarray  # int64 [n]
    tp: np.ndarray  # bool [n]
    fp: np.ndarray  # bool [n]
    ious: np.ndarray  # [n]: of the true positives
    positives: np.ndarray  # int64 [K], in the evaluated category order

    @staticmethod
    def merge(parts: Sequence[VocMatches]) -> VocMatches:
        """The parts of several ranks in image-id order (each image's in its own), as one process has them."""
        image_ids = np.concatenate([p.image_ids for p in parts])
        order = np.argsort(image_ids, kind="stable")
        return VocMatches(image_ids[order], *(np.concatenate([getattr(p, f) for p in parts])[order]
                                              for f in ("scores", "category_ids", "tp", "fp", "ious")),
                          sum(p.positives for p in parts))


def match_voc(rows: np.ndarray, truths: dict[int, ImageTruth], category_ids: Sequence[int]) -> VocMatches:
    """VOC's matching of `rows` (coco rows of whole images, image by image) against `truths` (image id -> boxes
    with category ids, `truths_from_coco(coco_gt, image_ids)`) for each of `category_ids`."""
    tp, fp, ious = np.zeros(len(rows), bool), np.zeros(len(rows), bool), np.zeros(len(rows))
    positives = np.zeros(len(category_ids), dtype=np.int64)
    for k, cid in enumerate(category_ids):
        positives[k] = sum(int(((t.classes == cid) & ~t.ignore).sum()) for t in truths.values())
        mine = np.flatnonzero(rows[:, 6] == cid) if len(rows) else np.zeros(0, dtype=np.int64)
        _, tp[mine], fp[mine], ious[mine] = match_class(rows[mine], truths, int(cid))
    return VocMatches(rows[:, 0].astype(np.int64), rows[:, 5].copy(), rows[:, 6].astype(np.int64), tp, fp, ious,
                      positives)


def average_precision(tp: np.ndarray, fp: np.ndarray, positives: int, metric: str) -> float:
    """AP from the matched detections (score order) and the number of positives."""
    if positives == 0:
        return 0.0
    counted = tp | fp
    tp_sum, fp_sum = np.cumsum(tp[counted]), np.cumsum(fp[counted])
    recall = tp_sum / positives
    precision = tp_sum / np.maximum(tp_sum + fp_sum, 1e-12)
    if metric == "voc07":
        return float(np.mean([precision[recall >= t].max() if (recall >= t).any() else 0.0
                              for t in np.linspace(0, 1, 11)]))
    r = np.concatenate(([0.0], recall, [1.0]))
    p = np.concatenate(([0.0], precision, [0.0]))
    p = np.maximum.accumulate(p[::-1])[::-1]  # the envelope: the best precision at this recall or beyond
    steps = np.nonzero(r[1:] != r[:-1])[0]
    return float(np.sum((r[steps + 1] - r[steps]) * p[steps + 1]))


def voc_evaluate(rows: np.ndarray, truths: dict[int, ImageTruth], names: Sequence[str],
                 category_ids: Sequence[int], metric: str = "voc12") -> VocResult:
    """VOC AP@0.5 per class and its mean, with Darknet's counts at conf 0.25. `rows`: coco rows (image_id,
    x, y, w, h, score, category_id) of every evaluated image; `truths`: image id -> its ground truth."""
    return voc_from_matches(match_voc(rows, truths, category_ids), names, category_ids, metric)


def voc_from_matches(matches: VocMatches, names: Sequence[str], category_ids: Sequence[int],
                     metric: str = "voc12") -> VocResult:
    """`voc_evaluate` from the matching of every evaluated image (one process's, or the ranks' merged)."""
    if check_metric(metric) == "coco":
        raise ValueError("voc_evaluate computes voc07 or voc12; the COCO metric is CocoEvaluator's")
    per_class, totals = [], np.zeros(3)
    iou_sum = 0.0
    for name, cid, positives in zip(names, category_ids, matches.positives.tolist()):
        mine = np.flatnonzero(matches.category_ids == int(cid))
        mine = mine[np.argsort(-matches.scores[mine], kind="stable")]  # score order, ties in image order
        scores, tp, fp, ious = matches.scores[mine], matches.tp[mine], matches.fp[mine], matches.ious[mine]
        sure = scores >= DARKNET_CONF
        counts = int((tp & sure).sum()), int((fp & sure).sum())
        totals += (counts[0], counts[1], positives - counts[0])
        iou_sum += float(ious[tp & sure].sum())
        per_class.append(VocClass(name, positives, average_precision(tp, fp, positives, metric), *counts))
    scored = [c.ap for c in per_class if c.positives]
    return VocResult(metric, float(np.mean(scored)) if scored else 0.0, per_class, int(totals[0]),
                     int(totals[1]), int(totals[2]), iou_sum / max(totals[0], 1))


def format_darknet_summary(result: VocResult, class_indices: Sequence[int] | None = None) -> str:
    """The lines `./darknet detector map` prints, for the same numbers side by side."""
    lines = []
    for k, c in enumerate(result.per_class):
        index = class_indices[k] if class_indices is not None else k
        lines.append(f"class_id = {index}, name = {c.name}, ap = {100 * c.ap:.2f}%   \t (TP = {c.tp}, FP = {c.fp}) ")
    tp, fp, fn = result.tp, result.fp, result.fn
    precision = tp / max(tp + fp, 1)
    recall = tp / max(tp + fn, 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-12)
    lines += [(f"\n for conf_thresh = {DARKNET_CONF:.2f}, precision = {precision:.2f}, recall = {recall:.2f}, "
               f"F1-score = {f1:.2f} "),
              (f" for conf_thresh = {DARKNET_CONF:.2f}, TP = {tp}, FP = {fp}, FN = {fn}, average IoU = "
               f"{100 * result.average_iou:.2f} % "),
              f"\n IoU threshold = {100 * IOU_THRESHOLD:.0f} %, used "
              + ("11 Recall-points" if result.metric == "voc07" else "Area-Under-Curve for each unique Recall"),
              (f" mean average precision (mAP@{IOU_THRESHOLD:.2f}) = {result.map50:.6f}, or "
               f"{100 * result.map50:.2f} % ")]
    return "\n".join(lines)
