"""The Darknet side of the `--metric darknet` checks: Darknet's own `detector map` output read back into figures
(parse_darknet_map), and truths taken from a COCO json the way Darknet reads them after a conversion to YOLO
label files (coco_truths), scored by the product's darknet_map (coco_darknet_map). The product evaluates its
own splits through detect.evaluation.darknet_eval; these are what its figures are compared with."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detect.evaluation.darknet_map import DarknetDetections, truths_from_xyxy
from detect.evaluation.darknet_map_report import DarknetMapResult
from detect.evaluation.darknet_map_score import darknet_map


@dataclass
class ImageTruth:
    file_name: str
    width: int
    height: int
    classes: np.ndarray  # int64 [m], 0..K-1
    boxes: np.ndarray  # float64 [m, 4] xyxy, image pixels


def coco_truths(annotations: str | Path) -> list[ImageTruth]:
    """Every image of a COCO instances json, sorted by file name, with its non-crowd boxes (xyxy pixels, as the
    json gives them: no clipping, no dropping) and classes numbered in sorted category-id order."""
    data = json.loads(Path(annotations).read_text())
    class_of = {cid: i for i, cid in enumerate(sorted(c["id"] for c in data["categories"]))}
    boxes: dict[int, list] = {image["id"]: [] for image in data["images"]}
    for a in data["annotations"]:
        if not a.get("iscrowd", 0):
            x, y, w, h = a["bbox"]
            boxes[a["image_id"]].append((class_of[a["category_id"]], x, y, x + w, y + h))
    found = []
    for image in sorted(data["images"], key=lambda i: i["file_name"]):
        rows = np.array(boxes[image["id"]], dtype=np.float64).reshape(-1, 5)
        found.append(ImageTruth(image["file_name"], int(image["width"]), int(image["height"]),
                                rows[:, 0].astype(np.int64), rows[:, 1:]))
    return found


def coco_darknet_map(detections: Sequence[DarknetDetections], truths: Sequence[ImageTruth], names: Sequence[str],
                     points: int = 0, iou_thresh: float = 0.5, conf_thresh: float = 0.25) -> DarknetMapResult:
    """darknet_map over `coco_truths` images (in the same order as `detections`)."""
    converted = [truths_from_xyxy(t.classes, t.boxes, t.width, t.height) for t in truths]
    return darknet_map(detections, converted, names, points, iou_thresh, conf_thresh)


_CLASS = re.compile(r"class_id = (\d+), name = (.*), ap = ([-\d.na]+)%\s+\(TP = (\d+), FP = (\d+)\)")
_TOTALS = re.compile(r"TP = (\d+), FP = (\d+), FN = (\d+), average IoU = ([-\d.na]+) %")
_PRF = re.compile(r"precision = ([-\d.na]+), recall = ([-\d.na]+), F1-score = ([-\d.na]+)")
_MAP = re.compile(r"mean average precision \(mAP@([\d.]+)\) = ([-\d.na]+)")
_COUNTS = re.compile(r"detections_count = (\d+), unique_truth_count = (\d+)")


def parse_darknet_map(text: str) -> dict:
    """The figures of a `darknet detector map` output (Darknet's own or `DarknetMapResult.report()`): per class
    {id: (name, ap in %, tp, fp)}, tp, fp, fn, average_iou (%), precision, recall, f1, map, iou_thresh, points,
    detections_count, unique_truth_count. Raises ValueError naming what is missing."""
    found: dict = {"classes": {}}
    for line in text.splitlines():
        if m := _CLASS.search(line):
            found["classes"][int(m[1])] = (m[2], float(m[3]), int(m[4]), int(m[5]))
        elif m := _TOTALS.search(line):
            found.update(tp=int(m[1]), fp=int(m[2]), fn=int(m[3]), average_iou=float(m[4]))
        elif m := _PRF.search(line):
            found.update(precision=float(m[1]), recall=float(m[2]), f1=float(m[3]))
        elif m := _MAP.search(line):
            found.update(iou_thresh=float(m[1]), map=float(m[2]))
        elif m := _COUNTS.search(line):
            found.update(detections_count=int(m[1]), unique_truth_count=int(m[2]))
        elif "Recall-points" in line or "Area-Under-Curve" in line:
            found["points"] = int(re.search(r"used (\d+)", line)[1]) if "Recall-points" in line else 0
    missing = [k for k in ("map", "tp", "precision", "points", "detections_count") if k not in found]
    if missing or not found["classes"]:
        raise ValueError(f"not a `darknet detector map` output: no {', '.join(missing) or 'class_id'} line found")
    return found
