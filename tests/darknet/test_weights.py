"""Darknet .weights I/O (reference §4) and fine-tuning transfer from .weights and .pt files."""

import numpy as np
import pytest
import torch

from detect import Darknet
from detect.darknet import load_weights, save_pt
from tests.conftest import shared_path
from tests.support.darknet_helpers import randomize_weights

TINY_BYTES = 35_434_956
SMALL_CFG = """[net]
width=32
height=32
channels=3

[convolutional]
batch_normalize=1
filters=4
size=3
pad=1
activation=leaky

[convolutional]
filters=6
size=3
pad=1
activation=linear
{extra}

[shortcut]
from=-2
weights_type=per_channel
weights_normalization=relu

[convolutional]
filters=14
size=1
activation=linear

[yolo]
mask=0,1
anchors=4,5, 8,9
classes=2
num=2
"""


def _small(extra="", **kwargs):
    model = Darknet(SMALL_CFG.format(extra=extra), **kwargs)
    randomize_weights(model, seed=5)
    return model


def test_real_yolov3_tiny_loads_every_byte_and_saves_an_identical_body(tmp_path):
    weights = shared_path("weights", "yolov3-tiny.weights")
    model = Darknet(shared_path("darknet-cfg", "yolov3-tiny.cfg"))
    report = model.load_darknet_weights(weights)
    assert report["bytes"] == TINY_BYTES and report["bytes_consumed"] == TINY_BYTES
    assert report["floats"] == 8_858_734 and report["layers_loaded"] == 24 and not report["skipped"]
    assert report["version"] == (0, 2, 0) and report["seen"] == 32_013_312 == model.seen
    out = tmp_path / "again.weights"
    model.save_darknet_weights(out)
    saved, original = out.read_bytes(), weights.read_bytes()
    assert saved[20:] == original[20:]
    assert np.frombuffer(saved[:20], "<i4", 3).tolist() == [0, 2, 5]
    assert int(np.frombuffer(saved, "<u8", 1, 12)[0]) == 32_013_312


def test_partial_file_stops_at_a_layer_boundary_and_matches_darknet_partial(tmp_path):
    weights = shared_path("weights", "yolov3-tiny.weights")
    cfg = shared_path("darknet-cfg", "yolov3-tiny.cfg")
    full = Darknet(cfg)
    full.load_darknet_weights(weights)
    partial = tmp_path / "yolov3-tiny.conv.15"
    full.save_darknet_weights(partial, cutoff=15)
    assert partial.stat().st_size == 30_973_396  # reference §4.4
    fresh = Darknet(cfg, num_classes=3)
    before = fresh.layers[15].conv.weight.clone()
    report = load_weights(fresh, partial)
    assert report["layers_loaded"] == 15 and report["floats"] == 7_743_344 and not report["skipped"]
    assert torch.equal(fresh.layers[13].conv.weight, full.layers[13].conv.weight)
    assert torch.equal(fresh.layers[15].conv.weight, before)  # not in the file: keeps its initialisation


def test_mid_layer_end_and_leftover_floats_are_clear_errors(tmp_path):
    model = _small()
    path = tmp_path / "m.weights"
    model.save_darknet_weights(path)
    data = path.read_bytes()
    (tmp_path / "short.weights").write_bytes(data[:-8])
    with pytest.raises(ValueError, match=r"ends inside layer 3 \(ConvBlock\): array 'weights' needs 84 floats, "
                                         r"82 are left"):
        model.load_darknet_weights(tmp_path / "short.weights")
    (tmp_path / "long.weights").write_bytes(data + b"\0" * 12)
    with pytest.raises(ValueError, match=r"3 floats are left over after the last layer with weights \(layer 3\)"):
        model.load_darknet_weights(tmp_path / "long.weights")


def test_version_0_1_header_has_a_32_bit_seen(tmp_path):
    model = _small()
    path = tmp_path / "m.weights"
    model.save_darknet_weights(path)
    body = path.read_bytes()[20:]
    old = tmp_path / "old.weights"
    old.write_bytes(np.array([0, 1, 0], "<i4").tobytes() + np.array([777], "<u4").tobytes() + body)
    other = Darknet(model.cfg_text)
    report = other.load_darknet_weights(old)
    assert report["seen"] == 777 and report["bytes_consumed"] == len(body) + 16
    assert torch.equal(other.layers[2].weights, model.layers[2].weights)


