"""A second model's view of what a box shows (`--second-opinion`): does a box look like the class's labelled
objects to a model that was not trained on this dataset?

A model fine-tuned on one class finds that class in everything that resembles it a little: kangaroo fold models
call horses, people and cars kangaroos at 0.8-0.95, and those detections outrank the kangaroos nobody boxed;
and where it misses a kangaroo, its right label looks invented. A general model (e.g. the COCO weights the
fine-tune started from) tells them apart: it calls the labelled kangaroos dog, sheep, cow, bird or nothing, and
those horses horse, those people person. So the second model runs over the split once, and each box gets its
view: the second model's most confident class at IoU >= 0.5, down to the audit's detection floor (0.001: a
faint detection still says what the box looks like most), or none. Its classes
need not be ours: which views go with which of our classes is learnt from the split's labels (almost all right),
per class, shrunk toward all classes' (PRIOR_WEIGHT labels). A view's ratio multiplies each kind's likelihood:
- missing: the views of the class's labels against those of its unlabelled detections (weighted by their
  statistic, so that the confident ones count);
- box, class, spurious: the views of the errors made on the split by detect.audit.likelihood.simulate (moved
  boxes: mostly none; relabelled labels: their objects', of other classes; invented boxes: what the second model
  sees on empty regions) against the views of the class's labels.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from detect.audit.calibration import shrunk_shares
from detect.audit.evidence import MATCH_IOU
from detect.ops.boxes_np import box_iou


def views(boxes: np.ndarray, opinion: np.ndarray, num_views: int) -> np.ndarray:
    """[n] the second model's view of each xyxy box: the class of its most confident detection [k, 6] at IoU >=
    0.5, or `num_views - 1` (none)."""
    none = np.full(len(boxes), num_views - 1, np.int64)
    if not len(boxes) or not len(opinion):
        return none
    on_it = box_iou(boxes, opinion[:, :4]) >= MATCH_IOU
    best = np.where(on_it, opinion[None, :, 4], -1.0).argmax(1)
    return np.where(on_it.any(1), opinion[best, 5].astype(np.int64), none)


def class_shares(counts: np.ndarray) -> np.ndarray:
    """[classes, views] shares, each class shrunk toward all classes' shares (add-half smoothed)."""
    return shrunk_shares(counts, (counts.sum(0) + 0.5) / (counts.sum() + 0.5 * counts.shape[1]))


class AppearanceRatio:
    """P(view | a labelled object of class k) / P(view | an unlabelled detection of class k), per (k, view)."""

    def __init__(self, label_classes: np.ndarray, label_views: np.ndarray, found_classes: np.ndarray,
                 found_views: np.ndarray, found_weights: np.ndarray, num_classes: int, num_views: int):
        labels = np.zeros((num_classes, num_views))
        np.add.at(labels, (label_classes, label_views), 1.0)
        found = np.zeros((num_classes, num_views))
        np.add.at(found, (found_classes, found_views), found_weights)
        self.table = class_shares(labels) / class_shares(found)

    def __call__(self, classes: np.ndarray, views_: np.ndarray) -> np.ndarray:
        return self.table[classes, views_]


@dataclasses.dataclass(frozen=True)
class LabelViews:
    """The second model's view of every label of the split, read once for all the kinds."""

    num_views: int  # the second model's classes seen on the split, and none (the last)
    per_image: list[np.ndarray]  # int [m] per image
    classes: np.ndarray  # int [M]: the labels' classes, all images together
    views: np.ndarray  # int [M]
    counted: np.ndarray  # bool [M]: not VOC difficult


def label_views(images: list) -> LabelViews | None:
    """The views of the split's labels, or None when the images carry no second opinion."""
    if not images or any(image.opinion is None for image in images):
        return None
    num_views = int(max((im.opinion[:, 5].max() for im in images if len(im.opinion)), default=-1)) + 2
    per_image = [views(im.boxes, im.opinion, num_views) for im in images]
    return LabelViews(num_views, per_image, np.concatenate([im.classes for im in images]),
                      np.concatenate(per_image), ~np.concatenate([im.difficult for im in images]))


def pooled_shares(view_list, num_views: int) -> np.ndarray:
    """[views] the shares of `view_list`, all classes together (add-half smoothed)."""
    return (np.bincount(np.asarray(view_list, np.int64), minlength=num_views) + 0.5) / \
        (len(view_list) + 0.5 * num_views)


def label_view_factors(images: list, seen: LabelViews | None, simulated, num_classes: int) -> np.ndarray:
    """[m, 3] per label of the split: how much likelier its view is when the label is a box, class or spurious
    error than when it is right. Right: the views of the class's labels (shrunk toward all classes'). Wrong: the
    views of the errors made on the split (detect.audit.likelihood.simulate): the moved boxes' (mostly none: a box
    moved off its object covers none of it at IoU 0.5), the relabelled labels' (their objects', of other classes)
    and the invented boxes' (what the second model sees on empty regions). Ones without a second opinion."""
    if seen is None:
        return np.ones((sum(len(image.classes) for image in images), 3))
    counts = np.zeros((num_classes, seen.num_views))
    np.add.at(counts, (seen.classes[seen.counted], seen.views[seen.counted]), 1.0)
    right = class_shares(counts)[seen.classes, seen.views]

    def seen_on(boxes) -> list[int]:
        return [int(views(box[None], images[n].opinion, seen.num_views)[0]) for n, box in boxes]

    wrong = [pooled_shares(seen_on(simulated.misplaced), seen.num_views),
             pooled_shares([int(seen.per_image[n][j]) for n, j in simulated.relabelled], seen.num_views),
             pooled_shares(seen_on(simulated.invented), seen.num_views)]
    return np.stack([w[seen.views] / right for w in wrong], 1)


def appearance_factors(images: list, seen: LabelViews | None, candidates: list, num_classes: int) -> list[np.ndarray]:
    """Per image, the AppearanceRatio of each missing candidate (`candidates[i]` = (detection rows, explained,
    statistic, ...)); ones where the images carry no second opinion."""
    if seen is None:
        return [np.ones(len(rows)) for rows, *_ in candidates]
    found_views = [views(im.detections[rows, :4], im.opinion, seen.num_views) for im, (rows, *_) in
                   zip(images, candidates)]
    found_classes = [im.detections[rows, 5].astype(np.int64) for im, (rows, *_) in zip(images, candidates)]
    ratio = AppearanceRatio(seen.classes[seen.counted], seen.views[seen.counted], np.concatenate(found_classes),
                            np.concatenate(found_views), np.concatenate([c[2] for c in candidates]),
                            num_classes, seen.num_views)
    return [ratio(classes, v) for classes, v in zip(found_classes, found_views)]


def with_opinions(images: list, opinions: dict[int, np.ndarray]) -> list:
    """The audit images with the second model's detections (record index -> [k, 6]) attached."""
    return [dataclasses.replace(image, opinion=opinions.get(image.index, np.zeros((0, 6)))) for image in images]
