"""Box areas, the pairwise IoU and the IoU of aligned pairs on NumPy arrays of xyxy boxes (left, top, right,
bottom), for the metrics, which run on host arrays and should not import torch for them (detect.ops.boxes is the
torch family).

Coordinates are continuous (no +1 on the sides, as COCOeval and Darknet compute them). A box with a negative
side has area 0, as in detect.ops.boxes.box_area.
"""

from __future__ import annotations

import numpy as np

# Keeps the division finite for zero-area boxes (their intersection is 0 too, so their IoU is 0).
MIN_UNION = 1e-12


def box_area(boxes: np.ndarray) -> np.ndarray:
    """Area [N] of xyxy boxes [N, 4]; negative extents count as zero."""
    return np.prod((boxes[:, 2:4] - boxes[:, :2]).clip(0), axis=1)


def box_iou(a: np.ndarray, b: np.ndarray, crowd: np.ndarray | None = None) -> np.ndarray:
    """Pairwise IoU [N, M] of xyxy boxes a [N, 4] and b [M, 4].

    A column flagged in `crowd` (bool [M]) gets intersection over a's area instead: COCOeval overlaps a
    detection with a crowd region that way, so that one person inside a crowd overlaps it fully.
    """
    top_left = np.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = np.minimum(a[:, None, 2:4], b[None, :, 2:4])
    inter = np.prod((bottom_right - top_left).clip(0), axis=2)
    area_a = box_area(a)
    union = area_a[:, None] + box_area(b)[None, :] - inter
    if crowd is not None:
        union = np.where(crowd[None, :], area_a[:, None], union)
    return inter / np.maximum(union, MIN_UNION)


def aligned_box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU [N] of each row pair of xyxy boxes a [N, 4] and b [N, 4] (box_iou's diagonal, without its N x N)."""
    inter = np.prod((np.minimum(a[:, 2:4], b[:, 2:4]) - np.maximum(a[:, :2], b[:, :2])).clip(0), axis=1)
    return inter / np.maximum(box_area(a) + box_area(b) - inter, MIN_UNION)
