"""Defaults fitted to the run: what a fine-tune from pretrained weights needs differs from a run from scratch.

A new run's unset choices (`--nbs` not given, hyp keys the user's file does not name) are decided here from
what the run is: how many images, epochs and processes, and whether it starts from weights. Each choice comes
with its reason, which training logs; a value the user set is never changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from detect.engine.config import Hyp

NOMINAL_BATCH = 64  # images per optimiser step reached by accumulation in a long run (from scratch or large data)
# A fine-tune should make at least this many optimiser steps: below it, accumulating to the nominal batch costs
# more in lost updates than the less noisy gradient gives (160 images x 10 epochs at nbs 64 are 30 steps).
MIN_FINETUNE_STEPS = 300
FINETUNE_CLOSE_MOSAIC = 0.3  # fraction of a fine-tune's last epochs without mosaic
# lr multiple of the parameters copied from the weights: they hold features learnt on far more images than a
# fine-tune sees, and at the full lr the first epochs of a small dataset's noisy gradients wear them away.
FINETUNE_TRANSFERRED_LR = 0.5


@dataclass(frozen=True)
class RunShape:
    """What the run is, as far as the defaults care."""

    images: int  # training images
    epochs: int
    batch_size: int  # per process
    world_size: int
    max_batches: int | None = None  # per epoch and process (smoke runs)
    finetune: bool = False  # starts from pretrained weights

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.world_size

    @property
    def micro_batches(self) -> int:
        """Micro-batches per process over the whole run (the loader drops the incomplete last batch)."""
        per_epoch = max(self.images // self.global_batch, 1)
        if self.max_batches is not None:
            per_epoch = min(per_epoch, self.max_batches)
        return per_epoch * self.epochs


@dataclass(frozen=True)
class Plan:
    nbs: int
    hyp: Hyp
    reasons: tuple[str, ...]


def choose_nbs(shape: RunShape) -> tuple[int, str | None]:
    """The nominal batch: NOMINAL_BATCH, or for a short fine-tune the accumulation that keeps enough steps."""
    full = max(round(NOMINAL_BATCH / shape.global_batch), 1)
    if not shape.finetune:
        return NOMINAL_BATCH, None
    accumulate = min(full, max(shape.micro_batches // MIN_FINETUNE_STEPS, 1))
    if accumulate == full:
        return NOMINAL_BATCH, None
    nbs = accumulate * shape.global_batch
    return nbs, (f"nbs {nbs} (not {NOMINAL_BATCH}): {shape.images} images x {shape.epochs} epochs at "
                 f"{shape.global_batch} per micro-batch make {shape.micro_batches // full} optimiser steps when "
                 f"accumulating to {NOMINAL_BATCH}, {shape.micro_batches // accumulate} at nbs {nbs}; a fine-tune "
                 f"needs steps more than a smooth gradient")


def finetune_hyp(hyp: Hyp, user_keys: set[str], total_steps: int) -> tuple[Hyp, list[str]]:
    """Warm-up for weights that are already trained: short, and without the bias-lr boost that a random init
    needs (it would overwrite the pretrained objectness and box biases in the first steps)."""
    changes, reasons = {}, []
    if not user_keys & {"warmup_epochs", "warmup_min_steps"}:
        steps = max(3, math.ceil(0.03 * total_steps))
        used = min(steps, total_steps // 2)  # what the schedule takes (detect.engine.setup caps it at half)
        bounds = "at least 3" + (", at most half the run" if used < steps else "")
        changes.update(warmup_epochs=0.0, warmup_min_steps=steps)
        reasons.append(f"warm-up {used} of the run's {total_steps} optimiser steps (3%, {bounds}): the "
                       f"transferred layers need no burn-in, only the new head rows settle")
    if "warmup_bias_lr" not in user_keys:
        changes["warmup_bias_lr"] = 0.0
        reasons.append("warmup_bias_lr 0: biases ramp up with the weights instead of starting at 10x lr, which "
                       "would overwrite the pretrained objectness and box biases")
    if "transferred_lr_scale" not in user_keys:
        changes["transferred_lr_scale"] = FINETUNE_TRANSFERRED_LR
        reasons.append(f"transferred_lr_scale {FINETUNE_TRANSFERRED_LR}: the layers copied from the weights learn at "
                       f"{FINETUNE_TRANSFERRED_LR:g} x lr0 = {hyp.optim.lr0 * FINETUNE_TRANSFERRED_LR:g}, the rest "
                       f"(head convs with re-initialised rows, layers the weights did not reach) at lr0 = "
                       f"{hyp.optim.lr0:g}: "
                       f"a small dataset's gradients would wear the pretrained features away at the full lr")
    if "close_mosaic" not in user_keys:
        changes["close_mosaic"] = FINETUNE_CLOSE_MOSAIC
        reasons.append(f"close_mosaic {FINETUNE_CLOSE_MOSAIC}: the last {FINETUNE_CLOSE_MOSAIC:.0%} of the epochs "
                       f"train on whole images, as evaluated; mosaic before that multiplies the few images")
    return (hyp.replace_flat(**changes) if changes else hyp), reasons


def plan_run(shape: RunShape, hyp: Hyp, nbs: int | None, user_keys: set[str]) -> Plan:
    """The run's nominal batch and hyperparameters: the user's where given, else fitted to `shape`."""
    reasons = []
    if nbs is None:
        nbs, why = choose_nbs(shape)
        if why:
            reasons.append(why)
    if shape.finetune:
        accumulate = max(round(nbs / shape.global_batch), 1)
        hyp, why = finetune_hyp(hyp, user_keys, max(shape.micro_batches // accumulate, 1))
        reasons += why
    return Plan(nbs, hyp, tuple(reasons))
