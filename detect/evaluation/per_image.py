"""The ground truth as NumPy arrays per image, the input of the metrics computed outside COCOeval (the PR / F1
curves and confusion matrix of the plots, VOC's AP and Darknet's counts): image id -> `ImageTruth` (boxes xyxy,
classes, ignore, crowd), from a pycocotools COCO. The detections beside them: image id -> float [n, 6] rows
(x1, y1, x2, y2, score, class index), from coco rows (detect.evaluation.split_match.detections_from_rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ImageTruth:
    """The boxes of one image. An ignored box (COCO crowd, VOC difficult) is no object to find, and a detection
    on it is neither right nor wrong."""

    boxes: np.ndarray  # float [m, 4] xyxy
    classes: np.ndarray  # int [m]: class indices, or COCO category ids (whichever the detections carry)
    ignore: np.ndarray  # bool [m]
    # bool [m]: COCO crowd regions, overlapped by intersection over the detection's area (None: no box). A VOC
    # difficult box is ignored but no crowd region: COCOeval here matches it by IoU (evaluation.cocoeval_engines)
    crowd: np.ndarray | None = None

    @classmethod
    def empty(cls) -> ImageTruth:
        return cls(np.zeros((0, 4)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))

    def crowd_mask(self) -> np.ndarray:
        return np.zeros(len(self.classes), dtype=bool) if self.crowd is None else self.crowd


def truths_from_coco(coco_gt, image_ids: Sequence[int],
                     category_ids: Sequence[int] | None = None) -> dict[int, ImageTruth]:
    """image id -> its boxes from a pycocotools COCO; crowd and difficult boxes `ignore`, crowd regions `crowd`.

    With `category_ids`, `classes` are each box's index in it and boxes of other categories are left out;
    without, `classes` are the category ids and every box is kept.
    """
    index = None if category_ids is None else {int(cid): k for k, cid in enumerate(category_ids)}
    truths = {}
    for image_id in image_ids:
        anns = coco_gt.imgToAnns.get(int(image_id), [])
        if index is not None:
            anns = [a for a in anns if int(a["category_id"]) in index]
        boxes = np.array([a["bbox"] for a in anns], dtype=np.float64).reshape(-1, 4)
        boxes[:, 2:] += boxes[:, :2]
        cids = [int(a["category_id"]) for a in anns]
        classes = np.array(cids if index is None else [index[c] for c in cids], dtype=np.int64)
        crowd = np.array([bool(a.get("iscrowd", 0)) for a in anns], dtype=bool)
        difficult = np.array([bool(a.get("difficult", 0)) for a in anns], dtype=bool)
        # a difficult box is ignored like a crowd region, but COCOeval here matches it by IoU (cocoeval_engines)
        truths[int(image_id)] = ImageTruth(boxes, classes, crowd | difficult, crowd & ~difficult)
    return truths
