"""Fine-tuning transfer of the head feeders row by row (detect.darknet.transfer): box and objectness rows of every
anchor, class rows matched by name, the other class rows initialised as a from-scratch start would."""

import logging
import math

import cv2
import pytest
import torch

from detect import Darknet
from detect.darknet.load import load_model
from detect.darknet.pt_files import save_pt
from detect.darknet.surgery import class_prior_logit, init_head_priors
from detect.darknet.transfer import model_head_layouts, transfer_state
from tests.conftest import shared_path
from tests.support.darknet_helpers import (
    build_uninitialised,
    letterbox,
    randomize_weights,
)

IMAGE = "000000404484.jpg"  # COCO val: a person and a dog
TARGET = ["Person", "kangaroo", "dog"]  # COCO's person is class 0, dog class 16
PERSON, DOG = 0, 16
BN_FEEDER_CFG = """[net]
width=32
height=32
channels=3

[convolutional]
batch_normalize=1
filters=8
size=3
pad=1
activation=leaky

[convolutional]
batch_normalize=1
filters={filters}
size=1
activation=linear

[yolo]
mask=0,1
anchors=4,5, 8,9
classes={classes}
num=2
"""


def _coco_names():
    return [n for n in shared_path("darknet-cfg", "coco.names").read_text().splitlines() if n]


@pytest.fixture(scope="module")
def tiny_source():
    model = Darknet(shared_path("darknet-cfg", "yolov3-tiny.cfg"), img_size=416).eval()
    model.load_darknet_weights(shared_path("weights", "yolov3-tiny.weights"))
    return model


@pytest.fixture(scope="module")
def real_image():
    image = cv2.imread(str(shared_path("data", "coco-tiny", "val2017", IMAGE)))
    return letterbox(image, 416)[0]


def _expected_heads(matched, initialised, classes=3):
    return [{"head": i, "layer": layer, "anchors": 3, "classes": classes, "source_classes": 80,
             "box_obj_rows": 15, "class_rows": 3 * len(matched), "initialised_rows": 3 * len(initialised),
             "matched": matched, "initialised": initialised, "whole": False, "reason": None}
            for i, layer in enumerate((16, 23))]


