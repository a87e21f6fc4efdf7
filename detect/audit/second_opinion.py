"""A second model's view of what a box shows (`--second-opinion`): is an unlabelled detection the kind of thing
the class's labelled objects are?

A model fine-tuned on one class finds that class in everything that resembles it a little: kangaroo fold models
call horses, people and cars kangaroos at 0.8-0.95, and those detections outrank the kangaroos nobody boxed.
A general model (e.g. the COCO weights the fine-tune started from) tells them apart: it calls the labelled
kangaroos dog, sheep, cow, bird or nothing, and those horses horse, those people person. So the second model
runs over the split once, and each box gets its view: the second model's best class at IoU >= 0.5 (confidence
>= OPINION_CONF), or none. Per class of the dataset, the views of its labels (the split's, almost all right)
are compared with the views of its unlabelled detections (weighted by each one's calibrated chance, so the
confident ones count): their ratio is how much likelier the view is for a real object of the class than for
what the model finds unlabelled. It multiplies a missing candidate's likelihood ratio. Each class's figures are
shrunk toward all classes' together (PRIOR_WEIGHT labels), so a class with few labels borrows from the others.
The second model's classes need not be the dataset's: only which of its views go with which of our classes is
learnt, from the labels.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from detect.audit.calibration import PRIOR_WEIGHT
from detect.audit.evidence import MATCH_IOU
from detect.data.loader import close_loader
from detect.evaluation.model_eval import Feed, rank_steps, whole_image_loader
from detect.inference.loading import class_names
from detect.inference.options import AUDIT, build_settings, load_model
from detect.inference.predictor import Predictor
from detect.ops.boxes_np import box_iou
from detect.runtime import dist

log = logging.getLogger("detect.audit")

OPINION_CONF = 0.05  # the second model's detections below this are no view of the box


def views(boxes: np.ndarray, opinion: np.ndarray, num_views: int) -> np.ndarray:
    """[n] the second model's view of each xyxy box: the class of its most confident detection [k, 6] at IoU >=
    0.5 with confidence >= OPINION_CONF, or `num_views - 1` (none)."""
    none = np.full(len(boxes), num_views - 1, np.int64)
    opinion = opinion[opinion[:, 4] >= OPINION_CONF] if len(opinion) else opinion
    if not len(boxes) or not len(opinion):
        return none
    on_it = box_iou(boxes, opinion[:, :4]) >= MATCH_IOU
    best = np.where(on_it, opinion[None, :, 4], -1.0).argmax(1)
    return np.where(on_it.any(1), opinion[best, 5].astype(np.int64), none)


def _shares(counts: np.ndarray) -> np.ndarray:
    """[classes, views] shares, each class shrunk toward all classes' shares by PRIOR_WEIGHT pseudo-counts."""
    pooled = (counts.sum(0) + 0.5) / (counts.sum() + 0.5 * counts.shape[1])
    return (counts + PRIOR_WEIGHT * pooled) / (counts.sum(1, keepdims=True) + PRIOR_WEIGHT)


class AppearanceRatio:
    """P(view | a labelled object of class k) / P(view | an unlabelled detection of class k), per (k, view)."""

    def __init__(self, label_classes: np.ndarray, label_views: np.ndarray, found_classes: np.ndarray,
                 found_views: np.ndarray, found_weights: np.ndarray, num_classes: int, num_views: int):
        labels = np.zeros((num_classes, num_views))
        np.add.at(labels, (label_classes, label_views), 1.0)
        found = np.zeros((num_classes, num_views))
        np.add.at(found, (found_classes, found_views), found_weights)
        self.table = _shares(labels) / _shares(found)

    def __call__(self, classes: np.ndarray, views_: np.ndarray) -> np.ndarray:
        return self.table[classes, views_]


def opinion_detections(source, weights: str, cfg: str | None, options, ctx, workers: int = 0,
                       cache_dir=None) -> tuple[dict[int, np.ndarray] | None, list[str]]:
    """Collective: (record index -> the second model's detections [k, 6] in its own classes, on rank 0 (None
    elsewhere); its class names). The split's images through detect.predict's path, whole batches to the ranks."""
    handle = load_model(weights, cfg, options, ctx.device, cache_dir=cache_dir)
    predictor = Predictor(handle.runner, build_settings(handle, options, AUDIT, ctx.device), ctx.device)
    steps = rank_steps(source.records, predictor.settings.batch_size, ctx.rank, ctx.world_size)
    index = {record.image_id: i for i, record in enumerate(source.records)}
    loader = whole_image_loader(source, steps, Feed("second opinion", predictor.settings.batch_size, workers,
                                                    ctx.rank, ctx.world_size, cache_dir))
    found: dict[int, np.ndarray] = {}
    try:
        for step in loader:
            for (image_id, _), rows in zip(step, predictor([image for _, image in step])):
                found[index[image_id]] = rows.detach().cpu().numpy().astype(np.float64)
    finally:
        close_loader(loader)
    parts = dist.gather_object_to_main(found)
    names = list(class_names(handle))
    log.info("second opinion: %s (%d classes) over %d images", weights, len(names), len(source.records))
    return ({k: v for part in parts for k, v in part.items()} if parts is not None else None), names


def appearance_factors(images: list, candidates: list, num_classes: int) -> list[np.ndarray]:
    """Per image, the AppearanceRatio of each missing candidate (`candidates[i]` = (detection rows, explained,
    statistic)); ones where the images carry no second opinion."""
    if not images or any(image.opinion is None for image in images):
        return [np.ones(len(rows)) for rows, _, _ in candidates]
    num_views = int(max((image.opinion[:, 5].max() for image in images if len(image.opinion)), default=-1)) + 2
    label_views = [views(im.boxes[~im.difficult], im.opinion, num_views) for im in images]
    found_views = [views(im.detections[rows, :4], im.opinion, num_views) for im, (rows, _, _) in
                   zip(images, candidates)]
    found_classes = [im.detections[rows, 5].astype(np.int64) for im, (rows, _, _) in zip(images, candidates)]
    ratio = AppearanceRatio(np.concatenate([im.classes[~im.difficult] for im in images]),
                            np.concatenate(label_views), np.concatenate(found_classes), np.concatenate(found_views),
                            np.concatenate([statistic for _, _, statistic in candidates]), num_classes, num_views)
    return [ratio(classes, v) for classes, v in zip(found_classes, found_views)]


def with_opinions(images: list, opinions: dict[int, np.ndarray]) -> list:
    """The audit images with the second model's detections (record index -> [k, 6]) attached."""
    return [dataclasses.replace(image, opinion=opinions.get(image.index, np.zeros((0, 6)))) for image in images]
