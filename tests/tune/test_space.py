"""The search space: the default file parses into ranges train.py accepts, draws stay in them, and every bad
spec is refused with the file, the key and what would be right."""

import optuna
import pytest

from detect.engine.config import Hyp
from detect.tune.space import DEFAULT_SPACE, Param, load_space, parse_space, suggest_all


def test_the_default_space_is_a_fine_tune_space_of_valid_ranges():
    space = load_space()
    assert list(space)[:5] == ["lr0", "lrf", "momentum", "weight_decay", "warmup_epochs"]
    assert {"hsv_h", "hsv_s", "hsv_v", "scale", "translate", "fliplr", "mosaic"} <= set(space)
    assert space["lr0"] == Param("lr0", "float", 0.001, 0.05, log=True)
    assert space["weight_decay"].low == pytest.approx(1e-5) and space["weight_decay"].log
    for param in space.values():  # both ends are hyperparameters train.py takes
        Hyp.from_dict({param.key: param.low})
        Hyp.from_dict({param.key: param.high})
    assert DEFAULT_SPACE.name == "tune-space.yaml"


def test_kinds_follow_the_hyp_keys_and_draws_stay_in_range():
    space = parse_space({"lr0": {"low": 1e-4, "high": 0.1, "log": True}, "warmup_min_steps": {"low": 0, "high": 40,
                         "step": 10}, "iou_loss": {"choices": ["ciou", "giou"]}, "scale": {"low": "0", "high": 0.9}})
    assert [p.kind for p in space.values()] == ["float", "int", "categorical", "float"]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    for _ in range(20):
        values = suggest_all(space, study.ask())
        assert 1e-4 <= values["lr0"] <= 0.1 and 0 <= values["scale"] <= 0.9
        assert values["warmup_min_steps"] in (0, 10, 20, 30, 40) and isinstance(values["warmup_min_steps"], int)
        assert values["iou_loss"] in ("ciou", "giou")
        Hyp.from_dict(values)
    fixed = optuna.trial.FixedTrial({"lr0": 0.02, "warmup_min_steps": 20, "iou_loss": "giou", "scale": 0.3})
    assert suggest_all(space, fixed) == {"lr0": 0.02, "warmup_min_steps": 20, "iou_loss": "giou", "scale": 0.3}


@pytest.mark.parametrize("mapping, message", [
    ({"momentm": {"low": 0.8, "high": 0.9}},
     r"space.yaml: unknown hyperparameter 'momentm' \(did you mean 'momentum'\?\)"),
    ({"lr0": {"low": 0.1, "high": 0.01}}, "lr0: low 0.1 must be below high 0.01"),
    ({"lr0": {"low": 0.0, "high": 0.1, "log": True}}, "lr0: a log range needs low > 0, got 0"),
    ({"lr0": {"low": 0.001, "high": 0.1, "log": True, "step": 0.01}}, "log and step cannot be combined"),
    ({"lr0": {"low": 0.001}}, "lr0: a range needs both low and high"),
    ({"lr0": {"low": 0.001, "hi": 0.1}}, "lr0: unknown field 'hi'"),
    ({"lr0": {"low": "fast", "high": 0.1}}, "lr0: low must be a number, got 'fast'"),
    ({"lr0": 0.01}, r"lr0: give a range \{low: L, high: H\} or \{choices: \[...\]\}, got 0.01 \(a fixed value"),
    ({"scale": {"low": 0.0, "high": 1.5}}, r"scale: high 1.5 is not a valid value \(scale must be in \[0, 1\)"),
    ({"mosaic": {"choices": [0.0, 2.0]}}, r"mosaic: choice 2.0 is not a valid value \(mosaic is a probability"),
    ({"mosaic": {"choices": []}}, "mosaic: choices must be a non-empty list"),
    ({"steps": {"choices": [[0.8, 0.9]]}}, "steps: a choice must be a number, a name, true/false or null"),
    ({"warmup_min_steps": {"low": 0, "high": 2.5}}, "warmup_min_steps is a whole number"),
    ({"mosaic": {"choices": [0.0, 1.0], "low": 0}}, r"mosaic: choices cannot be combined with \['low'\]"),
    ([], "expected a mapping of hyperparameters to ranges"),
])
def test_bad_specs_are_clear_errors(mapping, message):
    with pytest.raises(ValueError, match=message):
        parse_space(mapping, "space.yaml")


def test_a_space_file_that_is_missing_or_not_yaml(tmp_path):
    with pytest.raises(FileNotFoundError, match="--space .*nope.yaml: no such file"):
        load_space(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("lr0: {low: 0.1, high: [\n")
    with pytest.raises(ValueError, match="bad.yaml: not valid YAML"):
        load_space(bad)
    good = tmp_path / "space.yaml"
    good.write_text("lr0: {low: 1e-4, high: 1e-2, log: true}\n")  # YAML 1.1 reads these as text; taken as numbers
    assert load_space(good)["lr0"] == Param("lr0", "float", 1e-4, 1e-2, log=True)
