"""Sharded COCO evaluation: each rank runs its own batches, rank 0 runs COCOeval, every rank gets the result.

The evaluation loader forms its batches over the whole split and deals whole batches to ranks, so an image is
computed in the same batch (same shape, same neighbours) whatever the world size: the metrics are identical
for 1, 2 or 3 processes. Ranks report which images they evaluated; an image seen twice is an error.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from detect.evaluation.coco import ClassAP, coco_evaluate, detections_to_rows, rows_to_results, sort_rows
from detect.evaluation.postprocess import non_max_suppression, scale_to_original
from detect.ops.preprocess import to_model_input
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
    rank_seconds: list[dict[str, float]] = field(default_factory=list)  # per rank: preprocess/inference/nms
    results: list[dict] = field(default_factory=list, repr=False)  # COCO result dicts (for --save-json)
    coco_summary: list[str] = field(default_factory=list, repr=False)  # COCOeval.summarize()'s lines, verbatim


@dataclass
class _ShardOutput:
    """What one rank sends to rank 0."""

    rows: np.ndarray  # [n, 7] (image_id, x, y, w, h, score, category_id)
    image_ids: list[int]
    seconds: dict[str, float]


def _meta(meta, key: str):
    return meta[key] if isinstance(meta, dict) else getattr(meta, key)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _autocast(device: torch.device, amp_dtype: torch.dtype | None):
    if amp_dtype is not None and device.type == "cuda":
        return torch.autocast("cuda", dtype=amp_dtype)
    return contextlib.nullcontext()


class CocoEvaluator:
    """COCO metrics over one split, computed across ranks: `reset()`, `process(pred, metas)` per batch, then
    `compute()` (collective: gathers every rank's detections, rank 0 runs COCOeval, every rank gets the result).

    `source` is the split the images come from (its `category_ids`, `names` and `coco_ground_truth()`); nothing is
    taken from the loader. `merge` refines each kept box to the score-weighted mean of its NMS cluster (higher
    mAP; the plain protocol of other implementations is multi_label=False, merge=False).
    """

    def __init__(self, source, conf_thres: float = 0.001, iou_thres: float = 0.6, max_det: int = 300,
                 multi_label: bool = True, merge: bool = True):
        self.source = source
        self.conf_thres, self.iou_thres, self.max_det = conf_thres, iou_thres, max_det
        self.multi_label, self.merge = multi_label, merge
        self.reset()

    def reset(self) -> None:
        self._rows, self._image_ids = [], []
        self.seconds = dict.fromkeys(("preprocess", "inference", "nms"), 0.0)  # this rank's stage times

    def process(self, pred: torch.Tensor, metas) -> None:
        """NMS of one batch's [N, P, 5+K] predictions; rows in original image pixels."""
        tick = time.perf_counter()
        detections = non_max_suppression(pred, self.conf_thres, self.iou_thres, self.max_det, self.multi_label,
                                         merge=self.merge)
        for det, meta in zip(detections, metas):
            image_id = int(_meta(meta, "image_id"))
            boxes = scale_to_original(det, _meta(meta, "ratio"), _meta(meta, "pad"), _meta(meta, "orig_size"))
            self._rows.append(detections_to_rows(torch.cat((boxes, det[:, 4:6]), dim=1), image_id,
                                                 self.source.category_ids))
            self._image_ids.append(image_id)
        self.seconds["nms"] += time.perf_counter() - tick

    def gather(self) -> list[_ShardOutput]:
        """Every rank's detections (collective; the list is complete on every rank)."""
        rows = np.concatenate(self._rows) if self._rows else np.zeros((0, 7))
        return dist.all_gather_object(_ShardOutput(rows, list(self._image_ids), dict(self.seconds)))

    def compute(self) -> EvalResult:
        """Collective: the metrics, the same on every rank (rank 0 also keeps the COCO result dicts)."""
        shards = self.gather()
        outcome, results = (None, None), []
        if dist.is_main_process():
            try:
                result = _evaluate_on_rank0(shards, self.source)
            except Exception as e:  # tell the other ranks instead of leaving them waiting at the broadcast
                dist.broadcast_object((None, f"{type(e).__name__}: {e}"))
                raise
            results, result.results = result.results, []  # only the metrics travel; rank 0 keeps the results
            outcome = (result, None)
        result, failure = dist.broadcast_object(outcome)
        if failure is not None:
            raise dist.RemoteRankError(f"COCO evaluation failed on rank 0: {failure}")
        if dist.is_main_process():
            result.results = results
        return result


def _merge_shards(shards: list[_ShardOutput]) -> tuple[np.ndarray, list[int], dict[str, float]]:
    image_ids = [i for shard in shards for i in shard.image_ids]
    seconds = {k: sum(shard.seconds[k] for shard in shards) for k in ("preprocess", "inference", "nms")}
    if len(set(image_ids)) != len(image_ids):
        unique, counts = np.unique(image_ids, return_counts=True)
        raise RuntimeError(f"evaluation saw image ids {unique[counts > 1][:10].tolist()} more than once: the "
                           f"evaluation loader must deal every image to exactly one rank")
    rows = sort_rows(np.concatenate([shard.rows for shard in shards]))
    return rows, sorted(image_ids), seconds


def _evaluate_on_rank0(shards: list[_ShardOutput], source) -> EvalResult:
    rows, image_ids, seconds = _merge_shards(shards)
    coco_gt = source.coco_ground_truth()
    missing = set(coco_gt.getImgIds()) - set(image_ids)
    if missing:
        log.warning("%d ground-truth images were not evaluated (e.g. id %d); metrics cover the %d evaluated",
                    len(missing), min(missing), len(image_ids))
    tick = time.perf_counter()
    results = rows_to_results(rows)
    summary: list[str] = []
    stats, per_class = coco_evaluate(coco_gt, results, image_ids, source.names, source.category_ids, summary)
    seconds["cocoeval"] = time.perf_counter() - tick
    n = max(len(image_ids), 1)
    # per-image cost summed over ranks (what one image costs), milliseconds
    timings = {k: 1000.0 * seconds[k] / n for k in TIMING_KEYS}
    return EvalResult(stats, stats[0], stats[1], per_class, timings, len(image_ids),
                      [dict(shard.seconds) for shard in shards], results, summary)


def evaluate(model: torch.nn.Module, loader, evaluator: CocoEvaluator, device, amp_dtype: torch.dtype | None = None,
             channels_last: bool = False) -> EvalResult:
    """COCO metrics of `model` (the unwrapped / EMA module) over this rank's batches of `loader`, on every rank.

    Every rank must call this with its own loader (from build_eval_loader with its rank) over the split of
    `evaluator.source`: the same result is returned everywhere. `amp_dtype` (torch.float16 / torch.bfloat16)
    runs the model under autocast on CUDA (the model itself is not converted); `channels_last` feeds NHWC
    inputs to a model converted to that layout.
    """
    device = torch.device(device)
    evaluator.reset()
    seconds = evaluator.seconds
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            tick = time.perf_counter()
            for images, _targets, metas in loader:
                images = to_model_input(images, device, channels_last)
                tick = _lap(seconds, "preprocess", tick, device)  # includes loading the batch
                with _autocast(device, amp_dtype):
                    pred = model(images).float()  # boxes and scores in float32 whatever the autocast dtype
                tick = _lap(seconds, "inference", tick, device)
                evaluator.process(pred, metas)
                tick = time.perf_counter()
    finally:
        model.train(was_training)
    return evaluator.compute()


def _lap(seconds: dict, stage: str, since: float, device: torch.device) -> float:
    """Add the time since `since` (after the device has finished) to `stage`; returns now."""
    _synchronize(device)
    now = time.perf_counter()
    seconds[stage] += now - since
    return now
