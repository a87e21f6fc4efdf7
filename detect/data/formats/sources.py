"""Dataset sources: COCO json, YOLO txt, VOC xml and Darknet obj.data splits read into one record format (via the
label cache).

A source exposes `records` (list of ImageRecord), `names`, `category_ids` (contiguous class index -> original
category id, used to write COCO results; a class selection's own ids, detect.data.formats.class_selection) and
`coco_ground_truth()`: a pycocotools COCO of what the bad-input report
kept, the boxes as training sees them. For a COCO json: its own annotations of the kept boxes and crowd regions
(ids, `area`, `iscrowd` as written; a box clipped to its image is scored clipped, `area` stays the json's); what
the report dropped is not scored. For YOLO txt, Darknet and VOC xml: built from the records.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
from pathlib import Path

import numpy as np

from detect.data.formats import voc, yolo_labels
from detect.data.formats.class_selection import select_classes
from detect.data.formats.coco_exports import (
    class_categories,
    cocoeval_ids,
    report_unknown_categories,
    unique_images,
)
from detect.data.formats.spec import DataSpec, default_cache_dir
from detect.data.records.cache import Fingerprint, SplitLabels, cache_file_for, cached_labels
from detect.data.records.images import probe_images
from detect.data.records.records import (
    BadInputReport,
    ImageRecord,
    first_few,
    validate_boxes_kept,
)

log = logging.getLogger(__name__)

class DatasetSource:
    """One split of a dataset: validated records plus what evaluation needs."""

    def __init__(self, spec: DataSpec, split: str, labels: SplitLabels, category_map: dict[int, int] | None = None):
        self.spec, self.split = spec, split
        self.category_map = category_map  # a class selection's original -> new category id (None: no selection)
        self.records = labels.records
        self.names = list(labels.names)
        self.category_ids = list(labels.category_ids)
        self.dropped_image_ids = list(labels.dropped_image_ids)
        self.report = labels.report  # the bad-input report of the cache build
        self.annotation_index, self.crowd_index = labels.annotation_index, labels.crowd_index  # COCO json only
        self._coco = None

    @property
    def num_classes(self) -> int:
        return len(self.names)

    def coco_ground_truth(self):
        """pycocotools COCO of this split: what the report kept (images that could not be read are left out, with a
        warning; so are the boxes it dropped)."""
        if self._coco is None:
            from pycocotools.coco import COCO

            if self.dropped_image_ids:
                log.warning(f"ground truth of {self.split}: {len(self.dropped_image_ids)} unreadable image(s) left out")
            dataset = self._json_ground_truth() if self.annotation_index is not None else self._ground_truth_dict()
            coco = COCO()
            coco.dataset = dataset
            with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
                coco.createIndex()
            self._coco = coco
        return self._coco

    def _images(self) -> list[dict]:
        return [{"id": r.image_id, "file_name": os.path.basename(r.path), "width": r.width, "height": r.height}
                for r in self.records]

    def _categories(self) -> list[dict]:
        return [{"id": cid, "name": n} for cid, n in zip(self.category_ids, self.names)]

    def _json_ground_truth(self) -> dict:
        """The COCO json's annotations the label cache kept (`annotation_index`, `crowd_index`), boxes clipped as
        the records are. Their ids are the json's where COCOeval can use them (unique integers from 1), else 1..n
        in this order, the json's own id kept as `json_id` (detect.data.formats.coco_exports.cocoeval_ids)."""
        ann_file = self.spec.annotations(self.split)
        anns = json.loads(ann_file.read_text()).get("annotations", [])
        sizes = {r.image_id: (r.width, r.height) for r in self.records}
        chosen = [anns[i] for i in np.concatenate([self.annotation_index, self.crowd_index]).tolist()
                  if i < len(anns)]
        if len(chosen) != len(self.annotation_index) + len(self.crowd_index) or \
                any(a.get("image_id") not in sizes for a in chosen):
            raise ValueError(f"{ann_file} changed since its label cache was read; run again (the cache is rebuilt)")
        if self.category_map is not None:  # crowd regions of the classes not chosen leave too
            chosen = [dict(a, category_id=self.category_map[a["category_id"]]) for a in chosen
                      if a["category_id"] in self.category_map]
        xywh = np.array([a["bbox"] for a in chosen], dtype=np.float64).reshape(-1, 4)
        xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1)
        size = np.array([sizes[a["image_id"]] * 2 for a in chosen], dtype=np.float64).reshape(-1, 4)
        clipped = np.clip(xyxy, 0.0, size)  # as validate_boxes clips
        was_clipped = (clipped != xyxy).any(1)
        ids, why = cocoeval_ids([a.get("id") for a in chosen])
        if why:  # the json's own id stays with each annotation as `json_id`
            log.info(f"{ann_file}: {why}; evaluation numbers the {len(chosen)} annotations it scores 1..{len(chosen)} "
                     f"(`json_id` keeps the json's own)")
        annotations = []
        for a, ann_id, box, cut in zip(chosen, ids, clipped.tolist(), was_clipped.tolist()):
            bbox = [box[0], box[1], box[2] - box[0], box[3] - box[1]] if cut else a["bbox"]
            area = a.get("area")
            if not isinstance(area, (int, float)) or not np.isfinite(area) or area < 0:
                area = bbox[2] * bbox[3]
            annotations.append({"id": ann_id, "image_id": a["image_id"], "category_id": a["category_id"],
                                "bbox": bbox, "area": area, "iscrowd": int(bool(a.get("iscrowd", 0))),
                                **({"json_id": a.get("id")} if why else {})})
        return {"images": self._images(), "annotations": annotations, "categories": self._categories()}

    def _ground_truth_dict(self) -> dict:
        """YOLO txt, VOC xml: the records' boxes."""
        annotations = []
        for r in self.records:
            for box, cls, difficult in zip(r.boxes.tolist(), r.classes.tolist(), r.difficult.tolist()):
                w, h = box[2] - box[0], box[3] - box[1]
                # COCOeval ignores only crowd boxes (its _prepare sets `ignore` from `iscrowd`): a VOC difficult
                # box is one, flagged `difficult` so that detect.evaluation.coco matches it by IoU as VOC does, not by the
                # crowd's intersection over the detection's area
                annotations.append({"id": len(annotations) + 1, "image_id": r.image_id,
                                    "category_id": self.category_ids[cls], "bbox": [box[0], box[1], w, h],
                                    "area": w * h, "iscrowd": int(difficult), "difficult": int(difficult)})
        return {"images": self._images(), "annotations": annotations, "categories": self._categories()}


