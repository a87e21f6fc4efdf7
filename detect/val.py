"""`python -m detect.val`: COCO metrics of a Darknet model on a dataset split (also under torchrun).

    python -m detect.val --cfg cfg/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --data data/coco.yaml
    torchrun --nproc_per_node 2 -m detect.val ...   # each rank evaluates its own batches
    python -m detect.val --track --weights best.pt --data MOT17/train   # HOTA, MOTA, IDF1 (one process)

Defaults are the best settings (rect batches, multi-label, merge-NMS); `--square --single-label --no-merge`
is the plain protocol of other implementations. Writes metrics.json (and results.json with --save-json) to
runs/val/<name>.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import detect.runtime.cpu_threads  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads; docs/inference.md "CPU engines")
from detect.evaluation.class_order import DatasetClassModel, dataset_class_order
from detect.evaluation.coco import STAT_NAMES, format_class_table, format_summary
from detect.evaluation.cocoeval_engines import BACKENDS, DEFAULT_BACKEND
from detect.evaluation.evaluator import CocoEvaluator, EvalResult, write_results_json
from detect.evaluation.model_eval import Feed, evaluate_model, rank_steps
from detect.evaluation.voc_metrics import METRICS, format_darknet_summary
from detect.inference.cli_flags import (
    add_inference_flags,
    add_model_flags,
    add_run_folder_flags,
    add_workers_flag,
    check_inference_args,
    inference_options,
)
from detect.inference.handle import ModelHandle
from detect.inference.loading import class_names
from detect.inference.options import EVALUATION, InferenceOptions, build_settings, load_handle
from detect.inference.postprocess import ClassAgnosticModel
from detect.inference.predictor import Predictor
from detect.ops.class_names import are_class_ids
from detect.runtime import dist
from detect.runtime.commands import DefaultsHelpFormatter, run_tool
from detect.runtime.files import atomic_write_text
from detect.runtime.log import setup_logging
from detect.runtime.runs import next_run_dir
from detect.tracking.config import DEFAULT_TRACKER, TRACKERS

log = logging.getLogger("detect.val")  # not __name__: under `python -m` that is __main__, outside `detect`


# the mAP evaluation's flags, which --track does not use (refused rather than ignored)
NOT_FOR_TRACKING = ("split", "single_cls", "single_label", "no_merge", "save_json", "save_thresholds", "plots",
                    "strict", "cache", "metric", "points", "exif")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m detect.val", description=__doc__.split("\n")[0],
                                formatter_class=DefaultsHelpFormatter)
    add_model_flags(p)
    p.add_argument("--data", required=True, help="dataset spec (data/*.yaml), or a Darknet obj.data")
    p.add_argument("--split", default="val", choices=("train", "val", "test"),
                   help="which split of --data to evaluate (its `val:`, `test:` or `train:` entry)")
    p.add_argument("--single-cls", action="store_true",
                   help="evaluate every class of --data as one: a model trained with --single-cls, or a model "
                        "with several classes class-agnostically (each box scored by its best class)")
    add_inference_flags(p, EVALUATION, batch_help="batch size (per process)")
    p.add_argument("--single-label", action="store_true", help="one label per box (best class) instead of multi")
    p.add_argument("--no-merge", action="store_true", help="plain NMS instead of merge-NMS")
    p.add_argument("--save-json", action="store_true", help="write the COCO results json")
    p.add_argument("--save-thresholds", action="store_true",
                   help="choose a confidence threshold per class on this split (its best F1 at IoU 0.5, shrunk "
                        "toward the global best for classes with few boxes) and store them with --weights: in a "
                        ".pt, in an .onnx's metadata, beside X.weights as X.weights.class_conf.json; "
                        "detect.predict and the API use them where --conf (conf=) is not given")
    p.add_argument("--plots", action="store_true",
                   help="write PR_curve.png, F1_curve.png, confusion_matrix.png and val_batch0 mosaics")
    p.add_argument("--strict", action="store_true",
                   help="refuse a split with an unusable image instead of leaving it out of the metrics")
    p.add_argument("--cache-dir", default=None,
                   help="label cache folder (default: $DETECT_CACHE, else ~/.cache/detect), as train's")
    p.add_argument("--cache", default="off", choices=("ram", "disk", "off"),
                   help="decoded, resized images kept for the next run: ram = shared memory (this run only), disk = "
                        "beside the label cache, off = decode every image (train.py's auto is for its epochs)")
    p.add_argument("--metric", default="coco", choices=(*METRICS, "darknet"),
                   help="coco: COCO's 12 numbers; voc07 / voc12: also VOC AP@0.5 (11-point / all-point, difficult "
                        "boxes ignored) per class, with Darknet's `detector map` summary (TP, FP, FN, P, R, F1 and "
                        "average IoU at conf 0.25); darknet: `darknet detector map` itself (its image reading and "
                        "resize, threshold 0.005, NMS 0.45, --points), in its layout")
    p.add_argument("--points", type=int, default=0, choices=(0, 11, 101),
                   help="with --metric darknet: 0 = area under the curve (Darknet's default), 11 = VOC2007's "
                        "recall points, 101 = COCO's")
    p.add_argument("--exif", default="ignore", choices=("ignore", "apply"),
                   help="with --metric darknet: photos with an EXIF orientation other than 1 are read as stored, "
                        "sideways, as Darknet reads them (ignore), or turned upright as their labels are drawn "
                        "(apply; the other metrics always apply it)")
    p.add_argument("--coco-backend", default=DEFAULT_BACKEND, choices=BACKENDS,
                   help="COCOeval engine (pycocotools' numbers from each; ultrafast-pycocotools is Rust, "
                        "faster-coco-eval C++, pycocotools the reference)")
    p.add_argument("--track", nargs="?", const=DEFAULT_TRACKER, default=None, choices=tuple(TRACKERS),
                   metavar="TRACKER", help=f"tracking metrics instead (HOTA, MOTA, IDF1; TrackEval): --data is a "
                   f"MOTChallenge sequence folder (SEQ/img1/*.jpg, SEQ/gt/gt.txt, SEQ/seqinfo.ini) or a folder of "
                   f"them, tracked with {' or '.join(TRACKERS)} (default {DEFAULT_TRACKER}); the detector runs as "
                   f"predict --track runs it, with predict's defaults: --conf is the tracker's high score (default: "
                   f"the model's per-class thresholds, else 0.25), --iou 0.45")
    add_workers_flag(p, "data loader workers per process")
    add_run_folder_flags(p, "runs/val")
    args = p.parse_args(argv)
    if args.track and (unused := ["--" + dest.replace("_", "-") for dest in NOT_FOR_TRACKING
                                  if getattr(args, dest) != p.get_default(dest)]):
        p.error(f"{', '.join(unused)}: not for --track (tracking metrics over MOTChallenge sequences, the detector "
                f"run as predict --track runs it)")
    check_inference_args(p, args)
    if args.save_thresholds and (args.single_cls or args.metric == "darknet"):
        p.error("--save-thresholds needs the model's own classes and the COCO evaluation's detections: leave out "
                "--single-cls and --metric darknet")
    if args.exif != "ignore" and args.metric != "darknet":
        p.error(f"--exif {args.exif} goes with --metric darknet (Darknet ignores EXIF; detect.val's other metrics "
                f"always read photos upright)")
    return args


def open_checked_split(data, split: str, model_names: list[str], weights, strict: bool = False, cache_dir=None,
                       single_cls: bool = False):
    """(the split's source, opened once, after the checks that must fail before any work; the model's class of
    each dataset class, or None when they are the same: detect.evaluation.class_order, by name)."""
    from detect.data.formats.spec import load_data_spec
    from detect.data.loader import open_split

    spec = load_data_spec(data).with_single_cls(single_cls)
    source = open_split(spec, split, cache_dir)
    if not source.records and not source.dropped_image_ids:
        raise ValueError(f"{data}: the {split} split has no images (check the annotation file / image folder)")
    if source.dropped_image_ids:
        bad = [f"{path} ({kind}: {detail})" for path, kind, detail in source.report.entries
               if kind in ("missing", "empty_file", "corrupt", "unsupported_format", "label_syntax")]
        message = (f"{data}: {len(source.dropped_image_ids)} image(s) of the {split} split cannot be used, e.g. "
                   f"{'; '.join(bad[:3])}")
        if strict:
            raise FileNotFoundError(f"{message}; --strict evaluates only complete splits")
        log.warning("%s; they and their ground truth are left out of the metrics (--strict refuses instead)",
                    message)
    num_classes = len(model_names)
    agnostic = ("--single-cls makes it one class" if num_classes == 1 else
                "--single-cls to evaluate every class of both as one (class-agnostic)")
    if not single_cls and not are_class_ids(model_names):  # names to match: the order, or one line refusing
        return source, dataset_class_order(model_names, source.names, weights, data, agnostic)
    if source.num_classes != num_classes and not (single_cls and source.num_classes == 1):
        advice = "use weights trained for this dataset" + (
            f", or list {num_classes} of its classes under `classes:` in {data}"
            if source.num_classes > num_classes else "")
        if not single_cls:
            advice = f"{agnostic}, or {advice}" if num_classes == 1 else f"{advice}, or {agnostic}"
        raise ValueError(f"--weights {weights} predicts {num_classes} classes but {data} has "
                         f"{source.num_classes}; {advice}")
    return source, None


def report_evaluation(result: EvalResult, run_dir: Path, args, skipped: int = 0) -> None:
    """Print the summary and the class table; write metrics.json."""
    t = result.timings
    print("\n".join(result.coco_summary) or format_summary(result.stats))
    ranks = len(result.rank_seconds) or 1
    print(f"COCOeval engine: {result.backend}" + (f", categories shared by {ranks} ranks" if ranks > 1 else ""))
    print(format_class_table(result.per_class, result.num_images, result.stats))
    if result.voc is not None:
        print(f"\n{result.voc.metric.upper()} AP@0.5 (Darknet's detector map layout):")
        print(format_darknet_summary(result.voc))
    print(f"speed per image: {t['preprocess']:.1f} ms preprocess, {t['inference']:.1f} ms inference, "
          f"{t['nms']:.1f} ms NMS, {t['cocoeval']:.1f} ms COCOeval ({result.num_images} images)")
    if skipped:
        print(f"the figures cover {result.num_images} of {result.num_images + skipped} images: {skipped} could not "
              f"be used (see the warning above)")
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics = {"map": result.map, "map50": result.map50, "stats": dict(zip(STAT_NAMES, result.stats)),
               "per_class": [c.__dict__ for c in result.per_class], "timings_ms_per_image": t,
               "num_images": result.num_images, "images_left_out": skipped, "args": vars(args)}
    if result.voc is not None:
        metrics["voc"] = {"metric": result.voc.metric, "map50": result.voc.map50, "tp": result.voc.tp,
                          "fp": result.voc.fp, "fn": result.voc.fn, "average_iou": result.voc.average_iou,
                          "per_class": [c.__dict__ for c in result.voc.per_class]}
    atomic_write_text(run_dir / "metrics.json", json.dumps(metrics, indent=1))
    print(f"results written to {run_dir}")


def darknet_map_job(args):
    from detect.evaluation.darknet_eval import DarknetMapJob

    recorded = {k: (str(v) if v is not None and not isinstance(v, (int, float, bool)) else v)
                for k, v in vars(args).items()}
    return DarknetMapJob(args.weights, args.cfg, args.data, args.split, args.img, args.resize, args.points, args.exif,
                         args.strict, args.cache_dir, args.single_cls, args.project, args.name, recorded)


def run(args) -> EvalResult:
    ctx = dist.init_distributed(args.device)
    setup_logging(ctx.rank, ctx.world_size)
    try:
        if args.track:
            from detect.tracking.evaluate import run_track_eval

            return run_track_eval(args.weights, args.cfg, args.data, args.track, inference_options(args),
                                  ctx.device, ctx.world_size, args.project, args.name)
        if args.metric == "darknet":
            from detect.evaluation.darknet_eval import run_darknet_map

            return run_darknet_map(darknet_map_job(args), ctx, open_checked_split)
        options = inference_options(args)
        handle = load_handle(args.weights, args.cfg, options, ctx.device, cache_dir=args.cache_dir)
        predictor = build_predictor(handle, options, args.single_cls, ctx.device)
        s = predictor.settings  # recorded in metrics.json as they ran
        args.img, args.square, args.conf, args.iou, args.max_det, args.batch = (
            handle.img_size, handle.square, s.conf, s.iou, s.max_det, s.batch_size)
        # every rank checks (the label cache is built by rank 0 first), so every rank fails the same way
        source, order = open_checked_split(args.data, args.split, class_names(handle), args.weights, args.strict,
                                           args.cache_dir, args.single_cls)
        if order is not None:  # the model's rows in the dataset's classes, before NMS
            if args.save_thresholds:
                raise ValueError(f"--save-thresholds stores thresholds in the model's class order, but {args.data}'s "
                                 f"classes are not the model's in its order; save them on a dataset that has them")
            predictor.runner = DatasetClassModel(predictor.runner, order)
        evaluator = CocoEvaluator(source, backend=args.coco_backend, metric=args.metric,  # scores; NMS: predictor
                                  keep_results=bool(args.plots or args.save_thresholds))
        cache = None if args.cache == "off" else args.cache
        feed = Feed(args.split, args.batch, args.workers, ctx.rank, ctx.world_size, args.cache_dir, cache)
        result = evaluate_model(handle, predictor, source, evaluator, feed)
        if args.slice is not None:
            log_tiles(source.records, args, ctx)
        run_dir = dist.broadcast_object(next_run_dir(args.project, args.name) if ctx.is_main else None)
        if ctx.is_main:
            run_dir.mkdir(parents=True, exist_ok=True)
        if args.save_json:  # every rank's part streamed into one file by rank 0
            write_results_json(run_dir / "results.json", result.rows)
        if ctx.is_main:
            report_evaluation(result, run_dir, args, len(source.dropped_image_ids))
            if args.save_thresholds:
                from detect.evaluation.thresholds import save_split_thresholds

                path, table = save_split_thresholds(result.match, source, args.weights, f"the {args.split} split of "
                                                    f"{args.data} ({result.num_images} images)", args.conf)
                print(f"{table}\nper-class confidence thresholds written to {path}")
            if args.plots:
                from detect.plots.evaluation import write_eval_plots

                log.info("plots: %s", ", ".join(p.name for p in write_eval_plots(run_dir, result.match, source)))
        return result
    finally:
        dist.destroy()


def build_predictor(handle: ModelHandle, options: InferenceOptions, single_cls: bool, device) -> Predictor:
    """The model as this evaluation runs it: --single-cls with a K-class model scores every box by its best
    class, one class for all (class-agnostic NMS); the options with the evaluation's defaults (EVALUATION:
    conf 0.001, IoU 0.6, multi-label, merge-NMS), whose NMS the Predictor runs."""
    runner = handle.runner
    if single_cls and handle.num_classes > 1:
        log.info("--single-cls: the model's %d classes are evaluated as one (each box scored by its best class, "
                 "NMS across the classes)", handle.num_classes)
        runner = ClassAgnosticModel(runner)
    return Predictor(runner, build_settings(handle, options, EVALUATION, device), device)


def log_tiles(records: list, args, ctx) -> None:
    """How many tiles --slice cut from this rank's images (its share: detect.evaluation.model_eval)."""
    from detect.ops.slicing import needs_tiles, tile_grid

    mine = [records[i] for step in rank_steps(records, 1, ctx.rank, ctx.world_size) for i in step]
    tiles = sum(len(tile_grid(r.width, r.height, args.slice, args.overlap))
                for r in mine if needs_tiles(r.width, r.height, args.slice))
    log.info("--slice %d --overlap %g: %d tiles over this rank's %d images, each image also whole", args.slice,
             args.overlap, tiles, len(mine))


def main(argv=None) -> int:
    """0 on success; 2 and `error: ...` on stderr for a user's mistake; 1 and one such line for any other failure
    (the traceback in the debug log); 130 on Ctrl-C."""
    return run_tool("detect.val", parse_args, run, argv, log)


if __name__ == "__main__":
    sys.exit(main())
