"""Every cfg in ../shared/darknet-cfg builds (own size and a small one), runs at the small size, has the float
count of reference §5, and round-trips random .weights byte for byte."""

import pytest
import torch

from detect import Darknet
from tests.conftest import ROOT, shared_path
from tests.support.darknet_helpers import build_uninitialised, randomize_weights

# reference §5: .weights floats per cfg (bytes = 20 + 4 * floats)
EXPECTED_FLOATS = {
    "csdarknet53-omega.cfg": 27677512, "darknet53.cfg": 41645640, "yolov3-openimages.cfg": 64807342,
    "yolov3-spp.cfg": 63052381, "yolov3-tiny-prn.cfg": 4939758, "yolov3-tiny.cfg": 8858734,
    "yolov3-tiny_3l.cfg": 9009967, "yolov3-voc.cfg": 61678657, "yolov3.cfg": 62001757,
    "yolov4-csp-swish.cfg": 52986205, "yolov4-csp.cfg": 52986205, "yolov4-p5.cfg": 70917468,
    "yolov4-tiny-3l.cfg": 6334045, "yolov4-tiny.cfg": 6062814, "yolov4.cfg": 64429405,
    "yolov4x-mish.cfg": 99847037, "yolov7-tiny.cfg": 6241885, "yolov7.cfg": 36974557,
}
# reference §5: head strides in cfg order, input size
EXPECTED_HEADS = {
    "yolov3.cfg": ([32, 16, 8], (416, 416)), "yolov3-tiny.cfg": ([32, 16], (416, 416)),
    "yolov4.cfg": ([8, 16, 32], (608, 608)), "yolov4-p5.cfg": ([8, 16, 32], (896, 896)),
    "yolov7-tiny.cfg": ([8, 16, 32], (416, 416)), "yolov4-tiny-3l.cfg": ([32, 16, 8], (608, 608)),
}
BIG = {name for name, floats in EXPECTED_FLOATS.items() if floats > 30_000_000}


def _cases():
    return [pytest.param(name, marks=pytest.mark.slow) if name in BIG else name for name in EXPECTED_FLOATS]


def test_the_table_covers_every_shared_cfg():
    directory = shared_path("darknet-cfg")
    assert sorted(p.name for p in directory.glob("*.cfg")) == sorted(EXPECTED_FLOATS)


@pytest.mark.parametrize("name", list(EXPECTED_FLOATS))
def test_cfg_builds_at_its_size_and_a_small_one_with_the_reference_float_count(name):
    path = shared_path("darknet-cfg", name)
    with torch.device("meta"):  # shapes and counts only: no memory, no init
        model = Darknet(path)
        small = Darknet(path, img_size=2 * model.max_stride)
    assert model.input_size == (model.net_options["height"], model.net_options["width"])
    assert model.darknet_float_count() == EXPECTED_FLOATS[name]
    params = sum(p.numel() for p in model.parameters())
    bn_stats = sum(b.numel() for n, b in model.named_buffers() if n.endswith(("running_mean", "running_var")))
    assert params + bn_stats == EXPECTED_FLOATS[name]
    if name in EXPECTED_HEADS:
        strides, size = EXPECTED_HEADS[name]
        assert [h.stride[0] for h in model.heads] == strides and model.input_size == size
    assert small.darknet_float_count() == EXPECTED_FLOATS[name]
    assert [h.stride for h in small.heads] == [h.stride for h in model.heads]


@pytest.mark.parametrize("name", sorted(set(EXPECTED_FLOATS) - BIG))
def test_cfg_runs_at_a_small_size(name):
    path = shared_path("darknet-cfg", name)
    with torch.device("meta"):
        small = 2 * Darknet(path).max_stride
    model = Darknet(path, img_size=small).eval()
    x = torch.rand(1, 3, small, small)
    with torch.no_grad():
        out = model(x)
    if model.is_classifier:
        assert out.shape == (1, model.num_classes) and abs(float(out.sum()) - 1) < 1e-4
        return
    rows = sum(h.num_anchors * (small // int(h.stride[0])) ** 2 for h in model.heads)
    assert out.shape == (1, rows, 5 + model.num_classes)
    assert torch.isfinite(out).all()
    model.train()
    raws = model(x)
    assert [tuple(r.shape) for r in raws] == [
        (1, h.num_anchors, small // int(h.stride[0]), small // int(h.stride[1]), 5 + h.num_classes)
        for h in model.heads]


@pytest.mark.parametrize("name", _cases())
def test_random_weights_round_trip_byte_identical(name, tmp_path):
    path = shared_path("darknet-cfg", name)
    model = build_uninitialised(path, img_size=2 * 32)
    randomize_weights(model, seed=1)
    first, second = tmp_path / "first.weights", tmp_path / "second.weights"
    model.save_darknet_weights(first)
    assert first.stat().st_size == 20 + 4 * EXPECTED_FLOATS[name]
    with torch.no_grad():
        for tensor in model.state_dict().values():
            tensor.zero_()
    report = model.load_darknet_weights(first)
    assert report["floats"] == EXPECTED_FLOATS[name] and report["layers_loaded"] == len(model.layers)
    model.save_darknet_weights(second)
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("name", list(EXPECTED_FLOATS))
def test_project_cfg_copy_builds_the_same_model(name):
    copy = ROOT / "cfg" / name
    with torch.device("meta"):
        ours, theirs = Darknet(copy), Darknet(shared_path("darknet-cfg", name))
    assert ours.layer_shapes == theirs.layer_shapes
    assert ours.darknet_float_count() == EXPECTED_FLOATS[name]
    assert [h.options for h in ours.heads] == [h.options for h in theirs.heads]
    assert ours.net_options == theirs.net_options
