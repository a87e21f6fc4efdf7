"""The plots of one evaluation, from the matches rank 0 holds after it (`EvalResult.match`: each rank matched its
own images, detect.evaluation.split_match) and the split's records: PR_curve.png, F1_curve.png,
confusion_matrix.png, val_batch0_labels.jpg and val_batch0_pred.jpg in a run folder.

The curves and the confusion matrix are detect.evaluation's (matching, pr_curves, confusion): its own matching
at IoU 0.5, not COCOeval's run, because the curves need the scores, which COCOeval's accumulated arrays keep
only on its recall grid. It follows COCOeval's rules, so the PR curve's AP is COCOeval's AP@0.5.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from detect.evaluation.pr_curves import pr_curves
from detect.evaluation.split_match import CONFUSION_CONF, IOU_THRES, SplitMatch
from detect.evaluation.thresholds import choose_thresholds
from detect.plots.confusion import plot_confusion_matrix
from detect.plots.curves import plot_f1_curves, plot_pr_curves
from detect.plots.mosaics import MAX_IMAGES, Tile, draw_mosaic

log = logging.getLogger(__name__)


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


def write_eval_plots(run_dir: str | Path, match: SplitMatch, source) -> list[Path]:
    """Every evaluation plot into `run_dir`; `source` is the evaluated split (records, names). Returns the files
    written."""
    run_dir = Path(run_dir)
    names = list(source.names)
    matched = match.matched()
    curves = pr_curves(*matched)
    choice = choose_thresholds(*matched)  # what best.pt and detect.val --save-thresholds store: marked on the curves
    written = [plot_pr_curves(curves, names, run_dir / "PR_curve.png", choice),
               plot_f1_curves(curves, names, run_dir / "F1_curve.png", choice),
               plot_confusion_matrix(match.confusion, names, run_dir / "confusion_matrix.png", CONFUSION_CONF,
                                     IOU_THRES)]
    labels, predictions = _mosaic_tiles(source.records, match.mosaic, CONFUSION_CONF)
    if labels:
        written += [draw_mosaic(labels, names, run_dir / "val_batch0_labels.jpg"),
                    draw_mosaic(predictions, names, run_dir / "val_batch0_pred.jpg")]
    return written
