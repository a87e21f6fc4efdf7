"""`darknet detector map`, figure for figure: AlexeyAB darknet's validate_detector_map (src/detector.c) with the
box decoding of get_yolo_detections / correct_yolo_boxes (src/yolo_layer.c) and do_nms_sort (src/box.c). This
module makes the detections and truths as Darknet holds them; detect.evaluation.darknet_map_score scores them.

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
