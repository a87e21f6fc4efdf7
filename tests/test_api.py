"""detect.api: Detector on the real yolov3-tiny weights (equal to detect.predict), on a tiny checkpoint
(inputs, names, errors) and on a stand-in ONNX runtime model."""

import json
import sys
import types

import cv2
import numpy as np
import pytest
import torch

from detect.api import Detections, Detector
from detect.inference.loading import load_model_file
from detect.predict import main as predict_main
from detect.val import main as val_main
from tests.support.log_lines import log_lines
from tests.support.val_data import NAMES, write_coco_dataset, write_tiny_checkpoint


@pytest.fixture(scope="module")
def coco_detector():
    from tests.conftest import shared_path

    cfg, weights = shared_path("darknet-cfg", "yolov3-tiny.cfg"), shared_path("weights", "yolov3-tiny.weights")
    names = shared_path("darknet-cfg", "coco.names").read_text().split("\n")
    return Detector.load(weights, cfg, names=[n for n in names if n], device="cpu", img_size=320)


def test_yolov3_tiny_equals_predict_and_batches_equal_singles(coco_detector, shared, tmp_path):
    image = shared("data", "coco-tiny", "val2017", "000000005001.jpg")  # a crowd of people
    found = coco_detector(image)
    assert isinstance(found, Detections) and len(found) >= 5 and found.labels.count("person") >= 5
    assert found.boxes.dtype == np.float32 and found.boxes.shape == (len(found), 4)
    args = ["--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")), "--weights",
            str(shared("weights", "yolov3-tiny.weights")), "--source", str(image), "--img-size", "320",
            "--names", str(shared("darknet-cfg", "coco.names")), "--device", "cpu", "--project", str(tmp_path)]
    assert predict_main(args) == 0
    predicted = json.loads((tmp_path / "exp" / "json" / f"{image.stem}.json").read_text())["detections"]
    assert [d["name"] for d in predicted] == found.labels
    np.testing.assert_allclose([d["box_xyxy"] for d in predicted], found.boxes, atol=0.006)
    np.testing.assert_allclose([d["confidence"] for d in predicted], found.scores, atol=6e-6)

    bgr = cv2.imread(str(image))
    other = np.ascontiguousarray(bgr[:, ::-1])  # same size: batched with the first in one forward pass
    batch = coco_detector([image, other, bgr[:200, :300]])
    for single, batched in zip((found, coco_detector(other), coco_detector(bgr[:200, :300])), batch):
        assert single.labels == batched.labels
        np.testing.assert_allclose(single.boxes, batched.boxes, atol=1e-3)
        np.testing.assert_allclose(single.scores, batched.scores, atol=1e-5)


def test_tiny_checkpoint_inputs_and_names(tmp_path):
    detector = Detector.load(write_tiny_checkpoint(tmp_path), device="cpu", conf=0.01)
    assert detector.names == NAMES and detector.settings.img_size == 64  # the cfg's [net] size
    rng = np.random.default_rng(0)
    bgr = rng.integers(0, 255, (48, 80, 3), dtype=np.uint8)
    path = tmp_path / "x.png"
    cv2.imwrite(str(path), bgr)
    from_path, from_array = detector(path), detector(bgr)
    from_rgb = detector(np.ascontiguousarray(bgr[:, :, ::-1]), rgb=True)
    assert len(from_array) > 0 and set(from_array.labels) <= set(NAMES)
    for other in (from_path, from_rgb):
        np.testing.assert_array_equal(other.boxes, from_array.boxes)
    stacked = detector(np.stack([bgr, bgr]))  # an [N, H, W, 3] array is a batch
    # the same detections as alone (a batch of 2 may order near-tied scores differently: compare as sets)
    def rows(found):
        table = np.column_stack([found.class_ids, found.boxes, found.scores]).astype(np.float64)
        return table[np.lexsort(np.round(table[:, :3], 3).T[::-1])]
    assert len(stacked) == 2 and len(stacked[1]) == len(from_array)
    np.testing.assert_allclose(rows(stacked[1]), rows(from_array), atol=1e-4)
    assert (from_array.boxes[:, [0, 2]] <= 80).all() and (from_array.boxes[:, [1, 3]] <= 48).all()
    first = from_array.to_dicts()[0]
    assert first["name"] == NAMES[first["class_id"]] and first["score"] == pytest.approx(from_array.scores[0])
    assert len(detector(bgr[:, :, 0])) >= 0  # grayscale HxW is accepted


