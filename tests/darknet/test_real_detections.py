"""The official yolov3-tiny weights find what is in real COCO val images (letterboxed to 416 here),
and fusing BatchNorm keeps the outputs within 1e-4 relative."""

import json

import cv2
import pytest
import torch

from detect import Darknet
from tests.conftest import shared_path
from tests.support.darknet_helpers import letterbox, randomize_weights, relative_error

# (file, COCO category name) of val images whose annotation has one large, unambiguous object
IMAGES = [("000000359937.jpg", "bus"), ("000000104455.jpg", "zebra")]


def iou_xyxy(a, b) -> float:
    inter_w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    inter_h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = inter_w * inter_h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


@pytest.fixture(scope="module")
def tiny_model():
    model = Darknet(shared_path("darknet-cfg", "yolov3-tiny.cfg"), img_size=416).eval()
    model.load_darknet_weights(shared_path("weights", "yolov3-tiny.weights"))
    return model


def _truth_boxes(annotations, file_name, category):
    image = next(i for i in annotations["images"] if i["file_name"] == file_name)
    category_id = next(c["id"] for c in annotations["categories"] if c["name"] == category)
    boxes = [a["bbox"] for a in annotations["annotations"] if a["image_id"] == image["id"]
             and a["category_id"] == category_id and a["area"] > 0.04 * image["width"] * image["height"]]
    return [[x, y, x + w, y + h] for x, y, w, h in boxes]


@pytest.mark.parametrize("file_name, category", IMAGES)
def test_real_weights_find_the_annotated_objects(tiny_model, file_name, category):
    root = shared_path("data", "coco-tiny")
    annotations = json.loads((root / "annotations" / "instances_val2017.json").read_text())
    truths = _truth_boxes(annotations, file_name, category)
    names = shared_path("darknet-cfg", "coco.names").read_text().split("\n")
    class_index = names.index(category)

    image = cv2.imread(str(root / "val2017" / file_name))
    x, scale, (left, top) = letterbox(image, 416)
    with torch.no_grad():
        rows = tiny_model(x)[0]
    scores = rows[:, 4:5] * rows[:, 5:]  # Darknet's prob = objectness · class probability
    best_class = int(scores.max(0).values.argmax())
    assert best_class == class_index, f"strongest detection is {names[best_class]}, expected {category}"
    cx, cy, w, h = rows[:, :4].T
    boxes = torch.stack([(cx - w / 2 - left) / scale, (cy - h / 2 - top) / scale,
                         (cx + w / 2 - left) / scale, (cy + h / 2 - top) / scale], 1)
    confident = boxes[scores[:, class_index] > 0.25].tolist()
    assert truths and confident
    for truth in truths:  # every sizeable annotated object is found by a confident detection of its class
        assert max(iou_xyxy(box, truth) for box in confident) > 0.5, truth


def test_fused_matches_unfused_on_real_weights(tiny_model):
    x = torch.rand(2, 3, 128, 160, generator=torch.Generator().manual_seed(0))
    fused = Darknet(tiny_model.cfg_text, img_size=416).eval()
    fused.load_state_dict(tiny_model.state_dict())
    fused.fuse()
    assert all(getattr(m, "bn", None) is None for m in fused.layers)
    with torch.no_grad():
        assert relative_error(fused(x), tiny_model(x)) < 1e-4
        for a, b in zip(fused.layer_outputs(x), tiny_model.layer_outputs(x)):
            assert relative_error(a, b) < 1e-4


def test_fused_matches_unfused_with_groups_and_random_statistics():
    cfg = """[net]
width=32
height=32
channels=4

[convolutional]
batch_normalize=1
filters=8
size=3
pad=1
groups=2
activation=mish

[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
dilation=1
activation=leaky
"""
    model = Darknet(cfg).eval()
    randomize_weights(model, seed=2)
    x = torch.rand(2, 4, 32, 32)
    with torch.no_grad():
        expected = model(x)
        assert relative_error(model.fuse()(x), expected) < 1e-4
