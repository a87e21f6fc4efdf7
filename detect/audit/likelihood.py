"""How much more often the evidence against a label shows up when the label is wrong than when it is right,
measured on the split itself by making each kind of error on its own labels.

For each kind there is one statistic (detect.audit.scoring): box = shifted * (1 - confirm), class = other *
(1 - confirm), spurious = nothing_seen(seen_conf), missing = p * (1 - explained) of an unlabelled detection. Its
density among the split's labels as they are (almost all right) is the "right" density; its density over
simulated errors is the "wrong" one: labels of the split moved by 25-75% of their size in a random direction or,
one in RESIZED_SHARE, drawn 0.5-0.7 or 1.45-2 times their size about their centre (box),
given a random other class (class), boxes of the split's sizes put where no label is (spurious), labels taken
away (missing: the statistic of the detection that then has no label). Their ratio, per bin of 0.05 and made
non-decreasing in the statistic, is the likelihood ratio the score's Bayes rule takes. The box and class ratios
are read per band of the label's confirm (BandedRatioCurve, confirm_band): a moved or relabelled box is rarely
confirmed, a right label with a poor detection beside it often is, if only faintly, which the product
(1 - confirm) alone undervalues; the missing ratio per whether the detection's class is labelled elsewhere in its
image. The spurious ratio is
measured per (class, size) cell, its right density shrunk toward the split's: a class the model rarely finds
shows "nothing seen" often on correct labels, so nothing seen says little there.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from detect.audit.calibration import pool_adjacent_violators, shrunk_shares
from detect.audit.evidence import (
    MATCH_IOU,
    AuditImage,
    label_evidence,
    missing_candidates,
    nothing_seen,
)
from detect.ops.boxes_np import box_iou

NUM_BINS = 20
SIMULATED = 3000  # labels perturbed per kind (at most): enough for 20 bins, a second on COCO's val
MOVE_RANGE = (0.25, 0.75)  # of the box's width and height
RESIZED_SHARE = 0.3  # of the simulated box errors: the right place, clearly another extent
RESIZE_RANGES = ((0.5, 0.7), (1.45, 2.0))  # each side times this: IoU with the object 0.25-0.49
TIE_BREAK = 0.01
PLACE_GRID = 4.0  # pixels: the grid a label's box is read on for its simulation key (label_keys)


def histogram(values: np.ndarray) -> np.ndarray:
    return np.bincount(np.clip((np.asarray(values) * NUM_BINS).astype(np.int64), 0, NUM_BINS - 1),
                       minlength=NUM_BINS).astype(np.float64)


class RatioCurve:
    """wrong density / right density of a statistic in [0, 1], per bin (add-half smoothed), non-decreasing."""

    def __init__(self, wrong: np.ndarray, right_counts: np.ndarray):
        wrong_counts = histogram(wrong)
        f1 = (wrong_counts + 0.5) / (wrong_counts.sum() + 0.5 * NUM_BINS)
        f0 = (right_counts + 0.5) / (right_counts.sum() + 0.5 * NUM_BINS)
        # weighted by the right density, a pooled run of bins gets its mass ratio: where the statistic does not
        # rise with the error, the ratio is 1
        self.table = pool_adjacent_violators(f1 / f0, f0)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        position = np.clip(np.asarray(values) * NUM_BINS - 0.5, 0, NUM_BINS - 1)
        low = np.floor(position).astype(np.int64)
        high = np.minimum(low + 1, NUM_BINS - 1)
        t = position - low
        # pooled bins (pool adjacent violators) would tie every statistic in them: the statistic itself breaks
        # the tie, by at most 1%, so that within a kind the stronger evidence still ranks first
        return ((1 - t) * self.table[low] + t * self.table[high]) * (1.0 + TIE_BREAK * np.asarray(values))


class CellRatioCurves:
    """A RatioCurve per (class, size) cell, as the confidence calibration groups: each cell's right density shrunk
    toward its size's, the size's toward the split's (PRIOR_WEIGHT labels each), so a rare class borrows its
    size's figure rather than the split's, where small objects and large ones are mixed."""

    def __init__(self, wrong: np.ndarray, right: np.ndarray, classes: np.ndarray, sizes: np.ndarray,
                 num_classes: int, num_sizes: int):
        self.num_sizes = num_sizes
        counts = np.zeros((num_classes, num_sizes, NUM_BINS))
        np.add.at(counts, (classes, sizes, np.clip((right * NUM_BINS).astype(np.int64), 0, NUM_BINS - 1)), 1.0)
        overall = counts.sum((0, 1)) / max(counts.sum(), 1.0)
        by_size = shrunk_shares(counts.sum(0), overall)
        # with one class (or classes not told apart) the cell is its size
        shrunk = by_size[None] if num_classes == 1 else shrunk_shares(counts, by_size)
        self.curves = [RatioCurve(wrong, density * 1000.0) for density in shrunk.reshape(-1, NUM_BINS)]

    def __call__(self, values: np.ndarray, classes: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        cells = classes * self.num_sizes + sizes
        out = np.zeros(len(values))
        for c in np.unique(cells):
            where = cells == c
            out[where] = self.curves[int(c)](values[where])
        return out


CONFIRM_EDGES = np.array([0.02, 0.1, 0.3])  # bands of a label's `confirm`: faint, some, strong
CONFIRM_BANDS = len(CONFIRM_EDGES) + 2  # and below them all: no confirming detection at all
SIBLING_BANDS = 2  # an unlabelled detection's labelled same-class objects in its image: none, some


def confirm_band(confirm: np.ndarray, confirm_conf: np.ndarray) -> np.ndarray:
    """0 where no same-class detection sits on the box at all (down to the detection floor), else 1 + the band of
    `confirm` (CONFIRM_EDGES). Calibrated, a faint confirming detection and none are both about 0, yet they tell a
    right label the model barely confirms from a moved or relabelled one, which nothing confirms: on coco-tiny with
    yolov3-tiny, 84% of the moved labels listed as box errors have no same-class detection at IoU 0.5, against 43%
    of the right labels listed."""
    return np.where(np.asarray(confirm_conf) > 0, np.digitize(confirm, CONFIRM_EDGES) + 1, 0)


def sibling_band(count: np.ndarray) -> np.ndarray:
    return np.minimum(np.asarray(count, np.int64), SIBLING_BANDS - 1)


def band_ratio(wrong_band: np.ndarray, right_band: np.ndarray, num_bands: int) -> np.ndarray:
    """Per band: its share among the errors over its share among the split's own cases (add-half smoothed)."""
    nw = np.bincount(wrong_band, minlength=num_bands) + 0.5
    nr = np.bincount(right_band, minlength=num_bands) + 0.5
    return (nw / nw.sum()) / (nr / nr.sum())


