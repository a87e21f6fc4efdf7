"""The single-process COCOeval the product's evaluation is checked against: pycocotools (or faster-coco-eval) run
once over every image and category, as a user would run it by hand. The product evaluates through
detect.evaluation.evaluator (shared by ranks, detect.evaluation.sharded); these figures are what it must give."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Sequence

from detect.evaluation.coco import STAT_NAMES, ClassAP, class_ap, ground_truth_counts
from detect.evaluation.cocoeval_engines import check_ground_truth_ids, cocoeval_class, quiet

log = logging.getLogger(__name__)


def coco_evaluate(coco_gt, results: list[dict], image_ids: Sequence[int], names: Sequence[str],
                  category_ids: Sequence[int], summary_lines: list[str] | None = None,
                  backend: str = "pycocotools") -> tuple[list[float], list[ClassAP]]:
    """Run COCOeval (bbox) over `image_ids` in this process: the 12 stats and AP per class with ground truth.
    The reference the sharded evaluation (detect.evaluation.sharded) is tested against.

    No detections at all gives zeros (the COCO API cannot load an empty result list). Ground truth flagged
    `difficult` is ignored the VOC way (`cocoeval_engines.cocoeval_class`). `summary_lines`, when given,
    receives the lines COCOeval.summarize() printed, as printed (nothing when COCOeval did not run).
    """
    check_ground_truth_ids(coco_gt)
    image_ids = sorted(int(i) for i in image_ids)
    counts = ground_truth_counts(coco_gt, image_ids)
    present = [(k, int(cid)) for k, cid in enumerate(category_ids) if int(cid) in counts]
    if not results:
        log.warning("no detections at all: every metric is 0")
        per_class = [ClassAP(names[k], *counts[cid], 0.0, 0.0) for k, cid in present]
        return [0.0] * len(STAT_NAMES), per_class

    coco_dt = quiet(coco_gt.loadRes, results)
    evaluator = cocoeval_class(backend)(coco_gt, coco_dt, "bbox")
    if backend != "pycocotools":
        evaluator.print_function = print  # its summarize() prints through this
    evaluator.params.imgIds = image_ids
    # COCOeval sorts the category ids; precision's class axis follows that order
    evaluated_ids = sorted({int(c) for c in category_ids})
    evaluator.params.catIds = evaluated_ids
    quiet(evaluator.evaluate)
    quiet(evaluator.accumulate)
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):  # kept verbatim: users compare it with published logs
        evaluator.summarize()
    log.debug("pycocotools summary:\n%s", summary.getvalue().rstrip())
    if summary_lines is not None:
        summary_lines.extend(summary.getvalue().splitlines())
    # pycocotools reports -1 for "no ground truth"; a metric of nothing is reported as 0 here
    stats = [max(float(s), 0.0) for s in evaluator.stats]
    precision = evaluator.eval["precision"]
    axis = {cid: i for i, cid in enumerate(evaluated_ids)}
    per_class = [ClassAP(names[k], *counts[cid], *class_ap(precision, axis[cid])) for k, cid in present]
    return stats, per_class
