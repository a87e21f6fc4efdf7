"""One evaluation's detections matched to the ground truth where they are: every rank matches its own images, and
rank 0 puts the compact matches together. What is computed outside COCOeval reads them: the PR and F1 curves and
the per-class thresholds (COCOeval's matching at IoU 0.5, detect.evaluation.matching), the confusion matrix, the
prediction mosaic's detections and, with `--metric voc07|voc12`, VOC's matching (detect.evaluation.voc_metrics).
No rank holds another rank's detections: a match is a score, a class and a flag or two per detection.

Matching is per image, so the matches of a split cut across ranks are the matches of the whole split; put
together in image-id order (each image's in its own order), they are what one process matching every image gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from detect.evaluation.confusion import confusion_matrix
from detect.evaluation.matching import match_detections
from detect.evaluation.per_image import truths_from_coco
from detect.evaluation.voc_metrics import VocMatches, match_voc

IOU_THRES = 0.5  # the curves', thresholds' and confusion matrix's IoU (COCOeval's AP@0.5)
CONFUSION_CONF = 0.25  # detections the confusion matrix and the prediction mosaic count
MOSAIC_IMAGES = 16  # the split's first records drawn in val_batch0_pred.jpg (detect.plots.mosaics.MAX_IMAGES)


@dataclass
class SplitMatch:
    image_ids: np.ndarray  # int64 [n]: each counted detection's image (COCOeval's rules at IOU_THRES)
    scores: np.ndarray  # [n]
    classes: np.ndarray  # int64 [n]: class indices
    hits: np.ndarray  # bool [n]: true positives
    truth_counts: np.ndarray  # int64 [K]: boxes to find per class
    confusion: np.ndarray  # int64 [K+1, K+1] at CONFUSION_CONF (detect.evaluation.confusion)
    mosaic: dict[int, np.ndarray] = field(default_factory=dict)  # image id -> [n, 6] of the mosaic's images
    voc: VocMatches | None = None  # with a VOC metric: VOC's matching of every detection

    def matched(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`match_detections`' output: what pr_curves, choose_thresholds and count_at take."""
        return self.scores, self.classes, self.hits, self.truth_counts


def detections_from_rows(rows: np.ndarray, category_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """Coco rows ([n, 7]: image id, x, y, w, h, score, category id) -> image id -> [n, 6] (x1, y1, x2, y2, score,
    class index), each image's rows in their order, without a dict per detection."""
    if len(rows) == 0:
        return {}
    ids = np.asarray(category_ids, dtype=np.int64)
    order = np.argsort(ids)
    index = order[np.searchsorted(ids, rows[:, 6].astype(np.int64), sorter=order)]
    det = np.column_stack([rows[:, 1:3], rows[:, 1:3] + rows[:, 3:5], rows[:, 5], index]).astype(np.float64)
    image = rows[:, 0].astype(np.int64)
    by_image = np.argsort(image, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(image[by_image]) != 0])
    return {int(image[g[0]]): det[g] for g in np.split(by_image, starts[1:])}


def match_share(rows: np.ndarray, image_ids: Sequence[int], source, voc_metric: str | None = None,
                with_coco: bool = True) -> SplitMatch:
    """The matches of `image_ids` (this rank's images) and their `rows` against `source`'s ground truth: COCOeval's
    at IoU 0.5, the confusion matrix and the mosaic's detections (unless not `with_coco`), VOC's with a
    `voc_metric`."""
    ids = sorted(int(i) for i in image_ids)
    coco_gt, category_ids = source.coco_ground_truth(), list(source.category_ids)
    truths = truths_from_coco(coco_gt, ids, category_ids)
    wanted = set(ids)
    detections = {i: d for i, d in detections_from_rows(rows, category_ids).items() if i in wanted}
    k = len(category_ids)
    if with_coco:
        image_of, scores, classes, hits, truth_counts = match_detections(detections, truths, k, IOU_THRES,
                                                                         with_images=True)
        confusion = confusion_matrix(detections, truths, k, CONFUSION_CONF, IOU_THRES)
        records = getattr(source, "records", ())[:MOSAIC_IMAGES]  # a split without records draws no mosaic
        first = {int(r.image_id) for r in records} & wanted
        mosaic = {i: detections[i] for i in first if i in detections}
    else:
        image_of, classes = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        scores, hits = np.zeros(0), np.zeros(0, dtype=bool)
        truth_counts, confusion, mosaic = np.zeros(k, dtype=np.int64), np.zeros((k + 1, k + 1), np.int64), {}
    voc = None
    if voc_metric is not None:
        voc = match_voc(rows[np.isin(rows[:, 0], ids)] if len(rows) else rows,
                        truths_from_coco(coco_gt, ids), category_ids)
    return SplitMatch(image_of, scores, classes, hits, truth_counts, confusion, mosaic, voc)


def merge_shares(shares: Sequence[SplitMatch]) -> SplitMatch:
    """The ranks' matches as one process matching every image would have them (image-id order)."""
    image_of = np.concatenate([s.image_ids for s in shares])
    order = np.argsort(image_of, kind="stable")
    voc = [s.voc for s in shares if s.voc is not None]
    return SplitMatch(image_of[order], np.concatenate([s.scores for s in shares])[order],
                      np.concatenate([s.classes for s in shares])[order],
                      np.concatenate([s.hits for s in shares])[order], sum(s.truth_counts for s in shares),
                      sum(s.confusion for s in shares), {k: v for s in shares for k, v in s.mosaic.items()},
                      VocMatches.merge(voc) if voc else None)
