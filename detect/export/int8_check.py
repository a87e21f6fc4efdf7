"""The mAP check of an int8 export: the float and the int8 graph of one model, each evaluated by `detect.val` (in
a child process: the export package does not import the evaluation) on the val split of the spec that
calibrated it, on the engine the tools run it on. An int8 graph that loses more than `max_drop` mAP@0.5:0.95 is
refused (`Int8CheckFailed`, the file kept for a look)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_MAX_DROP = 0.005


class Int8CheckFailed(ValueError):
    pass


@dataclass(frozen=True)
class Int8Check:
    float_map: float
    float_map50: float
    int8_map: float
    int8_map50: float

    @property
    def drop(self) -> float:
        return self.float_map - self.int8_map

    def line(self, data: str) -> str:
        return (f"int8 check on {data}'s val split (detect.val, square at the export's size): mAP@0.5:0.95 "
                f"{self.float_map:.4f} float -> {self.int8_map:.4f} int8 ({-self.drop:+.4f}), mAP@0.5 "
                f"{self.float_map50:.4f} -> {self.int8_map50:.4f}")


def _val_metrics(weights: Path, data: str, img_size: int, project: Path, name: str) -> tuple[float, float]:
    command = [sys.executable, "-m", "detect.val", "--weights", str(weights), "--data", data, "--img",
               str(img_size), "--device", "cpu", "--project", str(project), "--name", name]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    metrics_path = project / name / "metrics.json"
    if done.returncode != 0 or not metrics_path.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Int8CheckFailed(f"the int8 check could not evaluate {weights.name} on {data} ({last}); run "
                              f"detect.val on it yourself, or pass --no-int8-check")
    metrics = json.loads(metrics_path.read_text())
    return float(metrics["map"]), float(metrics["map50"])


def check_int8(float_path: Path, int8_path: Path, data: str, img_size: int, max_drop: float) -> Int8Check:
    """Both graphs' val metrics; Int8CheckFailed when int8 loses more than `max_drop` mAP@0.5:0.95."""
    with tempfile.TemporaryDirectory(prefix="int8-check-") as tmp:
        float_map, float_map50 = _val_metrics(float_path, data, img_size, Path(tmp), "float")
        int8_map, int8_map50 = _val_metrics(int8_path, data, img_size, Path(tmp), "int8")
    check = Int8Check(float_map, float_map50, int8_map, int8_map50)
    if check.drop > max_drop:
        raise Int8CheckFailed(f"{check.line(data)}: int8 lost more than {max_drop:g}; {int8_path} is kept for a "
                              f"look, but use the float export, or calibrate on more images "
                              f"(--calibration-images)")
    return check
