"""What `darknet detector map` prints, from a `DarknetMapResult`, in its exact layout (src/detector.c
validate_detector_map, AlexeyAB darknet), the same figures as a dict for metrics.json, and a parser of
Darknet's own output so the two can be compared line by line."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np


@dataclass
class DarknetMapResult:
    """The figures of one `detector map` run. `ap` is per class in name order (doubles, as Darknet sums
    them); `tp`/`fp` per class and the totals are counted at `conf_thresh`; precision, recall, F1 and the average
    IoU are float32 as Darknet computes them (the average IoU over TP + FP, see darknet_map)."""

    names: list[str]
    ap: np.ndarray  # float64 [K]
    class_tp: np.ndarray  # int [K]
    class_fp: np.ndarray  # int [K]
    truth_counts: np.ndarray  # int [K]
    map: float
    tp: int
    fp: int
    precision: float
    recall: float
    f1: float
    average_iou: float
    detections_count: int
    unique_truth_count: int
    points: int
    iou_thresh: float
    conf_thresh: float

    @property
    def fn(self) -> int:
        return self.unique_truth_count - self.tp

    def report(self, ranks: bool = False) -> str:
        """Darknet's stdout from the `detections_count` line to the `-points` help, line for line (its progress
        counter on stderr and the timing line left out; `ranks=True` keeps the `rank = ...` progress lines,
        which Darknet ends with a carriage return, as lines)."""
        lines = [f"\n detections_count = {self.detections_count}, unique_truth_count = {self.unique_truth_count}  "]
        if ranks:
            lines += [f" rank = {r} of ranks = {self.detections_count} " for r in range(0, self.detections_count, 100)]
        for i, name in enumerate(self.names):
            lines.append(f"class_id = {i}, name = {name}, ap = {self.ap[i] * 100:2.2f}%   \t "
                         f"(TP = {int(self.class_tp[i])}, FP = {int(self.class_fp[i])}) ")
        lines.append(f"\n for conf_thresh = {_c(self.conf_thresh, '1.2f')}, precision = {_c(self.precision, '1.2f')}, "
                     f"recall = {_c(self.recall, '1.2f')}, F1-score = {_c(self.f1, '1.2f')} ")
        lines.append(f" for conf_thresh = {_c(self.conf_thresh, '0.2f')}, TP = {self.tp}, FP = {self.fp}, "
                     f"FN = {self.fn}, average IoU = {_c(self.average_iou * 100, '2.2f')} % ")
        used = f"used {self.points} Recall-points " if self.points else "used Area-Under-Curve for each unique Recall "
        lines.append(f"\n IoU threshold = {_c(self.iou_thresh * 100, '2.0f')} %, {used}")
        lines.append(f" mean average precision (mAP@{_c(self.iou_thresh, '0.2f')}) = {_c(self.map, 'f')}, "
                     f"or {_c(self.map * 100, '2.2f')} % ")
        lines += ["\nSet -points flag:", " `-points 101` for MS COCO ",
                  " `-points 11` for PascalVOC 2007 (uncomment `difficult` in voc.data) ",
                  " `-points 0` (AUC) for ImageNet, PascalVOC 2010-2012, your custom dataset"]
        return "\n".join(lines) + "\n"

    def as_dict(self) -> dict:
        """Plain numbers for metrics.json (NaN, as Darknet's 0/0 without detections, becomes None)."""
        per_class = {name: {"ap": float(self.ap[i]), "tp": int(self.class_tp[i]), "fp": int(self.class_fp[i]),
                            "truths": int(self.truth_counts[i])} for i, name in enumerate(self.names)}
        return {"map50" if self.iou_thresh == 0.5 else f"map@{self.iou_thresh:g}": self.map,
                "points": self.points, "iou_thresh": self.iou_thresh, "conf_thresh": self.conf_thresh,
                "tp": self.tp, "fp": self.fp, "fn": self.fn, "precision": _finite(self.precision),
                "recall": _finite(self.recall), "f1": _finite(self.f1), "average_iou": _finite(self.average_iou),
                "detections_count": self.detections_count, "unique_truth_count": self.unique_truth_count,
                "per_class": per_class}


def _c(value: float, spec: str) -> str:
    """printf's %f family as glibc prints it: a NaN from 0/0 (x86 sets its sign bit) reads "-nan"."""
    return "-nan" if math.isnan(value) else format(value, spec)


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


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
