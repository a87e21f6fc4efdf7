"""What `darknet detector map` prints, from a `DarknetMapResult`, in its exact layout (src/detector.c
validate_detector_map, AlexeyAB darknet), and the same figures as a dict for metrics.json. (The tests read
Darknet's own output back with tests/support/darknet_oracles.py to compare the two line by line.)"""

from __future__ import annotations

import math
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