def test_dontload_dontloadscales_and_flipped(tmp_path):
    model = _small(extra="flipped=1")
    path = tmp_path / "m.weights"
    model.save_darknet_weights(path)
    body = np.fromfile(path, "<f4", offset=20)
    conv1 = model.layers[1].conv.weight  # [6, 4, 3, 3], flipped: stored as [(4·3·3)][6]
    start = 4 + 3 * 4 + 4 * 27 + 6
    assert np.array_equal(body[start:start + 216], conv1.detach().reshape(6, -1).T.reshape(-1).numpy())
    again = Darknet(model.cfg_text)
    again.load_darknet_weights(path)
    assert torch.equal(again.layers[1].conv.weight, conv1)
    # dontloadscales: the file has no BN statistics for that layer; dontload: nothing at all for that layer
    text = model.cfg_text.replace("batch_normalize=1", "batch_normalize=1\ndontloadscales=1")
    text = text.replace("weights_type=per_channel", "weights_type=per_channel\ndontload=1")
    short = tmp_path / "short.weights"  # layer 0: biases + weights only; layer 2 (12 floats): absent
    kept = np.concatenate([body[:4], body[16:124], body[124:346], body[358:]])
    short.write_bytes(path.read_bytes()[:20] + kept.tobytes())
    target = Darknet(text)
    report = target.load_darknet_weights(short)
    assert body.size == 456 and report["floats"] == 456 - 12 - 12
    assert torch.equal(target.layers[0].bn.bias, model.layers[0].bn.bias)
    assert torch.equal(target.layers[0].bn.running_var, torch.ones(4))  # not read
    assert torch.equal(target.layers[3].conv.weight, model.layers[3].conv.weight)


def test_fine_tuning_transfer_from_weights_and_pt(tmp_path):
    source = _small()
    darknet_file, pt_file = tmp_path / "m.weights", tmp_path / "m.pt"
    source.save_darknet_weights(darknet_file)
    target = Darknet(SMALL_CFG.format(extra=""), num_classes=5)
    report = load_weights(target, darknet_file)
    assert sorted(report["skipped"]) == ["layers.3.conv.bias: source (14,) vs model (20,)",
                                         "layers.3.conv.weight: source (14, 6, 1, 1) vs model (20, 6, 1, 1)"]
    assert torch.equal(target.layers[1].conv.weight, source.layers[1].conv.weight)

    save_pt(source, pt_file, names=["a", "b"])
    checkpoint = torch.load(pt_file, weights_only=True)
    assert checkpoint["names"] == ["a", "b"] and checkpoint["cfg_text"] == source.cfg_text
    assert checkpoint["ema"] is None
    rebuilt = Darknet(checkpoint["cfg_text"])
    assert not load_weights(rebuilt, pt_file)["skipped"]
    assert torch.equal(rebuilt.layers[0].bn.running_mean, source.layers[0].bn.running_mean)

    ema = {k: v + 1 for k, v in source.state_dict().items()}
    torch.save({"model": source.state_dict(), "ema": ema, "cfg_text": source.cfg_text, "names": []}, pt_file)
    target = Darknet(SMALL_CFG.format(extra=""), num_classes=5)
    report = load_weights(target, pt_file)
    assert len(report["skipped"]) == 2
    assert torch.equal(target.layers[1].conv.bias, source.layers[1].conv.bias + 1)  # the EMA weights

    bare = tmp_path / "bare.pt"
    torch.save({"module." + k: v for k, v in source.state_dict().items()}, bare)  # a DDP-wrapped state dict
    again = Darknet(source.cfg_text)
    assert not load_weights(again, bare)["skipped"]
    assert torch.equal(again.layers[2].weights, source.layers[2].weights)


def test_fused_model_refuses_darknet_io(tmp_path):
    model = _small().fuse()
    with pytest.raises(ValueError, match="fused"):
        model.save_darknet_weights(tmp_path / "x.weights")
    with pytest.raises(ValueError, match="cutoff=9"):
        _small().save_darknet_weights(tmp_path / "x.weights", cutoff=9)
