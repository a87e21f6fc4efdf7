"""Exponential moving average of a model's weights (and BatchNorm statistics), for evaluation and saving."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from detect.engine.config import EMAConfig

_DEFAULTS = EMAConfig()  # the defaults live in detect.engine.config


class ModelEMA:
    """`ema = decay(updates) * ema + (1 - decay(updates)) * model` after every optimiser step.

    The decay ramps up, `decay * (1 - exp(-updates / tau))`, so early weights (random init) are forgotten quickly.
    The EMA module is a frozen deep copy of the bare (unwrapped) model kept in eval mode.
    """

    def __init__(self, model: nn.Module, decay: float = _DEFAULTS.decay, tau: float = _DEFAULTS.tau, updates: int = 0):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay must be in [0, 1), got {decay}")
        self.module = copy.deepcopy(model).eval()
        for p in self.module.parameters():
            p.requires_grad_(False)
        self.decay = decay
        self.tau = tau
        self.updates = updates

    def current_decay(self) -> float:
        return self.decay * (1.0 - math.exp(-self.updates / self.tau)) if self.tau > 0 else self.decay

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        self.updates += 1
        d = self.current_decay()
        source = model.state_dict()
        floats_ema, floats_src, others_ema, others_src = [], [], [], []
        for name, value in self.module.state_dict().items():
            new = source[name].detach()
            if value.dtype.is_floating_point:
                floats_ema.append(value)
                floats_src.append(new.to(value.dtype))
            else:  # e.g. BatchNorm's num_batches_tracked, copied
                others_ema.append(value)
                others_src.append(new)
        # foreach: a few launches for the whole model rather than one or two per tensor
        if floats_ema:
            torch._foreach_mul_(floats_ema, d)
            torch._foreach_add_(floats_ema, floats_src, alpha=1.0 - d)
        if others_ema:
            torch._foreach_copy_(others_ema, others_src)

    def state_dict(self) -> dict:
        return {"module": self.module.state_dict(), "updates": self.updates, "decay": self.decay, "tau": self.tau}

    def load_state_dict(self, state: dict) -> None:
        self.module.load_state_dict(state["module"])
        self.updates = int(state["updates"])
