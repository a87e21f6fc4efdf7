"""The built-in synthetic dataset: simple shapes on textured backgrounds, in COCO format.

Four classes (circle, square, triangle, cross) in saturated colours, 16-80 px, not overlapping, 1-5 per
image, on smooth colour noise with grain and a few thin lines. Deterministic from a seed; generated on first
use (rank 0 first, into a temporary folder renamed into place) so a fresh machine trains with no download.
Boxes are read back from each shape's own drawn mask, so they are tight whatever the shape.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

from detect.runtime.dist import node_leaders_first
from detect.runtime.files import atomic_write_bytes, atomic_write_text, exclusive_lock

log = logging.getLogger(__name__)

CLASS_NAMES = ("circle", "square", "triangle", "cross")
GENERATOR_VERSION = 1
DONE_MARKER = "COMPLETE"


@dataclass(frozen=True)
class SyntheticConfig:
    seed: int = 0
    train_images: int = 400
    val_images: int = 100
    test_images: int = 0  # an optional test split (detect.val --split test)
    image_sizes: tuple[int, ...] = (256, 288, 320)
    max_objects: int = 5
    min_side: int = 16
    max_side: int = 80

    @classmethod
    def from_options(cls, options: dict) -> SyntheticConfig:
        known = {k: options[k] for k in asdict(cls()) if k in options}
        if "image_sizes" in known:
            known["image_sizes"] = tuple(int(s) for s in known["image_sizes"])
        cfg = cls(**known)
        if cfg.train_images < 1 or cfg.val_images < 1 or cfg.test_images < 0 or cfg.min_side < 4 or \
                cfg.max_side < cfg.min_side:
            raise ValueError(f"synthetic dataset options are out of range: {cfg}")
        return cfg

    def folder_name(self) -> str:
        fields = asdict(self)
        if not self.test_images:  # datasets generated before the test split keep their folder
            del fields["test_images"]
        text = json.dumps({"v": GENERATOR_VERSION, **fields}, sort_keys=True)
        return f"synthetic-{hashlib.sha1(text.encode()).hexdigest()[:10]}"


def textured_background(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Muted smooth colour noise + grain + a few thin lines (texture without shape-like blobs)."""
    coarse = rng.uniform(50, 170, (4, 4, 3)).astype(np.float32)
    image = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)
    image += rng.normal(0, 10, (h, w, 1)).astype(np.float32)
    image = np.clip(image, 0, 255).astype(np.uint8)
    for _ in range(int(rng.integers(0, 4))):
        p1, p2 = rng.integers(0, (w, h), 2), rng.integers(0, (w, h), 2)
        colour = rng.uniform(40, 190, 3).tolist()
        cv2.line(image, tuple(int(v) for v in p1), tuple(int(v) for v in p2), colour, 1, cv2.LINE_AA)
    return image


def shape_points(kind: str, cx: float, cy: float, side: float, rng: np.random.Generator) -> list[np.ndarray]:
    """Polygon(s) of a shape (circles are drawn separately)."""
    half = side / 2
    if kind == "square":
        pts = [(-half, -half), (half, -half), (half, half), (-half, half)]
    elif kind == "triangle":
        sign = 1 if rng.random() < 0.5 else -1  # pointing up or down
        pts = [(0, -sign * half), (half, sign * half), (-half, sign * half)]
    else:  # cross: a plus sign made of two bars a third of the side thick
        t = side / 6
        pts = [(-t, -half), (t, -half), (t, -t), (half, -t), (half, t), (t, t), (t, half), (-t, half),
               (-t, t), (-half, t), (-half, -t), (-t, -t)]
    return [np.round(np.array(pts) + (cx, cy)).astype(np.int32)]


def draw_shape(image: np.ndarray, kind: str, cx: int, cy: int, side: int, colour,
               rng: np.random.Generator) -> tuple[float, float, float, float] | None:
    """Draw one shape; return its tight box (x, y, w, h) in corner coordinates from its own mask."""
    mask = np.zeros(image.shape[:2], dtype=np.uint8)
    if kind == "circle":
        for target, value, line in ((mask, 255, cv2.LINE_8), (image, colour, cv2.LINE_AA)):
            cv2.circle(target, (cx, cy), side // 2, value, -1, line)
    else:
        polygon = shape_points(kind, cx, cy, side, rng)
        cv2.fillPoly(mask, polygon, 255, cv2.LINE_8)
        cv2.fillPoly(image, polygon, colour, cv2.LINE_AA)
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    return float(xs.min()), float(ys.min()), float(xs.max() + 1 - xs.min()), float(ys.max() + 1 - ys.min())


def random_colour(rng: np.random.Generator) -> tuple[int, int, int]:
    hsv = np.array([[[rng.integers(0, 180), rng.integers(170, 256), rng.integers(170, 256)]]], dtype=np.uint8)
    return tuple(int(v) for v in cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0])


