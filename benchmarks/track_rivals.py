"""The trackers `python -m benchmarks track` compares, behind one call: `step(rows [n, 6]) -> (boxes [k, 4]
xyxy, ids [k], scores [k])` per frame. Ours (detect.tracking) and, when installed, ultralytics' BYTETracker with
its own defaults (bytetrack.yaml), fed the same detections through a stand-in for its Boxes (conf, cls, xyxy,
xywh, boolean indexing). ultralytics is a benchmark reference only, not a dependency of the project."""

from __future__ import annotations

import numpy as np

from detect.tracking.bytetrack import ByteTracker
from detect.tracking.config import tracker_config


class OurTracker:
    def __init__(self, name: str = "bytetrack", fps: float = 30.0):
        self.tracker = ByteTracker(tracker_config(name), fps)

    def step(self, rows: np.ndarray):
        found = self.tracker.update(rows[:, :4], rows[:, 4], rows[:, 5])
        return found.boxes, found.ids, rows[found.index, 4]


class _Boxes:
    """What BYTETracker.update reads from ultralytics' Boxes, over rows (x1, y1, x2, y2, score, class)."""

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self.conf, self.cls, self.xyxy = rows[:, 4], rows[:, 5], rows[:, :4]
        self.xywh = np.concatenate([(rows[:, :2] + rows[:, 2:4]) / 2, rows[:, 2:4] - rows[:, :2]], axis=1)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index) -> _Boxes:
        return _Boxes(self.rows[index])


def ultralytics_available() -> str | None:
    """ultralytics' version, or None when it is not installed."""
    try:
        import ultralytics
    except ImportError:
        return None
    return ultralytics.__version__


class UltralyticsTracker:
    def __init__(self, fps: float = 30.0):
        from ultralytics.trackers.byte_tracker import BYTETracker
        from ultralytics.utils import YAML, IterableSimpleNamespace
        from ultralytics.utils.checks import check_yaml

        args = IterableSimpleNamespace(**YAML.load(check_yaml("bytetrack.yaml")))
        try:
            self.tracker = BYTETracker(args, frame_rate=int(fps))
        except TypeError:  # releases whose tracker takes no frame rate
            self.tracker = BYTETracker(args)

    def step(self, rows: np.ndarray):
        out = self.tracker.update(_Boxes(rows))
        if not len(out):
            return np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(0)
        return out[:, :4], out[:, 4].astype(np.int64), out[:, 5]