def test_bad_inputs_are_one_line_errors(tmp_path):
    weights = write_tiny_checkpoint(tmp_path)
    detector = Detector.load(weights, device="cpu")
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8 not really")
    with pytest.raises(ValueError, match=r"image .*broken.jpg: not an image OpenCV can decode"):
        detector([tmp_path / "broken.jpg"])
    with pytest.raises(TypeError, match="expected an image path, a PIL image or a numpy array, got a dict"):
        detector({"not": "an image"})
    with pytest.raises(ValueError, match="expected a uint8 image array"):
        detector(np.zeros((8, 8, 3), np.float32))
    with pytest.raises(ValueError, match=r"expected an HxWx3, HxWx1 or HxW image array, got shape \(8, 8, 4\)"):
        detector(np.zeros((8, 8, 4), np.uint8))
    with pytest.raises(ValueError, match=r"2 class names \(names=\) but tiny.pt predicts 3 classes"):
        Detector.load(weights, names=["a", "b"], device="cpu")
    with pytest.raises(ValueError, match="conf must be in"):
        Detector.load(weights, conf=1.5)
    # the model file's options as the API spells them, not as flags
    with pytest.raises(FileNotFoundError, match=r"^weights='.*nope.pt': file not found$"):
        Detector.load(tmp_path / "nope.pt")
    (tmp_path / "m.weights").write_bytes(b"\0" * 64)
    with pytest.raises(ValueError, match=r"^cfg= is required: .*m.weights is Darknet weights, which hold no cfg"):
        Detector.load(tmp_path / "m.weights")


class _StandInOnnx:
    """The duck type of detect.inference.onnx_runtime's models: one box at the input's centre, 20x10, class 1."""

    names = ("cat", "dog")
    max_stride = 32
    input_size = (64, 64)
    num_classes = 2

    def __init__(self):
        self.inputs = []

    def __call__(self, x):
        self.inputs.append(x)
        rows = torch.zeros(x.shape[0], 3, 7)
        rows[:, 0] = torch.tensor([32.0, 32.0, 20.0, 10.0, 0.9, 0.1, 0.8])
        return rows


@pytest.fixture
def stand_in_runtime(monkeypatch):
    module = types.ModuleType("detect.inference.onnx_runtime")
    module.opened = []

    def load_onnx_model(path, device):
        module.opened.append((str(path), device))
        return _StandInOnnx()

    module.load_onnx_model = load_onnx_model
    monkeypatch.setitem(sys.modules, "detect.inference.onnx_runtime", module)
    return module


def test_onnx_through_the_runtime_duck_type(stand_in_runtime, tmp_path):
    detector = Detector.load(tmp_path / "m.onnx", device="cpu")
    assert stand_in_runtime.opened == [(str(tmp_path / "m.onnx"), "cpu")] and detector.names == ["cat", "dog"]
    image = np.full((100, 200, 3), 90, np.uint8)
    found = detector([image, image])
    (x,) = detector.model.inputs  # both images in one batch, fitted into the fixed 64x64 input
    assert tuple(x.shape) == (2, 3, 64, 64)
    # ratio 64/200 = 0.32, 32 pixels of border above: (22, 27, 42, 37) -> ((x - 0) / 0.32, (y - 16) / 0.32)
    np.testing.assert_allclose(found[1].boxes, [[68.75, 34.375, 131.25, 65.625]], atol=1e-4)
    assert found[1].labels == ["dog"] and found[1].scores[0] == pytest.approx(0.72)
    with pytest.raises(ValueError, match=r"takes 64x64 inputs only, but img_size 320 was given"):
        Detector.load(tmp_path / "m.onnx", img_size=320, device="cpu")


def test_onnx_without_the_runtime_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "detect.inference.onnx_runtime", None)  # as if it could not be imported
    with pytest.raises(ValueError, match=r"m.onnx: running ONNX models needs detect.inference.onnx_runtime"):
        Detector.load(tmp_path / "m.onnx", device="cpu")


# --- the tools' loader (load_model_file) and Detector.load: input size and class names by default (predict items 3,
# 5 and 6; detect.val shares the loader)

@pytest.fixture(scope="module")
def coco_detector_by_default():
    """yolov3-tiny.weights loaded with neither names nor img_size; the messages the load logged."""
    from tests.conftest import shared_path

    cfg, weights = shared_path("darknet-cfg", "yolov3-tiny.cfg"), shared_path("weights", "yolov3-tiny.weights")
    with log_lines("detect.inference") as lines:
        detector = Detector.load(weights, cfg, device="cpu")
    return detector, lines


def test_darknet_weights_without_names_get_cocos_and_the_cfgs_size(coco_detector_by_default, shared):
    detector, lines = coco_detector_by_default
    cfg = shared("darknet-cfg", "yolov3-tiny.cfg")
    engine = [line for line in lines if line.startswith("CPU inference: ncnn")]
    assert len(engine) == 1 and "float32" in engine[0]
    assert [line for line in lines if line not in engine] == [
        f"img_size 416: the [net] size of {cfg} (img_size not given)",
        "yolov3-tiny.weights: images are stretched to the input (the cfg's letter_box=0)",
        "class names: COCO's 80 (yolov3-tiny.weights carries none; names= overrides)"]
    assert detector.settings.img_size == 416 and len(detector.names) == 80 and detector.names[0] == "person"
    found = detector(shared("data", "coco-tiny", "val2017", "000000005001.jpg"))  # a crowd of people
    assert found.labels.count("person") >= 5


