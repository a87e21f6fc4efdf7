"""Optimiser with parameter groups, warm-up (Darknet's burn_in) and cosine / step learning-rate schedules.

The schedule is a pure function of the optimiser step, so a resumed run sets exactly the learning rate and momentum
an uninterrupted run would have had.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from detect.engine.config import OptimConfig

_DEFAULTS = OptimConfig()  # the defaults live in detect.engine.config
OPTIMIZERS = ("sgd", "adamw")
SCHEDULES = ("cos", "step", "constant")


def parameter_groups(model: nn.Module) -> tuple[list, list, list]:
    """(decayed weights, BatchNorm weights, biases): only conv/linear weights get weight decay."""
    decay, bn_weights, biases = [], [], []
    seen = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            if name == "bias":
                biases.append(p)
            elif isinstance(module, (nn.modules.batchnorm._BatchNorm, nn.GroupNorm, nn.LayerNorm)):
                bn_weights.append(p)
            else:
                decay.append(p)
    return decay, bn_weights, biases


GROUP_KINDS = ("weights", "bn", "bias")  # the order of LRSchedule.values' learning rates


def build_optimizer(model: nn.Module, name: str, lr: float, momentum: float, weight_decay: float,
                    scaled: set[str] | frozenset = frozenset(), lr_scale: float = 1.0) -> torch.optim.Optimizer:
    """SGD (Nesterov) or AdamW with groups 0: decayed weights, 1: BN weights, 2: biases (no decay on 1 and 2);
    the fused implementation (on the CPU and CUDA). With `lr_scale` != 1 the parameters named in
    `scaled` form three more groups of the same kinds whose learning rate is `lr_scale` times their kind's.
    Each group names its parameters (`param_names`), so a checkpoint's optimiser state says which were scaled."""
    if name not in OPTIMIZERS:
        raise ValueError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")
    kinds = dict(zip(GROUP_KINDS, parameter_groups(model)))
    if not any(kinds.values()):
        raise ValueError("no trainable parameters (is every layer frozen?)")
    names = {id(p): n for n, p in model.named_parameters()}
    decays = {"weights": weight_decay, "bn": 0.0, "bias": 0.0}
    scaled = scaled if lr_scale != 1.0 else frozenset()
    groups = []
    for scale in (1.0, lr_scale) if scaled else (1.0,):
        for kind, params in kinds.items():
            chosen = [p for p in params if (names[id(p)] in scaled) == (scale != 1.0)]
            groups.append({"params": chosen, "param_names": [names[id(p)] for p in chosen],
                           "weight_decay": decays[kind], "group": kind, "lr_scale": scale})
    # The fused kernels update every tensor in a few launches (CPU: 3.7x faster than the default loop on 8M
    # parameters here) and take a found_inf flag on the device, which is how the step skips a window whose loss
    # was not finite without the host reading it (detect.engine.trainer); other devices keep torch's default.
    fused = all(p.device.type in ("cuda", "cpu") for g in groups for p in g["params"]) or None
    if name == "sgd":
        optimizer = torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=True, fused=fused)
        # Momentum buffers exist from the start: fused SGD's first step allocates them uninitialised and, when
        # that step is skipped (found_inf), the next one would read them. Zeros make the first step torch's.
        for group in optimizer.param_groups:
            for p in group["params"]:
                optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return optimizer
    return torch.optim.AdamW(groups, lr=lr, betas=(momentum, 0.999), fused=fused)


@dataclass
class LRSchedule:
    """Learning rate and momentum per optimiser step.

    Warm-up over `warmup_steps`: factor (step/warmup)^power (Darknet burn_in uses power 4; 1 is linear); the bias group
    starts from `warmup_bias_lr` and comes down to the scheduled lr; momentum rises from `warmup_momentum`.
    After warm-up: `cos` goes from lr0 to lr0*lrf along a half cosine, `step` multiplies by each of `scales` once
    progress passes the matching fraction in `steps` (Darknet's steps policy), `constant` keeps lr0.
    """

    lr0: float
    total_steps: int
    warmup_steps: int = 0
    kind: str = "cos"
    lrf: float = _DEFAULTS.lrf
    steps: tuple = _DEFAULTS.steps
    scales: tuple = _DEFAULTS.scales
    momentum: float = _DEFAULTS.momentum
    warmup_momentum: float = _DEFAULTS.warmup_momentum
    warmup_bias_lr: float = _DEFAULTS.warmup_bias_lr
    warmup_power: float = _DEFAULTS.warmup_power

    @classmethod
    def from_config(cls, optim: OptimConfig, total_steps: int, warmup_steps: int, kind: str) -> LRSchedule:
        return cls(lr0=optim.lr0, total_steps=total_steps, warmup_steps=warmup_steps, kind=kind, lrf=optim.lrf,
                   steps=optim.steps, scales=optim.scales, momentum=optim.momentum,
                   warmup_momentum=optim.warmup_momentum, warmup_bias_lr=optim.warmup_bias_lr,
                   warmup_power=optim.warmup_power)

    def __post_init__(self):
        if self.kind not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.kind!r}")
        if len(self.steps) != len(self.scales):
            raise ValueError(f"hyp steps {list(self.steps)} and scales {list(self.scales)} must have the same length")
        if self.total_steps < 1:
            raise ValueError(f"the run has {self.total_steps} optimiser steps; it needs at least one")

    def scheduled_factor(self, step: int) -> float:
        progress = min(max(step / self.total_steps, 0.0), 1.0)
        if self.kind == "cos":
            return self.lrf + (1.0 - self.lrf) * 0.5 * (1.0 + math.cos(math.pi * progress))
        if self.kind == "step":
            factor = 1.0
            for at, scale in zip(self.steps, self.scales):
                if progress >= at:
                    factor *= scale
            return factor
        return 1.0

    def values(self, step: int) -> tuple[list[float], float]:
        """([lr of group 0, 1, 2], momentum) at optimiser step `step` (0-based)."""
        lr = self.lr0 * self.scheduled_factor(step)
        if step >= self.warmup_steps or self.warmup_steps == 0:
            return [lr, lr, lr], self.momentum
        w = (step / self.warmup_steps) ** self.warmup_power
        lin = step / self.warmup_steps
        bias_lr = self.warmup_bias_lr + (lr - self.warmup_bias_lr) * lin
        momentum = self.warmup_momentum + (self.momentum - self.warmup_momentum) * lin
        return [lr * w, lr * w, bias_lr], momentum

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> float:
        """Set lr (times the group's `lr_scale`) and momentum (AdamW: beta1) of every group for `step`; returns
        the weights' lr."""
        lrs, momentum = self.values(step)
        by_kind = dict(zip(GROUP_KINDS, lrs))
        for group in optimizer.param_groups:
            group["lr"] = by_kind[group["group"]] * group.get("lr_scale", 1.0)
            if "momentum" in group:
                group["momentum"] = momentum
            elif "betas" in group:
                group["betas"] = (momentum, group["betas"][1])
        return lrs[0]


def scaled_parameter_names(optimizer_state: dict) -> set[str]:
    """The parameters an optimiser (its `state_dict()`, e.g. from a checkpoint) gives an lr multiple other than 1."""
    return {n for g in optimizer_state.get("param_groups", []) if g.get("lr_scale", 1.0) != 1.0
            for n in g.get("param_names", [])}


def accumulation_steps(nominal_batch: int, batch_per_process: int, world_size: int) -> int:
    """Micro-batches per optimiser step so that one step sees about `nominal_batch` images in total."""
    return max(round(nominal_batch / (batch_per_process * world_size)), 1)
