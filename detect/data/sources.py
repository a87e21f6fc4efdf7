"""Dataset sources: COCO json, YOLO txt and VOC xml splits read into one record format (via the label cache).

A source exposes `records` (list of ImageRecord), `names`, `category_ids` (contiguous class index -> original
category id, used to write COCO results) and `coco_ground_truth()` (a pycocotools COCO: the json as given for
COCO, built in memory for YOLO txt and VOC xml).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
from pathlib import Path

import numpy as np

from detect.data import voc, yolo_labels
from detect.data.cache import Fingerprint, SplitLabels, cache_file_for, cached_labels
from detect.data.images import probe_images
from detect.data.records import BadInputReport, ImageRecord, validate_boxes
from detect.data.spec import DataSpec, default_cache_dir

log = logging.getLogger(__name__)

class DatasetSource:
    """One split of a dataset: validated records plus what evaluation needs."""

    def __init__(self, spec: DataSpec, split: str, labels: SplitLabels):
        self.spec, self.split = spec, split
        self.records = labels.records
        self.names = list(labels.names)
        self.category_ids = list(labels.category_ids)
        self.dropped_image_ids = list(labels.dropped_image_ids)
        self.report = labels.report  # the bad-input report of the cache build
        self._coco = None

    @property
    def num_classes(self) -> int:
        return len(self.names)

    def coco_ground_truth(self):
        """pycocotools COCO of this split; images that could not be read are left out (with a warning)."""
        if self._coco is None:
            from pycocotools.coco import COCO

            dataset = (json.loads(self.spec.annotations(self.split).read_text()) if self.spec.format == "coco"
                       else self._ground_truth_dict())
            if self.dropped_image_ids:
                dropped = set(self.dropped_image_ids)
                log.warning(f"ground truth of {self.split}: {len(dropped)} unreadable image(s) left out")
                dataset["images"] = [im for im in dataset["images"] if im["id"] not in dropped]
                dataset["annotations"] = [a for a in dataset["annotations"] if a["image_id"] not in dropped]
            coco = COCO()
            coco.dataset = dataset
            with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
                coco.createIndex()
            self._coco = coco
        return self._coco

    def _ground_truth_dict(self) -> dict:
        images, annotations = [], []
        for r in self.records:
            images.append({"id": r.image_id, "file_name": os.path.basename(r.path), "width": r.width,
                           "height": r.height})
            for box, cls, difficult in zip(r.boxes.tolist(), r.classes.tolist(), r.difficult.tolist()):
                w, h = box[2] - box[0], box[3] - box[1]
                # COCOeval ignores only crowd boxes (its _prepare sets `ignore` from `iscrowd`): a VOC difficult
                # box is one, flagged `difficult` so that detect.evaluation.coco matches it by IoU as VOC does, not by the
                # crowd's intersection over the detection's area
                annotations.append({"id": len(annotations) + 1, "image_id": r.image_id,
                                    "category_id": self.category_ids[cls], "bbox": [box[0], box[1], w, h],
                                    "area": w * h, "iscrowd": int(difficult), "difficult": int(difficult)})
        categories = [{"id": cid, "name": n} for cid, n in zip(self.category_ids, self.names)]
        return {"images": images, "annotations": annotations, "categories": categories}


def scan_coco(images_dir: Path, ann_file: Path, names: tuple[str, ...] | None) -> SplitLabels:
    """Records from a COCO instances json; crowd boxes are left to evaluation (they stay in the json)."""
    try:
        data = json.loads(ann_file.read_text())
        images, anns, cats = data["images"], data.get("annotations", []), data["categories"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{ann_file}: not a COCO instances file ({type(e).__name__}: {e})") from None
    if not images:
        raise ValueError(f"{ann_file}: the annotation file has no images (its `images` list is empty); point the "
                         f"spec's annotations key at the right file")
    cats = sorted(cats, key=lambda c: c["id"])
    category_ids = [int(c["id"]) for c in cats]
    if names is not None and len(names) != len(cats):
        raise ValueError(f"{ann_file}: has {len(cats)} categories but the spec lists {len(names)} names")
    names = names or tuple(c["name"] for c in cats)
    cat_index = {cid: i for i, cid in enumerate(category_ids)}
    by_image: dict[int, list] = {}
    for a in anns:
        if not a.get("iscrowd", 0):
            by_image.setdefault(a["image_id"], []).append(a)
    report = BadInputReport()
    paths = [images_dir / im["file_name"] for im in images]
    probes = probe_images(paths, report)
    records, dropped = [], []
    for im, path, probe in zip(images, paths, probes):
        if probe is None:
            dropped.append(int(im["id"]))
            continue
        if (probe.width, probe.height) != (im["width"], im["height"]):
            report.add("corrupt", path, f"size {probe.width}x{probe.height} differs from the json's "
                                        f"{im['width']}x{im['height']}")
            dropped.append(int(im["id"]))
            continue
        image_anns = by_image.get(im["id"], [])
        xywh = np.array([a["bbox"] for a in image_anns], dtype=np.float64).reshape(-1, 4)
        xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1)
        classes = np.array([cat_index.get(a["category_id"], -1) for a in image_anns], dtype=np.float64)
        boxes, classes = validate_boxes(xyxy, classes, probe.width, probe.height, len(names), str(path), report)
        records.append(ImageRecord(str(path), probe.width, probe.height, boxes, classes, int(im["id"])))
    return SplitLabels(records, tuple(names), category_ids, dropped, report)


def open_source(spec: DataSpec, split: str, cache_dir: Path | None = None) -> DatasetSource:
    """The validated split of a coco, yolo or voc spec (synthetic specs are resolved to coco by the loader)."""
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
        files = yolo_labels.list_images(images)
        cache_file = cache_file_for(cache_dir, Path(spec.source_file).stem, split, str(images.resolve()))
        labels = cached_labels(cache_file, lambda: yolo_labels.fingerprint(files, spec.names),
                               lambda: yolo_labels.scan(files, spec.names), what)
    elif spec.format == "voc":
        items = voc.split_items(spec, split)
        xml_files = [] if spec.names else voc.all_xml_files(spec)  # class names come from every split
        cache_file = cache_file_for(cache_dir, Path(spec.source_file).stem, split, f"{spec.path}|{spec.voc}")
        labels = cached_labels(cache_file, lambda: voc.fingerprint(items, spec.names, xml_files),
                               lambda: voc.scan(items, spec.names, xml_files), what)
    else:
        raise ValueError(f"{spec.source_file}: format {spec.format!r} has no files to open; "
                         f"use detect.data.loader, which generates the synthetic dataset first")
    return DatasetSource(spec, split, labels)


__all__ = ["DatasetSource", "open_source", "scan_coco"]
