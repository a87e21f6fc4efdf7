"""The torch model against the independent NumPy oracle (tests/darknet/oracle*.py), layer by layer, on small
random cfgs that exercise every layer type and option, and on the real yolov3-tiny weights at a small size."""

import numpy as np
import pytest
import torch

from detect import Darknet
from detect.darknet.activations import ACTIVATIONS
from tests.conftest import shared_path

from .helpers import randomize_weights, relative_error
from .oracle import activate
from .oracle_net import oracle_forward

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

GRAPH_CFG = """[net]
width=22
height=18
channels=3

# 0
[convolutional]
batch_normalize=1
filters=8
size=3
pad=1
activation=leaky

# 1-4: maxpool 2/2 on an even map, then odd 9x11 maps: 2/1, SPP 5/1, 3/2 with the default padding
[maxpool]
size=2
stride=2

[maxpool]
size=2
stride=1

[maxpool]
size=5
stride=1

[maxpool]
size=3
stride=2

# 5-7: routes, plain and grouped (one and several inputs)
[route]
layers=2,3

[route]
layers=-1
groups=2
group_id=1

[route]
layers=5,6,2
groups=4
group_id=3

# 8-11: shortcuts: fewer-channel add with activation; weighted multi-from; per-channel softmax
[convolutional]
batch_normalize=1
filters=16
size=3
pad=1
activation=linear

[shortcut]
from=-3
activation=leaky

[shortcut]
from=2,7
weights_type=per_feature
weights_normalization=relu

[shortcut]
from=8
weights_type=per_channel
weights_normalization=softmax
activation=swish

# 12-13
[convolutional]
filters=32
size=1
activation=linear

[shortcut]
from=11
weights_type=per_channel
weights_normalization=avg_relu

# 14-18: depth maxpool (32 channels into 5), upsample x2, sum-downsample with scale, scale only, local_avgpool
[maxpool]
maxpool_depth=1
out_channels=5

[upsample]
stride=2

[upsample]
stride=-2
scale=0.5

[upsample]
stride=1
scale=2

[local_avgpool]
size=3
stride=2

# 19-23: reorg3d and the legacy reorg on layer 0
[route]
layers=0

[reorg3d]
stride=2

[route]
layers=0

[reorg]
stride=2

[convolutional]
filters=1
size=1
activation=logistic

# 24-27: scale_channels both ways, sam
[scale_channels]
from=22
scale_wh=1

[avgpool]

[scale_channels]
from=20
activation=leaky

[convolutional]
filters=32
size=3
pad=1
activation=logistic

[sam]
from=26

# 29-36: dropout, batchnorm, activation, empty, maxpool, connected (BN and bias), softmax
[dropout]
probability=0.3

[batchnorm]

[activation]
activation=tanh

[empty]

[maxpool]
size=2
stride=2

[connected]
output=20
batch_normalize=1
activation=leaky

[connected]
output=12
activation=linear

[softmax]
groups=3
temperature=2
"""

YOLO_CFG = """[net]
width=64
height=48
channels=3

[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
activation=leaky

[convolutional]
filters=21
size=1
activation=linear

[yolo]
mask=0,1,2
anchors=4,6, 9,12, 14,10, 20,18, 30,24, 40,44
classes=2
num=6
scale_x_y=1.1

[route]
layers=-3

[convolutional]
batch_normalize=1
filters=16
size=3
stride=2
pad=1
activation=leaky

[convolutional]
filters=21
size=1
activation=logistic

[yolo]
mask=3,4,5
anchors=4,6, 9,12, 14,10, 20,18, 30,24, 40,44
classes=2
num=6
scale_x_y=2.0
new_coords=1
"""


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
