"""Training hyperparameters as typed, frozen configuration: optimiser and schedule, loss, augmentation, EMA.

A hyp yaml (`--hyp`, e.g. cfg/hyp.yaml) is a flat mapping; each key belongs to exactly one section (EMA keys
carry an `ema_` prefix). The dataclass field defaults below are the only defaults: a key the file leaves out
takes them, and a key no section knows (a typo) is an error naming the nearest valid key. `Hyp.to_dict()` is the
flat plain-data form stored in checkpoints and run folders, and `Hyp.from_dict` reads it back.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import yaml

from detect.data.augmentation.augment_config import AugmentConfig
from detect.runtime.assets import find_user_file

IOU_KINDS = ("iou", "giou", "diou", "ciou")
# Objectness weight per head stride: fine heads see many small, easy negatives (same idea as YOLOv5's balance).
DEFAULT_OBJ_BALANCE = {8: 4.0, 16: 1.0, 32: 0.4, 64: 0.1}


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True)
class OptimConfig:
    """Optimiser, learning-rate schedule and step safeguards."""

    lr0: float = 0.01  # initial learning rate (SGD; ~0.001 for AdamW)
    lrf: float = 0.01  # final lr = lr0 * lrf (cosine)
    momentum: float = 0.937  # SGD momentum / AdamW beta1
    weight_decay: float = 0.0005  # conv weights only
    warmup_epochs: float = 1.0  # Darknet burn_in, in epochs ...
    warmup_min_steps: int = 20  # ... but at least this many optimiser steps (at most half the run)
    warmup_momentum: float = 0.8
    warmup_bias_lr: float = 0.1
    warmup_power: float = 1.0  # lr factor (step / warmup) ** power during warm-up; Darknet's burn_in uses 4
    steps: tuple[float, ...] = (0.8, 0.9)  # schedule step: fractions of the run where lr is multiplied ...
    scales: tuple[float, ...] = (0.1, 0.1)  # ... by these
    grad_clip: float = 10.0  # max gradient norm (0 disables)
    max_nonfinite: int = 20  # stop after this many non-finite losses in a row
    bn_momentum: float | None = 0.03  # BatchNorm running-stat factor (PyTorch convention); None keeps Darknet's
    transferred_lr_scale: float = 1.0  # lr multiplier of the parameters copied from --weights (fine-tunes: 0.5)

    def __post_init__(self):
        for name in ("lr0", "lrf", "momentum", "weight_decay", "warmup_epochs", "warmup_momentum",
                     "warmup_bias_lr", "warmup_power", "grad_clip"):
            _check(getattr(self, name) >= 0, f"{name} must be a non-negative number, got {getattr(self, name)}")
        _check(self.warmup_min_steps >= 0, f"warmup_min_steps must be >= 0, got {self.warmup_min_steps}")
        _check(self.transferred_lr_scale > 0,
               f"transferred_lr_scale must be a positive number, got {self.transferred_lr_scale}")
        _check(self.max_nonfinite >= 1, f"max_nonfinite must be >= 1, got {self.max_nonfinite}")
        _check(len(self.steps) == len(self.scales),
               f"steps {list(self.steps)} and scales {list(self.scales)} must have the same length")
        _check(self.bn_momentum is None or 0 < self.bn_momentum <= 1,
               f"bn_momentum must be in (0, 1] or null, got {self.bn_momentum}")


@dataclass(frozen=True)
class LossConfig:
    box: float = 0.05  # box (1 - IoU kind) gain
    obj: float = 1.0  # objectness BCE gain
    cls: float = 0.5  # class BCE gain
    anchor_t: float = 4.0  # a ground truth trains every anchor whose w/h ratio is below this
    iou_loss: str = "ciou"  # used when a head's iou_loss is mse (Darknet's default), i.e. not an IoU kind
    label_smoothing: float | None = None  # overrides every head's label_smooth_eps when set
    obj_iou_ratio: float = 1.0  # objectness target = (1 - r) + r * IoU
    obj_balance: dict = field(default_factory=lambda: dict(DEFAULT_OBJ_BALANCE))  # head stride -> weight
    # a positive's class BCE times its class's weight: null (all 1), "auto" (from the training label counts,
    # detect.engine.class_weights), or one number per class
    class_weights: str | tuple | None = None

    def __post_init__(self):
        _check(self.iou_loss in IOU_KINDS, f"iou_loss must be one of {IOU_KINDS}, got {self.iou_loss!r}")
        for name in ("box", "obj", "cls"):
            _check(getattr(self, name) >= 0, f"{name} must be a non-negative gain, got {getattr(self, name)}")
        _check(self.anchor_t > 1, f"anchor_t must be > 1, got {self.anchor_t}")
        _check(0 <= self.obj_iou_ratio <= 1, f"obj_iou_ratio must be in [0, 1], got {self.obj_iou_ratio}")
        _check(self.label_smoothing is None or 0 <= self.label_smoothing < 1,
               f"label_smoothing must be in [0, 1) or null, got {self.label_smoothing}")
        w = self.class_weights
        _check(w is None or w == "auto" or (isinstance(w, tuple) and len(w) > 0 and all(v > 0 for v in w)),
               f"class_weights must be null, auto or a list of positive numbers (one per class), got {w!r}")


@dataclass(frozen=True)
class EMAConfig:
    decay: float = 0.9999  # EMA of the weights (evaluation and best.pt)
    tau: float = 2000.0  # warm-up: decay * (1 - exp(-updates / tau))

    def __post_init__(self):
        _check(0 <= self.decay < 1, f"ema_decay must be in [0, 1), got {self.decay}")
        _check(self.tau > 0, f"ema_tau must be positive, got {self.tau}")


# section name -> (class, prefix of its keys in the flat yaml)
_SECTIONS = {"optim": (OptimConfig, ""), "loss": (LossConfig, ""), "augment": (AugmentConfig, ""),
             "ema": (EMAConfig, "ema_")}


def _coerce(key: str, value, default, nullable: bool):
    """`value` in the type of the field's default (yaml numbers may be ints, lists stand for tuples)."""
    if value is None and nullable:
        return None
    if default is None and isinstance(value, (str, list, tuple)):  # a choice by name, or one number per item
        try:
            return value if isinstance(value, str) else tuple(float(v) for v in value)
        except (TypeError, ValueError):
            raise ValueError(f"{key} must be a name or a list of numbers, got {value!r}") from None
    try:
        if isinstance(default, int) and not (isinstance(value, float) and not value.is_integer()):
            return int(value)
        if isinstance(default, float) or default is None:
            return float(value)
        if isinstance(default, tuple):
            return tuple(float(v) for v in value)
        if isinstance(default, dict):
            return {int(k) if float(k).is_integer() else float(k): float(v) for k, v in dict(value).items()}
        if isinstance(default, str) and isinstance(value, str):
            return value
    except (TypeError, ValueError):
        pass
    kind = {int: "whole number", float: "number", tuple: "list of numbers", dict: "mapping of numbers",
            str: "string"}.get(type(default), "number")
    raise ValueError(f"{key} must be a {kind}{' or null' if nullable else ''}, got {value!r}")


