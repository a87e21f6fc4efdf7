"""What the detection beside a label says about which error the label would be.

A label's `shifted` detection (detect.audit.evidence: the best same-class detection overlapping it at
window_low <= IoU < 0.5 that is no other label's object) is the evidence of a `box` error: the model sees the
object beside the label. It is also there when the label was invented next to something the model finds (an
unlabelled object, a false alarm), and beside many right labels (a poorly placed second detection). Which of these
it is shows in how the two boxes relate: a misplaced label keeps its object's size (moved) or differs from it by a
clear factor (drawn too small or too large) and overlaps it well, while a box invented on an empty region lies
beside whatever is there, of any size, barely overlapping, and the detection beside a right label is mostly another
object (an unboxed neighbour: the glass beside the labelled glass), just touching it. So each pair falls in a band,
size agreement (|log area ratio| below log 1.5, below log 3, beyond) times overlap (IoU bands, OVERLAP_EDGES), and
the box and spurious ratios are multiplied by the band's share among the simulated errors of the kind
(detect.audit.likelihood.simulate) over its share among the split's labels that have a detection beside them.
With a second model (detect.audit.second_opinion), its view of the detection beside counts the same way: the
object of a misplaced label looks like the class's labelled objects; what lies beside an invented box looks like
what it is (a person a kangaroo model calls a kangaroo).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from detect.audit.likelihood import SimulatedErrors, band_ratio
from detect.audit.second_opinion import LabelViews, class_shares, pooled_shares, views
from detect.ops.boxes_np import MIN_UNION, aligned_box_iou, box_area

AREA_EDGES = np.log([1.5, 3.0])  # |log(area beside / area of the label)|: the same size, another, unrelated
# IoU of the pair: a random box or a neighbour mostly under 0.25, a misplaced label's object more; read in bands of
# 0.1 above (one edge at 0.2: coco-tiny box-level AP 0.497 instead of 0.502, box kind 0.401 instead of 0.420)
OVERLAP_EDGES = np.array([0.25, 0.35, 0.45])
OVERLAPS = len(OVERLAP_EDGES) + 1
BANDS = (len(AREA_EDGES) + 1) * OVERLAPS


@dataclass(frozen=True)
class Pairs:
    """Labels and the detections beside them, all images together."""

    image: np.ndarray  # int [k]: the image of each pair
    label: np.ndarray  # float [k, 4]
    beside: np.ndarray  # float [k, 4]


def pair_bands(pairs: Pairs) -> np.ndarray:
    """[k] the band of each pair (the module docstring)."""
    ratio = np.maximum(box_area(pairs.beside), MIN_UNION) / np.maximum(box_area(pairs.label), MIN_UNION)
    size = np.digitize(np.abs(np.log(ratio)), AREA_EDGES)
    overlap = np.digitize(aligned_box_iou(pairs.label, pairs.beside), OVERLAP_EDGES)
    return (size * OVERLAPS + overlap).astype(np.int64)


def split_pairs(images: list, evidence: list) -> tuple[np.ndarray, Pairs]:
    """(which of the split's labels [M] have a detection beside them, those pairs)."""
    has = np.concatenate([ev.shifted_det >= 0 for ev in evidence]) if evidence else np.zeros(0, bool)
    parts = []
    for n, (image, ev) in enumerate(zip(images, evidence)):
        rows = ev.shifted_det[ev.shifted_det >= 0]
        parts.append((np.full(len(rows), n), image.boxes[ev.shifted_det >= 0], image.evidence_rows()[rows, :4]))
    return has, _pairs(parts)


def simulated_pairs(images: list, places: list, rows: list) -> Pairs:
    """The simulated labels (image, box) that have a detection beside them (`rows`, -1 when none)."""
    return _pairs([(np.array([n]), box[None], images[n].evidence_rows()[row, :4][None])
                   for (n, box), row in zip(places, rows) if row >= 0])


def _pairs(parts: list) -> Pairs:
    if not parts:
        return Pairs(np.zeros(0, np.int64), np.zeros((0, 4)), np.zeros((0, 4)))
    return Pairs(*(np.concatenate([part[i] for part in parts]) for i in range(3)))


def beside_factors(images: list, evidence: list, simulated: SimulatedErrors, seen: LabelViews | None,
                   num_classes: int) -> np.ndarray:
    """[M, 3] per label of the split, the factors of its box and spurious ratios from the detection beside it
    (ones for the class kind and where there is none); with a second opinion, times its view's."""
    counted = ~np.concatenate([im.difficult for im in images]) if images else np.zeros(0, bool)
    has, right = split_pairs(images, evidence)
    out = np.ones((len(has), 3))
    right_band = pair_bands(right)
    reference = right_band[counted[has]]
    wrong = {0: simulated_pairs(images, simulated.misplaced, simulated.misplaced_beside),
             2: simulated_pairs(images, simulated.invented, simulated.invented_beside)}
    for column, pairs in wrong.items():
        out[has, column] = band_ratio(pair_bands(pairs), reference, BANDS)[right_band]
    if seen is not None:
        right_views = _views_beside(images, right, seen.num_views)
        counts = np.zeros((num_classes, seen.num_views))
        classes = seen.classes[has]
        np.add.at(counts, (classes[counted[has]], right_views[counted[has]]), 1.0)
        share = class_shares(counts)[classes, right_views]
        for column, pairs in wrong.items():
            wrong_views = _views_beside(images, pairs, seen.num_views)
            out[has, column] *= pooled_shares(wrong_views, seen.num_views)[right_views] / share
    return out


def _views_beside(images: list, pairs: Pairs, num_views: int) -> np.ndarray:
    """[k] the second model's view of each pair's detection beside."""
    out = np.full(len(pairs.image), num_views - 1, np.int64)
    for n in np.unique(pairs.image):
        where = pairs.image == n
        out[where] = views(pairs.beside[where], images[int(n)].opinion, num_views)
    return out
