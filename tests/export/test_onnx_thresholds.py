"""Per-class thresholds in ONNX exports: the export copies a .pt's into the metadata, loading the .onnx uses them,
detect.val --save-thresholds rewrites them there, and an --nms graph applies them as non_max_suppression does."""

import numpy as np
import pytest
import torch

from detect.api import Detector
from detect.export.cli import main as export_main
from detect.inference.class_conf import ClassConf, save_class_conf
from detect.inference.loading import load_model_file
from detect.inference.onnx_runtime import load_onnx_model
from detect.inference.postprocess import non_max_suppression
from detect.val import main as val_main
from tests.support.val_data import write_coco_dataset, write_tiny_checkpoint

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

CHOSEN = ClassConf((0.31, 0.5, 0.318), 0.315, (1, 1, 4), 10.0, "a test")


def test_the_export_carries_them_and_the_onnx_model_uses_them(tmp_path):
    spec, weights = write_coco_dataset(tmp_path / "data"), write_tiny_checkpoint(tmp_path)
    save_class_conf(weights, CHOSEN)
    assert export_main(["--weights", str(weights)]) == 0
    exported = tmp_path / "tiny.onnx"
    assert load_onnx_model(exported).metadata.class_conf == CHOSEN
    assert load_model_file(exported, device=torch.device("cpu")).class_conf == CHOSEN
    assert Detector.load(exported, device="cpu").settings.class_conf == CHOSEN.conf
    assert Detector.load(exported, device="cpu", conf=0.2).settings.class_conf is None
    args = ["--weights", str(exported), "--data", str(spec), "--batch", "2", "--device", "cpu", "--workers", "0",
            "--project", str(tmp_path / "runs"), "--save-thresholds"]
    assert val_main(args) == 0  # chosen again, into the file's metadata; the graph is untouched
    again = load_onnx_model(exported).metadata
    assert again.class_conf != CHOSEN and len(again.class_conf.conf) == 3 and "(3 images)" in again.class_conf.chosen_on
    assert again.output == "rows" and again.input_size == (64, 64)


@pytest.mark.slow  # three exports
def test_an_nms_graph_applies_them_unless_conf_is_given(tmp_path):
    weights = write_tiny_checkpoint(tmp_path)
    save_class_conf(weights, CHOSEN)
    assert export_main(["--weights", str(weights), "--nms"]) == 0
    assert export_main(["--weights", str(weights)]) == 0
    assert export_main(["--weights", str(weights), "--nms", "--conf", "0.31", "--output",
                        str(tmp_path / "one.onnx")]) == 0
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    rows = load_onnx_model(tmp_path / "tiny.onnx")(x)  # the plain graph's rows, for the reference NMS
    for path, conf in ((tmp_path / "tiny-nms.onnx", CHOSEN.conf), (tmp_path / "one.onnx", 0.31)):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        detections, counts = session.run(None, {"images": x.numpy()})
        (expected,) = non_max_suppression(rows, conf, 0.45, 300, multi_label=False)
        assert 0 < counts[0] == len(expected)
        np.testing.assert_allclose(detections[0, :counts[0], 4:], expected[:, 4:].numpy(), atol=1e-5)
    # the per-class graph keeps fewer: class 2 needs 0.318 where one threshold lets 0.31 pass
    assert counts[0] > len(non_max_suppression(rows, CHOSEN.conf, 0.45, 300, multi_label=False)[0])
