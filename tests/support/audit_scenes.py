"""Scenes for the audit's tests: labelled images and a model that sees every object (its detections the true
boxes, slightly moved, at a high confidence), with one error of each kind put into the labels."""

import numpy as np

from detect.audit.evidence import AuditImage


def scene(num_images: int = 40, seed: int = 0, classes: int = 3) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """True boxes and classes: three objects an image, apart from each other, on 640 x 480 images."""
    rng = np.random.default_rng(seed)
    boxes, labels = [], []
    for _ in range(num_images):
        xs = rng.permutation(3) * 200 + rng.uniform(10, 60, 3)
        w, h = rng.uniform(60, 120, 3), rng.uniform(60, 200, 3)
        y = rng.uniform(10, 470 - h)
        boxes.append(np.stack([xs, y, xs + w, y + h], 1))
        labels.append(rng.integers(0, classes, 3))
    return boxes, labels


def detections_of(boxes: np.ndarray, labels: np.ndarray, rng) -> np.ndarray:
    wh = np.tile(boxes[:, 2:] - boxes[:, :2], 2)
    jittered = boxes + rng.normal(0, 0.02, boxes.shape) * wh
    return np.concatenate([jittered, rng.uniform(0.8, 0.95, (len(boxes), 1)), labels[:, None]], 1)


def audit_scene(num_images: int = 40, seed: int = 0):
    """(audit images, the four errors as {kind: (image, box, true class)}): image 0 lost a label (missing), image
    1's first label moved by half its width (box), image 2's first label relabelled (class), image 3 holds a
    label on nothing (spurious)."""
    rng = np.random.default_rng(seed + 1)
    boxes, labels = scene(num_images, seed)
    # image 3's objects below y = 150, so that its top band is empty
    boxes[3][:, [1, 3]] += max(0.0, 150.0 - float(boxes[3][:, 1].min()))
    boxes[3][:, 3] = np.minimum(boxes[3][:, 3], 479.0)
    detections = [detections_of(b, c, rng) for b, c in zip(boxes, labels)]
    label_boxes = [b.copy() for b in boxes]
    label_classes = [c.copy() for c in labels]
    errors = {"missing": (0, boxes[0][0].copy(), int(labels[0][0]))}
    label_boxes[0], label_classes[0] = label_boxes[0][1:], label_classes[0][1:]
    shift = 0.5 * (boxes[1][0, 2] - boxes[1][0, 0])
    label_boxes[1][0] += [shift, 0, shift, 0]
    errors["box"] = (1, label_boxes[1][0].copy(), int(labels[1][0]))
    label_classes[2][0] = (labels[2][0] + 1) % 3
    errors["class"] = (2, boxes[2][0].copy(), int(labels[2][0]))
    invented = np.array([250.0, 10.0, 330.0, 130.0])
    label_boxes[3] = np.concatenate([label_boxes[3], invented[None]])
    label_classes[3] = np.concatenate([label_classes[3], [1]])
    errors["spurious"] = (3, invented, 1)
    images = [AuditImage(i, b, c, np.zeros(len(c), bool), np.zeros((0, 4)), np.zeros(0, np.int64), d, 640)
              for i, (b, c, d) in enumerate(zip(label_boxes, label_classes, detections))]
    return images, errors
