"""`--metric darknet` (detect.val, and train's fitness): Darknet's `detector map` on a split of any data format.

Each image is read and resized as Darknet's own loader does (detect.data.darknet_image), the model runs in
float32 at the network size, its rows become Darknet's detections (threshold 0.005) and do_nms_sort at 0.45, and
detect.evaluation.darknet_map computes the figures. Images go in file-name order (a Darknet list as `ls` would
write it; a Darknet valid list's own order differs only where two images' detections tie in score); every box
of a record is a truth (no crowd or difficult rule). Those are the boxes as the dataset reader checked them: a
label line Darknet would read as it stands (a box past the image's edge, a duplicate line, one of zero area) is
clipped or dropped here and named in the dataset's report, the one place the two can differ. Under torchrun
each rank runs every world_size-th image and rank 0 computes the result, which every rank receives.

detect.val's `run_darknet_map` loads the model itself: Darknet runs it in float32 at its cfg's width and height
(or --img-size) with thresholds and NMS of its own, so --conf, --iou, --max-det and the NMS flags do not apply;
the model's own resize mode (letter_box) does, and --resize overrides it.
"""

from __future__ import annotations

import json
import logging

import torch

from detect.darknet.load import check_img_size, load_model
from detect.evaluation.darknet_map import darknet_map, truths_from_xyxy
from detect.evaluation.darknet_map_report import DarknetMapResult
from detect.evaluation.darknet_map_run import model_detections
from detect.inference.loading import chosen_resize, is_onnx_path
from detect.runtime import dist
from detect.runtime.files import atomic_write_text
from detect.runtime.runs import next_run_dir

POINTS = (0, 11, 101)  # -points: area under the curve, VOC2007's 11 recall points, COCO's 101


def darknet_split_map(model, source, letter_box: bool, points: int = 0, rank: int = 0, world_size: int = 1,
                      batch: int = 8) -> DarknetMapResult:
    """Collective: Darknet's map of `model` (a detect.darknet model; its build size is the network size, as
    Darknet's cfg width and height) over `source`'s records. The model is run as it is (mode and device kept)."""
    if points not in POINTS:
        raise ValueError(f"--points {points}: Darknet takes 0 (area under the curve), 11 or 101")
    order = sorted(range(len(source.records)), key=lambda i: source.records[i].path)
    mine = order[rank::world_size]
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            found = model_detections(model, [source.records[i].path for i in mine], letter_box,
                                     batch=batch)
    finally:
        model.train(was_training)
    gathered = dist.gather_object_to_main(list(zip(mine, found)))
    result = None
    if gathered is not None:
        by_index = dict(pair for part in gathered for pair in part)
        detections = [by_index[i] for i in order]
        truths = [truths_from_xyxy(r.classes, r.boxes.astype("float64"), r.width, r.height)
                  for r in (source.records[i] for i in order)]
        result = darknet_map(detections, truths, source.names, points)
    return dist.broadcast_object(result)


log = logging.getLogger("detect.val")


def run_darknet_map(args, ctx, open_checked_split):
    """The result of --metric darknet (detect.evaluation.darknet_map_report.DarknetMapResult), on every rank."""
    if is_onnx_path(args.weights):
        raise ValueError(f"--metric darknet runs the Darknet model itself; {args.weights} is an ONNX export: give the "
                         f".pt or the .weights with their cfg")
    loaded = load_model(args.cfg, args.weights, img_size=args.img, exact=True)
    model = loaded.model
    if args.img is not None:
        check_img_size(args.img, model.max_stride)
    model = model.to(ctx.device).float().eval()
    mode = chosen_resize(model, args.weights, loaded.record, args.resize)
    h, w = model.input_size
    log.info("--metric darknet: network %dx%d, images %s as Darknet's loader does, thresh 0.005, NMS 0.45, "
             "-points %d (--conf, --iou and the NMS flags do not apply)", w, h,
             "letterboxed" if mode == "letterbox" else "stretched", args.points)
    source = open_checked_split(args.data, args.split, model.num_classes, args.weights, args.strict, args.cache_dir,
                                args.single_cls)
    result = darknet_split_map(model, source, mode == "letterbox", args.points, ctx.rank, ctx.world_size)
    run_dir = dist.broadcast_object(next_run_dir(args.project, args.name) if ctx.is_main else None)
    if ctx.is_main:
        print(result.report())
        metrics = {"darknet": result.as_dict(), "split": args.split, "images": len(source.records),
                   "args": {k: (str(v) if v is not None and not isinstance(v, (int, float, bool)) else v)
                            for k, v in vars(args).items()}}
        atomic_write_text(run_dir / "metrics.json", json.dumps(metrics, indent=1))
        print(f"results written to {run_dir}")
    return result
