"""A tiny 3-class model checkpoint and a tiny COCO dataset written in a tmp folder, and detect.val's arguments for them: what the val, predict, API, export and inference tests evaluate."""

import json

import cv2
import numpy as np
import torch

from detect.darknet import Darknet, save_pt

# A tiny detector: one stride-2 conv and a [yolo] head with 3 classes.
TINY_CFG = """[net]
width=64
height=64
channels=3

[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
activation=leaky

[convolutional]
size=1
stride=1
pad=1
filters=24
activation=linear

[yolo]
mask=0,1,2
anchors=6,8, 12,10, 20,24
classes=3
num=3
"""


NAMES = ["red", "green", "blue"]


def write_tiny_checkpoint(folder, names=NAMES):
    """A .pt checkpoint (random but seeded weights, cfg text and names inside)."""
    torch.manual_seed(0)
    cfg = TINY_CFG.replace("classes=3", f"classes={len(names)}").replace("filters=24",
                                                                          f"filters={3 * (5 + len(names))}")
    model = Darknet(cfg)
    path = folder / "tiny.pt"
    save_pt(model, path, names=names)
    return path


def write_coco_dataset(folder, sizes=((48, 64), (64, 40), (64, 64)), drop_file=None, no_images=False):
    """Generated images (coloured rectangles on grey) with a COCO json, and a spec; returns the spec path."""
    rng = np.random.default_rng(0)
    (folder / "images").mkdir(parents=True)
    images, anns = [], []
    for i, (h, w) in enumerate(sizes):
        image = np.full((h, w, 3), 114, np.uint8)
        name = f"img{i}.jpg"
        for _ in range(2):
            bw, bh = int(rng.integers(8, w // 2)), int(rng.integers(8, h // 2))
            x, y = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
            cls = int(rng.integers(0, 3))
            image[y:y + bh, x:x + bw] = [(0, 0, 255), (0, 255, 0), (255, 0, 0)][cls]
            anns.append({"id": len(anns) + 1, "image_id": 10 + i, "category_id": cls + 1, "bbox": [x, y, bw, bh],
                         "area": bw * bh, "iscrowd": 0})
        if name != drop_file:
            cv2.imwrite(str(folder / "images" / name), image)
        images.append({"id": 10 + i, "file_name": name, "width": w, "height": h})
    if no_images:
        images, anns = [], []
    categories = [{"id": k + 1, "name": n} for k, n in enumerate(NAMES)]
    (folder / "val.json").write_text(json.dumps({"images": images, "annotations": anns, "categories": categories}))
    spec = folder / "data.yaml"
    spec.write_text(f"path: {folder}\nformat: coco\ntrain: images\nval: images\n"
                    f"train_annotations: val.json\nval_annotations: val.json\n")
    return spec


def val_args(spec, weights, tmp_path, *extra):
    return ["--weights", str(weights), "--data", str(spec), "--img", "64", "--batch", "2", "--device", "cpu",
            "--workers", "0", "--project", str(tmp_path / "runs"), *extra]
