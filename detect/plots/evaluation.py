"""The plots of one evaluation, from what rank 0 holds after COCOeval: the COCO result dicts, the split's
ground truth (its pycocotools COCO) and records. PR_curve.png, F1_curve.png, confusion_matrix.png,
val_batch0_labels.jpg and val_batch0_pred.jpg in a run folder.

The curves and the confusion matrix are detect.evaluation's (matching, pr_curves, confusion): its own matching
at IoU 0.5, not COCOeval's run, because the curves need the scores, which COCOeval's accumulated arrays keep
only on its recall grid. It follows COCOeval's rules, so the PR curve's AP is COCOeval's AP@0.5.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detect.evaluation.confusion import confusion_matrix
from detect.evaluation.matching import match_detections
from detect.evaluation.per_image import detections_by_image, truths_from_coco
from detect.evaluation.pr_curves import pr_curves
from detect.evaluation.thresholds import choose_thresholds
from detect.plots.confusion import plot_confusion_matrix
from detect.plots.curves import plot_f1_curves, plot_pr_curves
from detect.plots.mosaics import MAX_IMAGES, Tile, draw_mosaic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalPlotSettings:
    conf_thres: float = 0.25  # detections the confusion matrix and the prediction mosaic count
    iou_thres: float = 0.5


def _mosaic_tiles(records, detections: dict, conf_thres: float) -> tuple[list[Tile], list[Tile]]:
    """(ground-truth tiles, prediction tiles) of the first records whose image can be read."""
    from detect.data.records.images import load_image

    labels, predictions = [], []
    for record in records[:MAX_IMAGES]:
        try:
            image = load_image(record.path)[..., ::-1]  # BGR -> RGB
        except OSError as e:
            log.warning("mosaic: %s", e)
            continue
        det = detections.get(int(record.image_id), np.zeros((0, 6)))
        det = det[det[:, 4] >= conf_thres]
        title = Path(record.path).name
        labels.append(Tile(image, record.boxes, record.classes, title=title))
        predictions.append(Tile(image, det[:, :4], det[:, 5].astype(np.int64), det[:, 4], title=title))
    return labels, predictions


def write_eval_plots(run_dir: str | Path, results: Sequence[dict], source,
                     settings: EvalPlotSettings = EvalPlotSettings()) -> list[Path]:
    """Every evaluation plot into `run_dir`; `source` is the evaluated split (records, names, category_ids,
    coco_ground_truth()). Returns the files written."""
    run_dir = Path(run_dir)
    names, category_ids = list(source.names), list(source.category_ids)
    image_ids = [int(r.image_id) for r in source.records]
    detections = detections_by_image(results, category_ids)
    truths = truths_from_coco(source.coco_ground_truth(), image_ids, category_ids)
    matched = match_detections(detections, truths, len(names), settings.iou_thres)
    curves = pr_curves(*matched)
    choice = choose_thresholds(*matched)  # what best.pt and detect.val --save-thresholds store: marked on the curves
    counts = confusion_matrix(detections, truths, len(names), settings.conf_thres, settings.iou_thres)
    written = [plot_pr_curves(curves, names, run_dir / "PR_curve.png", choice),
               plot_f1_curves(curves, names, run_dir / "F1_curve.png", choice),
               plot_confusion_matrix(counts, names, run_dir / "confusion_matrix.png", settings.conf_thres,
                                     settings.iou_thres)]
    labels, predictions = _mosaic_tiles(source.records, detections, settings.conf_thres)
    if labels:
        written += [draw_mosaic(labels, names, run_dir / "val_batch0_labels.jpg"),
                    draw_mosaic(predictions, names, run_dir / "val_batch0_pred.jpg")]
    return written
