"""The training loop: DDP step with accumulation and no_sync, AMP, clipping, EMA, schedule, checkpoints, resume.

`Trainer.fit()` runs the epochs; everything it needs is built by `detect.train` and passed in (`TrainSetup`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from detect import dist
from detect.checkpoint import build_checkpoint, copy_atomic, rng_state, save_checkpoint, set_rng_state
from detect.config import Hyp
from detect.ema import ModelEMA
from detect.loss import YoloLoss
from detect.optim import LRSchedule
from detect.options import TrainOptions
from detect.precision import autocast
from detect.preprocess import to_model_input

log = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """Raised when the loss stays non-finite for too many micro-batches in a row."""


class CheckpointWriteError(RuntimeError):
    """Raised on every rank when rank 0 could not write a checkpoint (full disk, I/O error): the run stops
    cleanly with the previous checkpoint in place."""


@dataclass
class TrainSetup:
    """Everything the loop needs, built by detect.train."""

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


@dataclass
class TrainState:
    epoch: int = 0  # epochs completed
    step: int = 0  # optimiser steps done
    batch_in_epoch: int = 0  # micro-batches of epoch `epoch` already done (mid-epoch interruption)
    best_fitness: float = -math.inf
    epoch_rng: dict | None = None  # this rank's RNG state at the start of the current epoch
    nonfinite_total: int = 0
    nonfinite_run: int = 0
    stop_requested: bool = False


class Trainer:
    def __init__(self, setup: TrainSetup, state: TrainState | None = None, on_epoch_end=None, on_batch=None):
        self.setup = setup
        self.state = state or TrainState()
        self.on_epoch_end = on_epoch_end  # callable(epoch, row dict) on rank 0 (results.csv)
        self.on_batch = on_batch  # callable(epoch, index, images, targets, paths) on rank 0 (batch mosaics)
        self.stop_signal = False  # set by the SIGTERM handler
        self._postfix_time = -math.inf  # when the progress bar last showed the losses

    # ---- one micro-batch -------------------------------------------------------------------------------------
    def _prepare(self, images: torch.Tensor, micro_index: int) -> torch.Tensor:
        x = to_model_input(images, self.setup.ctx.device)
        if self.setup.multi_scale is not None:
            x = self.setup.multi_scale.resize(x, self.setup.multi_scale.size_for(micro_index))
        return x.contiguous(memory_format=torch.channels_last) if self.setup.channels_last else x

    def _post(self, micro_index: int, phase: int, what: str) -> None:
        """Tell the group this rank reached `what` of micro-batch `micro_index` (phase 0, 1), the end of the
        epoch whose last micro-batch it is (phase 2) or rank 0's own work after it (phase 3: results and plots,
        which the others do not wait for until the next forward), so a rank that hangs can be named
        (detect.liveness)."""
        dist.post_progress(self.setup.ctx, 4 * micro_index + phase, f"micro-batch {micro_index}, {what}")

    def _agree(self, nonfinite: bool) -> tuple[bool, bool]:
        """(any rank non-finite, any rank asked to stop): one all-reduce so every rank takes the same branch."""
        flags = torch.tensor([float(nonfinite), float(self.stop_signal)], device=self.setup.ctx.device)
        dist.all_reduce_sum(flags)
        return bool(flags[0] > 0), bool(flags[1] > 0)

    def _micro_step(self, images, targets, micro_index: int, sync: bool) -> torch.Tensor | None:
        """Forward + backward of one micro-batch; None when the loss was non-finite on some rank (skipped)."""
        self._post(micro_index, 0, "before its forward")  # DDP's forward broadcasts buffers: a collective
        x = self._prepare(images, micro_index)
        no_sync = getattr(self.setup.ddp_model, "no_sync", None)
        sync_ctx = no_sync() if (no_sync is not None and not sync) else contextlib.nullcontext()
        with sync_ctx:
            with autocast(self.setup.ctx.device, self.setup.amp_dtype):
                raw = self.setup.ddp_model(x)
            loss, parts = self.setup.loss(raw, targets, (x.shape[2], x.shape[3]))
            self._post(micro_index, 1, "before the loss agreement")
            nonfinite, stop = self._agree(not bool(torch.isfinite(loss)))
            self.state.stop_requested |= stop
            if nonfinite:
                return None
            # gradient of one optimiser step = nbs x the mean over its micro-batches (world-size independent)
            self.setup.scaler.scale(loss * (self.setup.opts.nbs / self.setup.accumulate)).backward()
        return parts

    def _optimizer_step(self) -> float:
        s = self.setup
        lr = s.schedule.apply(s.optimizer, self.state.step)
        if not any(p.grad is not None for g in s.optimizer.param_groups for p in g["params"]):
            # every micro-batch of this window was skipped (non-finite loss, agreed by all ranks): nothing to
            # apply, and GradScaler refuses an update without gradients; the schedule still moves on
            self.state.step += 1
            return lr
        s.scaler.unscale_(s.optimizer)
        clip = s.hyp.optim.grad_clip
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(s.model.parameters(), clip)
        s.scaler.step(s.optimizer)
        s.scaler.update()
        s.optimizer.zero_grad(set_to_none=True)
        if s.ema is not None:
            s.ema.update(s.model)
        self.state.step += 1
        return lr

    def _count_nonfinite(self, parts) -> None:
        st = self.state
        if parts is not None:
            st.nonfinite_run = 0
            return
        st.nonfinite_total += 1
        st.nonfinite_run += 1
        log.warning("non-finite loss: micro-batch skipped (%d in a row, %d in total)", st.nonfinite_run,
                    st.nonfinite_total)
        limit = self.setup.hyp.optim.max_nonfinite
        if st.nonfinite_run >= limit:
            raise NonFiniteLossError(f"the loss was non-finite for {limit} micro-batches in a row (epoch "
                                     f"{st.epoch}, step {st.step}): lower lr0 in the hyp file, check the labels, "
                                     f"or try --amp off")

    def train_step(self, images, targets, micro_index: int, last_of_window: bool):
        """One micro-batch, and the optimiser step when it closes an accumulation window.
        Returns (loss parts [box, obj, cls] on the device or None when skipped, lr of the step or None)."""
        parts = self._micro_step(images, targets, micro_index, sync=last_of_window)
        self._count_nonfinite(parts)
        return parts, (self._optimizer_step() if last_of_window else None)

    # ---- one epoch -------------------------------------------------------------------------------------------
    def _set_train_mode(self) -> None:
        self.setup.model.train()
        for bn in self.setup.frozen_bn:  # frozen layers keep their BatchNorm statistics
            bn.eval()

    def train_epoch(self) -> dict:
        s, st = self.setup, self.state
        epoch = st.epoch
        if st.epoch_rng is not None and st.batch_in_epoch:
            self._set_rng(st.epoch_rng)  # replay the interrupted epoch's random stream
        st.epoch_rng = self._rng()
        self._set_train_mode()
        n_batches = len(s.train_loader)  # --max-batches is applied by the loader
        skip = st.batch_in_epoch
        # loss sums stay on the device: reading them every step would make the host wait for the GPU
        sums, counted, images_seen = torch.zeros(3, device=s.ctx.device), 0, 0
        lr = s.optimizer.param_groups[0]["lr"]
        bar = self._progress(n_batches, epoch, skip)
        start = time.perf_counter()
        for i, (images, targets, paths) in enumerate(s.train_loader.epoch(epoch, skip), start=skip):
            if self.on_batch is not None:
                self.on_batch(epoch, i, images, targets, paths)
            last_of_window = (i + 1) % s.accumulate == 0 or i == n_batches - 1
            parts, step_lr = self.train_step(images, targets, epoch * n_batches + i, last_of_window)
            if parts is not None:
                sums += parts
                counted += 1
            images_seen += images.shape[0]
            if last_of_window:
                lr = step_lr
                st.batch_in_epoch = i + 1
                if st.stop_requested:
                    break
            if bar is not None:
                self._update_bar(bar, sums, counted, lr, images_seen * s.ctx.world_size, start)
        if bar is not None:
            bar.close()
        mean = dist.all_reduce_mean(sums / max(counted, 1)).cpu()
        return {"box": float(mean[0]), "obj": float(mean[1]), "cls": float(mean[2]), "lr": lr,
                "img_s": images_seen * s.ctx.world_size / max(time.perf_counter() - start, 1e-9)}

    def _progress(self, total: int, epoch: int, initial: int):
        if not (self.setup.progress and self.setup.ctx.is_main):
            return None
        from tqdm import tqdm

        self._postfix_time = -math.inf
        return tqdm(total=total, initial=initial, desc=f"epoch {epoch + 1}/{self.setup.opts.epochs}", leave=True,
                    dynamic_ncols=True, mininterval=1.0)

    def _update_bar(self, bar, sums: torch.Tensor, counted: int, lr, images, start) -> None:
        now = time.perf_counter()
        if now - self._postfix_time >= 1.0:  # reading the device sums waits for the GPU: about once a second
            self._postfix_time = now
            parts = (sums / max(counted, 1)).tolist()
            post = {"box": f"{parts[0]:.4f}", "obj": f"{parts[1]:.4f}", "cls": f"{parts[2]:.4f}",
                    "lr": f"{lr:.2e}", "img/s": f"{images / max(now - start, 1e-9):.1f}"}
            if self.setup.ctx.device.type == "cuda":
                post["mem"] = f"{torch.cuda.max_memory_allocated(self.setup.ctx.device) / 2**30:.2f}G"
            bar.set_postfix(post, refresh=False)
        bar.update(1)

    def _rng(self) -> dict:
        """Process RNG states (augmentation is seeded per sample by the loader and needs no state)."""
        return rng_state()

    def _set_rng(self, state: dict) -> None:
        set_rng_state(state)

    # ---- checkpoints -----------------------------------------------------------------------------------------
    def checkpoint(self, path: Path, best: bool = False) -> None:
        """Collective (every rank gathers its RNG state); rank 0 writes `path` atomically, verified, the previous
        one kept (detect.checkpoint.save_checkpoint), and copies it to best.pt when `best`. When rank 0 cannot
        write (full disk, I/O error), every rank raises `CheckpointWriteError`: continuing would train epochs
        that no checkpoint could keep, and the previous checkpoint is intact to resume from."""
        st = self.state
        # mid-epoch: the epoch-start state, so the resumed run replays the same stream; else the current one
        rng = st.epoch_rng if st.batch_in_epoch else self._rng()
        every_rng = dist.all_gather_object(rng)
        failure = None
        if dist.is_main_process():
            ckpt = build_checkpoint(model=self.setup.model, ema=self.setup.ema, optimizer=self.setup.optimizer,
                                    scaler=self.setup.scaler, epoch=st.epoch, step=st.step,
                                    batch_in_epoch=st.batch_in_epoch, best_fitness=st.best_fitness,
                                    cfg_text=self.setup.model.cfg_text, names=self.setup.names,
                                    hyp=self.setup.hyp.to_dict(),
                                    opts=self.setup.opts.to_dict(), rank_rng=every_rng)
            try:
                save_checkpoint(ckpt, path)
                if best:
                    copy_atomic(path, path.with_name("best.pt"))
            except OSError as e:
                kept = f"{path} is as it was" if path.exists() else "no checkpoint was written yet"
                failure = (f"could not write {path} ({type(e).__name__}: {e}); {kept}: free space (or fix the "
                           f"disk) and resume with --resume {path}")
        # also the barrier: nobody reads (resume, restart) a checkpoint rank 0 is still writing
        failure = dist.broadcast_object(failure)
        if failure is not None:
            raise CheckpointWriteError(failure)

    def restore(self, ckpt: dict) -> None:
        """Load a resumable checkpoint into the bare model, EMA, optimiser, scaler and loop state."""
        s, st = self.setup, self.state
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
        rngs = ckpt.get("rng") or []
        if len(rngs) == s.ctx.world_size:
            st.epoch_rng = rngs[s.ctx.rank]
            self._set_rng(rngs[s.ctx.rank])
        else:
            self._resume_on_other_world(len(rngs))

    def _resume_on_other_world(self, saved_world: int) -> None:
        """A checkpoint of another world size (an elastic group that lost or regained a node): the batches of an
        epoch are dealt differently, so an interrupted epoch restarts from its first batch and the step count
        follows this world's steps per epoch."""
        s, st = self.setup, self.state
        st.epoch_rng = None
        if st.batch_in_epoch:
            log.warning("checkpoint saved by %d processes in the middle of epoch %d; this group has %d: the epoch "
                        "restarts from its first batch", saved_world, st.epoch + 1, s.ctx.world_size)
            st.batch_in_epoch = 0
        st.step = st.epoch * math.ceil(len(s.train_loader) / s.accumulate)
        log.warning("checkpoint holds RNG states for %d processes, this run has %d: the processes' random "
                    "streams start afresh", saved_world, s.ctx.world_size)

    def _sync_ema_buffers(self) -> None:
        """Per-process BatchNorm (CPU) leaves each rank's running statistics one local update apart: give every
        rank rank 0's EMA buffers so the sharded evaluation sees one model."""
        if self.setup.ema is None or not self.setup.ctx.distributed:
            return
        buffers = dist.broadcast_object({k: v.cpu() for k, v in self.setup.ema.module.named_buffers()})
        with torch.no_grad():
            for name, value in self.setup.ema.module.named_buffers():
                value.copy_(buffers[name])

    # ---- the run ---------------------------------------------------------------------------------------------
    def fit(self) -> TrainState:
        s, st = self.setup, self.state
        while st.epoch < s.opts.epochs:
            t0 = time.perf_counter()
            row = self.train_epoch()
            if st.stop_requested:
                log.warning("stop requested (SIGTERM): saving %s at epoch %d, batch %d and exiting",
                            s.run_dir / "last.pt", st.epoch + 1, st.batch_in_epoch)
                self.checkpoint(s.run_dir / "last.pt")
                return st
            st.epoch += 1
            st.batch_in_epoch = 0
            self._post(st.epoch * len(s.train_loader) - 1, 2, "the epoch's evaluation and checkpoint")
            final = st.epoch == s.opts.epochs
            self._sync_ema_buffers()
            fitness, metrics = None, {}
            if s.evaluate_fn is not None and (st.epoch % s.opts.eval_interval == 0 or final):
                fitness, metrics = s.evaluate_fn(s.ema.module if s.ema is not None else s.model)
            elif s.evaluate_fn is None:  # no evaluator: a loss-based fitness keeps best.pt meaningful
                fitness = -(row["box"] + row["obj"] + row["cls"])
            row.update(metrics, epoch=st.epoch, time=time.perf_counter() - t0, fitness=fitness)
            improved = fitness is not None and fitness > st.best_fitness
            row["best"] = improved  # best.pt is this epoch's (the plots of its evaluation follow)
            if improved:
                st.best_fitness = fitness
            self.checkpoint(s.run_dir / "last.pt", best=improved)
            if self.on_epoch_end is not None and dist.is_main_process():
                self._post(st.epoch * len(s.train_loader) - 1, 3, "rank 0's results and plots of the epoch")
                self.on_epoch_end(row)
        return st