def test_img_size_must_be_a_multiple_of_the_largest_stride(shared, tmp_path, capsys):
    cfg, weights = shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights")
    with pytest.raises(ValueError) as raised:
        Detector.load(weights, cfg, img_size=100, device="cpu")
    assert str(raised.value) == ("img_size 100 must be a multiple of the model's largest stride 32 (and at least "
                                 "32): try 96 or 128")
    # detect.val refuses it the same way, before it reads the dataset (which does not exist here)
    args = ["--cfg", str(cfg), "--weights", str(weights), "--data", str(tmp_path / "none.yaml"), "--device", "cpu",
            "--img-size", "100", "--project", str(tmp_path / "runs")]
    assert val_main(args) == 2
    assert capsys.readouterr().err.strip() == ("error: --img-size 100 must be a multiple of the model's largest "
                                               "stride 32 (and at least 32): try 96 or 128")
    assert not (tmp_path / "runs").exists()


def _trained_at(path, img_size):
    """The checkpoint at `path` with the training options best.pt and last.pt record (opts.img_size)."""
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["opts"] = {"img_size": img_size}
    torch.save(checkpoint, path)
    return path


def test_default_img_size_is_the_training_size(tmp_path, monkeypatch):
    weights = _trained_at(write_tiny_checkpoint(tmp_path), 96)  # [net] 64x64
    with log_lines("detect.inference") as lines:
        detector = Detector.load(weights, device="cpu", backend="torch")
    assert detector.settings.img_size == 96 and lines == [
        "img_size 96: the size tiny.pt was trained at (img_size not given)",
        "tiny.pt: images are stretched to the input (as tiny.pt was trained)"]
    assert Detector.load(weights, device="cpu", img_size=64).settings.img_size == 64
    handle = load_model_file(weights, device=torch.device("cpu"))
    assert (handle.names, handle.square, handle.img_size, handle.max_stride) == (NAMES, False, 96, 2)
    # detect.val evaluates at that size too (its data loader's size; metrics.json records it)
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))
    spec = write_coco_dataset(tmp_path / "data")
    args = ["--weights", str(weights), "--data", str(spec), "--device", "cpu", "--workers", "0", "--project",
            str(tmp_path / "runs"), "--name", "trained"]
    assert val_main(args) == 0
    assert json.loads((tmp_path / "runs" / "trained" / "metrics.json").read_text())["args"]["img"] == 96


class _StandInDynamicOnnx(_StandInOnnx):
    input_size = None


@pytest.mark.parametrize("fixed", [True, False])
def test_tools_default_to_an_onnx_models_own_size(stand_in_runtime, monkeypatch, tmp_path, fixed):
    stand_in_runtime.load_onnx_model = lambda path, device: _StandInOnnx() if fixed else _StandInDynamicOnnx()
    with log_lines("detect.inference") as lines:
        handle = load_model_file(tmp_path / "m.onnx", device=torch.device("cpu"))
    assert handle.names == ["cat", "dog"] and handle.input_shape == ((64, 64) if fixed else None)
    assert (handle.square, handle.img_size) == ((True, 64) if fixed else (False, 416))
    why = "fixed input size" if fixed else "default for a dynamic ONNX model"
    fitted = [(f"{tmp_path / 'm.onnx'} takes 64x64 inputs only: every image is fitted into that canvas"
               " (no rect canvases)")] if fixed else []
    assert lines == [f"--img-size {handle.img_size}: m.onnx's {why} (--img-size not given)", *fitted]


def test_augment_in_the_api_and_predict_agree_and_find_the_crowd(shared, tmp_path):
    cfg, weights = shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights")
    image = shared("data", "coco-tiny", "val2017", "000000005001.jpg")  # a crowd of people
    plain = Detector.load(weights, cfg, device="cpu", img_size=320)(image)
    tta = Detector.load(weights, cfg, device="cpu", img_size=320, augment=True)(image)
    assert tta.labels.count("person") >= plain.labels.count("person") >= 5
    assert not np.array_equal(tta.scores, plain.scores)  # the extra passes changed what NMS kept
    args = ["--cfg", str(cfg), "--weights", str(weights), "--source", str(image), "--img-size", "320",
            "--device", "cpu", "--project", str(tmp_path), "--augment"]
    assert predict_main(args) == 0
    predicted = json.loads((tmp_path / "exp" / "json" / f"{image.stem}.json").read_text())["detections"]
    assert [d["name"] for d in predicted] == tta.labels
    np.testing.assert_allclose([d["confidence"] for d in predicted], tta.scores, atol=6e-6)
