"""detect.engine.cfg_training: a Darknet cfg's training keys as hyperparameters (--hyp cfg), key by key."""

import pytest

from detect.engine.cfg_training import (
    cfg_training_keys,
    describe_ignored,
    map_cfg_training,
)
from detect.engine.config import Hyp
from tests.conftest import shared_path

HYP_KEYS = set(Hyp.keys())

CFG = """[net]
batch=32
subdivisions=4
width=64
height=64
channels=3
momentum=0.9
decay=0.0004
learning_rate=0.002
burn_in=200
power=2
max_batches=4000
policy=steps
steps=3200,3600
scales=.1,.2
saturation=1.25
exposure=1.5
hue=.05
angle=7
flip=0
mosaic=1
letter_box=1

[convolutional]
size=1
stride=1
filters=21
activation=linear

[yolo]
mask=0,1,2
anchors=6,8, 12,10, 20,24
classes=2
num=3
jitter=.2
counters_per_class=100, 25
max_delta=3
"""


def test_every_training_key_maps_with_its_scale():
    m = map_cfg_training(CFG, HYP_KEYS | {"class_weights"})
    assert m.hyp["lr0"] == pytest.approx(0.02) and m.hyp["momentum"] == 0.9 and m.hyp["weight_decay"] == 0.0004
    assert m.hyp["warmup_min_steps"] == 200 and m.hyp["warmup_epochs"] == 0.0 and m.hyp["warmup_power"] == 2.0
    assert m.hyp["steps"] == [0.8, 0.9] and m.hyp["scales"] == [0.1, 0.2] and m.opts["schedule"] == "step"
    assert m.opts["nbs"] == 32
    assert m.hyp["hsv_s"] == pytest.approx(0.25) and m.hyp["hsv_v"] == pytest.approx(0.5) and m.hyp["hsv_h"] == 0.05
    assert m.hyp["degrees"] == 7.0 and m.hyp["fliplr"] == 0.0 and m.hyp["mosaic"] == 1.0
    assert m.hyp["scale"] == pytest.approx(0.2) and m.hyp["translate"] == pytest.approx(0.1)
    assert m.hyp["class_weights"] == [1.0, 3.0]  # max / count = 4, capped by max_delta 3
    assert "learning_rate=0.002 -> lr0 0.02 (x10: relative to each trainer's usual value)" in m.mapped
    assert any(line.startswith("subdivisions=4: memory only") for line in m.unmapped)
    assert any(line.startswith("letter_box=1: training feeds images as --resize says") for line in m.unmapped)


def test_a_key_this_trainer_lacks_is_listed_not_dropped_silently():
    m = map_cfg_training(CFG, HYP_KEYS - {"class_weights"})
    assert "class_weights" not in m.hyp
    assert [line.split(": ", 1)[1] for line in m.unmapped if line.startswith("yolo.counters_per_class=")] == \
        ["this trainer has no class_weights yet"]


def test_policies_without_an_equivalent_and_a_cfg_without_training_keys():
    poly = CFG.replace("policy=steps", "policy=poly")
    m = map_cfg_training(poly, HYP_KEYS)
    assert "schedule" not in m.opts and any(line.startswith("policy=poly: no equivalent") for line in m.unmapped)
    assert map_cfg_training(CFG.replace("policy=steps", "policy=constant"), HYP_KEYS).opts["schedule"] == "constant"
    bare = "[net]\nwidth=64\nheight=64\nchannels=3\n\n[convolutional]\nsize=1\nstride=1\nfilters=4\n"
    assert cfg_training_keys(bare)[1] == {} and describe_ignored(bare) is None


def test_yolov4_cfg_as_darknet_trains_it():
    cfg = shared_path("darknet-cfg", "yolov4.cfg")
    m = map_cfg_training(cfg, HYP_KEYS)
    assert m.hyp["lr0"] == pytest.approx(0.013) and m.hyp["momentum"] == 0.949 and m.opts["nbs"] == 64
    assert m.hyp["steps"] == [pytest.approx(400000 / 500500, abs=1e-4), pytest.approx(450000 / 500500, abs=1e-4)]
    assert m.hyp["scale"] == pytest.approx(0.3) and m.hyp["mosaic"] == 1.0 and m.hyp["hsv_h"] == pytest.approx(0.1)
    note = describe_ignored(cfg)
    assert note.startswith(f"{cfg} sets training keys this run does not use (learning_rate=0.0013, momentum=0.949, ")
    assert note.endswith("--hyp cfg maps the cfg's onto this trainer's, key by key")
    # Hyp accepts every mapped value (the run would refuse an out-of-range one naming the cfg)
    Hyp.from_dict({**Hyp().to_dict(), **m.hyp}, "yolov4.cfg")


def test_train_with_hyp_cfg_trains_with_the_cfgs_keys_and_logs_them(tmp_path, monkeypatch, capsys):
    import yaml

    from tests.support.training import TINY_DATA, train_tiny

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY_DATA.replace("path: gen", f"path: {tmp_path / 'gen'}"))
    (tmp_path / "hyp.yaml").write_text("")
    cfg = CFG.replace("classes=2", "classes=4").replace("filters=21", "filters=27").replace("100, 25", "1,1,1,1")
    (tmp_path / "m.cfg").write_text(cfg)
    argv = ["--cfg", "m.cfg", "--epochs", "1", "--max-batches", "1"]
    assert train_tiny(*argv, "--hyp", "cfg") == 0
    out = capsys.readouterr().out
    assert "--hyp cfg: learning_rate=0.002 -> lr0 0.02" in out and "--hyp cfg: not mapped: letter_box=1" in out
    assert "--hyp cfg: --nbs 8 given on the command line, not the cfg's 32" in out
    run = tmp_path / "runs" / "r"
    hyp, opts = yaml.safe_load((run / "hyp.yaml").read_text()), yaml.safe_load((run / "opts.yaml").read_text())
    assert hyp["lr0"] == pytest.approx(0.02) and hyp["warmup_min_steps"] == 200 and hyp["hsv_v"] == 0.5
    assert opts["schedule"] == "step" and opts["nbs"] == 8 and opts["hyp"] == "cfg"
    # without --hyp cfg: said once, the defaults train
    assert train_tiny(*argv, "--name", "plain") == 0
    out = capsys.readouterr().out
    assert out.count("sets training keys this run does not use (learning_rate=0.002,") == 1
    assert yaml.safe_load((tmp_path / "runs" / "plain" / "hyp.yaml").read_text())["lr0"] == Hyp().optim.lr0
