"""detect.inference.engines: auto's order (ncnn, OpenVINO, PyTorch), engines that are missing, a model ncnn cannot
express going to OpenVINO, and a named engine's failure as one error."""

import logging

import numpy as np
import pytest
import torch

from detect.api import Detector
from detect.darknet import Darknet
from detect.darknet.load import load_model
from detect.inference import engines
from detect.inference.engines import cpu_backend, load_cpu_engine
from detect.inference.loading import load_darknet
from detect.inference.ncnn_model import NcnnModel
from detect.inference.openvino_model import OpenVinoModel
from tests.support.every_layer_cfg import EVERY_LAYER_CFG
from tests.support.val_data import write_tiny_checkpoint

pytest.importorskip("ncnn")
pytest.importorskip("openvino")

CPU = torch.device("cpu")
# EVERY_LAYER_CFG with one weighted shortcut, which ncnn has no form for; OpenVINO and PyTorch run it
WEIGHTED_CFG = EVERY_LAYER_CFG.replace("from=-2\nactivation=linear",
                                       "from=-2\nactivation=linear\nweights_type=per_feature\n"
                                       "weights_normalization=relu")


def test_auto_tries_ncnn_then_openvino_then_torch_on_the_cpu_and_torch_on_cuda(monkeypatch):
    assert cpu_backend("auto", CPU) == ["ncnn", "openvino", "torch"]
    assert cpu_backend("ncnn", CPU) == ["ncnn"] and cpu_backend("torch", CPU) == ["torch"]
    assert cpu_backend("auto", torch.device("cuda")) == ["torch"]
    with pytest.raises(ValueError, match="--backend ncnn runs on the CPU only"):
        cpu_backend("ncnn", torch.device("cuda"))
    with pytest.raises(ValueError, match="choose one of auto, ncnn, openvino, torch"):
        cpu_backend("tensorrt", CPU)
    monkeypatch.setattr(engines, "ncnn_available", lambda: False)
    assert cpu_backend("auto", CPU) == ["openvino", "torch"]
    with pytest.raises(ValueError, match=r"ncnn is not installed \(pip install ncnn\)"):
        cpu_backend("ncnn", CPU)
    monkeypatch.setattr(engines, "openvino_available", lambda: False)
    assert cpu_backend("auto", CPU) == ["torch"]


def test_a_model_ncnn_cannot_express_runs_on_openvino_under_auto(tmp_path, caplog):
    torch.manual_seed(0)
    model = Darknet(WEIGHTED_CFG).eval()
    with caplog.at_level(logging.INFO, "detect.inference"):
        compiled = load_cpu_engine(model, ["ncnn", "openvino", "torch"], 64, 1, tmp_path, "w.pt")
    assert isinstance(compiled, OpenVinoModel)
    assert "w.pt: ncnn cannot run layer16: weighted shortcut (per_feature); trying the next engine" in caplog.text
    x = torch.rand(1, 3, 64, 32)
    with torch.inference_mode():
        assert float((compiled(x) - model(x)).abs().max()) < 1e-3
    assert load_cpu_engine(model, ["ncnn", "torch"], 64, 1, tmp_path, "w.pt") is None  # the caller runs PyTorch
    with pytest.raises(ValueError, match=r"w.pt: ncnn cannot run this model \(layer16: weighted shortcut"):
        load_cpu_engine(model, ["ncnn"], 64, 1, tmp_path, "w.pt")


def test_the_tools_loader_gives_ncnn_by_default_and_each_named_engine(tmp_path):
    weights = write_tiny_checkpoint(tmp_path)
    kinds = {"auto": NcnnModel, "ncnn": NcnnModel, "openvino": OpenVinoModel, "torch": Darknet}
    for backend, kind in kinds.items():
        handle = load_darknet(weights, None, CPU, 64, "--img-size", backend, tmp_path / "cache")
        model, size = handle.runner, handle.img_size
        assert isinstance(model, kind) and size == 64


@pytest.mark.parametrize("backend, kind", [("auto", NcnnModel), ("openvino", OpenVinoModel)])
def test_detector_finds_the_same_objects_on_each_engine_as_on_pytorch(backend, kind, shared, tmp_path, monkeypatch):
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path))
    cfg, weights = shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights")
    image = shared("data", "coco-tiny", "val2017", "000000005001.jpg")
    engine = Detector.load(weights, cfg, device="cpu", img_size=416, backend=backend)
    reference = Detector.load(weights, cfg, device="cpu", img_size=416, backend="torch")
    assert isinstance(engine.model, kind) and isinstance(reference.model, Darknet)
    found, expected = engine(image), reference(image)
    assert len(found) == len(expected) >= 5
    np.testing.assert_array_equal(found.class_ids, expected.class_ids)
    np.testing.assert_allclose(found.boxes, expected.boxes, atol=1e-2)
    np.testing.assert_allclose(found.scores, expected.scores, atol=1e-4)


@pytest.mark.parametrize("engine", ["ncnn", "openvino"])
def test_yolov3_tiny_rows_equal_the_unfused_models_within_1e_3(engine, shared, tmp_path):
    model = load_model(shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights"),
                       exact=True).model.eval()
    compiled = load_cpu_engine(model, [engine], 416, 2, tmp_path, "yolov3-tiny.weights")
    for shape in [(1, 3, 416, 416), (2, 3, 320, 416)]:  # square, and a rect canvas of predict at batch 2
        x = torch.rand(shape, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            expected = model(x)
        assert float((compiled(x) - expected).abs().max()) < 1e-3  # boxes in input pixels, up to ~600
