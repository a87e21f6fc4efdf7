import math

import pytest
from torch import nn

from detect.engine.optim import (
    LRSchedule,
    accumulation_steps,
    build_optimizer,
    parameter_groups,
    scaled_parameter_names,
)


def _model():
    return nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.Conv2d(8, 4, 1))


def test_parameter_groups_no_decay_on_bn_and_bias():
    m = _model()
    decay, bn, bias = parameter_groups(m)
    assert [p.shape for p in decay] == [m[0].weight.shape, m[2].weight.shape]
    assert bn == [m[1].weight]
    assert {id(p) for p in bias} == {id(m[1].bias), id(m[2].bias)}
    m[0].weight.requires_grad_(False)
    assert len(parameter_groups(m)[0]) == 1


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_build_optimizer(name):
    opt = build_optimizer(_model(), name, lr=0.01, momentum=0.9, weight_decay=5e-4)
    assert [g["weight_decay"] for g in opt.param_groups] == [5e-4, 0.0, 0.0]
    if name == "sgd":
        assert opt.param_groups[0]["nesterov"] is True
    with pytest.raises(ValueError, match="--optimizer"):
        build_optimizer(_model(), "lion", 0.01, 0.9, 0.0)


def test_warmup_then_cosine():
    s = LRSchedule(lr0=0.01, total_steps=100, warmup_steps=10, kind="cos", lrf=0.1, momentum=0.9,
                   warmup_momentum=0.8, warmup_bias_lr=0.1)
    lrs, mom = s.values(0)
    assert lrs[0] == 0.0 and lrs[2] == pytest.approx(0.1) and mom == pytest.approx(0.8)
    lrs, mom = s.values(5)
    cos5 = 0.01 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.05)))
    assert lrs[0] == pytest.approx(cos5 * 0.5) and mom == pytest.approx(0.85)
    assert lrs[2] == pytest.approx(0.1 + (cos5 - 0.1) * 0.5)
    lrs, mom = s.values(50)
    assert lrs == [pytest.approx(0.01 * 0.55)] * 3 and mom == 0.9
    assert s.values(100)[0][0] == pytest.approx(0.001)


def test_darknet_burn_in_power_and_steps():
    s = LRSchedule(lr0=0.001, total_steps=1000, warmup_steps=100, kind="step", steps=(0.8, 0.9), scales=(0.1, 0.1),
                   warmup_power=4.0)
    assert s.values(50)[0][0] == pytest.approx(0.001 * 0.5 ** 4)
    assert s.values(799)[0][0] == pytest.approx(0.001)
    assert s.values(800)[0][0] == pytest.approx(0.0001)
    assert s.values(950)[0][0] == pytest.approx(0.00001)
    with pytest.raises(ValueError, match="same length"):
        LRSchedule(lr0=0.1, total_steps=10, steps=(0.5,), scales=(0.1, 0.1))


def test_apply_sets_groups_and_adam_betas():
    opt = build_optimizer(_model(), "adamw", lr=0.001, momentum=0.9, weight_decay=0.01)
    s = LRSchedule(lr0=0.001, total_steps=10, warmup_steps=4, warmup_momentum=0.5, momentum=0.9)
    s.apply(opt, 2)
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.7)


def test_accumulation_steps():
    assert accumulation_steps(64, 8, 2) == 4
    assert accumulation_steps(64, 16, 1) == 4
    assert accumulation_steps(64, 128, 2) == 1


def test_transferred_parameters_get_their_own_groups_at_a_multiple_of_the_lr():
    m = _model()
    transferred = {"0.weight", "1.weight", "1.bias"}  # the first conv and its BatchNorm came from the weights
    opt = build_optimizer(m, "sgd", lr=0.01, momentum=0.9, weight_decay=5e-4, scaled=transferred, lr_scale=0.2)
    assert [(g["group"], g["lr_scale"], g["param_names"]) for g in opt.param_groups] == [
        ("weights", 1.0, ["2.weight"]), ("bn", 1.0, []), ("bias", 1.0, ["2.bias"]),
        ("weights", 0.2, ["0.weight"]), ("bn", 0.2, ["1.weight"]), ("bias", 0.2, ["1.bias"])]
    s = LRSchedule(lr0=0.01, total_steps=100, warmup_steps=10, warmup_bias_lr=0.0)
    s.apply(opt, 5)
    lrs, _ = s.values(5)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx(lrs + [0.2 * lr for lr in lrs])
    # a checkpoint's optimiser state says which parameters were scaled (resume rebuilds the same groups)
    assert scaled_parameter_names(opt.state_dict()) == transferred
    plain = build_optimizer(m, "sgd", 0.01, 0.9, 5e-4, scaled=transferred, lr_scale=1.0)
    assert [len(g["params"]) for g in plain.param_groups] == [2, 1, 2]
    assert scaled_parameter_names(plain.state_dict()) == set()
