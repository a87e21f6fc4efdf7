"""One model file, one image: the API (Detector), detect.predict (its json) and detect.val (its results.json) give
the same boxes, for the same yolo-mini as Darknet `.weights`, a `.pt`, a dynamic `.onnx` and an `.onnx` fixed at
a non-square size (which every front end fits the image into: detect.inference.loading's ONNX policy). yolo-mini's
cfg has no letter_box, so these are stretched (Darknet's default); a `.pt` recorded as letterboxed, and its fixed
export, are letterboxed by every front end alike."""

import json

import cv2
import numpy as np
import pytest
import torch

from detect.api import Detector
from detect.darknet import Darknet, save_pt
from detect.export.cli import main as export_main
from detect.predict import main as predict_main
from detect.val import main as val_main

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

CONF, IOU, SIZE = 0.6, 0.45, 128
FIXED = (96, 128)  # h, w of the fixed export: not the image's aspect ratio, nor square
IMAGE = (100, 150)  # h, w
NAMES = ["red", "green", "blue"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{kind: (weights, cfg or None)} of one seeded 3-class yolo-mini, and a one-image COCO dataset."""
    folder = tmp_path_factory.mktemp("same-boxes")
    torch.manual_seed(0)
    model = Darknet("cfg/yolo-mini.cfg", num_classes=len(NAMES))
    with torch.no_grad():  # BatchNorm gains well above 1 spread the scores (a fresh model scores every box alike)
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.uniform_(2, 4)
                module.bias.uniform_(-0.5, 0.5)
    save_pt(model, folder / "mini.pt", names=NAMES)
    common = ["--weights", str(folder / "mini.pt")]
    assert export_main([*common, "--format", "darknet", "--output", str(folder / "darknet")]) == 0
    assert export_main([*common, "--img", str(SIZE), "--dynamic", "--output", str(folder / "dynamic.onnx")]) == 0
    assert export_main([*common, "--img", *map(str, FIXED), "--output", str(folder / "fixed.onnx")]) == 0
    save_pt(model, folder / "boxed.pt", names=NAMES, resize="letterbox")
    assert export_main(["--weights", str(folder / "boxed.pt"), "--img", *map(str, FIXED), "--output",
                        str(folder / "boxed-fixed.onnx")]) == 0
    return {"pt": (folder / "mini.pt", None), "weights": (folder / "darknet.weights", folder / "darknet.cfg"),
            "dynamic-onnx": (folder / "dynamic.onnx", None), "fixed-onnx": (folder / "fixed.onnx", None),
            "pt-letterbox": (folder / "boxed.pt", None), "fixed-onnx-letterbox": (folder / "boxed-fixed.onnx", None)}


def _one_image_dataset(folder):
    """A grey image with coloured rectangles, as its own COCO split (one box per class) and spec."""
    (folder / "images").mkdir(parents=True)
    image = np.full((*IMAGE, 3), 114, np.uint8)
    boxes = [(10, 12, 50, 60), (70, 20, 140, 50), (30, 65, 110, 95)]
    for k, (x1, y1, x2, y2) in enumerate(boxes):
        image[y1:y2, x1:x2] = [(0, 0, 255), (0, 255, 0), (255, 0, 0)][k]
    cv2.imwrite(str(folder / "images" / "one.png"), image)
    anns = [{"id": k + 1, "image_id": 1, "category_id": k + 1, "bbox": [x1, y1, x2 - x1, y2 - y1],
             "area": (x2 - x1) * (y2 - y1), "iscrowd": 0} for k, (x1, y1, x2, y2) in enumerate(boxes)]
    coco = {"images": [{"id": 1, "file_name": "one.png", "width": IMAGE[1], "height": IMAGE[0]}],
            "annotations": anns, "categories": [{"id": k + 1, "name": n} for k, n in enumerate(NAMES)]}
    (folder / "val.json").write_text(json.dumps(coco))
    spec = folder / "data.yaml"
    spec.write_text(f"path: {folder}\nformat: coco\ntrain: images\nval: images\n"
                    f"train_annotations: val.json\nval_annotations: val.json\n")
    return spec, folder / "images" / "one.png"


def _sorted(rows) -> np.ndarray:
    """[n, 6] rows (class, x1, y1, x2, y2, score) in a fixed order: class, then the box to predict's 2 decimals."""
    rows = np.asarray(rows, np.float64).reshape(-1, 6)
    keys = np.round(rows[:, :5], 2)
    return rows[np.lexsort(keys.T[::-1])]


@pytest.mark.parametrize("kind", ["weights", "pt", "dynamic-onnx", "fixed-onnx", "pt-letterbox",
                                  "fixed-onnx-letterbox"])
def test_api_predict_and_val_give_the_same_boxes(files, kind, tmp_path, monkeypatch):
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))
    weights, cfg = files[kind]
    spec, image = _one_image_dataset(tmp_path / "data")
    fixed = kind.startswith("fixed-onnx")
    size = [] if fixed else ["--img", str(SIZE)]  # a fixed export runs at its own size
    model = ["--weights", str(weights), *(["--cfg", str(cfg)] if cfg else []), *size, "--device", "cpu"]
    runs = ["--conf", str(CONF), "--iou", str(IOU), "--project", str(tmp_path / "runs")]

    detector = Detector.load(weights, cfg, device="cpu", img_size=None if fixed else SIZE, conf=CONF, iou=IOU)
    assert detector.settings.resize == ("letterbox" if kind.endswith("letterbox") else "stretch")
    found = detector(image)
    api = _sorted([[k, *b, s] for k, b, s in zip(found.class_ids, found.boxes, found.scores)])

    assert predict_main([*model, *runs, "--source", str(image), "--name", "predict"]) == 0
    record = json.loads((tmp_path / "runs" / "predict" / "json" / "one.json").read_text())
    predicted = _sorted([[d["class"], *d["box_xyxy"], d["confidence"]] for d in record["detections"]])

    assert val_main([*model, *runs, "--data", str(spec), "--single-label", "--no-merge", "--save-json",
                     "--workers", "0", "--name", "val"]) == 0
    results = json.loads((tmp_path / "runs" / "val" / "results.json").read_text())
    evaluated = _sorted([[r["category_id"] - 1, r["bbox"][0], r["bbox"][1], r["bbox"][0] + r["bbox"][2],
                          r["bbox"][1] + r["bbox"][3], r["score"]] for r in results])

    assert 2 <= len(api) <= 300, kind
    for other in (predicted, evaluated):
        assert other.shape == api.shape and np.array_equal(other[:, 0], api[:, 0]), kind
        np.testing.assert_allclose(other[:, 1:5], api[:, 1:5], atol=0.006)  # predict's json: 2 decimals
        np.testing.assert_allclose(other[:, 5], api[:, 5], atol=6e-6)  # and 5 for the confidence