def make_image(rng: np.random.Generator, cfg: SyntheticConfig):
    """One image and its annotations [(class index, (x, y, w, h))]."""
    h, w = (int(rng.choice(cfg.image_sizes)) for _ in range(2))
    image = textured_background(rng, h, w)
    placed, objects = [], []
    for _ in range(int(rng.integers(1, cfg.max_objects + 1))):
        for _attempt in range(20):
            side = int(rng.integers(cfg.min_side, cfg.max_side + 1))
            cx, cy = int(rng.integers(side // 2 + 1, w - side // 2 - 1)), int(rng.integers(side // 2 + 1, h - side // 2 - 1))
            box = np.array([cx - side / 2 - 3, cy - side / 2 - 3, cx + side / 2 + 3, cy + side / 2 + 3])
            if all(box[2] <= p[0] or p[2] <= box[0] or box[3] <= p[1] or p[3] <= box[1] for p in placed):
                break
        else:
            continue  # no free spot: fewer objects in this image
        placed.append(box)
        cls = int(rng.integers(len(CLASS_NAMES)))
        xywh = draw_shape(image, CLASS_NAMES[cls], cx, cy, side, random_colour(rng), rng)
        if xywh is not None:
            objects.append((cls, xywh))
    return image, objects


def generate_split(rng: np.random.Generator, count: int, cfg: SyntheticConfig, images_dir: Path) -> dict:
    images_dir.mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for image_id in range(1, count + 1):
        image, objects = make_image(rng, cfg)
        name = f"{image_id:06d}.jpg"
        encoded, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 92])
        if not encoded:
            raise OSError(f"OpenCV could not encode synthetic image {images_dir / name} as JPEG")
        atomic_write_bytes(images_dir / name, jpeg.tobytes())
        images.append({"id": image_id, "file_name": name, "height": image.shape[0], "width": image.shape[1]})
        for cls, (x, y, bw, bh) in objects:
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": cls + 1,
                                "bbox": [x, y, bw, bh], "area": bw * bh, "iscrowd": 0})
    categories = [{"id": i + 1, "name": n} for i, n in enumerate(CLASS_NAMES)]
    return {"images": images, "annotations": annotations, "categories": categories}


def generate(folder: Path, cfg: SyntheticConfig) -> None:
    """Write the dataset into a temporary sibling of `folder`, then rename it into place."""
    start = time.perf_counter()
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        for split, count, offset in (("train", cfg.train_images, 0), ("val", cfg.val_images, 1),
                                     ("test", cfg.test_images, 2)):
            if count == 0:  # no test split asked for
                continue
            rng = np.random.default_rng([cfg.seed, offset])
            coco = generate_split(rng, count, cfg, tmp / "images" / split)
            atomic_write_text(tmp / "annotations" / f"instances_{split}.json", json.dumps(coco))
        atomic_write_text(tmp / DONE_MARKER, json.dumps(asdict(cfg)))
        if folder.exists():  # an incomplete earlier attempt
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    test = f" + {cfg.test_images} test" if cfg.test_images else ""
    log.info(f"synthetic dataset: {cfg.train_images} train + {cfg.val_images} val{test} images generated in "
             f"{folder} ({time.perf_counter() - start:.1f} s)")


def ensure_synthetic(cfg: SyntheticConfig, folder: Path) -> Path:
    """The dataset folder, generated on rank 0 first (then on each other node that lacks it) when missing or
    incomplete. Independent processes (two jobs, or a search's trials, started together on one folder) take turns
    on a lock file beside it: the second finds the first's dataset complete, rather than replacing it under the
    first one's reads."""
    with node_leaders_first():
        if not (folder / DONE_MARKER).exists():
            with exclusive_lock(folder.parent / f".{folder.name}.lock"):
                if not (folder / DONE_MARKER).exists():
                    generate(folder, cfg)
    return folder