class BandedRatioCurve:
    """The likelihood ratio of (statistic, band): the band's share under the error over its share among the
    split's own cases, times a RatioCurve of the statistic within the band. For box and class the band is the
    label's confirm (a moved or relabelled box is rarely confirmed, a right label with a poor detection beside it
    often is, which the statistic's (1 - confirm) alone undervalues); for missing, how many objects of the class
    the image has labelled (a forgotten object is mostly one of several alike; a false find often alone)."""

    def __init__(self, wrong: np.ndarray, wrong_band: np.ndarray, right: np.ndarray, right_band: np.ndarray,
                 num_bands: int):
        self.band_ratio = band_ratio(wrong_band, right_band, num_bands)
        self.curves = [RatioCurve(wrong[wrong_band == b], histogram(right[right_band == b]))
                       for b in range(num_bands)]

    def __call__(self, values: np.ndarray, bands: np.ndarray) -> np.ndarray:
        out = np.zeros(len(values))
        for b in np.unique(bands):
            where = bands == b
            out[where] = self.band_ratio[b] * self.curves[b](values[where])
        return out


def _misplaced_box(box: np.ndarray, rng, width: float, height: float) -> np.ndarray:
    """A box error made on `box`: moved off its object, or (RESIZED_SHARE) of clearly another extent."""
    w, h = box[2] - box[0], box[3] - box[1]
    if rng.uniform() < RESIZED_SHARE:
        scale = rng.uniform(*RESIZE_RANGES[int(rng.integers(len(RESIZE_RANGES)))])
        centre, half = (box[:2] + box[2:]) / 2, np.array([w, h]) * scale / 2
        misplaced = np.concatenate([centre - half, centre + half])
    else:
        distance, angle = rng.uniform(*MOVE_RANGE), rng.uniform(0, 2 * np.pi)
        misplaced = box + np.tile([distance * w * np.cos(angle), distance * h * np.sin(angle)], 2)
    return np.clip(misplaced, 0, [width, height, width, height])


def _empty_box(image: AuditImage, size: np.ndarray, rng, tries: int = 10) -> np.ndarray | None:
    side = image.longer_side
    w, h = size
    if w >= side or h >= side:
        return None
    for _ in range(tries):
        x, y = rng.uniform(0, side - w), rng.uniform(0, side - h)
        box = np.array([[x, y, x + w, y + h]])
        if not len(image.boxes) or box_iou(box, image.boxes).max() == 0:
            return box[0]
    return None


@dataclasses.dataclass
class SimulatedErrors:
    """The statistics of simulated errors of each kind."""

    box: np.ndarray
    wrong_class: np.ndarray
    nothing: np.ndarray
    missing: np.ndarray
    box_band: np.ndarray  # the confirm_band of the misplaced, the relabelled and the invented labels
    class_band: np.ndarray
    invented_band: np.ndarray
    missing_siblings: np.ndarray  # the removed label's class's other labels in its image
    # where they were made, for a second model's view of them (detect.audit.second_opinion): (image, box) of the
    # misplaced and the invented labels, (image, label) of the relabelled ones
    misplaced: list = dataclasses.field(default_factory=list)
    invented: list = dataclasses.field(default_factory=list)
    relabelled: list = dataclasses.field(default_factory=list)
    # the detection beside each misplaced and invented label (its `shifted_det`, -1 when none: detect.audit.beside)
    misplaced_beside: list = dataclasses.field(default_factory=list)
    invented_beside: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Perturbation:
    """The errors made on one label of the split (simulation_plan): where the label is, where it would be misplaced
    to, the class it would be given (None with one class), and an empty place of its size for an invented label
    (None when there is none)."""

    image: int  # position in the images
    label: int
    misplaced: np.ndarray
    new_class: int | None
    invented: np.ndarray | None


