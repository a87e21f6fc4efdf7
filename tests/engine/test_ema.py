import math

import torch
from torch import nn

from detect.engine.ema import ModelEMA


def test_ema_update_follows_formula_and_copies_int_buffers():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    ema = ModelEMA(model, decay=0.9, tau=2.0)
    start = ema.module[0].weight.clone()
    with torch.no_grad():
        model[0].weight.add_(1.0)
    model.train()(torch.randn(4, 3))  # bumps num_batches_tracked
    ema.update(model)
    d = 0.9 * (1 - math.exp(-1 / 2.0))
    assert torch.allclose(ema.module[0].weight, start * d + model[0].weight * (1 - d))
    assert int(ema.module[1].num_batches_tracked) == 1
    assert not any(p.requires_grad for p in ema.module.parameters())
    assert not ema.module.training


def test_ema_state_roundtrip():
    model = nn.Linear(2, 2)
    ema = ModelEMA(model, decay=0.5, tau=0)
    ema.update(model)
    other = ModelEMA(nn.Linear(2, 2))
    other.load_state_dict(ema.state_dict())
    assert other.updates == 1
    assert torch.equal(other.module.weight, ema.module.weight)
