"""Small COCO datasets written in a tmp folder as Roboflow and CVAT export them, and the mAP of perfect detections."""

import json

import cv2
import numpy as np
import torch

from detect.data.formats.spec import spec_from_dict
from detect.evaluation.coco import detections_to_rows
from detect.evaluation.evaluator import CocoEvaluator

SIZE = 64


# Roboflow: category 0 is named after the dataset, the supercategory of the real classes, the category of no box
ROBOFLOW_CATEGORIES = [{"id": 0, "name": "kangaroos", "supercategory": "none"},
                       {"id": 1, "name": "kangaroo", "supercategory": "kangaroos"},
                       {"id": 2, "name": "wallaby", "supercategory": "kangaroos"}]


def write_coco(root, images, annotations, categories=ROBOFLOW_CATEGORIES, name="data.json", names=None):
    """A 64x64 jpg per file name of `images` under root/images, the json beside them; the spec (both splits)."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    for k, file_name in enumerate(dict.fromkeys(im["file_name"] for im in images)):
        pixels = np.random.default_rng(k).integers(0, 255, (SIZE, SIZE, 3), dtype=np.uint8)
        cv2.imwrite(str(root / "images" / file_name), pixels)
    (root / name).write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    spec = {"format": "coco", "path": str(root), "train": "images", "val": "images",
            "train_annotations": name, "val_annotations": name, **({"names": names} if names else {})}
    return spec_from_dict(spec, str(root / f"{name}.yaml"))


def image(image_id, file_name):
    return {"id": image_id, "file_name": file_name, "width": SIZE, "height": SIZE}


def box(ann_id, image_id, bbox, category_id=1):
    return {"id": ann_id, "image_id": image_id, "category_id": category_id, "bbox": bbox,
            "area": bbox[2] * bbox[3], "iscrowd": 0}


def roboflow_json(first_id=0):
    """(images, annotations) as Roboflow exports them: image and annotation ids counted from `first_id` (0)."""
    images = [image(first_id + k, f"k{k}.jpg") for k in range(3)]
    annotations = [box(first_id + k, first_id + k % 3, [4 + 3 * k, 6 + 2 * k, 20 + k, 18], 1 + k % 2)
                   for k in range(7)]
    return images, annotations


def perfect_map(source, backend="pycocotools"):
    """CocoEvaluator's result for the source's own boxes as detections of score 1."""
    evaluator = CocoEvaluator(source, backend=backend)
    for r in source.records:
        det = torch.cat([torch.tensor(r.boxes, dtype=torch.float64), torch.ones(len(r.boxes), 1, dtype=torch.float64),
                         torch.tensor(r.classes, dtype=torch.float64)[:, None]], 1)
        evaluator.add_rows(detections_to_rows(det, r.image_id, source.category_ids), r.image_id)
    return evaluator.compute()
