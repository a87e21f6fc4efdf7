"""A COCO-sized split generated on the spot for `python -m benchmarks scale`: COCO's image and box counts and
box statistics on small images (no download).

Images: a pool of distinct small JPEGs (COCO's aspect ratios at a quarter of its size), hard-linked under one
file name per image, so 118k files cost the pool's bytes and a directory of links, while every file is probed,
decoded and augmented for real. Boxes per image: a negative binomial with COCO train2017's mean (7.3; about 1% of
images empty, at most 90); classes: a power law like COCO's (person about a fifth of the boxes); sizes:
log-normal area fractions giving roughly COCO's small / medium / large split, log-normal aspect ratios.
Everything is seeded: the same arguments give the same files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

COCO_TRAIN_IMAGES, COCO_VAL_IMAGES = 118_287, 5_000
MEAN_BOXES, MAX_BOXES, EMPTY_FRACTION = 7.3, 90, 0.01
POOL_SHAPES = ((160, 120), (120, 160), (160, 107), (160, 160), (107, 160), (160, 90))  # (w, h)
POOL_SIZE = 96
# COCO's 80 category ids (1..90 with gaps), in order
COCO_IDS = (list(range(1, 12)) + list(range(13, 26)) + [27, 28] + list(range(31, 45)) + list(range(46, 66))
            + [67, 70] + list(range(72, 83)) + list(range(84, 91)))


@dataclass(frozen=True)
class ScaleSplit:
    images: Path  # folder of the image files
    annotations: Path  # COCO json
    num_images: int
    num_boxes: int


def write_pool(folder: Path, seed: int) -> list[tuple[Path, int, int]]:
    """POOL_SIZE distinct JPEGs: (path, width, height)."""
    import cv2

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    pool = []
    for k in range(POOL_SIZE):
        w, h = POOL_SHAPES[k % len(POOL_SHAPES)]
        image = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)
        for _ in range(6):  # a few solid shapes: something for the encoder and the eye
            x, y = int(rng.integers(0, w)), int(rng.integers(0, h))
            cv2.rectangle(image, (x, y), (x + int(rng.integers(4, w // 2)), y + int(rng.integers(4, h // 2))),
                          tuple(int(c) for c in rng.integers(0, 256, 3)), -1)
        path = folder / f"pool{k:03d}.jpg"
        ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])
        assert ok, "OpenCV could not encode a generated image"
        path.write_bytes(data.tobytes())
        pool.append((path, w, h))
    return pool


def sample_boxes(rng: np.random.Generator, n: int, width: int, height: int) -> np.ndarray:
    """[n, 4] COCO boxes (x, y, w, h) inside a width x height image, at least 2 px a side."""
    side = np.sqrt(np.exp(rng.normal(np.log(0.02), 1.6, n)).clip(2e-4, 0.9))  # sqrt of the area fraction
    aspect = np.exp(rng.normal(0.0, 0.6, n))
    w = (side * np.sqrt(aspect) * width).clip(2, width)
    h = (side / np.sqrt(aspect) * height).clip(2, height)
    x = rng.random(n) * (width - w)
    y = rng.random(n) * (height - h)
    return np.stack([x, y, w, h], 1).round(2)


def class_probabilities(num_classes: int = len(COCO_IDS)) -> np.ndarray:
    p = 1.0 / np.arange(1, num_classes + 1) ** 1.1
    return p / p.sum()


def category_ids(num_classes: int) -> list[int]:
    """COCO's ids for 80 classes, 1..n otherwise (an Objects365-like set: 365)."""
    return list(COCO_IDS) if num_classes == len(COCO_IDS) else list(range(1, num_classes + 1))


