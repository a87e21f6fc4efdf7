"""The evaluation of each epoch during training: the val split through the ordinary evaluator, and the fitness
best.pt follows (COCO's mAP@0.5:0.95, VOC's mAP@0.5 with --metric voc07/voc12, Darknet's detector map with
--metric darknet)."""

from __future__ import annotations

import logging

from detect.darknet.load import uses_channels_last
from detect.evaluation.cocoeval_engines import DEFAULT_BACKEND

log = logging.getLogger(__name__)


def make_evaluator(val_source, img_size: int, batch_size: int, workers: int, stride: int, ctx, on_result=None,
                   cache: str | None = None, cache_dir=None, backend: str = DEFAULT_BACKEND,
                   metric: str = "coco", resize: str = "letterbox"):
    """A callable(model) -> (fitness, metrics) over the opened val split, or None without one; the fitness is
    mAP@0.5:0.95, or with `metric` voc07 / voc12 VOC's mAP@0.5; `on_result(EvalResult)` sees each result."""
    from detect.data.loader import build_eval_loader
    from detect.evaluation.evaluator import CocoEvaluator, evaluate

    if val_source is None:
        log.warning("the data spec has no val split: best.pt follows the training loss")
        return None
    loader = build_eval_loader(val_source, "val", img_size, batch_size, workers, stride, ctx.rank, ctx.world_size,
                               cache_dir=cache_dir, cache=cache, resize=resize)
    evaluator = CocoEvaluator(val_source, backend=backend, metric="coco" if metric == "darknet" else metric)
    if metric == "darknet" and ctx.rank == 0:  # Darknet reads EXIF-rotated photos sideways: say so once
        from detect.evaluation.darknet_eval import warn_exif_rotated

        warn_exif_rotated(val_source, "ignore", "the COCO mAP beside it reads them upright, and `detect.val "
                          "--metric darknet --exif apply` gives Darknet's figure with the orientation applied")

    def run(model):
        result = evaluate(model, loader, evaluator, ctx.device, channels_last=uses_channels_last(ctx.device))
        voc = f"  {metric.upper()} mAP@0.5 {result.voc.map50:.4f}" if result.voc is not None else ""
        fitness = result.voc.map50 if result.voc is not None else result.map
        if metric == "darknet":  # Darknet's detector map (its own reading and resize) is the fitness
            from detect.evaluation.darknet_eval import darknet_split_map

            fitness = darknet_split_map(model, val_source, resize == "letterbox", 0, ctx.rank, ctx.world_size).map
            voc = f"  Darknet mAP@0.50 {fitness:.4f}"
        log.info("val: mAP@0.5 %.4f  mAP@0.5:0.95 %.4f%s (%d images)", result.map50, result.map, voc,
                 result.num_images)
        if on_result is not None:
            on_result(result)
        return fitness, {"map50": result.map50, "map": result.map}

    return EpochEvaluation(run, loader)


class EpochEvaluation:
    """`make_evaluator`'s callable, with `close()` to stop its loader's workers when training ends. They persist
    between epochs and ignore SIGTERM (detect.data.datasets.worker_init); left to the garbage collector, a worker
    still alive at interpreter exit makes multiprocessing's exit handler wait on it forever (seen after torchrun
    restarted a group)."""

    def __init__(self, run, loader):
        self._run, self.loader = run, loader

    def __call__(self, model):
        return self._run(model)

    def close(self) -> None:
        from detect.data.loader import close_loader

        close_loader(self.loader)
