"""A small-object set built from coco-tiny, for measuring sliced inference (detect.val --slice) and its tests.

    python -m tests.support.small_objects OUT [--images 24] [--per-image 10] [--seed 0]
    python -m detect.val --cfg ../shared/darknet-cfg/yolov3-tiny.cfg \\
        --weights ../shared/weights/yolov3-tiny.weights --data OUT/data.yaml --img-size 416 --slice 416

How: the ground-truth objects of coco-tiny val (not crowd, longest side 64-400 px, shortest at least 20 px) are
cropped at their boxes, shrunk 3-4x (INTER_AREA) and pasted, `per_image` to a canvas and none overlapping, onto
1600x1200 canvases. A canvas's background is a coco-tiny train image scaled to cover the canvas and blurred
(Gaussian, sigma 25), so that its own objects, which are not annotated, are no longer recognisable while its
colours and light stay natural. Each pasted crop's rectangle is its box, with its COCO category; the json keeps
all 80 categories. Objects are drawn without replacement (again once all were used).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

from tests.conftest import SHARED

CANVAS = (1600, 1200)  # width, height
SHRINK = (3.0, 4.0)
SIDE_RANGE = (64, 400)  # the longest side of an object that is used, before shrinking
MIN_SIDE = 20
BLUR_SIGMA = 25


def usable_objects(annotations: list[dict]) -> list[dict]:
    return [a for a in annotations if not a["iscrowd"] and SIDE_RANGE[0] <= max(a["bbox"][2:]) <= SIDE_RANGE[1]
            and min(a["bbox"][2:]) >= MIN_SIDE]


def background(path: Path) -> np.ndarray:
    image = cv2.imread(str(path))
    scale = max(CANVAS[0] / image.shape[1], CANVAS[1] / image.shape[0])
    image = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_LINEAR)
    top, left = (image.shape[0] - CANVAS[1]) // 2, (image.shape[1] - CANVAS[0]) // 2
    image = image[top:top + CANVAS[1], left:left + CANVAS[0]]
    return cv2.GaussianBlur(image, (0, 0), BLUR_SIGMA)


def place(rng, size: tuple[int, int], taken: list[tuple[int, int, int, int]]) -> tuple[int, int] | None:
    """A top-left corner for a w x h crop that overlaps no box of `taken` (with 8 px between), or None."""
    w, h = size
    for _ in range(200):
        x, y = int(rng.integers(0, CANVAS[0] - w)), int(rng.integers(0, CANVAS[1] - h))
        if all(x + w + 8 <= a or a2 + 8 <= x or y + h + 8 <= b or b2 + 8 <= y for a, b, a2, b2 in taken):
            return x, y
    return None


def build(coco_root: Path, out: Path, images: int = 24, per_image: int = 10, seed: int = 0) -> Path:
    """Write OUT/images/*.jpg, OUT/annotations.json and OUT/data.yaml (a detect data spec); returns the spec."""
    rng = np.random.default_rng(seed)
    val = json.loads((coco_root / "annotations" / "instances_val2017.json").read_text())
    files = {image["id"]: coco_root / "val2017" / image["file_name"] for image in val["images"]}
    objects = usable_objects(val["annotations"])
    backgrounds = sorted((coco_root / "train2017").glob("*.jpg"))
    (out / "images").mkdir(parents=True, exist_ok=True)
    record_images, record_anns, pool = [], [], []
    for i in range(images):
        canvas, taken = background(backgrounds[i % len(backgrounds)]), []
        for _ in range(per_image):
            if not pool:
                pool = list(rng.permutation(len(objects)))
            ann = objects[pool.pop()]
            x, y, w, h = (int(round(v)) for v in ann["bbox"])
            crop = cv2.imread(str(files[ann["image_id"]]))[y:y + h, x:x + w]
            factor = rng.uniform(*SHRINK)
            size = (max(1, round(crop.shape[1] / factor)), max(1, round(crop.shape[0] / factor)))
            corner = place(rng, size, taken)
            if corner is None:
                continue
            px, py = corner
            canvas[py:py + size[1], px:px + size[0]] = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
            taken.append((px, py, px + size[0], py + size[1]))
            record_anns.append({"id": len(record_anns) + 1, "image_id": i + 1, "category_id": ann["category_id"],
                                "bbox": [px, py, size[0], size[1]], "area": size[0] * size[1], "iscrowd": 0})
        name = f"small_{i:03d}.jpg"
        cv2.imwrite(str(out / "images" / name), canvas, [cv2.IMWRITE_JPEG_QUALITY, 95])
        record_images.append({"id": i + 1, "file_name": name, "width": CANVAS[0], "height": CANVAS[1]})
    (out / "annotations.json").write_text(json.dumps({"images": record_images, "annotations": record_anns,
                                                      "categories": val["categories"]}))
    spec = out / "data.yaml"
    spec.write_text(f"path: {out.resolve()}\nformat: coco\ntrain: images\nval: images\n"
                    f"train_annotations: annotations.json\nval_annotations: annotations.json\n")
    return spec


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.support.small_objects", description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path, help="folder to write (images/, annotations.json, data.yaml)")
    p.add_argument("--coco", type=Path, default=SHARED / "data" / "coco-tiny", help="coco-tiny (../shared)")
    p.add_argument("--images", type=int, default=24)
    p.add_argument("--per-image", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    spec = build(args.coco, args.out, args.images, args.per_image, args.seed)
    print(f"{args.images} images of {CANVAS[0]}x{CANVAS[1]}: {spec}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
