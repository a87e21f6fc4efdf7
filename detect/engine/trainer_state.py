"""What the training loop carries and keeps: `TrainSetup` (everything built for a run), `TrainState` (where the
loop is), and the training checkpoint written and restored from them (`write_checkpoint`, `restore_checkpoint`,
with a checkpoint of another world size handled), plus the EMA buffer agreement before an evaluation.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from detect.darknet.pt_files import atomic_save
from detect.engine.checkpoint import (
    build_checkpoint,
    lean_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from detect.engine.config import Hyp
from detect.engine.ema import ModelEMA
from detect.engine.loss import YoloLoss
from detect.engine.optim import LRSchedule, accumulation_steps
from detect.engine.options import TrainOptions
from detect.runtime import dist

log = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """Raised when the loss stays non-finite for too many micro-batches in a row."""


class CheckpointWriteError(RuntimeError):
    """Raised on every rank when rank 0 could not write a checkpoint (full disk, I/O error): the run stops
    cleanly with the previous checkpoint in place."""


@dataclass
class TrainSetup:
    """Everything the loop needs, built by detect.engine.setup."""

    ctx: dist.DistContext
    model: nn.Module  # bare module (what EMA, saving and evaluation use)
    ddp_model: nn.Module  # DDP wrapper (or the same module with one process)
    loss: YoloLoss
    optimizer: torch.optim.Optimizer
    schedule: LRSchedule
    scaler: torch.amp.GradScaler
    amp_dtype: torch.dtype | None
    ema: ModelEMA | None
    train_loader: object  # detect.data.loader.TrainLoader (or anything with len() and epoch(e, start))
    accumulate: int
    hyp: Hyp
    names: list
    opts: TrainOptions  # epochs, nbs, eval_interval, ... (stored in checkpoints as plain data)
    run_dir: Path
    evaluate_fn: object = None  # callable(model) -> (fitness, metrics dict), same on every rank
    frozen_bn: list = field(default_factory=list)
    multi_scale: object = None
    channels_last: bool = False
    progress: bool = True
    img_size: int | None = None  # the training size (best.pt records it for the tools)
    loggers: object = None  # rank 0: the run's reports (detect.engine.run_loggers.RunLoggers); None elsewhere
    # rank 0: callable() -> best.pt's per-class thresholds (a dict) from the latest evaluation, or None
    # (detect.evaluation.thresholds.BestEvaluationThresholds)
    best_thresholds: object = None


@dataclass
class TrainState:
    epoch: int = 0  # epochs completed
    step: int = 0  # optimiser steps done
    batch_in_epoch: int = 0  # micro-batches of epoch `epoch` already done (mid-epoch interruption)
    best_fitness: float = -math.inf
    stale_evaluations: int = 0  # evaluations since the fitness last improved (--patience)
    stopped_early: bool = False
    epoch_rng: dict | None = None  # this rank's RNG state at the start of the current epoch
    nonfinite_total: int = 0
    nonfinite_run: int = 0
    stop_requested: bool = False
    stop_reason: str = ""  # SIGTERM, Ctrl-C, or another rank's (the ranks agree on a stop); an early stop's note
    # this rank's loss sums, counts and seconds of the epoch's batches before a mid-epoch stop, so that the resumed
    # epoch's row in results.csv covers the whole epoch: {"sums": [box, obj, cls], "counted", "images", "seconds"}
    epoch_partial: dict | None = None


def write_checkpoint(setup: TrainSetup, state: TrainState, path: Path, best: bool = False,
                     keep: Path | None = None) -> None:
    """Collective (every rank gathers its RNG state); rank 0 writes `path` atomically, verified, the previous
    one kept (detect.engine.checkpoint.save_checkpoint), and writes the lean best.pt from it when `best`. When rank 0 cannot
    write (full disk, I/O error), every rank raises `CheckpointWriteError`: continuing would train epochs
    that no checkpoint could keep, and the previous checkpoint is intact to resume from. `keep`: also a lean copy
    there (--save-period)."""
    st = state
    # mid-epoch: the epoch-start state, so the resumed run replays the same stream; else the current one
    rng = st.epoch_rng if st.batch_in_epoch else rng_state()
    every_rng = dist.all_gather_object(rng)
    every_partial = dist.all_gather_object(st.epoch_partial if st.batch_in_epoch else None)
    failure = None
    if dist.is_main_process():
        ckpt = build_checkpoint(model=setup.model, ema=setup.ema, optimizer=setup.optimizer,
                                scaler=setup.scaler, epoch=st.epoch, step=st.step,
                                batch_in_epoch=st.batch_in_epoch, best_fitness=st.best_fitness,
                                cfg_text=setup.model.cfg_text, names=setup.names,
                                hyp=setup.hyp.to_dict(),
                                opts=setup.opts.to_dict(), rank_rng=every_rng)
        ckpt.update(stale_evaluations=st.stale_evaluations, stopped_early=st.stopped_early)
        if st.batch_in_epoch:
            ckpt["epoch_partial"] = every_partial
        try:
            save_checkpoint(ckpt, path)
            lean = lean_checkpoint(ckpt, setup.img_size) if best or keep else None
            if best:  # what inference and fine-tuning need; resuming is last.pt's job
                thresholds = setup.best_thresholds() if setup.best_thresholds is not None else None
                atomic_save(lean if thresholds is None else {**lean, "class_conf": thresholds},
                            path.with_name("best.pt"))
            if keep is not None:
                atomic_save(lean, keep)
        except OSError as e:
            kept = f"{path} is as it was" if path.exists() else "no checkpoint was written yet"
            failure = (f"could not write {path} ({type(e).__name__}: {e}); {kept}: free space (or fix the "
                       f"disk) and resume with --resume {path}")
    # also the barrier: nobody reads (resume, restart) a checkpoint rank 0 is still writing
    failure = dist.broadcast_object(failure)
    if failure is not None:
        raise CheckpointWriteError(failure)


def restore_checkpoint(setup: TrainSetup, state: TrainState, ckpt: dict) -> None:
    """Load a resumable checkpoint into the bare model, EMA, optimiser, scaler and loop state."""
    s, st = setup, state
    s.model.load_state_dict(ckpt["model"])
    if s.ema is not None and ckpt.get("ema") is not None:
        s.ema.module.load_state_dict(ckpt["ema"])
        s.ema.updates = int(ckpt.get("ema_updates", 0))
    # the implementation (fused on CUDA, not on the CPU) is this run's, not the checkpoint's
    kernels = [{k: g[k] for k in ("fused", "foreach") if k in g} for g in s.optimizer.param_groups]
    s.optimizer.load_state_dict(ckpt["optimizer"])
    for group, kind in zip(s.optimizer.param_groups, kernels):
        group.update(kind)
    if ckpt.get("scaler") is not None:
        s.scaler.load_state_dict(ckpt["scaler"])
    st.epoch, st.step = int(ckpt["epoch"]), int(ckpt["step"])
    st.batch_in_epoch = int(ckpt.get("batch_in_epoch", 0))
    st.best_fitness = float(ckpt.get("best_fitness", -math.inf))
    st.stale_evaluations = int(ckpt.get("stale_evaluations", 0))
    rngs = ckpt.get("rng") or []
    if len(rngs) == s.ctx.world_size:
        st.epoch_rng = rngs[s.ctx.rank]
        set_rng_state(rngs[s.ctx.rank])
        partials = ckpt.get("epoch_partial") or []
        st.epoch_partial = partials[s.ctx.rank] if len(partials) == s.ctx.world_size else None
    else:
        _resume_on_other_world(setup, state, len(rngs))


def _resume_on_other_world(setup: TrainSetup, state: TrainState, saved_world: int) -> None:
    """A checkpoint of another world size (an elastic group that lost or regained a node): the batches of an
    epoch are dealt differently, so an interrupted epoch restarts from its first batch and the step count
    follows this world's steps per epoch."""
    s, st = setup, state
    st.epoch_rng = None
    if st.batch_in_epoch:
        log.warning("checkpoint saved by %d processes in the middle of epoch %d; this group has %d: the epoch "
                    "restarts from its first batch", saved_world, st.epoch + 1, s.ctx.world_size)
        st.batch_in_epoch = 0
    st.step = st.epoch * math.ceil(len(s.train_loader) / s.accumulate)
    log.warning("checkpoint holds RNG states for %d processes, this run has %d: the processes' random "
                "streams start afresh", saved_world, s.ctx.world_size)
    # --resume promises an exact continuation (docs/training.md): say plainly when this one is not, and why
    batch = s.opts.batch_size
    then = (f"{saved_world} processes x batch {batch} x {accumulation_steps(s.opts.nbs or 64, batch, saved_world)} "
            "accumulated" if saved_world else "an unknown number of processes")
    log.warning("this resume is not exact: the run trained as %s and goes on as %d processes x batch %d x %d "
                "accumulated, so each epoch's batches are dealt differently and the random streams differ; it will "
                "not reproduce the uninterrupted run (resume with %s processes for that)", then, s.ctx.world_size,
                batch, s.accumulate, saved_world or "the same number of")


def sync_ema_buffers(setup: TrainSetup) -> None:
    """Per-process BatchNorm (CPU) leaves each rank's running statistics one local update apart: give every
    rank rank 0's EMA buffers so the sharded evaluation sees one model."""
    if setup.ema is None or not setup.ctx.distributed:
        return
    buffers = dist.broadcast_object({k: v.cpu() for k, v in setup.ema.module.named_buffers()})
    with torch.no_grad():
        for name, value in setup.ema.module.named_buffers():
            value.copy_(buffers[name])
