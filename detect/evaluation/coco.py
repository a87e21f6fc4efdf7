"""COCO result rows and COCOeval's figures: detections in as compact rows, result dicts, the ground-truth counts
and per-class AP read from COCOeval's precision, and the 12 COCO stats printed as pycocotools prints them. The
evaluation itself runs in detect.evaluation.evaluator (COCOeval shared by ranks, detect.evaluation.sharded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

STAT_NAMES = (
    "AP@[.50:.95] all maxDets=100", "AP@.50 all maxDets=100", "AP@.75 all maxDets=100",
    "AP@[.50:.95] small maxDets=100", "AP@[.50:.95] medium maxDets=100", "AP@[.50:.95] large maxDets=100",
    "AR@[.50:.95] all maxDets=1", "AR@[.50:.95] all maxDets=10", "AR@[.50:.95] all maxDets=100",
    "AR@[.50:.95] small maxDets=100", "AR@[.50:.95] medium maxDets=100", "AR@[.50:.95] large maxDets=100",
)


@dataclass(frozen=True)
class ClassAP:
    name: str
    images: int     # evaluated images with at least one (non-crowd) instance of the class
    instances: int  # non-crowd ground-truth boxes of the class
    ap50: float
    ap: float       # AP@[.50:.95]


def detections_to_rows(det: torch.Tensor | np.ndarray, image_id: int, category_ids: Sequence[int]) -> np.ndarray:
    """Rows (x1, y1, x2, y2, score, class) in original pixels -> float64 [n, 7] rows
    (image_id, x, y, w, h, score, category_id): compact to gather across ranks, one dict each only at the end.

    Coordinates are rounded to 1/1000 pixel and scores to 5 decimals: far below what changes COCOeval,
    and it keeps the results json small.
    """
    rows = np.asarray(det.detach().cpu() if hasattr(det, "detach") else det, dtype=np.float64)
    out = np.empty((len(rows), 7), dtype=np.float64)
    out[:, 0] = image_id
    out[:, 1:3] = rows[:, 0:2].round(3)
    out[:, 3:5] = (rows[:, 2:4] - rows[:, 0:2]).round(3)
    out[:, 5] = rows[:, 4].round(5)
    out[:, 6] = np.asarray(category_ids, dtype=np.float64)[rows[:, 5].astype(np.int64)]
    return out


def rows_to_results(rows: np.ndarray) -> list[dict]:
    """[n, 7] rows from `detections_to_rows` -> COCO result dicts (bbox x, y, w, h)."""
    return [{"image_id": int(r[0]), "category_id": int(r[6]), "bbox": [float(v) for v in r[1:5]],
             "score": float(r[5])} for r in rows]


def sort_rows(rows: np.ndarray) -> np.ndarray:
    """A fixed order (image, score descending, category, box): COCOeval breaks score ties by input order,
    so this makes its result independent of how the rows were split across ranks. A sort of seven keys: the
    evaluator sorts each image's rows as they arrive and puts the images in order with `by_image`."""
    order = np.lexsort((rows[:, 4], rows[:, 3], rows[:, 2], rows[:, 1], rows[:, 6], -rows[:, 5], rows[:, 0]))
    return rows[order]


def by_image(rows: np.ndarray) -> np.ndarray:
    """Rows whose images' rows are each in sort_rows' order, images in any order -> sort_rows' order, by one
    stable sort of the image ids (the ranks' rows put together are so)."""
    if len(rows) < 2 or (rows[1:, 0] >= rows[:-1, 0]).all():  # one rank's rows, added image by image in order
        return rows
    return rows[np.argsort(rows[:, 0], kind="stable")]


def ground_truth_counts(coco_gt, image_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """category id -> (images containing it, instances) among `image_ids`, crowd boxes excluded."""
    anns = coco_gt.loadAnns(coco_gt.getAnnIds(imgIds=list(image_ids), iscrowd=False))
    images: dict[int, set] = {}
    instances: dict[int, int] = {}
    for a in anns:
        images.setdefault(a["category_id"], set()).add(a["image_id"])
        instances[a["category_id"]] = instances.get(a["category_id"], 0) + 1
    return {cid: (len(images[cid]), instances[cid]) for cid in instances}


def class_ap(precision: np.ndarray, k: int) -> tuple[float, float]:
    """(AP50, AP50:95) of category index k from COCOeval's precision [T, R, K, area, maxDets]."""
    p = precision[:, :, k, 0, -1]  # area "all", the largest maxDets (100)
    valid = p > -1
    ap = float(p[valid].mean()) if valid.any() else 0.0
    p50 = p[0][p[0] > -1]
    return (float(p50.mean()) if p50.size else 0.0), ap


# pycocotools' summarize(): (AP or AR, IoU range, area, maxDets) of each of the 12 stats, in order
_SUMMARY_ROWS = (
    (True, "0.50:0.95", "all", 100), (True, "0.50", "all", 100), (True, "0.75", "all", 100),
    (True, "0.50:0.95", "small", 100), (True, "0.50:0.95", "medium", 100), (True, "0.50:0.95", "large", 100),
    (False, "0.50:0.95", "all", 1), (False, "0.50:0.95", "all", 10), (False, "0.50:0.95", "all", 100),
    (False, "0.50:0.95", "small", 100), (False, "0.50:0.95", "medium", 100), (False, "0.50:0.95", "large", 100),
)


def format_summary(stats: Sequence[float]) -> str:
    """The 12 lines of pycocotools' COCOeval.summarize(), character for character, from the stats (what
    detect.val prints when COCOeval did not run, e.g. without any detection)."""
    lines = []
    for (precision, iou, area, max_dets), value in zip(_SUMMARY_ROWS, stats):
        title, kind = ("Average Precision", "(AP)") if precision else ("Average Recall", "(AR)")
        lines.append(f" {title:<18} {kind} @[ IoU={iou:<9} | area={area:>6s} | maxDets={max_dets:>3d} ] = "
                     f"{value:0.3f}")
    return "\n".join(lines)


def format_class_table(per_class: Sequence[ClassAP], num_images: int, stats: Sequence[float]) -> str:
    """A table: class, images, instances, AP50, AP; first row 'all'."""
    width = max([len(c.name) for c in per_class] + [5])
    total = sum(c.instances for c in per_class)
    lines = [f"{'class':>{width}s} {'images':>7s} {'instances':>9s} {'AP50':>6s} {'AP':>6s}",
             f"{'all':>{width}s} {num_images:7d} {total:9d} {stats[1]:6.3f} {stats[0]:6.3f}"]
    lines += [f"{c.name:>{width}s} {c.images:7d} {c.instances:9d} {c.ap50:6.3f} {c.ap:6.3f}" for c in per_class]
    return "\n".join(lines)
