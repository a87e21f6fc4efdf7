"""Sliced inference through the Predictor (what detect.predict --slice and Detector.load(slice_size=...) run): a
stand-in model that finds white rectangles exactly, so that where each box lands in the image is known to the
pixel, and yolov3-tiny on a generated small-object image (tests/small_objects.py)."""

import json

import cv2
import numpy as np
import pytest
import torch

from detect.api import Detector
from detect.inference.predictor import InferenceSettings, Predictor
from detect.predict import main as predict_main
from tests.support.small_objects import build as build_small_objects


class WhiteBoxModel:
    """A stand-in detector: every group of white pixels in its input (all channels > 0.95) is one box of class 0
    (x2, y2 exclusive, score 0.9); inputs are recorded."""

    max_stride, num_classes = 32, 1

    def __init__(self):
        self.inputs = []

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.inputs.append(tuple(x.shape))
        rows = torch.zeros(x.shape[0], 8, 6)
        for i, image in enumerate(x):
            mask = (image.min(0).values > 0.95).numpy().astype(np.uint8)
            count, _, stats, _ = cv2.connectedComponentsWithStats(mask)
            for k, (left, top, w, h, _area) in enumerate(stats[1:count][:8]):
                rows[i, k] = torch.tensor([left + w / 2, top + h / 2, w, h, 0.9, 1.0])
        return rows


# white rectangles (x1, y1, x2, y2) on a grey 1600x1200 image; 640 px tiles at overlap 0.2 start at x 0, 480, 960
# and y 0, 280, 560
SMALL = (702, 302, 705, 305)  # 3x3: between the whole image's bilinear samples (0.26); whole in tiles (480, 0), (480, 280)
ACROSS = (600, 900, 680, 960)  # cut by x = 640 (tile 0,*) and y = 920 (tiles *,280); whole in tile (480, 560)
LARGE = (150, 450, 950, 850)  # 800 px wide: every tile cuts it; the whole-image pass finds it


def _image() -> np.ndarray:
    image = np.full((1200, 1600, 3), 114, np.uint8)
    for x1, y1, x2, y2 in (SMALL, ACROSS, LARGE):
        image[y1:y2, x1:x2] = 255
    return image


def test_tiles_map_back_to_the_right_pixels_and_merge_to_one_box_per_object():
    model = WhiteBoxModel()
    settings = InferenceSettings(416, conf=0.25, iou=0.45, slice_size=640, slice_overlap=0.2)
    (rows,) = Predictor(model, settings, "cpu")([_image()])
    # one pass over the whole image (416 x 312 on a 416 x 352 canvas) and 9 tiles of 640 at 416 (448 x 448
    # canvases), batched 9 at most to the settings' batch size
    assert sorted(model.inputs) == [(1, 3, 352, 448), (9, 3, 448, 448)]
    boxes = sorted(rows[:, :4].tolist())
    assert len(boxes) == 3 and rows[:, 5].tolist() == [0, 0, 0]
    large, across, small = boxes  # sorted by x1
    # to within 2 input pixels (the resize blurs each edge's last pixel below the stand-in's threshold): 2 x 1.54
    # image pixels in a tile (640 at 416), 2 x 3.85 in the whole image (1600 at 416)
    np.testing.assert_allclose(small, SMALL, atol=3.1)
    np.testing.assert_allclose(across, ACROSS, atol=3.1)
    np.testing.assert_allclose(large, LARGE, atol=7.7)

    (plain,) = Predictor(WhiteBoxModel(), InferenceSettings(416, conf=0.25, iou=0.45), "cpu")([_image()])
    assert len(plain) == 2  # without tiles the small one is lost


def test_an_image_no_larger_than_a_tile_is_run_whole_once():
    model = WhiteBoxModel()
    image = _image()[:600, :640]
    settings = InferenceSettings(416, conf=0.25, iou=0.45, slice_size=640)
    (sliced,) = Predictor(model, settings, "cpu")([image])
    (plain,) = Predictor(WhiteBoxModel(), InferenceSettings(416, conf=0.25, iou=0.45), "cpu")([image])
    assert len(model.inputs) == 1 and torch.equal(sliced, plain)


@pytest.fixture(scope="module")
def small_object_image(tmp_path_factory):
    from tests.conftest import shared_path

    out = tmp_path_factory.mktemp("small")
    build_small_objects(shared_path("data", "coco-tiny"), out, images=1, per_image=12, seed=0)
    truth = json.loads((out / "annotations.json").read_text())["annotations"]
    return out / "images" / "small_000.jpg", np.array([a["bbox"] for a in truth], np.float64)


def _found(boxes: np.ndarray, truth_xywh: np.ndarray) -> int:
    """Ground-truth boxes matched by some detection at IoU >= 0.5."""
    truth = np.concatenate([truth_xywh[:, :2], truth_xywh[:, :2] + truth_xywh[:, 2:]], 1)
    top_left = np.maximum(truth[:, None, :2], boxes[None, :, :2])
    bottom_right = np.minimum(truth[:, None, 2:], boxes[None, :, 2:])
    inter = np.clip(bottom_right - top_left, 0, None).prod(-1)
    area = lambda b: (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])  # noqa: E731
    iou = inter / (area(truth)[:, None] + area(boxes)[None, :] - inter)
    return int((iou.max(1, initial=0) >= 0.5).sum())


def test_slicing_finds_small_objects_the_whole_image_misses(shared, small_object_image, tmp_path):
    cfg, weights = shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights")
    image, truth = small_object_image
    # letterboxed: the figures below are that mode's (stretched, as the cfg says, the tiles find 2 of the 12)
    plain = Detector.load(weights, cfg, device="cpu", img_size=416, resize="letterbox")(image)
    sliced = Detector.load(weights, cfg, device="cpu", img_size=416, slice_size=416, slice_overlap=0.2,
                           resize="letterbox")(image)
    # at conf 0.25 the whole image at 416 finds nothing; 416 px tiles (1:1) find 3 of the 12, and nothing else
    assert len(plain) == 0 and _found(sliced.boxes, truth) == len(sliced) >= 3
    args = ["--cfg", str(cfg), "--weights", str(weights), "--source", str(image), "--img-size", "416",
            "--device", "cpu", "--project", str(tmp_path), "--slice", "416", "--overlap", "0.2", "--resize",
            "letterbox"]
    assert predict_main(args) == 0
    predicted = json.loads((tmp_path / "exp" / "json" / f"{image.stem}.json").read_text())["detections"]
    assert [d["name"] for d in predicted] == sliced.labels
    np.testing.assert_allclose([d["box_xyxy"] for d in predicted], sliced.boxes, atol=0.006)
