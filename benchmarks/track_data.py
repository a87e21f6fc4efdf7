"""Sequences with known tracks for `python -m benchmarks track` and the tests: made on the spot, seeded.

- `pan_over`: a camera window panning and zooming across a real photo (coco-tiny, kangaroo): its annotated
  objects move through the frame with their annotation as id, leave it at one edge and come back (cut by the
  frame edge on the way);
- `moving_shapes`: coloured shapes moving at their own speeds on a textured background, crossing and hiding one
  another, leaving the frame and coming back.
Ground truth follows MOTChallenge: a box is scored (conf 1) when at least MIN_VISIBLE of the object shows and
its visible part is at least MIN_SIDE pixels a side; a less visible one is an ignore region (conf 0).
`simulate_detections` turns the truth into a detector's output: jittered boxes, missed and faint detections
that grow with occlusion, false positives.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from detect.tracking.mot import MotRows

MIN_VISIBLE = 0.4
MIN_SIDE = 6.0
FPS = 30.0


@dataclass(frozen=True)
class MadeSequence:
    name: str
    frames: list[np.ndarray] | None  # BGR images (None: made without pictures, for timing)
    truth: MotRows  # 1-based frames; conf 1 scored, 0 ignored
    classes: np.ndarray  # int64 [n], per truth row
    visibility: np.ndarray  # float [n], per truth row
    size: tuple[int, int]  # (width, height)
    length: int  # frames (the last ones may have no truth)


def _truth_rows(frame: int, ids, full_boxes, visible_fraction, classes, size, rows: list) -> None:
    """Append one frame's truth rows: boxes clipped to the frame; scored, ignored or (not visible) absent."""
    w, h = size
    clipped = np.clip(full_boxes, 0, [w, h, w, h])
    sides = clipped[:, 2:] - clipped[:, :2]
    for i, box, vis, k, (sw, sh) in zip(ids, clipped, visible_fraction, classes, sides):
        if vis <= 0 or sw <= 0 or sh <= 0:
            continue
        scored = vis >= MIN_VISIBLE and min(sw, sh) >= MIN_SIDE
        rows.append((frame, int(i), *box, 1.0 if scored else 0.0, int(k), float(vis)))


def _sequence(name: str, frames, rows: list, size, length: int) -> MadeSequence:
    table = np.array(rows, np.float64).reshape(-1, 9)
    truth = MotRows(table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2:6], table[:, 6])
    return MadeSequence(name, frames, truth, table[:, 7].astype(np.int64), table[:, 8], size, length)


def pan_over(image: np.ndarray, boxes: np.ndarray, classes: np.ndarray, name: str, length: int = 90,
             size: tuple[int, int] = (480, 360), zoom: tuple[float, float] = (0.7, 0.45), cycles: float = 1.0,
             phase: float = 0.0) -> MadeSequence:
    """A window of the frame's aspect moves from the photo's left edge to its right and back (`cycles` times), its
    width going from zoom[0] of the photo's to zoom[1] half-way and back, so objects grow and shrink; `boxes`
    [n, 4] xyxy in the photo, their ids 1..n in that order."""
    ih, iw = image.shape[:2]
    w, h = size
    frames, rows = [], []
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    area = np.prod(boxes[:, 2:] - boxes[:, :2], axis=1)
    for f in range(length):
        t = f / max(length - 1, 1)
        win_w = iw * (zoom[0] + (zoom[1] - zoom[0]) * np.sin(np.pi * t))
        win_w = min(win_w, ih * w / h)  # the window's height must fit in the photo
        win_h = win_w * h / w
        sweep = 0.5 - 0.5 * np.cos(2 * np.pi * cycles * t + phase)
        left = (iw - win_w) * sweep
        top = (ih - win_h) * (0.5 - 0.5 * np.cos(np.pi * cycles * t + phase))
        scale = w / win_w
        matrix = np.array([[scale, 0, -left * scale], [0, scale, -top * scale]])
        frames.append(cv2.warpAffine(image, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT))
        moved = (boxes - [left, top, left, top]) * scale
        inside = np.clip(moved, 0, [w, h, w, h])
        visible = np.prod((inside[:, 2:] - inside[:, :2]).clip(0), axis=1) / np.maximum(area * scale**2, 1e-9)
        _truth_rows(f + 1, np.arange(1, len(boxes) + 1), moved, visible, classes, size, rows)
    return _sequence(name, frames, rows, size, length)


