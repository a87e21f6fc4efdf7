"""What the model's numbers mean on this split: a detection's confidence turned into the chance it is right, and
the chance the model finds a labelled object, both measured against the split's own labels.

A confidence of 0.6 means different things for a class the model knows well and one it confuses, and for a large
object and a small one. `ConfidenceCalibration` measures it: detections matched to a same-class label at IoU 0.5
(COCO's greedy rule) are right, the others wrong, and per confidence bin the fraction right is the calibrated
probability. Bins are counted per (class, size) cell, each shrunk toward its size's figure (`PRIOR_WEIGHT`
pseudo-detections), which is shrunk toward the split's, and made non-decreasing in confidence (pool adjacent
violators), so a rare class borrows from the others rather than scoring on three detections. The labels are
mostly right, so the few errors among them barely move these figures.

Sizes are the object's side (square root of its area) as the network sees it, in input pixels at `img_size`:
what decides whether a model can see it, whatever the photo's resolution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SIZE_EDGES = (20.0, 60.0)  # network-input pixels: small < 20 <= medium < 60 <= large
NUM_SIZES = len(SIZE_EDGES) + 1
NUM_BINS = 20  # confidence bins of 0.05
PRIOR_WEIGHT = 20.0  # pseudo-counts pulling a cell toward its parent's rate


@dataclass(frozen=True)
class CalibrationSettings:
    """Which groups the calibration tells apart (the benchmark measures each choice; the defaults won)."""

    per_class: bool = True
    per_size: bool = True
    enabled: bool = True  # False: the raw confidence is taken as the probability


def size_bucket(boxes: np.ndarray, image_sides: np.ndarray, img_size: int) -> np.ndarray:
    """Size bucket (0 small, 1 medium, 2 large) of xyxy boxes [n, 4] in images whose longer side is
    `image_sides` [n], as seen at the network's input of `img_size`."""
    wh = (boxes[:, 2:4] - boxes[:, :2]).clip(0)
    side = np.sqrt(wh[:, 0] * wh[:, 1]) * img_size / np.maximum(image_sides, 1)
    return np.searchsorted(np.asarray(SIZE_EDGES), side, side="right").astype(np.int64)


def shrunk_shares(counts: np.ndarray, parent: np.ndarray, weight: float = PRIOR_WEIGHT) -> np.ndarray:
    """Shares along the last axis of `counts`, each row pulled toward the shares `parent` (broadcast) by `weight`
    pseudo-counts: a group seen a few times borrows its parent's figure, one seen often keeps its own."""
    return (counts + weight * parent) / (counts.sum(-1, keepdims=True) + weight)


def pool_adjacent_violators(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence closest to `values` in weighted least squares (isotonic regression)."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, w in zip(values.tolist(), np.maximum(weights, 1e-9).tolist()):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.concatenate([np.full(n, v) for v, _, n in blocks]) if blocks else np.zeros(0)


def _bins(conf: np.ndarray) -> np.ndarray:
    return np.clip((conf * NUM_BINS).astype(np.int64), 0, NUM_BINS - 1)


def _shrunk(hits: np.ndarray, counts: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per-bin rate of hits/counts pulled toward `parent` by PRIOR_WEIGHT pseudo-counts, then made monotone."""
    rate = (hits + PRIOR_WEIGHT * parent) / (counts + PRIOR_WEIGHT)
    return pool_adjacent_violators(rate, counts + PRIOR_WEIGHT)


class ConfidenceCalibration:
    """conf -> P(the detection is right), per (class, size) cell, from the split's detections and their matches."""

    def __init__(self, conf: np.ndarray, classes: np.ndarray, sizes: np.ndarray, right: np.ndarray,
                 num_classes: int, settings: CalibrationSettings = CalibrationSettings()):
        self.settings = settings
        k = num_classes if settings.per_class else 1
        s = NUM_SIZES if settings.per_size else 1
        cls = classes.astype(np.int64) if settings.per_class else np.zeros(len(conf), np.int64)
        size = sizes.astype(np.int64) if settings.per_size else np.zeros(len(conf), np.int64)
        b = _bins(conf)
        counts = np.zeros((k, s, NUM_BINS))
        hits = np.zeros((k, s, NUM_BINS))
        np.add.at(counts, (cls, size, b), 1.0)
        np.add.at(hits, (cls, size, b), right.astype(np.float64))
        # the split's figure, with the bin's centre as the prior of an empty bin (a flat, uninformed start)
        centres = (np.arange(NUM_BINS) + 0.5) / NUM_BINS
        overall = _shrunk(hits.sum((0, 1)), counts.sum((0, 1)), centres)
        by_size = np.stack([_shrunk(hits[:, j].sum(0), counts[:, j].sum(0), overall) for j in range(s)])
        self.table = np.stack([np.stack([_shrunk(hits[c, j], counts[c, j], by_size[j]) for j in range(s)])
                               for c in range(k)])  # [k, s, bins]

    def __call__(self, conf: np.ndarray, classes: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        if not self.settings.enabled:
            return conf.astype(np.float64)
        cls = classes.astype(np.int64) if self.settings.per_class else np.zeros(len(conf), np.int64)
        size = sizes.astype(np.int64) if self.settings.per_size else np.zeros(len(conf), np.int64)
        # linear between bin centres, so that two close confidences never land a whole bin apart
        position = np.clip(conf * NUM_BINS - 0.5, 0, NUM_BINS - 1)
        low = np.floor(position).astype(np.int64)
        high = np.minimum(low + 1, NUM_BINS - 1)
        t = position - low
        return (1 - t) * self.table[cls, size, low] + t * self.table[cls, size, high]
