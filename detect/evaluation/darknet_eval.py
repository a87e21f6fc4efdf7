"""`--metric darknet` (detect.val, and train's fitness): Darknet's `detector map` on a split of any data format.

Each image is read and resized as Darknet's own loader does (detect.data.formats.darknet_image), the model runs in
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

Darknet's stb_image ignores EXIF: a photo with an EXIF orientation other than 1 is fed as stored (sideways or
flipped) against labels drawn on the upright image, and its figure is computed so (one warning names how many
such images the label cache counted). `--exif apply` reads them upright instead: the figure for the photos as
they are meant to be seen, no longer Darknet's.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace

import torch

from detect.darknet.load import check_img_size, load_model
from detect.data.records.records import first_few
from detect.evaluation.class_order import dataset_class_probs
from detect.evaluation.darknet_map import truths_from_xyxy
from detect.evaluation.darknet_map_report import DarknetMapResult
from detect.evaluation.darknet_map_run import model_detections
from detect.evaluation.darknet_map_score import image_entries, map_from_entries, truth_offsets
from detect.inference.loading import chosen_resize, default_names, is_onnx_path
from detect.runtime import dist
from detect.runtime.files import atomic_write_text
from detect.runtime.runs import next_run_dir

POINTS = (0, 11, 101)  # -points: area under the curve, VOC2007's 11 recall points, COCO's 101


def darknet_split_map(model, source, letter_box: bool, points: int = 0, rank: int = 0, world_size: int = 1,
                      batch: int = 8, order: list[int] | None = None, exif: str = "ignore") -> DarknetMapResult:
    """Collective: Darknet's map of `model` (a detect.darknet model; its build size is the network size, as
    Darknet's cfg width and height) over `source`'s records. The model is run as it is (mode and device kept).
    `order`: the model's class of each dataset class (detect.evaluation.class_order), None when they are one.
    `exif`: "ignore" reads an EXIF-rotated photo's stored pixels, as Darknet does; "apply" turns it upright first."""
    if points not in POINTS:
        raise ValueError(f"--points {points}: Darknet takes 0 (area under the curve), 11 or 101")
    by_name = sorted(range(len(source.records)), key=lambda i: source.records[i].path)  # not `order`: the classes'
    mine = by_name[rank::world_size]
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            found = model_detections(model, [source.records[i].path for i in mine], letter_box,
                                     batch=batch, exif=exif)
    finally:
        model.train(was_training)
    if order is not None:  # per-class NMS: reordering the classes' probabilities after it is the same as before
        found = [replace(d, probs=dataset_class_probs(d.probs, order)) for d in found]
    # each rank matches its own images (an image matches alone); rank 0 takes the entries in Darknet's list order
    truths = {i: truths_from_xyxy(r.classes, r.boxes.astype("float64"), r.width, r.height)
              for i, r in ((i, source.records[i]) for i in by_name)}
    offsets = dict(zip(by_name, truth_offsets([truths[i][0] for i in by_name])))
    entries = [(i, image_entries(d, *truths[i], offsets[i], len(source.names))) for i, d in zip(mine, found)]
    gathered = dist.gather_object_to_main(entries)
    result = None
    if gathered is not None:
        by_index = dict(pair for part in gathered for pair in part)
        result = map_from_entries([by_index[i] for i in by_name], [truths[i][0] for i in by_name], source.names,
                                  points)
    return dist.broadcast_object(result)


log = logging.getLogger("detect.val")


def exif_rotated_paths(source) -> list[str]:
    """The records' images with an EXIF orientation other than 1, as the label cache counted them
    (`exif_rotated` in its report: their labels are drawn on the upright image)."""
    rotated = {path for path, kind, _ in source.report.entries if kind == "exif_rotated"}
    return sorted(r.path for r in source.records if r.path in rotated)


APPLY_HINT = "--exif apply gives the figure with the orientation applied"


def warn_exif_rotated(source, exif: str, apply_hint: str = APPLY_HINT) -> None:
    """One line about the split's EXIF-rotated photos: Darknet reads them sideways (--exif ignore, its figure), or
    they are read upright (--exif apply). `apply_hint`: how the caller's user gets the upright figure."""
    rotated = exif_rotated_paths(source)
    if not rotated:
        return
    what = (f"{len(rotated)} of the {len(source.records)} images of the {source.split} split carry an EXIF "
            f"orientation other than 1 (e.g. {first_few(rotated, 3)})")
    if exif == "apply":
        log.info("--metric darknet --exif apply: %s; read upright, as the labels are drawn (Darknet itself would read "
                 "them as stored, sideways or flipped)", what)
        return
    log.warning("--metric darknet: %s; Darknet ignores EXIF, so this figure, as Darknet's own, is computed on their "
                "stored pixels (sideways or flipped) against labels drawn on the upright images; %s", what, apply_hint)


@dataclass(frozen=True)
class DarknetMapJob:
    """What `--metric darknet` evaluates and where it writes, as detect.val's flags give it (typed: this module
    never sees the argparse namespace). `recorded`: the settings written into metrics.json."""
    weights: str
    cfg: str | None
    data: str
    split: str = "val"
    img_size: int | None = None
    resize: str | None = None
    points: int = 0
    exif: str = "ignore"
    strict: bool = False
    cache_dir: str | None = None
    single_cls: bool = False
    project: str = "runs/val"
    name: str = "exp"
    recorded: dict = field(default_factory=dict)


def run_darknet_map(job: DarknetMapJob, ctx, open_checked_split):
    """The result of --metric darknet (detect.evaluation.darknet_map_report.DarknetMapResult), on every rank."""
    if is_onnx_path(job.weights):
        raise ValueError(f"--metric darknet runs the Darknet model itself; {job.weights} is an ONNX export: give the "
                         f".pt or the .weights with their cfg")
    loaded = load_model(job.cfg, job.weights, img_size=job.img_size, exact=True)
    model = loaded.model
    if job.img_size is not None:
        check_img_size(job.img_size, model.max_stride)
    model = model.to(ctx.device).float().eval()
    mode = chosen_resize(model, job.weights, loaded.record, job.resize)
    h, w = model.input_size
    log.info("--metric darknet: network %dx%d, images %s as Darknet's loader does, thresh 0.005, NMS 0.45, "
             "-points %d (--conf, --iou and the NMS flags do not apply)", w, h,
             "letterboxed" if mode == "letterbox" else "stretched", job.points)
    names = loaded.names or default_names(model.num_classes, job.weights)
    source, order = open_checked_split(job.data, job.split, names, job.weights, job.strict, job.cache_dir,
                                       job.single_cls)
    warn_exif_rotated(source, job.exif)
    result = darknet_split_map(model, source, mode == "letterbox", job.points, ctx.rank, ctx.world_size,
                               order=order, exif=job.exif)
    run_dir = dist.broadcast_object(next_run_dir(job.project, job.name) if ctx.is_main else None)
    if ctx.is_main:
        print(result.report())
        metrics = {"darknet": result.as_dict(), "split": job.split, "images": len(source.records),
                   "args": job.recorded}
        atomic_write_text(run_dir / "metrics.json", json.dumps(metrics, indent=1))
        print(f"results written to {run_dir}")
    return result
