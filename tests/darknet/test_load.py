"""The one model loader (detect.darknet.load) and the training-time surgery (detect.darknet.surgery)."""

import math
from pathlib import Path

import pytest
import torch

from detect.darknet.load import for_inference, load_model
from detect.darknet.pt_files import save_pt
from detect.darknet.surgery import (
    backbone_length,
    freeze_layers,
    init_head_priors,
    set_bn_momentum,
)
from tests.conftest import shared_path

ROOT = Path(__file__).resolve().parents[2]
MINI = str(ROOT / "cfg" / "yolo-mini.cfg")


def test_freeze_backbone_of_yolov3_tiny():
    model = load_model(str(shared_path("darknet-cfg", "yolov3-tiny.cfg")), num_classes=3).model
    assert backbone_length(model) == 12  # conv/maxpool stack before the first head's conv chain
    frozen_bn = freeze_layers(model, "backbone")
    assert len(frozen_bn) == 6  # the 6 conv+BN layers among layers 0..11
    assert not any(p.requires_grad for layer in list(model.layers)[:12] for p in layer.parameters())
    assert all(p.requires_grad for layer in list(model.layers)[12:] for p in layer.parameters())
    with pytest.raises(ValueError, match="--freeze 99: the cfg has only 24 layers"):
        freeze_layers(model, "99")


def test_finetune_yolov3_tiny_weights_onto_three_classes():
    cfg = str(shared_path("darknet-cfg", "yolov3-tiny.cfg"))
    weights = str(shared_path("weights", "yolov3-tiny.weights"))
    loaded = load_model(cfg, weights, num_classes=3)
    model = loaded.model
    reference = load_model(cfg).model
    reference.load_darknet_weights(weights)
    assert model.num_classes == 3 and model.heads[0].num_classes == 3
    assert not hasattr(model, "weights_report") and loaded.names is None
    theirs, mine = reference.state_dict(), model.state_dict()
    transferable = [k for k in mine if k in theirs and mine[k].shape == theirs[k].shape]
    assert all(torch.equal(mine[k], theirs[k]) for k in transferable)
    # only the two class-count-dependent head convs (weights + biases) are skipped
    skipped = loaded.report["skipped"]
    assert len(skipped) == 4 and all("conv" in s for s in skipped)
    assert len(transferable) == len(mine) - 4


def test_pt_supplies_cfg_and_names_and_exact_refuses_a_misfit(tmp_path):
    source = load_model(MINI, num_classes=2).model
    pt = tmp_path / "m.pt"
    save_pt(source, pt, names=["cat", "dog"])
    loaded = load_model(None, pt, exact=True)  # the cfg comes from the file
    assert loaded.names == ["cat", "dog"] and loaded.model.num_classes == 2 and not loaded.report["skipped"]
    assert all(torch.equal(a, b) for a, b in zip(loaded.model.state_dict().values(), source.state_dict().values()))
    with pytest.raises(ValueError, match=r"m.pt does not fit .*yolo-mini.cfg \(4 classes\): 4 tensor"):
        load_model(MINI, pt, exact=True)
    with pytest.raises(ValueError, match="--cfg is required"):
        load_model(None, shared_path("weights", "yolov3-tiny.weights"))
    with pytest.raises(FileNotFoundError, match="--weights nope.pt: file not found"):
        load_model(MINI, "nope.pt")


def test_classifier_cfg_is_refused():
    with pytest.raises(ValueError, match="classifier cfg has no \\[yolo\\] heads"):
        load_model(str(shared_path("darknet-cfg", "darknet53.cfg")))


def test_for_inference_fuses_and_keeps_the_outputs():
    model = load_model(MINI, img_size=64).model.eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        before = model(x)
        after = for_inference(model, torch.device("cpu"))(x)
    assert model.fused and not model.training
    assert torch.allclose(before, after, atol=1e-4, rtol=1e-4)


def test_head_priors_and_bn_momentum():
    model = load_model(MINI, num_classes=4, img_size=64).model
    feeder = model.layers[model.heads[0].layer_index - 1].conv
    before = feeder.bias.detach().clone().view(model.heads[0].num_anchors, -1)
    init_head_priors(model, 416)
    prior = 8 / (416 / max(model.heads[0].stride)) ** 2  # about 8 objects over the head's cells
    after = feeder.bias.detach().view(model.heads[0].num_anchors, -1)
    assert torch.allclose(after[:, 4] - before[:, 4], torch.tensor(math.log(prior / (1 - prior))), atol=1e-5)
    assert torch.allclose(after[:, :4], before[:, :4])  # box rows untouched
    set_bn_momentum(model, 0.03)
    assert {m.momentum for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)} == {0.03}


def test_one_img_size_check_names_the_flag_and_the_nearest_sizes():
    from detect.darknet.load import check_img_size

    assert check_img_size(416, 32) == 416 and check_img_size(64, 64) == 64
    with pytest.raises(ValueError, match=r"^--img-size 100 must be a multiple of the model's largest stride 32 "
                                         r"\(and at least 32\): try 96 or 128$"):
        check_img_size(100, 32)
    with pytest.raises(ValueError, match=r"^--img 16 must be .* stride 32 .*: try 32$"):
        check_img_size(16, 32, "--img")


def test_cfg_required_names_what_the_weights_look_like(tmp_path):
    for name in ("yolo.weights", "darknet53.conv.74"):
        (tmp_path / name).write_bytes(b"\0" * 64)
        with pytest.raises(ValueError, match=f"{name} is Darknet weights, which hold no cfg"):
            load_model(None, tmp_path / name)
    (tmp_path / "classes.txt").write_text("cat\ndog\n")
    with pytest.raises(ValueError, match=r"classes.txt is not a PyTorch checkpoint \(which would carry its cfg\)"):
        load_model(None, tmp_path / "classes.txt")
    with pytest.raises(ValueError, match="there are no --weights to take a cfg from"):
        load_model(None, None)