def _show(value) -> str:
    """A json value as the file writes it (1, "1", null)."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _bbox(ann: dict) -> list[float]:
    """The 4 numbers of an annotation's bbox; NaNs (dropped as non_finite) when it has no such bbox."""
    try:
        values = [float(v) for v in ann["bbox"]]
    except (KeyError, TypeError, ValueError):
        values = []
    return values if len(values) == 4 else [float("nan")] * 4


def _validated(anns: list, positions: list[int], cat_index: dict, width: int, height: int, num_classes: int,
               path: Path, report: BadInputReport) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """validate_boxes_kept of the annotations at `positions`: (boxes, classes, positions kept)."""
    positions = np.array(positions, dtype=np.int64)
    xywh = np.array([_bbox(anns[i]) for i in positions.tolist()], dtype=np.float64).reshape(-1, 4)
    xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1)
    classes = np.array([cat_index[anns[i]["category_id"]] for i in positions.tolist()], dtype=np.float64)
    boxes, classes, kept = validate_boxes_kept(xyxy, classes, width, height, num_classes, str(path), report)
    return boxes, classes, positions[kept]


def scan_coco(images_dir: Path, ann_file: Path, names: tuple[str, ...] | None) -> SplitLabels:
    """Records from a COCO instances json. Crowd regions are not trained on: they are validated like boxes and
    kept for evaluation (`crowd_index`); annotations of no category or no image of the json are reported by id.
    An image listed twice is read once and a superclass is no class (detect.data.formats.coco_exports)."""
    try:
        data = json.loads(ann_file.read_text())
        images, anns, cats = data["images"], data.get("annotations", []), data["categories"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{ann_file}: not a COCO instances file ({type(e).__name__}: {e})") from None
    if not images:
        raise ValueError(f"{ann_file}: the annotation file has no images (its `images` list is empty); point the "
                         f"spec's annotations key at the right file")
    class_cats, supers = class_categories(cats, anns, ann_file, names)
    category_ids = [int(c["id"]) for c in class_cats]
    names = names or tuple(c["name"] for c in class_cats)
    cat_index = {cid: i for i, cid in enumerate(category_ids)}
    report = BadInputReport()
    known_images = {im["id"] for im in images}
    by_image: dict = {}
    orphans = []
    for i, a in enumerate(anns):
        if a.get("image_id") in known_images:
            by_image.setdefault(a["image_id"], []).append(i)
        else:
            orphans.append(a)
    if orphans:
        report.add("unknown_image", ann_file, f"{len(orphans)} annotation(s) whose image_id is not among the "
                   f"{len(images)} images of the file: annotation id(s) {first_few(_show(a.get('id')) for a in orphans)}"
                   f" (image_id {first_few(dict.fromkeys(_show(a.get('image_id')) for a in orphans))})",
                   count=len(orphans))
    images = unique_images(images, anns, by_image, images_dir, ann_file, report)
    paths = [images_dir / im["file_name"] for im in images]
    probes = probe_images(paths, report)
    records, dropped, box_index, crowd_index = [], [], [], []
    for im, path, probe in zip(images, paths, probes):
        if probe is None:
            dropped.append(int(im["id"]))
            continue
        if (probe.width, probe.height) != (im["width"], im["height"]):
            report.add("corrupt", path, f"size {probe.width}x{probe.height} differs from the json's "
                                        f"{im['width']}x{im['height']}")
            dropped.append(int(im["id"]))
            continue
        positions = by_image.get(im["id"], [])
        unknown = [i for i in positions if anns[i].get("category_id") not in cat_index]
        if unknown:
            report_unknown_categories(report, path, anns, unknown, class_cats, supers, ann_file)
        known = [i for i in positions if anns[i].get("category_id") in cat_index]
        crowd = [bool(anns[i].get("iscrowd", 0)) for i in known]
        args = (cat_index, probe.width, probe.height, len(names), path, report)
        boxes, classes, kept = _validated(anns, [i for i, c in zip(known, crowd) if not c], *args)
        crowd_index.append(_validated(anns, [i for i, c in zip(known, crowd) if c], *args)[2])
        box_index.append(kept)
        records.append(ImageRecord(str(path), probe.width, probe.height, boxes, classes, int(im["id"])))
    return SplitLabels(records, tuple(names), category_ids, dropped, report, _concat(box_index), _concat(crowd_index))


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def open_source(spec: DataSpec, split: str, cache_dir: Path | None = None) -> DatasetSource:
    """The validated split of a coco, yolo, voc or darknet spec (synthetic specs are resolved to coco by the
    loader)."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    images = spec.images(split)
    what = f"{Path(spec.source_file).stem} {split}"
    if spec.format == "coco":
        ann = spec.annotations(split)
        cache_file = cache_file_for(cache_dir, Path(spec.source_file).stem, split, f"{images.resolve()}|{ann}")

        def key():
            fp = Fingerprint(images.resolve(), ann.resolve(), spec.names).add_file_stat(ann)
            for entry in sorted(os.scandir(images), key=lambda e: e.name):
                fp.add_file_stat(Path(entry.path))
            return fp.hexdigest()

        labels = cached_labels(cache_file, key, lambda: scan_coco(images, ann, spec.names), what)
    elif spec.format == "yolo":
        from detect.data.formats.label_layouts import choose_layout

        files = yolo_labels.list_images(images)
        layout = choose_layout(files, images, what, spec.source_file, split, split in spec.background_only)
        cache_file = cache_file_for(cache_dir, Path(spec.source_file).stem, split, str(images.resolve()))
        labels = cached_labels(cache_file, lambda: yolo_labels.fingerprint(files, spec.names, layout),
                               lambda: yolo_labels.scan(files, spec.names, layout), what)
    elif spec.format == "voc":
        items = voc.split_items(spec, split)
        xml_files = [] if spec.names else voc.all_xml_files(spec)  # class names come from every split
        cache_file = cache_file_for(cache_dir, Path(spec.source_file).stem, split, f"{spec.path}|{spec.voc}")
        labels = cached_labels(cache_file, lambda: voc.fingerprint(items, spec.names, xml_files),
                               lambda: voc.scan(items, spec.names, xml_files), what)
    elif spec.format == "darknet":
        from detect.data.formats.darknet_source import darknet_labels

        labels = darknet_labels(spec, split, cache_dir, what)
    else:
        raise ValueError(f"{spec.source_file}: format {spec.format!r} has no files to open; "
                         f"use detect.data.loader, which generates the synthetic dataset first")
    if spec.selection.active:
        labels, category_map = select_classes(labels, spec.selection, spec.source_file, what)
        return DatasetSource(spec, split, labels, category_map)
    return DatasetSource(spec, split, labels)


__all__ = ["DatasetSource", "open_source", "scan_coco"]
