"""detect.engine.config: typed hyperparameters, one set of defaults, unknown keys refused with the nearest name."""


import pytest
import yaml

from detect.engine.config import (
    AugmentConfig,
    EMAConfig,
    Hyp,
    LossConfig,
    OptimConfig,
    load_hyp,
)
from tests.conftest import ROOT


def test_cfg_hyp_yaml_lists_exactly_the_defaults():
    raw = yaml.safe_load((ROOT / "cfg" / "hyp.yaml").read_text())
    assert sorted(raw) == sorted(Hyp.keys())  # every key documented, none extra
    assert load_hyp(ROOT / "cfg" / "hyp.yaml") == Hyp() == load_hyp(None)


def test_file_values_are_typed_and_sectioned(tmp_path):
    path = tmp_path / "h.yaml"
    path.write_text("lr0: 0.02\nwarmup_min_steps: 5\nsteps: [0.5]\nscales: [0.2]\nbox: 0.1\nmosaic: 0\n"
                    "ema_decay: 0.999\nbn_momentum: null\nobj_balance: {8: 2, 32: 1}\n")
    hyp = load_hyp(path)
    assert hyp.optim == OptimConfig(lr0=0.02, warmup_min_steps=5, steps=(0.5,), scales=(0.2,), bn_momentum=None)
    assert hyp.loss == LossConfig(box=0.1, obj_balance={8: 2.0, 32: 1.0})
    assert hyp.augment == AugmentConfig(mosaic=0.0) and hyp.ema == EMAConfig(decay=0.999)
    assert isinstance(hyp.optim.warmup_min_steps, int) and isinstance(hyp.augment.mosaic, float)
    flat = hyp.to_dict()  # plain data for checkpoints and hyp.yaml
    assert flat["steps"] == [0.5] and flat["ema_decay"] == 0.999 and yaml.safe_load(yaml.safe_dump(flat)) == flat
    assert Hyp.from_dict(flat) == hyp


@pytest.mark.parametrize("text, message", [
    ("lr_0: 0.1\n", "unknown hyperparameter 'lr_0' (did you mean 'lr0'?)"),
    ("mosiac: 0.5\n", "unknown hyperparameter 'mosiac' (did you mean 'mosaic'?)"),
    ("ema_decy: 0.9\n", "did you mean 'ema_decay'?"),
    ("lr0: fast\n", "lr0 must be a number, got 'fast'"),
    ("lr0: null\n", "lr0 must be a number, got None"),
    ("warmup_min_steps: 2.5\n", "warmup_min_steps must be a whole number, got 2.5"),
    ("mosaic: 2\n", "mosaic is a probability in [0, 1], got 2.0"),
    ("iou_loss: l1\n", "iou_loss must be one of"),
    ("ema_decay: 1.0\n", "ema_decay must be in [0, 1)"),
    ("steps: [0.5]\n", "steps [0.5] and scales [0.1, 0.1] must have the same length"),
    ("- lr0\n", "expected a mapping of hyperparameters, got list"),
    ("lr0: [\n", "not valid YAML"),
])
def test_bad_hyp_files_name_the_file_and_the_key(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        load_hyp(path)
    assert str(error.value).startswith(str(path)) and message in str(error.value)


def test_train_refuses_a_typo_before_starting(tmp_path):
    from detect.engine.options import parse_options

    path = tmp_path / "typo.yaml"
    path.write_text("weight_decy: 0.001\n")
    with pytest.raises(ValueError, match="did you mean 'weight_decay'"):
        parse_options(["--hyp", str(path)])
