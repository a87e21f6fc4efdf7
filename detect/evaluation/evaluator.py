"""Sharded COCO evaluation: each rank runs its own batches, the ranks share COCOeval category by category
(detect.evaluation.sharded), every rank gets the same result.

The evaluation loader forms its batches over the whole split and deals whole batches to ranks, so an image is
computed in the same batch (same shape, same neighbours) whatever the world size: the metrics are identical
for 1, 2 or 3 processes. Ranks report which images they evaluated; an image seen twice is an error. The model
runs through the Predictor every front end uses (detect.inference.predictor), whose postprocess (NMS, the
letterbox undone) makes the detections: the Predictor alone owns NMS and its thresholds, the evaluator only
scores what it is given.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from detect.evaluation.coco import (
    ClassAP,
    by_image,
    class_ap,
    detections_to_rows,
    format_summary,
    ground_truth_counts,
    rows_to_results,
    sort_rows,
)
from detect.evaluation.cocoeval_engines import (
    DEFAULT_BACKEND,
    check_backend,
    summary_stats,
)
from detect.evaluation.sharded import sharded_cocoeval
from detect.evaluation.split_match import SplitMatch, match_share, merge_shares
from detect.evaluation.voc_metrics import VocResult, check_metric, voc_from_matches
from detect.inference.options import EVALUATION
from detect.inference.predictor import InferenceSettings, Predictor
from detect.runtime import dist

log = logging.getLogger(__name__)

TIMING_KEYS = ("preprocess", "inference", "nms", "cocoeval")


@dataclass
class EvalResult:
    stats: list[float]  # the 12 COCO numbers (coco.STAT_NAMES)
    map: float          # AP@[.50:.95]
    map50: float        # AP@.50
    per_class: list[ClassAP]  # (name, images, instances, ap50, ap) for each class with ground truth
    timings: dict[str, float]  # milliseconds per image for each of TIMING_KEYS
    num_images: int
    # per rank: seconds of preprocess, inference, nms and its share of COCOeval
    rank_seconds: list[dict[str, float]] = field(default_factory=list)
    rows: np.ndarray | None = field(default=None, repr=False)  # this rank's own detections, [n, 7] (coco rows)
    match: SplitMatch | None = field(default=None, repr=False)  # rank 0: every image's matches (curves, plots)
    coco_summary: list[str] = field(default_factory=list, repr=False)  # COCOeval.summarize()'s 12 lines
    backend: str = DEFAULT_BACKEND  # the COCOeval engine that ran
    voc: VocResult | None = None  # with metric voc07 / voc12: VOC AP@0.5 and Darknet's counts

    @property
    def results(self) -> list[dict]:
        """COCO result dicts of this rank's detections, made when asked for (every rank's into one file:
        `write_results_json`)."""
        return rows_to_results(self.rows) if self.rows is not None else []


def _meta(meta, key: str):
    return meta[key] if isinstance(meta, dict) else getattr(meta, key)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class CocoEvaluator:
    """COCO metrics over one split, computed across ranks: `reset()`, `process(detections, metas)` per batch,
    then `compute()` (collective: COCOeval's work is shared by category, each rank evaluating its categories over
    every rank's images (detect.evaluation.sharded), and every rank gets the same result). With `keep_results`
    (the plots and per-class thresholds) and with a VOC metric, each rank also matches its own images
    (detect.evaluation.split_match) and rank 0 puts the matches together; no rank receives another's detections
    (results.json streams them: `write_results_json`). It scores detections only: the Predictor's settings
    (thresholds, NMS protocol) made them.

    `source` is the split the images come from (its `category_ids`, `names` and `coco_ground_truth()`); nothing is
    taken from the loader.
    """

    def __init__(self, source, *, backend: str = DEFAULT_BACKEND, keep_results: bool = True, metric: str = "coco"):
        self.source = source
        self.metric = check_metric(metric)
        self.backend, self.keep_results = check_backend(backend), keep_results
        self.reset()

    def reset(self) -> None:
        self._rows, self._image_ids = [], []
        self.seconds = dict.fromkeys(("preprocess", "inference", "nms"), 0.0)  # this rank's stage times

    def process(self, detections: list[torch.Tensor], metas) -> None:
        """One batch's detections (per image [n, 6] rows in its own pixels: Predictor.postprocess) with the
        loader's metas (their `image_id`)."""
        for rows, meta in zip(detections, metas, strict=True):
            self.add_rows(detections_to_rows(rows, _meta(meta, "image_id"), self.source.category_ids),
                          _meta(meta, "image_id"))

    def add_rows(self, rows: np.ndarray, image_id: int) -> None:
        """Detections of one image already as [n, 7] coco rows (detections_to_rows)."""
        self._rows.append(sort_rows(rows))  # one image's: the split's order is then one stable sort (by_image)
        self._image_ids.append(int(image_id))

    def compute(self) -> EvalResult:
        """Collective: the metrics, the same on every rank; rank 0 also holds every detection (`rows`) when
        `keep_results` (results.json, the plots)."""
        rows = by_image(np.concatenate(self._rows)) if self._rows else np.zeros((0, 7))
        shards = dist.all_gather_object((list(self._image_ids), dict(self.seconds)))
        image_ids = _check_images(shards, self.source)
        coco_gt = self.source.coco_ground_truth()
        counts = ground_truth_counts(coco_gt, image_ids)
        tick = time.perf_counter()
        outcome = sharded_cocoeval(coco_gt, rows, image_ids, self.source.category_ids,
                                   {cid: n for cid, (_, n) in counts.items()}, self.backend)
        seconds = time.perf_counter() - tick
        voc_metric = self.metric if self.metric != "coco" else None
        match = voc = None
        if self.keep_results or voc_metric:  # each rank matches its own images; rank 0 puts the matches together
            shares = dist.gather_object_to_main(match_share(rows, self._image_ids, self.source, voc_metric,
                                                            with_coco=self.keep_results))
            match = merge_shares(shares) if shares is not None else None
            if voc_metric:  # every rank gets the result
                voc = dist.broadcast_object(voc_from_matches(match.voc, self.source.names, self.source.category_ids,
                                                             voc_metric) if match is not None else None)
            match = match if self.keep_results else None
        if sum(outcome.rank_rows) == 0 and dist.is_main_process():
            log.warning("no detections at all: every metric is 0")
        raw = summary_stats(outcome.precision, outcome.recall)
        stats = [max(v, 0.0) for v in raw]  # COCOeval's -1 (nothing to measure) is reported as 0
        axis = {cid: k for k, cid in enumerate(outcome.category_ids)}
        per_class = [ClassAP(self.source.names[k], *counts[int(c)], *class_ap(outcome.precision, axis[int(c)]))
                     for k, c in enumerate(self.source.category_ids) if int(c) in counts]
        rank_seconds = [{**shard[1], "cocoeval": s} for shard, s in zip(shards, outcome.rank_seconds)]
        n = max(len(image_ids), 1)
        totals = {k: sum(r[k] for r in rank_seconds) for k in ("preprocess", "inference", "nms")}
        totals["cocoeval"] = seconds  # wall time of the shared evaluation
        timings = {k: 1000.0 * totals[k] / n for k in TIMING_KEYS}
        return EvalResult(stats, stats[0], stats[1], per_class, timings, len(image_ids), rank_seconds, rows, match,
                          format_summary(raw).splitlines(), self.backend, voc)


def write_results_json(path, rows: np.ndarray, chunk: int = 100_000) -> None:
    """Collective: every rank's detections (`EvalResult.rows`, coco rows) as one COCO results json at `path`,
    written by rank 0 rank after rank (each rank's images in order), a chunk of dicts at a time: rank 0 holds
    its own rows and one other rank's at once, never every rank's."""
    out = None
    if dist.is_main_process():
        tmp = f"{path}.tmp"
        out = open(tmp, "w")
        out.write("[")
    first = True
    try:
        for part in dist.objects_to_main(rows):
            for start in range(0, len(part), chunk):
                text = json.dumps(rows_to_results(part[start:start + chunk]))[1:-1]
                out.write(text if first else ", " + text)
                first = False
    finally:
        if out is not None:
            out.write("]")
            out.close()
    if out is not None:
        os.replace(tmp, path)


def _check_images(shards: list, source) -> list[int]:
    """Every evaluated image id, sorted; an image on two ranks is an error, a ground-truth image on none a
    warning."""
    image_ids = [i for ids, _seconds in shards for i in ids]
    if len(set(image_ids)) != len(image_ids):
        unique, counts = np.unique(image_ids, return_counts=True)
        raise RuntimeError(f"evaluation saw image ids {unique[counts > 1][:10].tolist()} more than once: the "
                           f"evaluation loader must deal every image to exactly one rank")
    missing = set(source.coco_ground_truth().getImgIds()) - set(image_ids)
    if missing:
        log.warning("%d ground-truth images were not evaluated (e.g. id %d); metrics cover the %d evaluated",
                    len(missing), min(missing), len(image_ids))
    return sorted(image_ids)


def evaluate(model: torch.nn.Module, loader, evaluator: CocoEvaluator, device, amp_dtype: torch.dtype | None = None,
             channels_last: bool = False, settings: InferenceSettings | None = None) -> EvalResult:
    """COCO metrics of `model` (the unwrapped / EMA module, or any Runner) over this rank's batches of `loader`,
    on every rank.

    Every rank must call this with its own loader (from build_eval_loader with its rank) over the split of
    `evaluator.source`: the same result is returned everywhere. `amp_dtype` (torch.float16 / torch.bfloat16)
    runs the model under autocast on CUDA (the model itself is not converted); `channels_last` feeds NHWC
    inputs to a model converted to that layout. `settings`: the Predictor's NMS (default detect.val's:
    EVALUATION); the loader makes the canvases.
    """
    settings = EVALUATION.settings(amp_dtype=amp_dtype) if settings is None else settings
    predictor = Predictor(model, settings, device, channels_last)
    was_training = model.training
    model.eval()
    try:
        return evaluate_batches(predictor, loader, evaluator)
    finally:
        model.train(was_training)


def evaluate_batches(predictor: Predictor, loader, evaluator: CocoEvaluator) -> EvalResult:
    """`evaluate` with the Predictor a front end built (its runner, device, precision, test-time augmentation,
    thresholds and NMS): each of this rank's letterboxed batches through its forward pass and postprocess (timed
    as "nms"), the detections to the evaluator, then the metrics (collective)."""
    device = predictor.device
    evaluator.reset()
    seconds = evaluator.seconds
    with torch.inference_mode():
        tick = time.perf_counter()
        for images, _targets, metas in loader:
            x = predictor.to_input(images)
            tick = _lap(seconds, "preprocess", tick, device)  # includes loading the batch
            pred = predictor.run(x)
            tick = _lap(seconds, "inference", tick, device)
            placements = [(_meta(m, "ratio"), _meta(m, "pad"), _meta(m, "orig_size")) for m in metas]
            evaluator.process(predictor.postprocess(pred, placements), metas)
            tick = _lap(seconds, "nms", tick, device)
    return evaluator.compute()


def evaluate_images(predictor: Predictor, steps, evaluator: CocoEvaluator) -> EvalResult:
    """Metrics of `predictor` run on whole images as detect.predict runs them (sliced, or fitted into a
    fixed-size input): `steps` yields this rank's lists of (image id, BGR image), each list one call of the
    predictor. Collective, like `evaluate`."""
    evaluator.reset()
    seconds = evaluator.seconds
    tick = time.perf_counter()
    for step in steps:
        tick = _lap(seconds, "preprocess", tick, predictor.device)  # reading the images
        found = predictor([image for _, image in step])
        tick = _lap(seconds, "inference", tick, predictor.device)  # letterbox, forward pass and NMS
        for (image_id, _), rows in zip(step, found):
            evaluator.add_rows(detections_to_rows(rows, image_id, evaluator.source.category_ids), image_id)
        tick = time.perf_counter()
    return evaluator.compute()


def _lap(seconds: dict, stage: str, since: float, device: torch.device) -> float:
    """Add the time since `since` (after the device has finished) to `stage`; returns now."""
    _synchronize(device)
    now = time.perf_counter()
    seconds[stage] += now - since
    return now
