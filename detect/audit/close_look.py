"""A closer look at the small boxes: the model run again on a crop about each, magnified.

A small object is the one a model sees worst, and where it sees nothing the audit cannot tell a real object it
misses from a label drawn on an empty region. Seen closer, most real ones show: on coco-tiny val with yolov3-tiny
(in tiles), of the small labels the model saw nothing at, 69% show a detection above 0.01 in their crop, against 5%
of boxes invented on empty regions. So every small box the audit judges (under 20 pixels at the network's input:
detect.audit.calibration.size_bucket), the split's labels and the errors the scoring simulates on them
(detect.audit.likelihood.simulation_plan), is looked at once more: a square crop CONTEXT times its longer side,
centred on it, at least the input size over MAX_UPSCALE (no pixel is blown up more than that: beyond, the model
sees blur), run through the same Predictor. The crop's detections count for that box only
(detect.audit.evidence.visible_rows), beside the image's own. Medium boxes gained nothing from it (coco-tiny
box-level AP 0.489 either way, for twice the crops), so they are not looked at.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from detect.audit.evidence import AuditImage
from detect.audit.likelihood import simulation_plan

CONTEXT = 3.0  # the crop's side over the box's longer side
MAX_UPSCALE = 4.0  # the crop is at least the network's input over this, in image pixels
SMALL = 0  # the size bucket looked at


def crop_window(box: np.ndarray, width: int, height: int, img_size: int) -> tuple[int, int, int, int]:
    """The crop (x1, y1, x2, y2 image pixels) about `box`: CONTEXT times its longer side, at least img_size /
    MAX_UPSCALE, centred on it and moved inside the image (cut where the image is smaller)."""
    side = max(CONTEXT * float(max(box[2] - box[0], box[3] - box[1])), img_size / MAX_UPSCALE)
    out = []
    for low, high, extent in ((box[0], box[2], width), (box[1], box[3], height)):
        length = min(side, extent)
        start = min(max((low + high) / 2 - length / 2, 0.0), extent - length)
        out.append((int(round(start)), int(round(start + length))))
    (x1, x2), (y1, y2) = out
    return x1, y1, max(x2, x1 + 1), max(y2, y1 + 1)


def boxes_to_look_at(images: list[AuditImage], num_classes: int, img_size: int) -> dict[int, np.ndarray]:
    """Position in `images` -> the small boxes [c, 4] the scoring will judge there: the labels (not difficult) and
    the simulated misplaced and invented labels, each once."""
    wanted: dict[int, list] = {}
    for n, image in enumerate(images):
        labels = image.boxes[~image.difficult]
        wanted[n] = list(labels[image.size_buckets(labels, img_size) == SMALL])
    for change in simulation_plan(images, num_classes):
        image = images[change.image]
        for box in (change.misplaced, change.invented):
            if box is not None and image.size_buckets(box[None], img_size)[0] == SMALL:
                wanted[change.image].append(box)
    out = {}
    for n, boxes in wanted.items():
        if boxes:
            out[n] = np.unique(np.asarray(boxes, np.float64).reshape(-1, 4), axis=0)
    return out


def with_looks(images: list[AuditImage], looks: dict[int, tuple[np.ndarray, list[np.ndarray]]]) -> list[AuditImage]:
    """The images with their closer looks: position -> (boxes [c, 4], the detections [k, 6] in each box's crop)."""
    out = []
    for n, image in enumerate(images):
        if n not in looks:
            out.append(image)
            continue
        boxes, found = looks[n]
        rows = [np.concatenate([det.reshape(-1, 6), np.full((len(det), 1), c, np.float64)], 1)
                for c, det in enumerate(found)]
        looked = np.concatenate(rows) if rows else np.zeros((0, 7))
        out.append(dataclasses.replace(image, look_boxes=np.asarray(boxes, np.float64).reshape(-1, 4),
                                       looked=looked))
    return out
