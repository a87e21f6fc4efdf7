"""Which track takes which detection: a minimum-cost matching in which no pair above a cost limit is made, and
the cost matrices ByteTrack matches on."""

from __future__ import annotations

import importlib

import numpy as np

from detect.ops.boxes_np import box_iou

INSTALL_HINT = 'pip install -e ".[track]"'


def _solver():
    try:
        return importlib.import_module("scipy.optimize").linear_sum_assignment
    except ImportError as e:
        raise ValueError(f"tracking needs SciPy ({e}); install the track extra: {INSTALL_HINT}") from None


def match(cost: np.ndarray, limit: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the pairs of the matching of `cost` [n, m] that minimises the cost of its pairs plus
    `limit` / 2 for every row and column left unmatched (LAPJV's cost_limit, as ByteTrack matches): a pair costing
    more than `limit` is never made, and two fair pairs do not displace one good pair (the pair a + b < limit + c
    case of crossing objects)."""
    if cost.size == 0:
        empty = np.empty(0, np.int64)
        return empty, empty
    allowed = cost <= limit
    if not allowed.any():
        empty = np.empty(0, np.int64)
        return empty, empty
    # pairs - limit x pairs = that objective less a constant; a forbidden pair gains nothing over no pair
    rows, cols = _solver()(np.where(allowed, cost - limit, 0.0))
    kept = allowed[rows, cols]
    return rows[kept], cols[kept]


def iou_cost(tracks_xyxy: np.ndarray, dets_xyxy: np.ndarray, scores: np.ndarray | None = None) -> np.ndarray:
    """1 - IoU [T, D] of predicted track boxes and detections; with `scores`, 1 - IoU x score (ByteTrack's fused
    cost: of two equally overlapping detections the surer one is preferred, and a faint overlap with a faint box
    is no match)."""
    iou = box_iou(tracks_xyxy, dets_xyxy)
    return 1 - (iou if scores is None else iou * scores[None, :])


def unmatched(count: int, matched: np.ndarray) -> np.ndarray:
    """The indices in range(count) not in `matched`."""
    keep = np.ones(count, bool)
    keep[matched] = False
    return np.flatnonzero(keep)
