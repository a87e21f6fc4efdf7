"""`darknet detector map`, figure for figure: AlexeyAB darknet's validate_detector_map (src/detector.c) with the
box decoding of get_yolo_detections / correct_yolo_boxes (src/yolo_layer.c) and do_nms_sort (src/box.c).

What makes Darknet's numbers its own, kept here on purpose:
- a row is kept when objectness > thresh (0.005 in map), and a class when objectness * class > thresh; boxes
  and IoUs are in image-relative (cx, cy, w, h) floats, computed in float32 as box.c does;
- do_nms_sort sorts the whole detection array once per class (glibc's qsort is a stable merge sort), so the
  array leaves NMS ordered by the last class's score, ties by the class before, ..., then by grid order;
- a detection matches the truth of its class with the highest IoU > iou_thresh (the first on ties); every
  class of a box with a score > 0 is a detection of its own;
- at conf_thresh a matched detection is a TP unless an earlier detection of the same image (whatever its score)
  matched the same truth; the average IoU sums the TPs' IoUs and divides by TP + FP;
- the PR curve is walked over the score-sorted list of all images; AP at `points` 0 is the area under the
  running-max precision at each unique recall, else the mean of the best precision at recall >= each of
  `points` evenly spaced recalls; the mean is over every class named, a class without truths adding 0.
Difficult truths (Darknet's `difficult` list) are not modelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detect.data.formats.darknet_image import letterbox_size
from detect.evaluation.darknet_map_report import DarknetMapResult

MAP_THRESH = 0.005  # validate_detector_map's detection threshold
MAP_NMS = 0.45


@dataclass
class DarknetDetections:
    """One image's detections as Darknet holds them: boxes float32 [n, 4] (cx, cy, w, h relative to the image),
    objectness float32 [n], probs float32 [n, K] (0 where a class is not kept)."""

    boxes: np.ndarray
    objectness: np.ndarray
    probs: np.ndarray


def darknet_order(grids: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """Row permutation from this project's head layout (row (a*H + y)*W + x, head by head) to Darknet's walk
    of each [yolo] layer (cell y*W + x outer, anchor inner). `grids`: (anchors, H, W) per head."""
    parts, start = [], 0
    for anchors, h, w in grids:
        parts.append(start + np.arange(anchors * h * w).reshape(anchors, h * w).T.reshape(-1))
        start += anchors * h * w
    return np.concatenate(parts)


def darknet_detections(rows, image_size: tuple[int, int], net_size: tuple[int, int], thresh: float = MAP_THRESH,
                       letter_box: bool = False, grids: Sequence[tuple[int, int, int]] | None = None
                       ) -> DarknetDetections:
    """get_yolo_detections + correct_yolo_boxes on one image's eval rows [P, 5+K] (cx, cy, w, h in network-input
    pixels, objectness, class probabilities). `image_size`, `net_size`: (w, h). `letter_box`: the input was
    Darknet's letterbox (else the stretch of letter_box=0). `grids` puts the rows in Darknet's order."""
    rows = np.asarray(rows.detach().cpu() if hasattr(rows, "detach") else rows, dtype=np.float32)
    if grids is not None:
        order = darknet_order(grids)
        if len(order) != len(rows):
            raise ValueError(f"{len(rows)} rows but the heads {list(grids)} (anchors, H, W) make {len(order)}: "
                             f"pass the grids of the input size the rows come from")
        rows = rows[order]
    rows = rows[rows[:, 4] > np.float32(thresh)]
    net_w, net_h = net_size
    obj = rows[:, 4]
    probs = obj[:, None] * rows[:, 5:]
    probs = np.where(probs > np.float32(thresh), probs, np.float32(0))
    boxes = rows[:, :4] / np.array([net_w, net_h, net_w, net_h], dtype=np.float32)
    if letter_box:
        boxes = _undo_letterbox(boxes, image_size, net_size)
    return DarknetDetections(boxes.astype(np.float32), obj.copy(), probs.astype(np.float32))


def _undo_letterbox(boxes: np.ndarray, image_size: tuple[int, int], net_size: tuple[int, int]) -> np.ndarray:
    """correct_yolo_boxes with letter=1: the shift in double (`x - deltaw / 2. / netw`), the scale in float."""
    (net_w, net_h), out = net_size, boxes.copy()
    new_w, new_h = letterbox_size(*image_size, net_w, net_h)
    for axis, net, new in ((0, net_w, new_w), (1, net_h, new_h)):
        ratio = np.float32(new) / np.float32(net)
        shift = float(np.float32(net - new)) / 2.0 / net
        out[:, axis] = ((boxes[:, axis].astype(np.float64) - shift) / float(ratio)).astype(np.float32)
        out[:, axis + 2] = boxes[:, axis + 2] * (np.float32(1) / ratio)
    return out


def darknet_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """box.c box_iou for every pair of (cx, cy, w, h) rows of `a` [n, 4] and `b` [m, 4]: [n, m] float32."""
    a, b = a.astype(np.float32)[:, None, :], b.astype(np.float32)[None, :, :]
    half = np.float32(2)

    def overlap(i: int) -> np.ndarray:
        left = np.maximum(a[..., i] - a[..., i + 2] / half, b[..., i] - b[..., i + 2] / half)
        right = np.minimum(a[..., i] + a[..., i + 2] / half, b[..., i] + b[..., i + 2] / half)
        return right - left

    w, h = overlap(0), overlap(1)
    inter = np.where((w < 0) | (h < 0), np.float32(0), w * h)
    union = a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return (inter / union).astype(np.float32)


def darknet_diou(a: np.ndarray, b: np.ndarray, exponent: float) -> np.ndarray:
    """box.c box_diou (`exponent` 0.6) and box_diounms (`exponent` beta_nms) for every pair of (cx, cy, w, h) rows:
    IoU - (d^2 / c^2)^exponent, d the centres' distance, c the diagonal of the smallest box around both (IoU alone
    where c is 0). [n, m] float32, as Darknet's floats compute it."""
    iou = darknet_iou(a, b)
    a, b = a.astype(np.float32)[:, None, :], b.astype(np.float32)[None, :, :]
    half = np.float32(2)
    sides = [np.maximum(a[..., i] + a[..., i + 2] / half, b[..., i] + b[..., i + 2] / half)
             - np.minimum(a[..., i] - a[..., i + 2] / half, b[..., i] - b[..., i + 2] / half) for i in (0, 1)]
    c = sides[0] * sides[0] + sides[1] * sides[1]
    d = (a[..., 0] - b[..., 0]) * (a[..., 0] - b[..., 0]) + (a[..., 1] - b[..., 1]) * (a[..., 1] - b[..., 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.power((d / c).astype(np.float64), exponent).astype(np.float32)  # C's pow: double, then float
    return np.where(c == 0, iou, iou - term).astype(np.float32)


def suppresses(boxes: np.ndarray, nms: float, kind: str = "default", beta: float = 0.6) -> np.ndarray:
    """[n, n] bool: row i's box suppresses column j's under the cfg's nms_kind (Darknet reads it from the last
    [yolo] layer): default IoU > nms; greedynms box_diou > nms; diounms box_diounms(beta_nms) > nms."""
    if kind == "greedynms":
        return darknet_diou(boxes, boxes, 0.6) > np.float32(nms)
    if kind == "diounms":
        return darknet_diou(boxes, boxes, beta) > np.float32(nms)
    return darknet_iou(boxes, boxes) > np.float32(nms)


def darknet_nms(dets: DarknetDetections, nms: float = MAP_NMS, kind: str = "default",
                beta: float = 0.6) -> DarknetDetections:
    """box.c do_nms_sort (diounms_sort for the cfg's `kind` greedynms or diounms, `beta` its beta_nms): rows of
    zero objectness swapped to the end and left alone; then per class, the array stably sorted by that class's
    score and each kept box zeroing that class in later boxes it suppresses (`suppresses`). Returns the
    detections in the array's final order, suppressed scores set to 0."""
    order, total = _zero_objectness_last(dets.objectness)
    probs = dets.probs.copy()
    iou = suppresses(dets.boxes[order[:total]], nms, kind, beta)
    current = np.arange(total)  # positions into order[:total], in the array's current order
    for k in range(probs.shape[1]):
        scores = probs[order[current], k]
        current = current[np.argsort(-scores, kind="stable")]
        candidates = current[probs[order[current], k] > 0]
        alive = np.ones(len(candidates), dtype=bool)
        for a in range(len(candidates)):
            if alive[a]:
                alive[a + 1:] &= ~iou[candidates[a], candidates[a + 1:]]
        probs[order[candidates[~alive]], k] = 0
    final = np.concatenate([order[current], order[total:]])
    return DarknetDetections(dets.boxes[final], dets.objectness[final], probs[final])


def _zero_objectness_last(objectness: np.ndarray) -> tuple[np.ndarray, int]:
    """do_nms_sort's first loop: each row of objectness 0 swapped with the last row not yet swapped. Returns the
    row order and how many rows lead (none of objectness 0). get_yolo_detections never makes such rows."""
    order = np.arange(len(objectness))
    total = len(order) - 1
    if not (objectness == 0).any():
        return order, total + 1
    i = 0
    while i <= total:
        if objectness[order[i]] == 0:
            order[[i, total]] = order[[total, i]]
            total -= 1
        else:
            i += 1
    return order, total + 1


def truths_from_xyxy(classes, boxes, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """Corner boxes in image pixels as Darknet reads them from a YOLO label file: (classes int64 [m], float32
    [m, 4] relative cx, cy, w, h), converted in double and rounded once, as fscanf's %f does."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    rel = np.stack([(b[:, 0] + b[:, 2]) / 2 / width, (b[:, 1] + b[:, 3]) / 2 / height,
                    (b[:, 2] - b[:, 0]) / width, (b[:, 3] - b[:, 1]) / height], 1)
    return np.asarray(classes, dtype=np.int64).reshape(-1), rel.astype(np.float32)


def darknet_map(per_image_detections: Sequence[DarknetDetections],
                per_image_truths: Sequence[tuple[np.ndarray, np.ndarray]], names: Sequence[str], points: int = 0,
                iou_thresh: float = 0.5, conf_thresh: float = 0.25) -> DarknetMapResult:
    """validate_detector_map over images in list order. Detections come from `darknet_nms`; truths are
    (classes, relative cx cy w h) per image as `truths_from_xyxy` gives them. `points`: 0 (area under the
    curve), 11 (VOC 2007) or 101 (COCO)."""
    if len(per_image_detections) != len(per_image_truths):
        raise ValueError(f"{len(per_image_detections)} images of detections but {len(per_image_truths)} of truths")
    if points < 0 or points == 1:
        raise ValueError(f"points={points}: use 0 (area under the curve) or at least 2 recall points (11, 101)")
    num_classes = len(names)
    if not num_classes:
        raise ValueError("names is empty: Darknet's mean runs over the class names, one per model class")
    counts = np.zeros(num_classes, dtype=np.int64)
    parts = [(np.zeros(0, np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool),
              np.zeros(0, np.float32))]
    for dets, (truth_classes, truth_boxes) in zip(per_image_detections, per_image_truths):
        truth_classes = np.asarray(truth_classes, dtype=np.int64).reshape(-1)
        if dets.probs.shape[1] != num_classes:
            raise ValueError(f"detections score {dets.probs.shape[1]} classes but {num_classes} names were given")
        if len(truth_classes) and (truth_classes.min() < 0 or truth_classes.max() >= num_classes):
            raise ValueError(f"truth class {int(truth_classes.max())} out of range for {num_classes} names")
        parts.append(_image_entries(dets, truth_classes, truth_boxes, int(counts.sum()), iou_thresh))
        np.add.at(counts, truth_classes, 1)
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


def _image_entries(dets: DarknetDetections, truth_classes: np.ndarray, truth_boxes, offset: int, iou_thresh: float):
    """One image's entries in Darknet's order (detection by detection, class by class, every score > 0): score,
    class, matched truth's global index (-1: none), whether it is the image's first entry to match that truth
    (what makes a TP at conf_thresh, whatever the earlier entry's score) and the match's IoU."""
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
