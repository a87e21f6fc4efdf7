"""Known label errors put into a real split, and a ranked list of suspected errors scored against them.

Four kinds, each a share of the split's boxes (seeded): `missing` (a box removed), `box` (moved by 35-60% of its
size in a random direction), `class` (relabelled to another class, uniformly), `spurious` (a box invented on an
empty region: the size of a random box of the split, overlapping no label, of a class drawn as the labels are).
Removed, moved and relabelled boxes are distinct. The corrupted labels are written as a YOLO split (images
linked, labels/<stem>.txt), so the audit reads them as a user's.

Scoring: an issue is right when its kind is the error's and its box overlaps the error's box at IoU >= 0.5 (the
removed box, the moved or relabelled or invented label), each error counted once, in rank order. Box-level AP is
the mean of the precision at each right issue over all injected errors (uninterpolated); recall at N counts the
right issues among the first N (N = the number injected). Image-level AP ranks images by their worst issue (or a
rival's image score) against "holds an injected error".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from detect.ops.boxes_np import box_iou

KINDS = ("missing", "box", "class", "spurious")


@dataclass(frozen=True)
class Injected:
    image: int
    kind: str
    box: tuple[float, float, float, float]  # the error's box: the removed, moved, relabelled or invented label
    cls: int
    truth: tuple[tuple[float, float, float, float], int] | None = None  # the object as it is (none for spurious)


@dataclass
class Corrupted:
    boxes: list[np.ndarray]  # per image [m, 4]
    classes: list[np.ndarray]
    errors: list[Injected]


def _moved(box: np.ndarray, rng, width: int, height: int) -> np.ndarray | None:
    w, h = box[2] - box[0], box[3] - box[1]
    distance, angle = rng.uniform(0.35, 0.6), rng.uniform(0, 2 * np.pi)
    shift = np.array([distance * w * np.cos(angle), distance * h * np.sin(angle)])
    moved = box + np.tile(shift, 2)
    moved[[0, 2]] = moved[[0, 2]].clip(0, width)
    moved[[1, 3]] = moved[[1, 3]].clip(0, height)
    # a box pushed off the image is cut: keep it only when what is left is still a moved box
    if (moved[2] - moved[0]) < 0.5 * w or (moved[3] - moved[1]) < 0.5 * h:
        return None
    return moved


def _resized(box: np.ndarray, rng, width: int, height: int) -> np.ndarray:
    """The box drawn at another extent about its centre: each side 0.55-0.7 or 1.45-1.8 times (IoU 0.3-0.49)."""
    scale = rng.uniform(0.55, 0.7) if rng.uniform() < 0.5 else rng.uniform(1.45, 1.8)
    centre, half = (box[:2] + box[2:]) / 2, (box[2:] - box[:2]) * scale / 2
    return np.concatenate([centre - half, centre + half]).clip(0, [width, height, width, height])


def _invented(boxes: list[np.ndarray], sizes, rng, image: int, wh: np.ndarray) -> np.ndarray | None:
    w, h = sizes[rng.integers(len(sizes))]
    width, height = wh[image]
    if w >= width or h >= height:
        return None
    x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
    box = np.array([x, y, x + w, y + h])
    if len(boxes[image]):  # on an empty region: it touches no label
        top_left = np.maximum(box[:2], boxes[image][:, :2])
        bottom_right = np.minimum(box[2:], boxes[image][:, 2:])
        if (np.prod((bottom_right - top_left).clip(0), 1) > 0).any():
            return None
    return box


def inject(records, num_classes: int, share: float, seed: int, kinds=KINDS, resized: bool = False) -> Corrupted:
    """Each kind of `kinds` on `share` of the split's (non-difficult) boxes; `class` needs two classes. The box
    errors are moved boxes, or with `resized` boxes drawn at another extent in place."""
    rng = np.random.default_rng(seed)
    boxes = [np.asarray(r.boxes, np.float64).reshape(-1, 4).copy() for r in records]
    classes = [np.asarray(r.classes, np.int64).copy() for r in records]
    wh = np.array([(r.width, r.height) for r in records])
    pool = [(i, j) for i, r in enumerate(records) for j in range(len(r.classes)) if not r.difficult[j]]
    count = max(1, round(share * len(pool)))
    chosen = rng.permutation(len(pool))
    errors: list[Injected] = []
    removed: dict[int, list[int]] = {}
    take = iter(chosen)
    for kind in [k for k in ("missing", "box", "class") if k in kinds]:
        if kind == "class" and num_classes < 2:
            continue
        made = 0
        while made < count:
            i, j = pool[next(take)]
            box = boxes[i][j]
            truth = (tuple(box), int(classes[i][j]))
            if kind == "missing":
                removed.setdefault(i, []).append(j)
                errors.append(Injected(i, kind, *truth, truth))
            elif kind == "box":
                moved = _resized(box, rng, *wh[i]) if resized else _moved(box, rng, *wh[i])
                if moved is None:
                    continue
                errors.append(Injected(i, kind, tuple(moved), truth[1], truth))
                boxes[i][j] = moved
            else:
                classes[i][j] = (classes[i][j] + rng.integers(1, num_classes)) % num_classes
                errors.append(Injected(i, kind, tuple(box), int(classes[i][j]), truth))
            made += 1
    for i, rows in removed.items():
        keep = np.setdiff1d(np.arange(len(classes[i])), rows)
        boxes[i], classes[i] = boxes[i][keep], classes[i][keep]
    if "spurious" in kinds:
        sizes = [(b[2] - b[0], b[3] - b[1]) for r in records for b in np.asarray(r.boxes).reshape(-1, 4)]
        label_classes = np.concatenate([np.asarray(r.classes) for r in records])
        made = 0
        while made < count:
            i = int(rng.integers(len(records)))
            box = _invented(boxes, sizes, rng, i, wh)
            if box is None:
                continue
            cls = int(label_classes[rng.integers(len(label_classes))])
            boxes[i] = np.concatenate([boxes[i], box[None]])
            classes[i] = np.concatenate([classes[i], [cls]])
            errors.append(Injected(i, "spurious", tuple(box), cls))
            made += 1
    return Corrupted(boxes, classes, errors)


def write_yolo_split(records, corrupted: Corrupted, names, folder: Path) -> Path:
    """The corrupted split as a YOLO dataset (images linked) under `folder`; its spec's path (split `train`)."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    (folder / "labels").mkdir(exist_ok=True)
    for i, record in enumerate(records):
        source = Path(record.path).resolve()
        image = folder / "images" / f"{i:06d}{source.suffix.lower()}"
        if not image.exists():
            os.symlink(source, image)
        b, c = corrupted.boxes[i], corrupted.classes[i]
        scale = np.array([record.width, record.height] * 2, float)
        centre = (b[:, :2] + b[:, 2:]) / 2
        size = b[:, 2:] - b[:, :2]
        rows = np.concatenate([centre, size], 1) / scale if len(b) else np.zeros((0, 4))
        lines = [f"{int(k)} " + " ".join(f"{v:.6f}" for v in row) for k, row in zip(c, rows)]
        (folder / "labels" / f"{i:06d}.txt").write_text("\n".join(lines) + ("\n" if lines else ""))
    spec = {"path": str(folder.resolve()), "format": "yolo", "train": "images", "names": list(names)}
    (folder / "data.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder / "data.yaml"


def ranked_hits(issues, errors: list[Injected]) -> np.ndarray:
    """Per issue (in rank order), whether it finds a not yet found injected error."""
    found = np.zeros(len(errors), bool)
    hits = np.zeros(len(issues), bool)
    by_image: dict[tuple[int, str], list[int]] = {}
    for e, error in enumerate(errors):
        by_image.setdefault((error.image, error.kind), []).append(e)
    for n, issue in enumerate(issues):
        candidates = [e for e in by_image.get((issue.image, issue.kind), []) if not found[e]]
        if not candidates:
            continue
        iou = box_iou(np.array([issue.box], float), np.array([errors[e].box for e in candidates], float))[0]
        best = int(iou.argmax())
        if iou[best] >= 0.5:
            found[candidates[best]] = hits[n] = True
    return hits


def average_precision(hits: np.ndarray, positives: int) -> float:
    """Uninterpolated AP of a ranked list: the mean precision at each hit, over all positives."""
    if positives == 0:
        return float("nan")
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return float(precision[hits].sum() / positives)


def box_figures(issues, errors: list[Injected]) -> dict:
    hits = ranked_hits(issues, errors)
    n = len(errors)
    per_kind = {}
    for kind in KINDS:
        wanted = [e for e in errors if e.kind == kind]
        if wanted:
            mine = [i for i in issues if i.kind == kind]
            per_kind[kind] = average_precision(ranked_hits(mine, wanted), len(wanted))
    return {"box_ap": average_precision(hits, n), "recall_at_n": float(hits[:n].sum() / max(n, 1)),
            "per_kind_ap": per_kind}


def seen_share(errors: list[Injected], detections: list[np.ndarray], min_conf: float) -> dict[str, float]:
    """Per kind, the share of the errors the model gives itself away on at confidence >= `min_conf`: for a
    removed, moved or relabelled box a detection of the object's true class at IoU >= 0.5 with its true box; for
    an invented box no detection at IoU >= 0.1. A ranking can list only these first: their share over all kinds
    bounds box-level AP (`all`). `detections[image]` is [k, 6] xyxy, score, class."""
    seen = {kind: [] for kind in KINDS}
    for error in errors:
        det = detections[error.image]
        det = det[det[:, 4] >= min_conf]
        if error.truth is None:
            seen[error.kind].append(box_iou(np.array([error.box]), det[:, :4]).max(initial=0) < 0.1)
            continue
        box, cls = error.truth
        same = det[det[:, 5] == cls]
        seen[error.kind].append(box_iou(np.array([box]), same[:, :4]).max(initial=0) >= 0.5)
    shares = {kind: float(np.mean(v)) for kind, v in seen.items() if v}
    shares["all"] = float(np.mean([x for v in seen.values() for x in v])) if errors else float("nan")
    return shares


def image_ap(scores: np.ndarray, errors: list[Injected], num_images: int) -> float:
    """AP of images ranked by `scores` (higher = more suspect; ties broken by image order) against holding an
    injected error."""
    positive = np.zeros(num_images, bool)
    positive[[e.image for e in errors]] = True
    order = np.argsort(-scores, kind="stable")
    return average_precision(positive[order], int(positive.sum()))