def label_keys(image: AuditImage, seed: int = 0) -> list[int]:
    """Each label's own draw of the simulation: a number fixed by the image's file name, the label's class and its
    box (to PLACE_GRID pixels, so a box that a format's rounding moves by a fraction of a pixel keeps it), not by
    where the image or the label stands in the split; the same split in COCO json or YOLO txt, in any order, makes
    the same errors on the same labels."""
    cells = np.round(image.boxes / PLACE_GRID).astype(np.int64).tolist()
    texts = (f"{seed}|{image.name}|{c}|{' '.join(map(str, box))}" for c, box in zip(image.classes.tolist(), cells))
    return [int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") for text in texts]


def simulation_plan(images: list[AuditImage], num_classes: int, seed: int = 0) -> list[Perturbation]:
    """The errors simulate() makes: on up to SIMULATED labels of the split (not difficult), drawn from the labels
    alone (so the boxes can be looked at closely before the scoring: detect.audit.close_look). Which labels, and
    what is made of each, follow from each label's own key (label_keys), not from the order the split lists them
    in."""
    keyed = sorted((key, n, j) for n, im in enumerate(images) for j, key in enumerate(label_keys(im, seed))
                   if not im.difficult[j])
    plan = []
    for key, n, j in keyed[:SIMULATED]:
        rng = np.random.default_rng(key)
        image = images[n]
        misplaced = _misplaced_box(image.boxes[j], rng, image.longer_side, image.longer_side)
        new_class = int((image.classes[j] + rng.integers(1, num_classes)) % num_classes) if num_classes > 1 else None
        invented = _empty_box(image, image.boxes[j, 2:] - image.boxes[j, :2], rng)
        plan.append(Perturbation(n, j, misplaced, new_class, invented))
    return plan


def simulate(images: list[AuditImage], probs: list[np.ndarray], num_classes: int, window_low: float,
             seed: int = 0) -> SimulatedErrors:
    """Errors of each kind made on up to SIMULATED labels of the split (simulation_plan), and what the model's
    evidence says then."""
    box, wrong_class, nothing, missing, siblings = [], [], [], [], []
    box_band, class_band, invented_band = [], [], []
    places: dict[str, list] = {"misplaced": [], "invented": [], "relabelled": [], "misplaced_beside": [],
                               "invented_beside": []}
    for change in simulation_plan(images, num_classes, seed):
        n, j = change.image, change.label
        image, p = images[n], probs[n]
        moved = image.boxes.copy()
        moved[j] = change.misplaced
        ev = label_evidence(dataclasses.replace(image, boxes=moved), p, window_low)
        box.append(ev.shifted[j] * (1 - ev.confirm[j]))
        box_band.append(confirm_band(ev.confirm[j], ev.confirm_conf[j]))
        places["misplaced"].append((n, moved[j]))
        places["misplaced_beside"].append(int(ev.shifted_det[j]))
        if change.new_class is not None:
            relabelled = image.classes.copy()
            relabelled[j] = change.new_class
            ev = label_evidence(dataclasses.replace(image, classes=relabelled), p, window_low)
            wrong_class.append(ev.other[j] * (1 - ev.confirm[j]))
            class_band.append(confirm_band(ev.confirm[j], ev.confirm_conf[j]))
            places["relabelled"].append((n, j))
        if change.invented is not None:  # the invented label, of the picked label's class, read as the labels are
            empty = change.invented
            places["invented"].append((n, empty))
            added = dataclasses.replace(image, boxes=np.concatenate([image.boxes, empty[None]]),
                                        classes=np.append(image.classes, image.classes[j]))
            ev = label_evidence(added, p, window_low)
            nothing.append(float(nothing_seen(ev.seen_conf[-1])))
            invented_band.append(confirm_band(ev.confirm[-1], ev.confirm_conf[-1]))
            places["invented_beside"].append(int(ev.shifted_det[-1]))
        keep = np.arange(len(image.classes)) != j
        fewer = dataclasses.replace(image, boxes=image.boxes[keep], classes=image.classes[keep],
                                    difficult=image.difficult[keep])
        ev = label_evidence(fewer, p, window_low)
        rows, explained = missing_candidates(fewer, p, ev.confirm, window_low)
        found = 0.0
        if len(rows):
            on_it = box_iou(image.detections[rows, :4], image.boxes[j][None])[:, 0] >= MATCH_IOU
            if on_it.any():
                found = float((p[rows] * (1 - explained))[on_it].max())
        missing.append(found)
        siblings.append(int((fewer.classes == image.classes[j]).sum()))
    statistics = (box, wrong_class, nothing, missing)
    bands = (box_band, class_band, invented_band, siblings)
    return SimulatedErrors(*(np.asarray(v, float) for v in statistics), *(np.asarray(v, np.int64) for v in bands),
                           **places)
