"""The torch model against the independent NumPy oracle (tests/darknet/oracle*.py), layer by layer, on small
random cfgs that exercise every layer type and option, and on the real yolov3-tiny weights at a small size."""

import numpy as np
import pytest
import torch

from detect import Darknet
from detect.darknet.activations import ACTIVATIONS
from tests.conftest import shared_path
from tests.support.cfg_texts import GRAPH_CFG, YOLO_CFG
from tests.support.darknet_helpers import randomize_weights, relative_error
from tests.support.oracle import activate
from tests.support.oracle_net import oracle_forward

# stair is discontinuous at integers: float32 vs float64 may round across a step, so it is checked alone below
CHAINED = [name for name in ACTIVATIONS if name != "stair"]

CONV_CFG = """[net]
width=24
height=20
channels=3

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

[convolutional]
filters=8
size=3
stride_x=2
stride_y=1
pad=1
activation=mish

[convolutional]
batch_normalize=1
filters=6
size=3
pad=1
groups=2
dilation=2
activation=swish

[convolutional]
filters=6
size=2
stride=2
padding=1

[convolutional]
filters=4
size=3
stride=1
stride_y=2
padding=0
activation=linear

[convolutional]
filters=6
size=2
pad=1
activation=relu
""" + "".join(f"""
[convolutional]
batch_normalize={i % 2}
filters=6
size=1
activation={name}
""" for i, name in enumerate(CHAINED))


def _compare(cfg_text, tmp_path, size, seed=0, tol=1e-4):
    model = Darknet(cfg_text, img_size=size).eval()
    randomize_weights(model, seed)
    path = tmp_path / "random.weights"
    model.save_darknet_weights(path)
    x = torch.rand((2, 3) + model.input_size, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        ours = model.layer_outputs(x)
        detections = model(x)
    expected, expected_detections = oracle_forward(model.cfg_text, path, x.double().numpy())
    assert len(ours) == len(expected)
    for index, (a, b) in enumerate(zip(ours, expected)):
        assert relative_error(a.reshape(b.shape), b) < tol, f"layer {index} {model.layers[index]}"
    return model, detections, expected_detections


def test_conv_options_and_every_activation_match_the_oracle(tmp_path):
    model, _, _ = _compare(CONV_CFG, tmp_path, (20, 24))
    assert model.layer_shapes[1] == (8, 20, 12)  # stride_x=2, stride_y=1
    assert model.layer_shapes[3] == (6, 11, 7)  # size=2 stride=2 padding=1 on 20x12
    assert model.layer_shapes[4] == (4, 5, 5)  # stride_y=2 overrides, stride_x stays 1, padding=0
    assert model.layer_shapes[5] == (6, 6, 6)  # even kernel with pad=1 grows the map by one


def test_graph_layers_match_the_oracle(tmp_path):
    model, out, _ = _compare(GRAPH_CFG, tmp_path, (18, 22))
    shapes = model.layer_shapes
    assert shapes[1] == (8, 9, 11) and shapes[2] == (8, 9, 11) and shapes[3] == (8, 9, 11)
    assert shapes[4] == (8, 5, 6)
    assert shapes[6] == (8, 9, 11) and shapes[7] == (8, 9, 11)
    assert shapes[14] == (5, 9, 11) and shapes[16] == (5, 9, 11) and shapes[18] == (5, 5, 6)
    assert shapes[20] == (32, 9, 11) and shapes[22] == (32, 9, 11)
    assert model.is_classifier and out.shape == (2, 12)
    assert torch.allclose(out.view(2, 3, 4).sum(-1), torch.ones(2, 3), atol=1e-5)


def test_yolo_heads_and_decoding_match_the_oracle(tmp_path):
    model, detections, expected = _compare(YOLO_CFG, tmp_path, (48, 64))
    assert detections.shape == (2, 3 * 24 * 32 + 3 * 12 * 16, 7)
    assert relative_error(detections, expected) < 1e-4
    assert [h.scale_x_y for h in model.heads] == [1.1, 2.0] and model.heads[1].new_coords


def test_stair_activation_matches_the_oracle():
    x = torch.linspace(-5.3, 5.3, 107)  # steps are 0.1: no value sits on an integer
    ours = ACTIVATIONS["stair"](x)
    assert relative_error(ours, activate(x.double().numpy(), "stair")) < 1e-6


def test_real_yolov3_tiny_weights_match_the_oracle_at_96():
    weights = shared_path("weights", "yolov3-tiny.weights")
    cfg = shared_path("darknet-cfg", "yolov3-tiny.cfg")
    model = Darknet(cfg, img_size=96).eval()
    model.load_darknet_weights(weights)
    x = torch.rand(1, 3, 96, 96, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ours = model.layer_outputs(x)
        detections = model(x)
    expected, expected_detections = oracle_forward(model.cfg_text, weights, x.double().numpy())
    for index, (a, b) in enumerate(zip(ours, expected)):
        assert relative_error(a, b) < 1e-4, f"layer {index}"
    # the 2/1 maxpool (layer 11) on the 3x3 map: the last row/col see only border values (-inf padding, not 0)
    assert np.array_equal(ours[11][0, :, -1, -1].numpy(), ours[10][0, :, -1, -1].numpy())
    assert relative_error(detections, expected_detections) < 1e-4


@pytest.mark.parametrize("cfg_text, size", [(GRAPH_CFG, (18, 22)), (YOLO_CFG, (48, 64))])
def test_channels_last_gives_the_same_outputs(cfg_text, size):
    model = Darknet(cfg_text, img_size=size).eval()
    randomize_weights(model, seed=4)
    x = torch.rand((2, 3) + size)
    with torch.no_grad():
        expected = model(x)
        model.to(memory_format=torch.channels_last)
        x_last = x.contiguous(memory_format=torch.channels_last)
        assert relative_error(model(x_last), expected) < 1e-5
        if not model.is_classifier:
            model.train()
            raws = model(x_last)
            assert [tuple(r.shape) for r in raws] == [(2, 3, 24, 32, 7), (2, 3, 12, 16, 7)]