def synthetic_ground_truth(num_images: int, seed: int, num_classes: int = len(COCO_IDS)) -> dict:
    """A COCO ground-truth dict of `num_images` images (image i shaped as pool image i, POOL_SHAPES) with COCO's
    box statistics (see the module's docstring); file names 000000000001.jpg on."""
    rng = np.random.default_rng(seed)
    ids = category_ids(num_classes)
    counts = rng.negative_binomial(1.2, 1.2 / (1.2 + MEAN_BOXES), num_images).clip(1, MAX_BOXES)
    counts[rng.random(num_images) < EMPTY_FRACTION] = 0
    classes = rng.choice(len(ids), int(counts.sum()), p=class_probabilities(len(ids)))
    image_rows, annotation_rows, next_box = [], [], 0
    for i in range(num_images):
        w, h = POOL_SHAPES[i % len(POOL_SHAPES)]
        image_rows.append({"id": i + 1, "file_name": f"{i + 1:012d}.jpg", "width": w, "height": h})
        for box in sample_boxes(rng, int(counts[i]), w, h):
            annotation_rows.append({"id": next_box + 1, "image_id": i + 1,
                                    "category_id": ids[int(classes[next_box])], "bbox": box.tolist(),
                                    "area": float(box[2] * box[3]), "iscrowd": 0})
            next_box += 1
    return {"info": {"num_images": num_images, "num_boxes": next_box, "seed": seed},
            "images": image_rows, "annotations": annotation_rows,
            "categories": [{"id": c, "name": f"class{c}"} for c in ids]}


def generate_split(root: Path, name: str, num_images: int, pool: list, seed: int) -> ScaleSplit:
    """`root/name/` with one link per image (pool image i % POOL_SIZE) and `root/name.json`; reused when already
    complete."""
    images, annotations = root / name, root / f"{name}.json"
    if annotations.is_file():
        meta = json.loads(annotations.read_text()).get("info", {})
        if meta.get("num_images") == num_images and meta.get("seed") == seed:
            return ScaleSplit(images, annotations, num_images, meta["num_boxes"])
    dataset = synthetic_ground_truth(num_images, seed)
    images.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(dataset["images"]):
        source, w, h = pool[i % len(pool)]
        assert (w, h) == (image["width"], image["height"]), "the pool's shapes follow POOL_SHAPES"
        target = images / image["file_name"]
        if not target.exists():
            try:
                os.link(source, target)
            except OSError:  # a file system without hard links
                target.write_bytes(source.read_bytes())
    tmp = annotations.with_suffix(".tmp")
    tmp.write_text(json.dumps(dataset))
    os.replace(tmp, annotations)
    return ScaleSplit(images, annotations, num_images, dataset["info"]["num_boxes"])


def generate_dataset(root: Path, train_images: int, val_images: int, seed: int = 0) -> Path:
    """Both splits and a data spec (returned) under `root`."""
    pool = write_pool(root / "pool", seed)
    train = generate_split(root, "train", train_images, pool, seed + 1)
    val = generate_split(root, "val", val_images, pool, seed + 2)
    spec = root / "scale.yaml"
    spec.write_text(f"path: {root}\nformat: coco\ntrain: {train.images.name}\nval: {val.images.name}\n"
                    f"train_annotations: {train.annotations.name}\nval_annotations: {val.annotations.name}\n")
    return spec


def fake_detections(boxes: np.ndarray, classes: np.ndarray, per_image: int, num_classes: int,
                    rng: np.random.Generator) -> np.ndarray:
    """[per_image, 6] (x1, y1, x2, y2, score, class index) for one image: jittered copies of its ground truth
    (true positives of varying quality) topped up with random boxes of random classes (false positives)."""
    n_true = min(len(boxes), per_image // 2)
    rows = np.zeros((per_image, 6))
    if n_true:
        pick = rng.integers(0, len(boxes), n_true)
        b = boxes[pick]
        wh = (b[:, 2:] - b[:, :2]).clip(1)
        jitter = rng.normal(0, 0.1, (n_true, 4)) * np.concatenate([wh, wh], 1)
        rows[:n_true, :4] = b + jitter
        rows[:n_true, 4] = rng.uniform(0.3, 1.0, n_true)
        rows[:n_true, 5] = classes[pick]
    rest = per_image - n_true
    xy = rng.uniform(0, 120, (rest, 2))
    rows[n_true:, :4] = np.concatenate([xy, xy + rng.uniform(2, 60, (rest, 2))], 1)
    rows[n_true:, 4] = rng.uniform(0.001, 0.5, rest)
    rows[n_true:, 5] = rng.integers(0, num_classes, rest)
    return rows
