"""detect.inference.class_conf: per-class thresholds stored with a .pt and beside a .weights file, read back by the
loader onto the handle, and the one log line that says which threshold inference uses."""

import hashlib
import json

import pytest
import torch

from detect.inference.class_conf import (
    DEFAULT_CONF,
    ClassConf,
    conf_options,
    read_class_conf,
    save_class_conf,
    sidecar_path,
)
from detect.inference.loading import conf_settings, load_model_file
from tests.support.log_lines import log_lines
from tests.support.val_data import write_tiny_checkpoint

THRESHOLDS = ClassConf((0.2, 0.45, 0.6), 0.4, (30, 2, 0), 10.0, "the val split of tiny.yaml (3 images)")


def test_thresholds_round_trip_and_damaged_ones_are_one_line_errors():
    assert ClassConf.from_dict(THRESHOLDS.to_dict(), "x") == THRESHOLDS
    assert THRESHOLDS.describe() == ("0.200 to 0.600 over 3 classes (global best-F1 0.400), chosen on the val split "
                                     "of tiny.yaml (3 images)")
    with pytest.raises(ValueError, match=r"best\.pt: damaged per-class thresholds \(KeyError"):
        ClassConf.from_dict({"conf": [0.2]}, "best.pt")
    with pytest.raises(ValueError, match=r"one number in \[0, 1\] per class, got \(0\.2, 1\.5\)"):
        ClassConf.from_dict({**THRESHOLDS.to_dict(), "conf": [0.2, 1.5], "instances": [1, 1]}, "best.pt")


def test_a_pt_carries_them_and_the_loader_puts_them_on_the_handle(tmp_path):
    weights = write_tiny_checkpoint(tmp_path)
    assert read_class_conf(weights) is None
    assert save_class_conf(weights, THRESHOLDS) == weights
    assert torch.load(weights, weights_only=True)["class_conf"] == THRESHOLDS.to_dict()  # a plain dict in the .pt
    handle = load_model_file(weights, device=torch.device("cpu"), backend="torch")
    assert handle.class_conf == THRESHOLDS
    save_class_conf(weights, ClassConf((0.3, 0.3), 0.3, (1, 1), 10.0, "elsewhere"))
    # thresholds of another model: an error where they would be used, not when the model loads (detect.val, which
    # chooses new ones, and a run with --conf load it)
    handle = load_model_file(weights, device=torch.device("cpu"), backend="torch")
    with pytest.raises(ValueError, match=r"tiny\.pt carries 2 per-class thresholds but the model predicts 3 classes"):
        conf_settings(handle, None)
    assert conf_settings(handle, 0.3) == {"conf": 0.3, "class_conf": None}


def test_a_weights_file_has_them_in_a_json_beside_it(tmp_path):
    weights = tmp_path / "model.weights"
    weights.write_bytes(b"\0" * 20)
    assert sidecar_path(weights) == tmp_path / "model.weights.class_conf.json"
    assert read_class_conf(weights) is None
    assert save_class_conf(weights, THRESHOLDS) == sidecar_path(weights)
    assert json.loads(sidecar_path(weights).read_text())["conf"] == [0.2, 0.45, 0.6]
    assert read_class_conf(weights) == THRESHOLDS
    assert json.loads(sidecar_path(weights).read_text())["weights_sha1"] == hashlib.sha1(b"\0" * 20).hexdigest()
    weights.write_bytes(b"\1" * 20)  # retrained in place: the json is another model's
    with log_lines("detect.inference.class_conf") as lines:
        assert read_class_conf(weights) is None
    assert len(lines) == 1 and "chosen for other weights than model.weights" in lines[0]
    sidecar_path(weights).write_text("{not json")
    with pytest.raises(ValueError, match=r"model\.weights\.class_conf\.json: not readable json"):
        read_class_conf(weights)


def test_the_one_log_line_says_which_threshold_is_used():
    with log_lines("detect.inference.class_conf") as lines:
        assert conf_options(None, None, "a.pt") == {"conf": DEFAULT_CONF, "class_conf": None}
        assert conf_options(None, 0.4, "a.pt") == {"conf": 0.4, "class_conf": None}
    assert lines == []  # no thresholds in the file: nothing to say
    with log_lines("detect.inference.class_conf") as lines:
        assert conf_options(THRESHOLDS, None, "runs/best.pt") == {"conf": 0.2, "class_conf": (0.2, 0.45, 0.6)}
    assert lines == ["confidence: best.pt's per-class thresholds, 0.200 to 0.600 over 3 classes (global best-F1 "
                     "0.400), chosen on the val split of tiny.yaml (3 images); --conf X gives every class X instead"]
    with log_lines("detect.inference.class_conf") as lines:
        assert conf_options(THRESHOLDS, 0.3, "best.pt", "conf=") == {"conf": 0.3, "class_conf": None}
    assert lines == ["conf=0.3 for every class (best.pt's per-class thresholds are not used)"]
