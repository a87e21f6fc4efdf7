"""The model run over a split as detect.val runs it (the one inference path: detect.evaluation.model_eval with
the Predictor's NMS), its detections kept per image, and the split's images as the audit reads them; a second
model's pass over the same images (--second-opinion: detect.audit.second_opinion reads it).

Tiles (`--slice auto`, the audit's default): the model runs over the split whole and in tiles of half the images'
median longer side (detect.ops.slicing: each tile at the model's input size, so objects are seen at about twice
the scale, merged with the whole-image pass), and the pass whose mAP@0.5 on the split's own labels (almost all
right) is higher is audited. A detector that finds small objects better in tiles (yolov3-tiny on COCO: 0.450 ->
0.494) then audits with them; one whose objects fill the image and which tiles cut into parts (the kangaroo fold
models: 0.67 -> 0.55) keeps the whole images. Cost: the tiled pass, about as many model passes as tiles plus one;
where that would be more than MAX_TILES an image on average (images of very different sizes, where half the median
side cuts the largest into hundreds of tiles), the tiles are not tried.

The checks detect.val makes come first and fail in one line: a split that is missing or holds no label, weights
whose classes are not the dataset's (compared by name: detect.evaluation.class_order).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detect.audit.close_look import boxes_to_look_at, crop_window
from detect.audit.evidence import AuditImage
from detect.data.loader import close_loader
from detect.evaluation.class_order import DatasetClassModel
from detect.evaluation.cocoeval_engines import DEFAULT_BACKEND
from detect.evaluation.evaluator import CocoEvaluator, EvalResult
from detect.evaluation.model_eval import Feed, evaluate_model, rank_steps, whole_image_loader
from detect.inference.loading import class_names
from detect.inference.options import AUDIT, InferenceOptions, build_settings, load_handle
from detect.inference.predictor import Predictor
from detect.ops.slicing import needs_tiles, tile_grid
from detect.runtime import dist

log = logging.getLogger("detect.audit")

MAX_TILES = 16  # tiles an image on average beyond which the tiled pass is not tried (a split of mixed resolutions)


@dataclass(frozen=True)
class ModelRun:
    """A model file over one split of a spec."""

    weights: str
    cfg: str | None
    data: str
    split: str
    options: InferenceOptions
    workers: int = 0
    cache_dir: Path | None = None
    choose_tiles: bool = False  # --slice auto: also run in tiles, keep the pass with the higher mAP@0.5 (detect_split)


@dataclass
class SplitDetections:
    source: object  # detect.data.formats.sources.DatasetSource
    detections: dict[int, np.ndarray] | None  # image id -> [n, 6] in the dataset's classes (rank 0; None elsewhere)
    result: EvalResult  # the model's metrics on the split, as detect.val prints them
    img_size: int


def refuse_unlabelled(source, data: str, split: str) -> None:
    """One line when the split has no label to audit (a background-only or empty split)."""
    if not any(len(r.classes) for r in source.records):
        raise ValueError(f"{data}: the {split} split has no labelled box in {len(source.records)} image(s); the "
                         f"audit compares labels with the model's detections: point --data at a spec whose {split} "
                         f"split has its labels (or choose another with --split)")


def tile_size(records) -> int:
    """Half the median longer side of the images, in pixels, rounded to a multiple of 32 (at least 32)."""
    sides = [max(r.width, r.height) for r in records if r.width and r.height]
    return max(32, int(round(float(np.median(sides)) / 2 / 32)) * 32) if sides else 32


def mean_tiles(records, size: int, overlap: float) -> float:
    """The tiles an image of `records` is cut into at `size` on average (0 for one that fits in a tile)."""
    counts = [len(tile_grid(r.width, r.height, size, overlap)) if needs_tiles(r.width, r.height, size) else 0
              for r in records if r.width and r.height]
    return float(np.mean(counts)) if counts else 0.0


def detect_split(run: ModelRun, ctx) -> SplitDetections:
    """Collective: the split's detections (gathered on rank 0) and the model's metrics there; with
    `run.choose_tiles` (and no tile size given), those of the whole images or of tiles, whichever pass scores the
    higher mAP@0.5 on the split (the module docstring)."""
    whole = _one_pass(run, ctx)
    if not run.choose_tiles or run.options.slice_size is not None:
        return whole
    size = tile_size(whole.source.records)
    tiles = mean_tiles(whole.source.records, size, run.options.slice_overlap)
    if tiles > MAX_TILES:
        log.info("the audit uses the whole images: tiles of %d px (half the median side) would be %.0f model passes an "
                 "image on average, the images' sizes vary that much (--slice SIZE to choose tiles)", size, tiles)
        return whole
    tiled = _one_pass(dataclasses.replace(run, options=dataclasses.replace(run.options, slice_size=size)), ctx)
    use_tiles = dist.broadcast_object(tiled.result.map50 > whole.result.map50 if ctx.is_main else None)
    log.info("the model on the %s split: mAP@0.5 %.3f on whole images, %.3f with tiles of %d px: the audit uses %s "
             "(--slice off or --slice SIZE to choose)", run.split, whole.result.map50, tiled.result.map50, size,
             "the tiles" if use_tiles else "the whole images")
    return tiled if use_tiles else whole


def _model_on_split(run: ModelRun, ctx):
    """(the loaded model, its Predictor in the dataset's classes, the checked split) of `run`."""
    from detect.val import open_checked_split

    handle = load_handle(run.weights, run.cfg, run.options, ctx.device, cache_dir=run.cache_dir)
    predictor = Predictor(handle.runner, build_settings(handle, run.options, AUDIT, ctx.device), ctx.device)
    source, order = open_checked_split(run.data, run.split, class_names(handle), run.weights, False, run.cache_dir)
    refuse_unlabelled(source, run.data, run.split)
    if order is not None:
        predictor.runner = DatasetClassModel(predictor.runner, order)
    return handle, predictor, source


def _one_pass(run: ModelRun, ctx) -> SplitDetections:
    """Collective: one pass of the model over the split with `run.options` as they are."""
    handle, predictor, source = _model_on_split(run, ctx)
    evaluator = CocoEvaluator(source, backend=DEFAULT_BACKEND, keep_results=True)
    feed = Feed(run.split, predictor.settings.batch_size, run.workers, ctx.rank, ctx.world_size, run.cache_dir)
    result = evaluate_model(handle, predictor, source, evaluator, feed)
    parts = dist.gather_object_to_main(result.rows)
    detections = None
    if parts is not None:
        rows = np.concatenate([p for p in parts if p is not None and len(p)] or [np.zeros((0, 7))])
        detections = rows_by_image(rows, source.category_ids)
    return SplitDetections(source, detections, result, handle.img_size)


def small_boxes(source, img_size: int) -> dict[int, np.ndarray]:
    """Record position -> the small boxes [c, 4] the scoring will judge there (detect.audit.close_look), from the
    split's labels alone."""
    return boxes_to_look_at(audit_images(source, {}), len(source.names), img_size)


def looks_by_position(run: ModelRun, boxes: dict[int, np.ndarray], image_id, ctx) -> dict[int, tuple] | None:
    """Collective: record position -> (its `boxes`, the model's detections in a crop about each) on rank 0 (None
    elsewhere); `image_id(position)` is the record's id in `run`'s split (look_closer)."""
    found = look_closer(run, {image_id(n): b for n, b in boxes.items()}, ctx)
    return None if found is None else {n: (b, found[image_id(n)]) for n, b in boxes.items()}


def look_closer(run: ModelRun, boxes: dict[int, np.ndarray], ctx) -> dict[int, list[np.ndarray]] | None:
    """Collective: image id -> the model's detections [k, 6] (image pixels, dataset classes) in a crop about each of
    its `boxes` (detect.audit.close_look.crop_window), on rank 0 (None elsewhere). The images are dealt to the ranks
    as in the audit's pass; each crop is an image of its own to the Predictor (whole, at the model's input size)."""
    if not any(len(b) for b in boxes.values()):
        return {} if ctx.is_main else None
    options = dataclasses.replace(run.options, slice_size=None)
    handle, predictor, source = _model_on_split(dataclasses.replace(run, options=options), ctx)
    wanted = [i for i, record in enumerate(source.records) if len(boxes.get(record.image_id, ()))]
    per_step = max(1, predictor.settings.batch_size)
    steps = [wanted[i:i + per_step] for i in range(0, len(wanted), per_step)][ctx.rank::ctx.world_size]
    loader = whole_image_loader(source, steps, Feed(run.split, per_step, run.workers, ctx.rank, ctx.world_size,
                                                    run.cache_dir))
    found: dict[int, list[np.ndarray]] = {}
    try:
        for step in loader:
            for image_id, image in step:
                height, width = image.shape[:2]
                windows = [crop_window(box, width, height, handle.img_size) for box in boxes[image_id]]
                crops = [np.ascontiguousarray(image[y1:y2, x1:x2]) for x1, y1, x2, y2 in windows]
                rows = [r.detach().cpu().numpy().astype(np.float64) for r in predictor(crops)]
                for det, (x1, y1, _, _) in zip(rows, windows):
                    det[:, [0, 2]] += x1
                    det[:, [1, 3]] += y1
                found[image_id] = [det[det[:, 5] >= 0] for det in rows]
    finally:
        close_loader(loader)
    parts = dist.gather_object_to_main(found)
    crops = sum(len(v) for v in boxes.values())
    log.info("a closer look at %d small box(es) in %d image(s) (detect.audit.close_look)", crops, len(wanted))
    return {k: v for part in parts for k, v in part.items()} if parts is not None else None


def rows_by_image(rows: np.ndarray, category_ids) -> dict[int, np.ndarray]:
    """COCO rows [n, 7] (image id, x, y, w, h, score, category id) -> image id -> [k, 6] xyxy, score, class index."""
    index = np.full(max(category_ids, default=0) + 1, -1, np.int64)
    index[np.asarray(category_ids, np.int64)] = np.arange(len(category_ids))
    det = np.empty((len(rows), 6))
    det[:, :2] = rows[:, 1:3]
    det[:, 2:4] = rows[:, 1:3] + rows[:, 3:5]
    det[:, 4] = rows[:, 5]
    det[:, 5] = index[rows[:, 6].astype(np.int64)]
    order = np.argsort(rows[:, 0], kind="stable")
    ids, starts = np.unique(rows[order, 0].astype(np.int64), return_index=True)
    return {int(i): part for i, part in zip(ids, np.split(det[order], starts[1:]))}


def crowd_regions(source) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """image id -> (crowd boxes [c, 4] xyxy, their classes) of a COCO json split (other formats have none)."""
    if source.spec.format != "coco":
        return {}
    from detect.evaluation.per_image import truths_from_coco

    truths = truths_from_coco(source.coco_ground_truth(), [r.image_id for r in source.records], source.category_ids)
    return {image_id: (t.boxes[t.crowd_mask()], t.classes[t.crowd_mask()])
            for image_id, t in truths.items() if t.crowd_mask().any()}


def audit_images(source, detections: dict[int, np.ndarray], key=None) -> list[AuditImage]:
    """The split's images with their labels, crowd regions and detections; `key(index, record)` is the key of an
    image in `detections` (default: its image id)."""
    crowds = crowd_regions(source)
    images = []
    for index, record in enumerate(source.records):
        det = detections.get(key(index, record) if key else record.image_id, np.zeros((0, 6)))
        crowd, crowd_classes = crowds.get(record.image_id, (np.zeros((0, 4)), np.zeros(0, np.int64)))
        images.append(AuditImage(index, np.asarray(record.boxes, np.float64).reshape(-1, 4),
                                 np.asarray(record.classes, np.int64), np.asarray(record.difficult, bool), crowd,
                                 crowd_classes, det[det[:, 5] >= 0], max(record.width, record.height),
                                 name=Path(record.path).name))
    return images


def opinion_detections(source, weights: str, cfg: str | None, options, ctx, workers: int = 0,
                       cache_dir=None, other_classes_only: bool = False) -> tuple[dict[int, np.ndarray] | None,
                                                                                list[str]]:
    """Collective: (record index -> the second model's detections [k, 6] in its own classes, on rank 0 (None
    elsewhere); its class names). The split's images through detect.predict's path, whole batches to the ranks.
    `other_classes_only`: (None, names) without a pass when the model's classes are the dataset's (it may be a
    model trained on these labels, which learnt their errors)."""
    handle = load_handle(weights, cfg, options, ctx.device, cache_dir=cache_dir)
    if other_classes_only and list(class_names(handle)) == list(source.names):
        log.info("no second opinion: %s predicts the dataset's own classes (--second-opinion W to choose one)",
                 weights)
        return None, list(source.names)
    predictor = Predictor(handle.runner, build_settings(handle, options, AUDIT, ctx.device), ctx.device)
    steps = rank_steps(source.records, predictor.settings.batch_size, ctx.rank, ctx.world_size)
    index = {record.image_id: i for i, record in enumerate(source.records)}
    loader = whole_image_loader(source, steps, Feed("second opinion", predictor.settings.batch_size, workers,
                                                    ctx.rank, ctx.world_size, cache_dir))
    found: dict[int, np.ndarray] = {}
    try:
        for step in loader:
            for (image_id, _), rows in zip(step, predictor([image for _, image in step])):
                found[index[image_id]] = rows.detach().cpu().numpy().astype(np.float64)
    finally:
        close_loader(loader)
    parts = dist.gather_object_to_main(found)
    names = list(class_names(handle))
    log.info("second opinion: %s (%d classes) over %d images", weights, len(names), len(source.records))
    return ({k: v for part in parts for k, v in part.items()} if parts is not None else None), names
