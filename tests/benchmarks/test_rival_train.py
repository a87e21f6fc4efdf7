"""The rival training benchmark's data and scoring (benchmarks.rival_train), without ultralytics itself."""

import json
from pathlib import Path

import numpy as np

from benchmarks.rival_train import coco_map, yolo_layout


def test_the_yolo_copy_holds_the_coco_boxes_and_the_ground_truth_scores_one(tmp_path):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(f"format: synthetic\npath: {tmp_path / 'gen'}\nseed: 3\ntrain_images: 6\nval_images: 5\n"
                    "image_sizes: [64, 96]\nmin_side: 10\nmax_side: 28\nmax_objects: 3\n")
    data, val_coco, images, categories = yolo_layout(str(spec), tmp_path / "yolo")
    assert data.read_text().startswith(f"path: {tmp_path / 'yolo'}\ntrain: train/images\nval: val/images\n")
    assert len(images) == 5 and all(Path(im["file"]).exists() for im in images)
    assert categories == sorted(c["id"] for c in val_coco["categories"])
    sizes = {im["id"]: (im["width"], im["height"]) for im in val_coco["images"]}
    for image in val_coco["images"]:  # each label line is its COCO box, normalised, with its class index
        w, h = sizes[image["id"]]
        rows = (tmp_path / "yolo" / "val" / "labels" / (Path(image["file_name"]).stem + ".txt")).read_text().split()
        got = np.array(rows, float).reshape(-1, 5)
        boxes = [a for a in val_coco["annotations"] if a["image_id"] == image["id"]]
        want = np.array([[categories.index(a["category_id"]), (a["bbox"][0] + a["bbox"][2] / 2) / w,
                          (a["bbox"][1] + a["bbox"][3] / 2) / h, a["bbox"][2] / w, a["bbox"][3] / h]
                         for a in boxes]).reshape(-1, 5)
        np.testing.assert_allclose(got, want, atol=1e-6)
    truth = [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 0.9}
             for a in val_coco["annotations"]]
    assert coco_map(val_coco, truth) == 1.0
    assert coco_map(val_coco, []) == 0.0
    shifted = [dict(d, bbox=[d["bbox"][0] + d["bbox"][2], *d["bbox"][1:]]) for d in truth]  # off by a box width
    assert coco_map(json.loads(json.dumps(val_coco)), shifted) == 0.0