def moving_shapes(name: str, length: int = 120, objects: int = 8, size: tuple[int, int] = (480, 360),
                  seed: int = 0, render: bool = True) -> MadeSequence:
    """`objects` rectangles and ellipses (class 0 and 1), each at its own constant speed, bouncing off walls a
    little outside the frame (so they leave and come back), in a fixed depth order: where two cross, the nearer
    hides the other. Half of them move in opposite directions along a shared band, so their paths cross."""
    rng = np.random.default_rng(seed)
    w, h = size
    sides = rng.uniform(22, 64, (objects, 2))
    position = rng.uniform([0, 0], [w, h], (objects, 2))
    speed = rng.uniform(1.0, 4.0, objects) * rng.choice([-1, 1], objects)
    velocity = np.stack([speed, rng.normal(0, 0.6, objects)], axis=1)
    band = objects // 2  # the crossing band: opposite horizontal motion on nearly one line
    position[:band, 1] = h / 2 + rng.normal(0, sides[:band, 1] / 3)
    velocity[:band, 1] = 0
    velocity[:band, 0] = np.abs(velocity[:band, 0]) * np.where(np.arange(band) % 2, 1, -1)
    shapes = rng.integers(0, 2, objects)
    colours = rng.integers(40, 256, (objects, 3))
    margin = sides.max(axis=1, keepdims=True)
    background = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (9, 9), 0) if render else None
    frames, rows = [], []
    for f in range(length):
        boxes = np.concatenate([position - sides / 2, position + sides / 2], axis=1)
        labels = np.zeros((h, w), np.int32)
        picture = background.copy() if render else None
        for i in range(objects):  # back to front: object i + 1 is in front of object i
            p1, p2 = tuple(int(v) for v in boxes[i, :2]), tuple(int(v) for v in boxes[i, 2:])
            centre, axes = tuple(int(v) for v in position[i]), tuple(int(v) for v in sides[i] / 2)
            for canvas, colour in ((labels, i + 1), (picture, tuple(int(c) for c in colours[i]))):
                if canvas is None:
                    continue
                if shapes[i] == 0:
                    cv2.rectangle(canvas, p1, p2, colour, -1)
                else:
                    cv2.ellipse(canvas, centre, axes, 0, 0, 360, colour, -1)
        full = np.prod(sides, axis=1) * np.where(shapes == 0, 1.0, np.pi / 4)
        visible = np.minimum(np.bincount(labels.ravel(), minlength=objects + 1)[1:] / full, 1.0)  # pixels round up
        _truth_rows(f + 1, np.arange(1, objects + 1), boxes, visible, shapes, size, rows)
        if render:
            frames.append(picture)
        position += velocity
        low, high = -margin, np.array([w, h]) + margin
        bounced = (position < low) | (position > high)
        velocity[bounced] *= -1
        position = np.clip(position, low, high)
    return _sequence(name, frames if render else None, rows, size, length)


def simulate_detections(seq: MadeSequence, seed: int = 0, jitter: float = 0.05, false_positives: float = 0.8,
                        faint: float = 0.12) -> list[np.ndarray]:
    """Per frame (1..length) detector rows [n, 6] (x1, y1, x2, y2, score, class) from the truth: each box found
    with a probability falling from 0.97 (mostly visible) to 0 (15% visible), its corners moved by `jitter` of
    its sides, its score lower the more is hidden, a `faint` share of them scoring 0.1 to 0.25 (blur, a passing
    occlusion); and a Poisson(`false_positives`) number of boxes where nothing is, mostly faint."""
    rng = np.random.default_rng(seed)
    w, h = seq.size
    out = []
    for frame in range(1, seq.length + 1):
        at = seq.truth.frames == frame
        boxes, vis, classes = seq.truth.boxes[at], seq.visibility[at], seq.classes[at]
        found = rng.random(len(boxes)) < 0.97 * np.clip((vis - 0.15) / 0.55, 0, 1)
        boxes, vis, classes = boxes[found], vis[found], classes[found]
        sides = np.concatenate([boxes[:, 2:] - boxes[:, :2]] * 2, axis=1)
        boxes = boxes + rng.normal(0, jitter, boxes.shape) * sides
        scores = rng.uniform(0.45, 0.95, len(boxes)) * (0.5 + 0.5 * np.clip(vis, 0, 1))
        dim = rng.random(len(boxes)) < faint
        scores[dim] = rng.uniform(0.1, 0.25, dim.sum())
        n_fp = rng.poisson(false_positives)
        centre = rng.uniform([0, 0], [w, h], (n_fp, 2))
        half = rng.uniform(8, 32, (n_fp, 2))
        fp_scores = np.where(rng.random(n_fp) < 0.8, rng.uniform(0.1, 0.35, n_fp), rng.uniform(0.35, 0.6, n_fp))
        rows = np.concatenate([
            np.concatenate([boxes, scores[:, None], classes[:, None]], axis=1),
            np.concatenate([centre - half, centre + half, fp_scores[:, None],
                            rng.integers(0, max(int(seq.classes.max(initial=0)) + 1, 1), (n_fp, 1))], axis=1)])
        out.append(rows[np.argsort(-rows[:, 4], kind="stable")])
    return out


def write_sequence(seq: MadeSequence, root: Path) -> Path:
    """The sequence as a MOTChallenge folder root/<name>: img1/000001.jpg ..., gt/gt.txt (frame, id, left, top,
    width, height, conf, class, visibility) and seqinfo.ini."""
    folder = Path(root) / seq.name
    (folder / "img1").mkdir(parents=True, exist_ok=True)
    (folder / "gt").mkdir(exist_ok=True)
    for number, image in enumerate(seq.frames or [], 1):
        cv2.imwrite(str(folder / "img1" / f"{number:06d}.jpg"), image)
    t = seq.truth
    lines = [f"{f},{i},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{int(c)},{k},{v:.3f}\n"
             for f, i, (x1, y1, x2, y2), c, k, v in zip(t.frames.tolist(), t.ids.tolist(), t.boxes.tolist(),
                                                       t.conf.tolist(), seq.classes.tolist(), seq.visibility.tolist())]
    (folder / "gt" / "gt.txt").write_text("".join(lines))
    info = configparser.ConfigParser()
    info.optionxform = str  # MOTChallenge's keys are camelCase
    info["Sequence"] = {"name": seq.name, "imDir": "img1", "frameRate": str(int(FPS)), "seqLength": str(seq.length),
                        "imWidth": str(seq.size[0]), "imHeight": str(seq.size[1]), "imExt": ".jpg"}
    with open(folder / "seqinfo.ini", "w") as f:
        info.write(f, space_around_delimiters=False)
    return folder
