"""detect.inference.ncnn_graph and ncnn_model: every layer kind the converter writes gives the PyTorch model's rows at
any batch and size, yolov3-tiny's real weights within 1e-3, the layers it refuses (named), and the check that
refuses a wrong network."""

import copy
from pathlib import Path

import pytest
import torch

from detect.darknet import Darknet
from detect.inference import ncnn_graph as graph_module
from detect.inference.ncnn_graph import UnsupportedLayer, ncnn_graph
from detect.inference.ncnn_model import NcnnModel, load_ncnn_model
from tests.support.engine_rows import assert_rows_match
from tests.support.every_layer_cfg import EVERY_LAYER_CFG

pytest.importorskip("ncnn")


def _model(cfg: str = EVERY_LAYER_CFG) -> Darknet:
    torch.manual_seed(0)
    model = Darknet(cfg).eval()
    for module in model.modules():  # BatchNorm statistics that are not the identity, so fusing them matters
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    return model


def test_every_layer_kind_gives_pytorchs_rows_at_any_batch_and_size():
    model = _model()
    kinds = {line.split()[0] for line in ncnn_graph(model.fuse()).param.splitlines()[2:]}
    assert {"Convolution", "ConvolutionDepthWise", "Pooling", "Crop", "Concat", "BinaryOp", "Interp", "Split",
            "Swish", "TanH", "Clip", "ReLU"} <= kinds
    model = _model()
    compiled = load_ncnn_model(model, 2)
    assert isinstance(compiled, NcnnModel) and compiled.max_stride == model.max_stride == 8
    assert_rows_match(compiled, model, [(1, 3, 64, 64), (3, 3, 32, 96), (2, 3, 128, 48)])


def test_kernel_hints_name_each_convolutions_output_at_the_intended_size_and_any_size_still_runs():
    model = _model()
    lines = {line.split()[1]: line for line in ncnn_graph(_model().fuse(), (96, 128)).param.splitlines()[2:]}
    assert "-23330=4,3,128,96,16 31=64" in lines["layer0"]  # (w, h, c) at 96x128; the image's conv runs direct
    assert "-23330=4,3,32,24,24" in lines["layer9"] and "31=" not in lines["layer9"]  # stride 4, 16 channels in
    compiled = load_ncnn_model(model, 2, img_size=96)  # kernels chosen for 96x96, run at other sizes
    assert_rows_match(compiled, model, [(1, 3, 96, 96), (2, 3, 40, 120)])


@pytest.mark.parametrize("section, named", [
    ("[shortcut]\nfrom=-2\nweights_type=per_feature\nweights_normalization=relu\n", "weighted shortcut"),
    ("[reorg3d]\nstride=2\n", "Reorg3d has no ncnn counterpart"),
    ("[maxpool]\nsize=1\nstride=1\nmaxpool_depth=1\nout_channels=4\n", "maxpool_depth"),
    ("[upsample]\nstride=-2\n", "negative stride"),
])
def test_a_layer_without_an_ncnn_form_is_refused_by_name(section, named):
    head = EVERY_LAYER_CFG.split("[maxpool]")[0]  # net, conv 16
    cfg = head + "[convolutional]\nfilters=16\nsize=1\nstride=1\nactivation=leaky\n" + section + \
        "[convolutional]\nfilters=24\nsize=1\nstride=1\nactivation=linear\n" + \
        "[yolo]\nmask=0,1,2\nanchors=4,6, 10,12, 20,18\nclasses=3\nnum=3\n"
    with pytest.raises(UnsupportedLayer, match=f"layer2: .*{named}"):
        load_ncnn_model(Darknet(cfg, img_size=64).eval(), 1)


def test_an_activation_ncnn_lacks_and_a_classifier_are_refused():
    cfg = EVERY_LAYER_CFG.replace("activation=tanh", "activation=selu")
    with pytest.raises(UnsupportedLayer, match="layer9: activation 'selu' has no ncnn layer"):
        ncnn_graph(_model(cfg).fuse())
    with pytest.raises(UnsupportedLayer, match="classifier"):
        ncnn_graph(Darknet("[net]\nwidth=32\nheight=32\nchannels=3\n[convolutional]\nfilters=4\nsize=3\nactivation=leaky\n"
                           "[avgpool]\n[softmax]\n").fuse())


def test_a_network_that_differs_from_pytorch_is_refused(monkeypatch):
    real = graph_module.ncnn_graph

    def wrong(fused, size):
        other = copy.deepcopy(fused)  # the check compares with `fused` itself
        other.layers[-2].conv.bias.data.add_(1.0)  # another model: every score differs
        return real(other, size)
    monkeypatch.setattr("detect.inference.ncnn_model.ncnn_graph", wrong)
    with pytest.raises(ValueError, match="ncnn's outputs differ from PyTorch's by"):
        load_ncnn_model(_model(), 1)


DETECTION_CFGS = sorted(p for p in (Path(__file__).parents[2] / "cfg").glob("*.cfg")
                        if "[yolo]" in p.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("cfg", DETECTION_CFGS, ids=lambda p: p.stem)
def test_every_detection_model_in_cfg_converts_and_gives_pytorchs_rows(cfg):
    model = _model(str(cfg))  # random weights and BatchNorm statistics; the unfused model is the reference
    compiled = load_ncnn_model(model, 2)
    stride = model.max_stride
    x = torch.rand(1, 3, 3 * stride, 2 * stride, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        expected = model(x)
    got = compiled(x)
    assert got.shape == expected.shape
    assert float(expected.abs().max()) > 50  # box rows in input pixels: 1e-3 is float32 rounding, not slack
    assert float((got - expected).abs().max()) < 1e-3  # 8e-6 (yolo-mini) to 3.1e-4 (yolov4-p5) measured
