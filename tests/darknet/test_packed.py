"""The oneDNN-packed CPU path (detect.darknet.packed) gives the fused model's outputs within float rounding, for
every activation it fuses, any input size and batch, and on the official yolov3-tiny weights and a real image."""

import cv2
import pytest
import torch

from detect import Darknet
from detect.darknet.activations import Activation
from detect.darknet.layers import ConvBlock
from detect.darknet.load import for_inference
from detect.darknet.packed import FUSED_ACTIVATIONS, PackedConv, pack_convolutions, packing_available
from tests.conftest import shared_path

from .helpers import letterbox, randomize_weights, relative_error
from .test_oracle import YOLO_CFG

pytestmark = pytest.mark.skipif(not packing_available(), reason="this torch build has no oneDNN")


def _fused_block(activation: str, groups: int = 1, stride: int = 1, dilation: int = 1) -> ConvBlock:
    torch.manual_seed(0)
    block = ConvBlock(8, 12, 3, stride, 1, dilation, groups, True, Activation(activation)).eval()
    with torch.no_grad():
        block.bn.running_mean.uniform_(-1, 1)
        block.bn.running_var.uniform_(0.5, 2)
        block.bn.weight.uniform_(0.5, 1.5)
        block.bn.bias.uniform_(-1, 1)
    block.fuse()
    return block


@pytest.mark.parametrize("activation", [*FUSED_ACTIVATIONS, "mish"])
def test_packed_conv_equals_the_fused_block_for_each_activation(activation):
    block = _fused_block(activation)
    x = torch.randn(2, 8, 11, 9) * 2
    with torch.no_grad():
        expected = block(x)
        packed = PackedConv(block)
        actual = packed(x)
    assert (packed.after is None) == (activation != "mish")  # mish is applied after the kernel
    assert actual.shape == (2, 12, 11, 9)
    assert (actual - expected).abs().max().item() < 1e-4


@pytest.mark.parametrize("groups, stride, dilation", [(4, 1, 1), (1, 2, 1), (1, 1, 2)])
def test_packed_conv_keeps_groups_stride_and_dilation(groups, stride, dilation):
    block = _fused_block("leaky", groups, stride, dilation)
    x = torch.randn(1, 8, 13, 10)
    with torch.no_grad():
        assert (PackedConv(block)(x) - block(x)).abs().max().item() < 1e-4


def test_unfused_block_is_refused():
    block = ConvBlock(3, 4, 3, 1, 1, 1, 1, True, Activation("leaky"))
    with pytest.raises(ValueError, match="fused ConvBlock"):
        PackedConv(block)


def test_packed_model_matches_at_other_sizes_and_batches():
    model = Darknet(YOLO_CFG).eval()
    randomize_weights(model)
    fused = Darknet(YOLO_CFG).eval()
    fused.load_state_dict(model.state_dict())
    packed = for_inference(fused, torch.device("cpu"))
    assert sum(isinstance(m, PackedConv) for m in packed.layers) == 4
    for shape in [(1, 3, 48, 64), (3, 3, 64, 32)]:  # the build size, then another batch and rect canvas
        x = torch.rand(shape)
        with torch.inference_mode():
            assert (packed(x) - model(x)).abs().max().item() < 1e-3


def test_for_inference_without_packing_keeps_plain_convolutions():
    model = for_inference(Darknet(YOLO_CFG), torch.device("cpu"), pack=False)
    assert sum(isinstance(m, ConvBlock) for m in model.layers) == 4
    assert pack_convolutions(Darknet(YOLO_CFG)) == 2  # BatchNorm convs stay: only fused ones are packed


def test_yolov3_tiny_packed_keeps_the_outputs_on_a_real_image(shared):
    image = cv2.imread(str(shared_path("data", "coco-tiny", "val2017", "000000359937.jpg")))
    x, _, _ = letterbox(image, 416)
    model = Darknet(shared_path("darknet-cfg", "yolov3-tiny.cfg"), img_size=416).eval()
    model.load_darknet_weights(shared_path("weights", "yolov3-tiny.weights"))
    with torch.inference_mode():
        expected = model(x)
        packed = for_inference(model, torch.device("cpu"))
        actual = packed(x)
    assert sum(isinstance(m, PackedConv) for m in packed.layers) == 13
    boxes, scores = (actual - expected)[..., :4].abs(), (actual - expected)[..., 4:].abs()
    assert boxes.max().item() < 0.01  # input pixels, on boxes up to 416
    assert scores.max().item() < 1e-4
    assert relative_error(actual, expected) < 1e-4  # as fusing alone (test_real_detections)
