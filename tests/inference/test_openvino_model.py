"""detect.inference.openvino_model: outputs against PyTorch at free batch and size, the converted model's cache
(reuse, damage, no room), the check that refuses a wrong conversion, and the tools' --backend. The engine order
is tests/inference/test_engines.py's."""

import copy
import logging

import numpy as np
import pytest
import torch

from detect.darknet import Darknet
from detect.inference import engines, openvino_model
from detect.inference.loading import load_darknet
from detect.inference.openvino_model import OpenVinoModel, load_openvino_model
from tests.support.engine_rows import assert_rows_match
from tests.support.log_lines import log_lines
from tests.support.val_data import write_tiny_checkpoint

pytest.importorskip("openvino")

CPU = torch.device("cpu")

# stride 8 with maxpools, an upsample and a route, so the free sizes meet every kind of layer
SMALL_CFG = """[net]
width=64
height=64
channels=3
[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky
[maxpool]
size=2
stride=2
[convolutional]
batch_normalize=1
filters=16
size=3
stride=2
pad=1
activation=leaky
[maxpool]
size=2
stride=2
[convolutional]
batch_normalize=1
filters=16
size=3
stride=1
pad=1
activation=mish
[upsample]
stride=2
[route]
layers=-1,-4
[convolutional]
size=1
stride=1
pad=1
filters=24
activation=linear
[yolo]
mask=0,1,2
anchors=4,6, 10,12, 20,18
classes=3
num=3
"""


def _small_model() -> Darknet:
    torch.manual_seed(0)
    model = Darknet(SMALL_CFG).eval()
    for module in model.modules():  # BatchNorm statistics that are not the identity, so fusing them matters
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    return model


def test_outputs_equal_pytorchs_at_any_batch_and_size(tmp_path):
    model = _small_model()
    compiled = load_openvino_model(model, 64, 2, tmp_path)
    assert isinstance(compiled, OpenVinoModel) and compiled.max_stride == model.max_stride == 8 and compiled.num_classes == 3
    assert_rows_match(compiled, model, [(1, 3, 64, 64), (3, 3, 32, 96), (2, 3, 128, 40)])


def test_the_converted_model_is_cached_and_a_damaged_entry_rebuilt(tmp_path, monkeypatch, caplog):
    model = _small_model()
    load_openvino_model(model, 64, 1, tmp_path)
    [xml] = (tmp_path / "openvino").glob("*.xml")
    assert xml.with_suffix(".bin").stat().st_size > 4 * sum(p.numel() for p in model.parameters()) * 0.9
    assert not list((tmp_path / "openvino").glob("*.tmp*"))

    def no_conversion(*args):
        raise AssertionError("converted again although the cache holds the model")
    converted = openvino_model._convert
    monkeypatch.setattr(openvino_model, "_convert", no_conversion)
    with log_lines("detect.inference") as lines:
        load_openvino_model(model, 64, 1, tmp_path)
    assert f"model cached {xml}" in lines[0]

    other = _small_model()
    other.layers[0].conv.weight.data.mul_(2)  # other weights: another key, so a conversion
    with pytest.raises(ValueError, match="converted again"):
        load_openvino_model(other, 64, 1, tmp_path)

    monkeypatch.setattr(openvino_model, "_convert", converted)
    xml.write_text("<net broken")
    with caplog.at_level(logging.WARNING, "detect.inference"):
        load_openvino_model(model, 64, 1, tmp_path)
    assert "cannot read the cached OpenVINO model" in caplog.text and "converting again" in caplog.text
    assert xml.read_text().startswith("<?xml")


def test_a_cache_folder_that_cannot_be_written_is_reported_and_inference_goes_on(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING, "detect.inference"):
        compiled = load_openvino_model(_small_model(), 64, 1, blocker)
    assert "cannot cache the converted OpenVINO model" in caplog.text
    assert compiled(torch.rand(1, 3, 64, 64)).shape[-1] == 8  # 4 box, objectness, 3 classes


def test_a_conversion_that_differs_from_pytorch_is_refused_and_auto_falls_back(tmp_path, monkeypatch, caplog):
    wrong = _small_model()
    wrong.layers[-2].conv.bias.data.add_(1.0)  # another model: every score differs
    real = openvino_model._convert
    monkeypatch.setattr(openvino_model, "_convert", lambda ov, fused, size: real(ov, wrong.fuse(), size))
    with pytest.raises(ValueError, match="OpenVINO's outputs differ from PyTorch's by"):
        load_openvino_model(_small_model(), 64, 1, None)

    weights = write_tiny_checkpoint(tmp_path)
    monkeypatch.setattr(engines, "ncnn_available", lambda: False)  # auto: OpenVINO, then PyTorch
    with caplog.at_level(logging.WARNING, "detect.inference"):
        model = load_darknet(weights, None, CPU, 64, "--img-size", "auto", tmp_path / "cache").runner
    assert isinstance(model, Darknet) and "trying the next engine" in caplog.text
    assert "no CPU engine took this model; running it on PyTorch" in caplog.text
    with pytest.raises(ValueError, match="--backend torch runs it on PyTorch"):
        load_darknet(weights, None, CPU, 64, "--img-size", "openvino", tmp_path / "cache")


def test_the_tools_take_backend_and_refuse_it_for_onnx(tmp_path, capsys):
    from detect.predict import main as predict_main
    from detect.val import main as val_main

    weights = write_tiny_checkpoint(tmp_path)
    image = tmp_path / "a.png"
    import cv2

    cv2.imwrite(str(image), np.full((64, 48, 3), 90, np.uint8))
    common = ["--source", str(image), "--device", "cpu", "--project", str(tmp_path / "runs")]
    assert predict_main(["--weights", str(weights), "--backend", "torch", *common]) == 0
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"not read: the flag is checked first")
    assert predict_main(["--weights", str(onnx), "--backend", "openvino", *common]) == 2
    assert "--backend openvino is for .pt and .weights models" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        val_main(["--weights", str(weights), "--data", "x.yaml", "--backend", "tensorrt"])
    assert "invalid choice: 'tensorrt'" in capsys.readouterr().err


def test_one_core_serves_every_model():
    """The Core (and its CPU plugin) lives as long as the process: see openvino_model._core."""
    assert openvino_model._core() is openvino_model._core()
    model = _small_model()
    first = load_openvino_model(model, 64, 1, None)
    del first
    second = load_openvino_model(copy.deepcopy(model), 64, 1, None)
    x = torch.rand(1, 3, 32, 32)
    with torch.inference_mode():
        assert float((second(x) - model(x)).abs().max()) < 1e-3
