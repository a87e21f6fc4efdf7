"""One record per image, label validation, and the bad-input report.

Every label that reaches a record went through `validate_boxes`: boxes are xyxy in original image pixels
(corner coordinates: a box covering pixel columns 0..9 is x1=0, x2=10), classes are contiguous 0..nc-1.
Offending input is counted by kind and listed in a log file; it never crashes the build.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from detect.runtime.files import atomic_write_text

log = logging.getLogger(__name__)

# One rule for every format (YOLO's normalised values past 1, COCO and VOC pixels past the edge): a box that sticks
# out of the image by at most this fraction of the image's side (or 1 px, whichever is larger) is clipped to the
# image; further out it is dropped as `outside_image`. Annotation tools let a box be dragged a little past the
# edge (an object cut by the frame); one far out is a wrong coordinate, not a cut object.
OUTSIDE_TOLERANCE = 0.10
# Boxes narrower or lower than this (pixels, after clipping) have no area to learn from.
MIN_BOX_SIDE = 1e-3

# Kinds of bad input. `skipped` kinds remove an image or a box; `fixed` kinds are converted and kept; `info`
# kinds are worth knowing but need no fix (a build with only those is logged as info, not as a warning).
# `duplicate_image`: a COCO json's second entry of one image (merged exports), kept once (detect.data.formats.coco_exports)
# `shared_label`: two images of one stem that would read one label file (detect.data.formats.label_location)
IMAGE_SKIP_KINDS = ("missing", "empty_file", "corrupt", "unsupported_format", "label_syntax", "no_image",
                    "duplicate_image", "shared_label")
# `unknown_image`: a COCO annotation whose image_id is none of the json's images (reported against the json)
BOX_SKIP_KINDS = ("class_out_of_range", "unknown_class", "unknown_image", "non_finite", "outside_image", "zero_area",
                  "duplicate")
FIXED_KINDS = ("clipped", "exif_rotated", "grayscale", "rgba", "16bit", "truncated", "size_mismatch")
# `confidence_column`: YOLO label lines with a pseudo-label's confidence or track id, read as boxes without them;
# `class_not_chosen`: boxes of classes a `classes:` selection leaves out (detect.data.formats.class_selection)
INFO_KINDS = ("background", "confidence_column", "class_not_chosen")


@dataclass
class ImageRecord:
    path: str
    width: int
    height: int
    boxes: np.ndarray  # float32 [n, 4] xyxy, original pixels
    classes: np.ndarray  # int64 [n], contiguous 0..nc-1
    image_id: int
    # bool [n]: boxes trained on but ignored by evaluation (VOC `difficult`); None means none of them
    difficult: np.ndarray | None = None

    def __post_init__(self):
        if self.difficult is None:
            self.difficult = np.zeros(len(self.classes), dtype=bool)


def image_ids_for(stems: list[str]) -> list[int]:
    """The numeric file stems when all of them are numeric and unique (COCO file names keep their official
    ids), else the position in the list."""
    if all(s.isdigit() for s in stems) and len({int(s) for s in stems}) == len(stems):
        return [int(s) for s in stems]
    return list(range(len(stems)))


@dataclass
class BadInputReport:
    """Counts per kind of bad input and the offending files (path, kind, detail)."""

    entries: list[tuple[str, str, str]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def add(self, kind: str, path: str | Path, detail: str = "", count: int = 1) -> None:
        self.counts[kind] += count
        self.entries.append((str(path), kind, detail))

    def merge(self, other: BadInputReport) -> None:
        self.entries.extend(other.entries)
        self.counts.update(other.counts)

    def summary(self, what: str, num_images: int, num_boxes: int, num_crowd: int = 0) -> str:
        def part(kinds):
            items = [f"{self.counts[k]} {k}" for k in kinds if self.counts[k]]
            return ", ".join(items) if items else "none"

        skipped_images = part(IMAGE_SKIP_KINDS)
        skipped_boxes = part(BOX_SKIP_KINDS)
        fixed = part(FIXED_KINDS)
        info = f"; info: {part(INFO_KINDS)}" if any(self.counts[k] for k in INFO_KINDS) else ""
        crowd = f" (+ {num_crowd} crowd region(s), ignored by evaluation)" if num_crowd else ""
        return (f"{what}: {num_images} images, {num_boxes} boxes{crowd}; skipped images: {skipped_images}; "
                f"dropped boxes: {skipped_boxes}; converted/fixed: {fixed}{info}")

    def needs_attention(self) -> bool:
        """Whether anything beyond information was reported."""
        return any(kind not in INFO_KINDS for _, kind, _ in self.entries)

    def write_log(self, path: Path) -> None:
        lines = [f"{kind}\t{p}\t{detail}" for p, kind, detail in self.entries]
        atomic_write_text(path, "kind\tfile\tdetail\n" + "\n".join(lines) + ("\n" if lines else ""))

    def to_json(self) -> dict:
        return {"entries": [list(e) for e in self.entries], "counts": dict(self.counts)}

    @classmethod
    def from_json(cls, data: dict) -> BadInputReport:
        return cls([tuple(e) for e in data["entries"]], Counter(data["counts"]))


def first_few(values, n: int = 5) -> str:
    """`1, 2, 3, 4, 5 and 2 more`: the first `n` values for a report line."""
    values = list(values)
    more = f" and {len(values) - n} more" if len(values) > n else ""
    return ", ".join(str(v) for v in values[:n]) + more


def validate_boxes(boxes: np.ndarray, classes: np.ndarray, width: int, height: int, num_classes: int,
                   path: str, report: BadInputReport) -> tuple[np.ndarray, np.ndarray]:
    """Keep the usable boxes of one image: (boxes float32 [k,4] xyxy, classes int64 [k]).

    Drops non-finite coordinates, class ids that are not integers in 0..nc-1, boxes outside the image beyond
    the tolerance, zero-area boxes and exact duplicates (same class and box); clips small overshoots.
    """
    boxes, classes, _ = validate_boxes_kept(boxes, classes, width, height, num_classes, path, report)
    return boxes, classes


def validate_boxes_kept(boxes: np.ndarray, classes: np.ndarray, width: int, height: int, num_classes: int,
                        path: str, report: BadInputReport,
                        lines: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`validate_boxes` plus which input boxes were kept (bool [n]), for per-box data that must follow them.
    `lines` (the file's line number of each box, for text labels) puts the lines at fault into the report."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    classes_f = np.asarray(classes, dtype=np.float64).reshape(-1)
    keep = np.ones(len(boxes), dtype=bool)

    def at(mask: np.ndarray) -> str:
        return f" (line(s) {first_few(np.asarray(lines)[mask].tolist())})" if lines is not None else ""

    def drop(mask: np.ndarray, kind: str, what: str) -> None:
        mask = mask & keep
        if mask.any():
            report.add(kind, path, f"{int(mask.sum())} box(es): {what}{at(mask)}", count=int(mask.sum()))
            keep[mask] = False

    finite = np.isfinite(boxes).all(1) & np.isfinite(classes_f)
    drop(~finite, "non_finite", "NaN or infinite value")
    valid_class = finite & (classes_f == np.round(classes_f)) & (classes_f >= 0) & (classes_f < num_classes)
    bad_ids = sorted(set(classes_f[~valid_class & keep].tolist()))
    drop(~valid_class, "class_out_of_range", f"class id(s) {bad_ids[:5]} not in 0..{num_classes - 1}")

    size = np.array([width, height, width, height], dtype=np.float64)
    tol = np.maximum(OUTSIDE_TOLERANCE * size, 1.0)
    safe = np.where(np.isfinite(boxes), boxes, 0.0)
    outside = ((safe < -tol) | (safe > size + tol)).any(1)
    drop(outside, "outside_image", f"coordinates more than {OUTSIDE_TOLERANCE:.0%} of the image's side beyond the "
                                   f"{width}x{height} image (up to {OUTSIDE_TOLERANCE:.0%} is clipped)")

    clipped = np.clip(safe, 0.0, size)
    was_clipped = keep & (np.abs(clipped - safe) > 1e-6).any(1)
    if was_clipped.any():
        report.add("clipped", path, f"{int(was_clipped.sum())} box(es) past the edge by up to "
                   f"{OUTSIDE_TOLERANCE:.0%} of the image, clipped to it{at(was_clipped)}",
                   count=int(was_clipped.sum()))
    sides = clipped[:, 2:] - clipped[:, :2]
    drop((sides < MIN_BOX_SIDE).any(1), "zero_area", "width or height <= 0")

    rows = np.concatenate([classes_f[:, None], np.round(clipped, 3)], 1)
    _, first = np.unique(rows[keep], axis=0, return_index=True)
    kept_idx = np.flatnonzero(keep)
    duplicate = np.zeros(len(boxes), dtype=bool)
    duplicate[kept_idx] = True
    duplicate[kept_idx[first]] = False
    drop(duplicate, "duplicate", "same class and box as another")
    return clipped[keep].astype(np.float32), classes_f[keep].astype(np.int64), keep