@dataclass(frozen=True)
class Hyp:
    optim: OptimConfig = field(default_factory=OptimConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    ema: EMAConfig = field(default_factory=EMAConfig)

    @staticmethod
    def keys() -> list[str]:
        """Every valid flat key."""
        return [prefix + f.name for cls, prefix in _SECTIONS.values() for f in fields(cls)]

    @classmethod
    def from_dict(cls, flat: Mapping, source: str = "hyp") -> Hyp:
        """Sections from a flat mapping (a hyp yaml, or `to_dict()` from a checkpoint); errors name `source`."""
        valid = cls.keys()
        unknown = [k for k in flat if k not in valid]
        if unknown:
            hints = [f"{k!r} (did you mean {difflib.get_close_matches(str(k), valid, n=1, cutoff=0.5)[0]!r}?)"
                     if difflib.get_close_matches(str(k), valid, n=1, cutoff=0.5) else repr(k) for k in unknown]
            raise ValueError(f"{source}: unknown hyperparameter {', '.join(hints)}; valid keys: {', '.join(valid)}")
        sections = {}
        for name, (section_cls, prefix) in _SECTIONS.items():
            values = {}
            for f in fields(section_cls):
                key = prefix + f.name
                if key in flat:
                    default = getattr(section_cls(), f.name)
                    try:
                        values[f.name] = _coerce(key, flat[key], default, "None" in str(f.type))
                    except ValueError as e:
                        raise ValueError(f"{source}: {e}") from None
            try:
                sections[name] = section_cls(**values)
            except ValueError as e:
                raise ValueError(f"{source}: {e}") from None
        return cls(**sections)

    def to_dict(self) -> dict:
        """The flat plain-data form (yaml keys; lists, not tuples)."""
        flat = {}
        for name, (_, prefix) in _SECTIONS.items():
            for key, value in asdict(getattr(self, name)).items():
                flat[prefix + key] = list(value) if isinstance(value, tuple) else value
        return flat

    def replace_flat(self, **changes) -> Hyp:
        """A copy with some flat keys changed (checked like a file)."""
        return Hyp.from_dict({**self.to_dict(), **changes}, "hyp")


def load_hyp(path: str | Path | None) -> Hyp:
    """The hyp yaml at `path` over the defaults (None: the defaults alone)."""
    return Hyp.from_dict(read_hyp_file(path), str(path))


def read_hyp_file(path: str | Path | None) -> dict:
    """The flat mapping a hyp yaml gives (empty for None): the keys the user chose."""
    if path is None:
        return {}
    path = find_user_file(path, "cfg")  # cfg/hyp.yaml is shipped: `--hyp hyp.yaml` finds it from any folder
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of hyperparameters, got {type(raw).__name__}")
    return raw
