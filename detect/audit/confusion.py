"""Which classes the model itself mixes up, read from its own detections, and what that does to the evidence of
a `class` error.

A model that is unsure between two classes scores both at the same place: with the audit's protocol (every class
above the floor kept, detect.inference.options.AUDIT) a bus comes out as a bus box and a truck box over it.
Summed over the split, the smaller confidence of every such pair (IoU >= CO_FIRING_IOU, two classes) gives how
much the model confuses each pair: on COCO's val a bus's other class is a truck or a car, a spoon's a knife or a
fork, a horse's a person, a cow or a sheep, from 80 images already.

When a label of class A sits on a box the model calls B, two stories explain it: the label is right and the
model mistakes an A for a B (likely in proportion to the confusion A -> B), or the label is wrong and the object
is a B (likely in proportion to how often B is what the model sees: its share of the split's labels). The factor
is their ratio: a right label the model confuses with a neighbouring class (a car it calls a truck) weighs less,
a box the model calls something it never confuses with the label (a horse label on a refrigerator) more. The
confusion row is shrunk toward the label shares (SHRINK units of confidence), so a class the model rarely finds
keeps a factor near 1.
"""

from __future__ import annotations

import numpy as np

from detect.ops.boxes_np import box_iou

CO_FIRING_IOU = 0.5
CO_FIRING_FLOOR = 0.002
SHRINK = 0.5
FACTOR_RANGE = (0.1, 10.0)


def co_firing(images: list, num_classes: int) -> np.ndarray:
    """[K, K] summed smaller confidence of detections of two classes at IoU >= CO_FIRING_IOU (symmetric). The
    detections under CO_FIRING_FLOOR are left out: a fifth of the boxes at the 0.001 floor (yolov3-tiny on COCO),
    whose pairs cost a third of the time and change little (a floor of 0.01 loses much: faint pairs carry the
    confusions too)."""
    pairs = np.zeros(num_classes * num_classes)
    for image in images:
        det = image.detections[image.detections[:, 4] >= CO_FIRING_FLOOR]
        if len(det) < 2:
            continue
        cls = det[:, 5].astype(np.int64)
        i, j = np.nonzero((box_iou(det[:, :4], det[:, :4]) >= CO_FIRING_IOU) & (cls[:, None] != cls[None, :]))
        pairs += np.bincount(cls[i] * num_classes + cls[j], np.minimum(det[i, 4], det[j, 4]),
                             minlength=num_classes * num_classes)
    return pairs.reshape(num_classes, num_classes)


def confusion_factors(images: list, num_classes: int, label_classes: np.ndarray, other_classes: np.ndarray):
    """Per label (class A, the model's other class B, -1 when none): P(B | the label is wrong) / P(B | the model
    confuses a right A), 1 where no other class is seen."""
    shares = np.bincount(np.concatenate([im.classes for im in images]) if images else np.zeros(0, np.int64),
                         minlength=num_classes).astype(np.float64) + 0.5
    shares /= shares.sum()
    counts = co_firing(images, num_classes)
    confused = (counts + SHRINK * shares[None, :]) / (counts.sum(1, keepdims=True) + SHRINK)
    out = np.ones(len(label_classes))
    seen = other_classes >= 0
    a, b = label_classes[seen], other_classes[seen]
    out[seen] = np.clip(shares[b] / confused[a, b], *FACTOR_RANGE)
    return out
