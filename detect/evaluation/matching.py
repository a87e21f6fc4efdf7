"""Detections against ground truth at one IoU threshold, by COCOeval's rules, so that the PR curve built on it
(detect.evaluation.pr_curves) has COCOeval's AP@0.5 (docs/training.md, "Plots and TensorBoard"). Pure NumPy.

COCOeval's rules: a crowd region overlaps a detection by intersection over the detection's area, ignored boxes
absorb any number of detections, and only the 100 best-scoring detections of a class in an image count (its
maxDets). Inputs per image id: detections [n, 6] and `ImageTruth` (detect.evaluation.per_image).
"""

from __future__ import annotations

import numpy as np

from detect.evaluation.per_image import ImageTruth
from detect.ops.boxes_np import box_iou

MAX_DETS_PER_CLASS = 100  # COCOeval's largest maxDets: detections per image and class it evaluates


def _best_per_class(det: np.ndarray, limit: int = MAX_DETS_PER_CLASS) -> np.ndarray:
    """Row mask: each class's `limit` best-scoring rows (of equal scores the earlier row), COCOeval's maxDets cut."""
    order = np.lexsort((-det[:, 4], det[:, 5]))  # by class, then score descending; lexsort is stable
    cls = det[order, 5]
    rank = np.arange(len(det)) - np.searchsorted(cls, cls, side="left")
    keep = np.zeros(len(det), dtype=bool)
    keep[order[rank < limit]] = True
    return keep


def match_image(det: np.ndarray, truth: ImageTruth, iou_thres: float) -> tuple[np.ndarray, np.ndarray]:
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


def match_detections(detections: dict, truths: dict, num_classes: int, iou_thres: float = 0.5,
                     with_images: bool = False):
    """(scores [n], classes [n], true positive [n], ground-truth count per class [K]) over every image, images in
    id order; the detections on ignored boxes are left out. `with_images`: each detection's image id first."""
    images, scores, classes, hits = [], [], [], []
    truth_counts = np.zeros(num_classes, dtype=np.int64)
    # images in id order, as COCOeval concatenates them: detections of equal scores keep its order
    for image_id in sorted(set(truths) | set(detections)):
        truth = truths.get(image_id, ImageTruth.empty())
        det = detections.get(image_id, np.zeros((0, 6)))
        det = det[_best_per_class(det)]
        tp, counted = match_image(det, truth, iou_thres)
        images.append(np.full(int(counted.sum()), image_id, dtype=np.int64))
        scores.append(det[counted, 4])
        classes.append(det[counted, 5].astype(np.int64))
        hits.append(tp[counted])
        truth_counts += np.bincount(truth.classes[~truth.ignore], minlength=num_classes)[:num_classes]
    if not scores:
        out = (np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool),
               truth_counts)
    else:
        out = (np.concatenate(images), np.concatenate(scores), np.concatenate(classes), np.concatenate(hits),
               truth_counts)
    return out if with_images else out[1:]