@pytest.mark.parametrize("source_kind", ["weights", "pt"])
def test_transferred_rows_give_the_source_outputs_on_a_real_image(tiny_source, real_image, source_kind, tmp_path,
                                                                  caplog):
    if source_kind == "weights":
        cfg = str(shared_path("darknet-cfg", "yolov3-tiny.cfg"))
        weights = shared_path("weights", "yolov3-tiny.weights")
    else:  # the .pt carries its cfg and the COCO names
        cfg, weights = None, tmp_path / "coco.pt"
        save_pt(tiny_source, weights, names=[n.replace(" ", "_") for n in _coco_names()])
    torch.manual_seed(7)
    with caplog.at_level(logging.INFO, logger="detect.darknet"):
        loaded = load_model(cfg, weights, names=TARGET, img_size=416)
    model = loaded.model.eval()
    assert loaded.report["heads"] == _expected_heads(["Person", "dog"], ["kangaroo"])
    assert "head 1 (layer 23, 3 anchors): 15 box+obj rows copied; 6 class rows copied (80 -> 3 classes; " \
           "matched: Person, dog); 3 class rows initialised (kangaroo)" in caplog.text
    assert ("COCO names of coco.names are assumed" in caplog.text) == (source_kind == "weights")
    # every tensor is copied whole except the feeders' (copied row by row): training's "transferred" parameters
    feeders = {n for n in model.state_dict() if n.startswith(("layers.15.", "layers.22."))}
    not_in_darknet_files = {n for n in model.state_dict() if n.endswith("num_batches_tracked")}
    expected = set(model.state_dict()) - feeders - (not_in_darknet_files if source_kind == "weights" else set())
    assert feeders and set(loaded.report["copied"]) == expected

    with torch.no_grad():
        theirs, mine = tiny_source(real_image), model(real_image)
    assert mine.shape == (1, 2535, 8) and theirs.shape == (1, 2535, 85)
    assert theirs[0, :, 4].max() > 0.8  # the image has confident detections: the rows carry real signal
    torch.testing.assert_close(mine[..., :5], theirs[..., :5], atol=1e-5, rtol=1e-5)  # cx, cy, w, h, obj
    torch.testing.assert_close(mine[..., 5], theirs[..., 5 + PERSON], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(mine[..., 7], theirs[..., 5 + DOG], atol=1e-6, rtol=1e-5)
    assert (mine[0, :, 4] * mine[0, :, 7]).max() > 0.7  # the dog is found at once (0.718)

    torch.manual_seed(7)  # the same initialisation as the loaded model's, then the from-scratch priors
    scratch = Darknet(shared_path("darknet-cfg", "yolov3-tiny.cfg"), img_size=416, num_classes=3)
    init_head_priors(scratch, 416)
    for head in model.heads:
        index = head.layer_index - 1
        kangaroo = [a * 8 + 5 + 1 for a in range(3)]
        assert torch.equal(model.layers[index].conv.weight[kangaroo], scratch.layers[index].conv.weight[kangaroo])
        assert torch.equal(model.layers[index].conv.bias[kangaroo], scratch.layers[index].conv.bias[kangaroo])


def test_names_match_case_and_underscore_insensitively_and_reorder_same_count_heads(tmp_path):
    source = Darknet(BN_FEEDER_CFG.format(filters=14, classes=2))  # a BatchNorm feeder: its arrays move by row
    randomize_weights(source, seed=3)
    pt = tmp_path / "two.pt"
    save_pt(source, pt, names=["traffic_light", "Dog"])
    loaded = load_model(BN_FEEDER_CFG.format(filters=14, classes=2), pt, names=["dog", "Traffic Light"])
    assert sorted(loaded.report["skipped"]) == [f"layers.1.{n}: class names differ (rows copied by name)"
                                                for n in ("bn.bias", "bn.running_mean", "bn.running_var",
                                                          "bn.weight", "conv.weight")]
    (head,) = loaded.report["heads"]
    assert head["matched"] == ["dog", "Traffic Light"] and head["class_rows"] == 4 and head["initialised_rows"] == 0
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs, mine = source.eval()(x), loaded.model.eval()(x)
    torch.testing.assert_close(mine, theirs[..., [0, 1, 2, 3, 4, 6, 5]], atol=1e-6, rtol=1e-5)  # classes swapped


def test_darknet_file_with_other_than_80_classes_matches_no_names(tmp_path):
    source = Darknet(BN_FEEDER_CFG.format(filters=14, classes=2))
    randomize_weights(source, seed=4)
    source.save_darknet_weights(tmp_path / "two.weights")
    torch.manual_seed(0)
    loaded = load_model(source.cfg_text, tmp_path / "two.weights", names=["person", "dog", "cat"])
    (head,) = loaded.report["heads"]
    assert (head["box_obj_rows"], head["class_rows"], head["initialised_rows"]) == (10, 0, 6)
    assert head["matched"] == [] and head["initialised"] == ["person", "dog", "cat"]
    torch.manual_seed(0)
    fresh = Darknet(source.cfg_text, num_classes=3)
    feeder, theirs, init = loaded.model.layers[1], source.layers[1], fresh.layers[1]
    box_obj = [a * 8 + e for a in range(2) for e in range(5)]
    source_box_obj = [a * 7 + e for a in range(2) for e in range(5)]
    classes = [a * 8 + 5 + k for a in range(2) for k in range(3)]
    for name in ("weight", "bias", "running_mean", "running_var"):  # BatchNorm arrays moved per row
        assert torch.equal(getattr(feeder.bn, name)[box_obj], getattr(theirs.bn, name)[source_box_obj])
        assert torch.equal(getattr(feeder.bn, name)[classes], getattr(init.bn, name)[classes])
    assert torch.equal(feeder.conv.weight[classes], init.conv.weight[classes])


def test_partial_conv_file_copies_no_head_rows(tiny_source, tmp_path):
    partial = tmp_path / "yolov3-tiny.conv.15"
    tiny_source.save_darknet_weights(partial, cutoff=15)
    torch.manual_seed(1)
    loaded = load_model(str(shared_path("darknet-cfg", "yolov3-tiny.cfg")), partial, names=TARGET, img_size=416)
    reasons = [h["reason"] for h in loaded.report["heads"]]
    assert {n.split(".")[1] for n in loaded.report["copied"]} == {str(i) for i in range(15) if i not in (1, 3, 5, 7,
                                                                                                       9, 11)}
    assert reasons == [f"the source has no weights for layer {i} (a partial file ends before it)" for i in (15, 22)]
    assert [(h["box_obj_rows"], h["class_rows"], h["initialised_rows"]) for h in loaded.report["heads"]] == \
        [(0, 0, 24)] * 2
    torch.manual_seed(1)
    fresh = Darknet(shared_path("darknet-cfg", "yolov3-tiny.cfg"), img_size=416, num_classes=3)
    assert torch.equal(loaded.model.layers[15].conv.bias, fresh.layers[15].conv.bias)  # untouched: no priors yet
    # the caller (training) gives the heads no weights reached the from-scratch priors, knowing the image size
    init_head_priors(loaded.model, 416, heads=[1])
    init_head_priors(fresh, 416)
    assert torch.equal(loaded.model.layers[22].conv.bias, fresh.layers[22].conv.bias)
    assert not torch.equal(loaded.model.layers[15].conv.bias, fresh.layers[15].conv.bias)


HEAD_CFGS = [("yolov3.cfg", False, 3), ("yolov4.cfg", False, 3), ("yolov4-tiny.cfg", False, 3),
             ("yolov4-csp.cfg", True, 3), ("yolov4-p5.cfg", True, 4), ("yolov7-tiny.cfg", True, 3),
             ("yolov7.cfg", True, 3)]


@pytest.mark.parametrize("cfg_name, new_coords, anchors", HEAD_CFGS)
def test_every_head_type_keeps_box_objectness_and_named_class_rows(cfg_name, new_coords, anchors):
    cfg = shared_path("darknet-cfg", cfg_name)
    source = build_uninitialised(cfg, img_size=64)
    target = build_uninitialised(cfg, img_size=64, num_classes=3)
    feeders = [h.layer_index - 1 for h in target.heads]
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for i in feeders:
            for t in source.layers[i].state_dict(keep_vars=True).values():
                t.uniform_(-1, 1, generator=gen)
            for t in target.layers[i].state_dict(keep_vars=True).values():
                t.zero_()
    names = ["dog", "Car", "platypus"]
    skipped, heads, _ = transfer_state(target, source.state_dict(), model_head_layouts(source), _coco_names(), names)
    assert len(skipped) == 2 * len(feeders)  # each feeder's conv weight and bias, copied by row instead
    assert [(h["anchors"], h["box_obj_rows"], h["class_rows"], h["matched"]) for h in heads] == \
        [(anchors, 5 * anchors, 2 * anchors, ["dog", "Car"])] * len(feeders)
    prior = 0.0 if new_coords else class_prior_logit(3)  # new_coords heads start from the plain initialisation
    for i, head in zip(feeders, target.heads):
        assert head.new_coords == new_coords and head.num_anchors == anchors
        for key, mine in target.layers[i].state_dict().items():
            theirs = source.layers[i].state_dict()[key]
            mine, theirs = mine.view(anchors, 8, *mine.shape[1:]), theirs.view(anchors, 85, *theirs.shape[1:])
            assert torch.equal(mine[:, :5], theirs[:, :5])
            assert torch.equal(mine[:, 5], theirs[:, 5 + DOG]) and torch.equal(mine[:, 6], theirs[:, 5 + 2])  # car
            expected = torch.full_like(mine[:, 7], prior if key.endswith("bias") else 0.0)
            assert torch.equal(mine[:, 7], expected)


def test_new_coords_model_outputs_match_after_transfer():
    cfg = shared_path("darknet-cfg", "yolov7-tiny.cfg")
    source = Darknet(cfg, img_size=64)
    randomize_weights(source, seed=2)
    target = Darknet(cfg, img_size=64, num_classes=2)
    transfer_state(target, source.state_dict(), model_head_layouts(source), _coco_names(), ["cat", "person"])
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs, mine = source.eval()(x), target.eval()(x)
    cat = _coco_names().index("cat")
    torch.testing.assert_close(mine, theirs[..., [0, 1, 2, 3, 4, 5 + cat, 5 + PERSON]], atol=1e-5, rtol=1e-5)


def test_bare_state_dict_reads_the_class_count_off_the_shapes_and_bad_names_are_refused(tmp_path):
    source = Darknet(BN_FEEDER_CFG.format(filters=14, classes=2))
    randomize_weights(source, seed=5)
    target = Darknet(source.cfg_text, num_classes=4)
    _, (head,), _ = transfer_state(target, source.state_dict())  # no cfg, no names: box and objectness rows only
    assert (head["source_classes"], head["box_obj_rows"], head["class_rows"]) == (2, 10, 0)
    with pytest.raises(ValueError, match="3 class names for a model of 4 classes; pass one name per class"):
        transfer_state(target, source.state_dict(), names=["a", "b", "c"])
    with pytest.raises(ValueError, match="num_classes=2 but 3 class names were given"):
        load_model(source.cfg_text, num_classes=2, names=["a", "b", "c"])
    assert math.isclose(class_prior_logit(3), math.log(0.6 / 2.01))


def test_a_head_whose_every_class_was_found_is_described_in_one_short_line():
    from detect.darknet.transfer import describe_head

    report = {"head": 0, "layer": 16, "anchors": 3, "classes": 80, "source_classes": 80, "box_obj_rows": 15,
              "class_rows": 240, "initialised_rows": 0, "matched": [f"class {k}" for k in range(80)],
              "initialised": [], "whole": False, "reason": None}
    assert describe_head(report) == "head 0 (layer 16, 3 anchors): 15 box+obj rows and all 240 class rows copied " \
                                    "(80 classes)"
