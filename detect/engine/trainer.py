"""The training loop: DDP step with accumulation and no_sync, AMP, clipping, EMA, schedule, the epoch's
evaluation and checkpoint.

`Trainer.fit()` runs the epochs; everything it needs is built by `detect.engine.setup` and passed in
(`TrainSetup`); the checkpoint it writes and restores is `detect.engine.trainer_state`'s.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

import torch

from detect.data.augmentation.device_augment import DeviceBatch
from detect.data.augmentation.device_paint import paint_batch
from detect.engine.checkpoint import rng_state, set_rng_state
from detect.engine.progress import EpochProgress
from detect.engine.trainer_state import (
    NonFiniteLossError,
    TrainSetup,
    TrainState,
    restore_checkpoint,
    sync_ema_buffers,
    write_checkpoint,
)
from detect.ops.preprocess import to_model_input
from detect.runtime import dist
from detect.runtime.precision import autocast

log = logging.getLogger(__name__)


class Trainer:
    def __init__(self, setup: TrainSetup, state: TrainState | None = None, on_epoch_end=None, on_batch=None):
        self.setup = setup
        self.state = state or TrainState()
        self.on_epoch_end = on_epoch_end  # callable(epoch, row dict) on rank 0 (results.csv)
        self.on_batch = on_batch  # callable(epoch, index, images, targets, paths) on rank 0 (batch mosaics)
        self.stop_signal = False  # set by the SIGTERM and Ctrl-C handlers (detect.train)
        self.stop_reason = ""  # what asked this rank, for the log
        self._pending: torch.Tensor | None = None  # the agreed flags of the last micro-batch, not read yet
        self._window_bad: torch.Tensor | None = None  # non-finite micro-batches of the open window (device)

    # ---- one micro-batch -------------------------------------------------------------------------------------
    def _prepare(self, images, micro_index: int) -> torch.Tensor:
        """The micro-batch as the model's input: a host batch of uint8 images, or a DeviceBatch painted here."""
        if isinstance(images, DeviceBatch):
            x = paint_batch(images, self.setup.ctx.device)
        else:
            x = to_model_input(images, self.setup.ctx.device)
        if self.setup.multi_scale is not None:
            x = self.setup.multi_scale.resize(x, self.setup.multi_scale.size_for(micro_index))
        return x.contiguous(memory_format=torch.channels_last) if self.setup.channels_last else x

    def _post(self, micro_index: int, phase: int, what: str) -> None:
        """Tell the group this rank reached `what` of micro-batch `micro_index` (phase 0, 1), the end of the
        epoch whose last micro-batch it is (phase 2) or rank 0's own work after it (phase 3: results and plots,
        which the others do not wait for until the next forward), so a rank that hangs can be named
        (detect.runtime.liveness)."""
        dist.post_progress(self.setup.ctx, 4 * micro_index + phase, f"micro-batch {micro_index}, {what}")

    def _flags(self, loss: torch.Tensor) -> torch.Tensor:
        """[any rank's loss non-finite, any rank asked to stop] on the device: one all-reduce, read later
        (`_read_flags`), so every rank takes the same branch without the host waiting for the step."""
        stop = torch.full((), float(self.stop_signal), device=loss.device)
        return dist.all_reduce_sum(torch.stack([(~torch.isfinite(loss.detach())).float(), stop]))

    def _micro_step(self, images, targets, micro_index: int, sync: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward + backward of one micro-batch, queued without a host synchronisation: (loss parts, zero when
        non-finite; the agreed flags of `_flags`). A non-finite loss still runs its backward; its window's
        optimiser step is then skipped on the device (`_optimizer_step`)."""
        self._post(micro_index, 0, "before its forward")  # DDP's forward broadcasts buffers: a collective
        x = self._prepare(images, micro_index)
        no_sync = getattr(self.setup.ddp_model, "no_sync", None)
        sync_ctx = no_sync() if (no_sync is not None and not sync) else contextlib.nullcontext()
        with sync_ctx:
            with autocast(self.setup.ctx.device, self.setup.amp_dtype):
                raw = self.setup.ddp_model(x)
            loss, parts = self.setup.loss(raw, targets, (x.shape[2], x.shape[3]))
            self._post(micro_index, 1, "before the loss agreement")
            flags = self._flags(loss)
            # gradient of one optimiser step = nbs x the mean over its micro-batches (world-size independent)
            self.setup.scaler.scale(loss * (self.setup.opts.nbs / self.setup.accumulate)).backward()
        self._window_bad = flags[0] if self._window_bad is None else self._window_bad + flags[0]
        return torch.where(flags[0] > 0, torch.zeros_like(parts), parts), flags

    def _optimizer_step(self) -> float:
        s = self.setup
        lr = s.schedule.apply(s.optimizer, self.state.step)
        bad, self._window_bad = self._window_bad, None
        if not any(p.grad is not None for g in s.optimizer.param_groups for p in g["params"]):
            self.state.step += 1  # nothing trained in this window (e.g. every layer frozen): the schedule moves on
            return lr
        s.scaler.unscale_(s.optimizer)
        clip = s.hyp.optim.grad_clip
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(s.model.parameters(), clip)
        # A window with a non-finite micro-batch is skipped on the device: GradScaler finds its inf/NaN gradients
        # (fp16); otherwise the fused optimiser takes the agreed flag as its found_inf and leaves every tensor.
        skip_on_device = not s.scaler.is_enabled() and bad is not None
        if skip_on_device:
            s.optimizer.found_inf = (bad > 0).float()
        try:
            s.scaler.step(s.optimizer)
        finally:
            if skip_on_device:
                del s.optimizer.found_inf
        s.scaler.update()
        s.optimizer.zero_grad(set_to_none=True)
        if s.ema is not None:
            s.ema.update(s.model)
        self.state.step += 1
        return lr

    def _read_flags(self, flags: torch.Tensor | None) -> None:
        """The agreed flags of a micro-batch queued earlier: count a non-finite loss, note a stop request."""
        if flags is None:
            return
        nonfinite, stop = (bool(v > 0) for v in flags.tolist())
        st = self.state
        st.stop_requested |= stop
        if not nonfinite:
            st.nonfinite_run = 0
            return
        st.nonfinite_total += 1
        st.nonfinite_run += 1
        log.warning("non-finite loss: its optimiser step skipped (%d micro-batches in a row, %d in total)",
                    st.nonfinite_run, st.nonfinite_total)
        limit = self.setup.hyp.optim.max_nonfinite
        if st.nonfinite_run >= limit:
            raise NonFiniteLossError(f"the loss was non-finite for {limit} micro-batches in a row (epoch "
                                     f"{st.epoch}, step {st.step}): lower lr0 in the hyp file, check the labels, "
                                     f"or try --amp off")

    def flush(self) -> None:
        """Read the flags still pending (before a checkpoint, at the end of an epoch)."""
        pending, self._pending = self._pending, None
        self._read_flags(pending)

    def train_step(self, images, targets, micro_index: int, last_of_window: bool):
        """One micro-batch, and the optimiser step when it closes an accumulation window.
        Returns (loss parts [box, obj, cls] on the device, zero when non-finite; lr of the step or None).
        The flags of the micro-batch before are read once this one is queued, so the host never waits for the
        step it has just queued (a GPU stays busy)."""
        parts, flags = self._micro_step(images, targets, micro_index, sync=last_of_window)
        lr = self._optimizer_step() if last_of_window else None
        previous, self._pending = self._pending, flags
        self._read_flags(previous)
        return parts, lr

    # ---- one epoch -------------------------------------------------------------------------------------------
    def _set_train_mode(self) -> None:
        self.setup.model.train()
        for bn in self.setup.frozen_bn:  # frozen layers keep their BatchNorm statistics
            bn.eval()

    def train_epoch(self) -> dict:
        s, st = self.setup, self.state
        epoch = st.epoch
        if st.epoch_rng is not None and st.batch_in_epoch:
            set_rng_state(st.epoch_rng)  # replay the interrupted epoch's random stream
        # process RNG states (augmentation is seeded per sample by the loader and needs no state)
        st.epoch_rng = rng_state()
        self._set_train_mode()
        n_batches = len(s.train_loader)  # --max-batches is applied by the loader
        skip = st.batch_in_epoch
        # loss sums stay on the device: reading them every step would make the host wait for the GPU; a resumed
        # epoch goes on from the sums of its batches before the stop (the checkpoint carries them)
        partial = (st.epoch_partial or {}) if skip else {}
        sums = torch.tensor(partial.get("sums", [0.0, 0.0, 0.0]), device=s.ctx.device)
        counted, images_seen = int(partial.get("counted", 0)), int(partial.get("images", 0))
        nonfinite_before = st.nonfinite_total
        lr = s.optimizer.param_groups[0]["lr"]
        bar = EpochProgress(s.progress and s.ctx.is_main, n_batches, epoch, s.opts.epochs, skip, s.ctx.device)
        start = time.perf_counter() - float(partial.get("seconds", 0.0))
        for i, (images, targets, paths) in enumerate(s.train_loader.epoch(epoch, skip), start=skip):
            if self.on_batch is not None:
                self.on_batch(epoch, i, images, targets, paths)
            last_of_window = (i + 1) % s.accumulate == 0 or i == n_batches - 1
            parts, step_lr = self.train_step(images, targets, epoch * n_batches + i, last_of_window)
            sums += parts
            counted += 1
            images_seen += len(images)
            if last_of_window:
                lr = step_lr
                st.batch_in_epoch = i + 1
                if st.stop_requested:
                    self.flush()
                    break
            bar.update(sums, counted, lr, images_seen * s.ctx.world_size, start)
        self.flush()  # a stop seen only now keeps the finished epoch's sums for the resume (epoch_partial)
        # a micro-batch whose loss was not finite added zeros: the means are over the finite ones
        counted -= st.nonfinite_total - nonfinite_before
        if st.stop_requested:
            st.epoch_partial = {"sums": sums.tolist(), "counted": counted, "images": images_seen,
                                "seconds": time.perf_counter() - start}
        bar.close()
        mean = dist.all_reduce_mean(sums / max(counted, 1)).cpu()
        return {"box": float(mean[0]), "obj": float(mean[1]), "cls": float(mean[2]), "lr": lr,
                "img_s": images_seen * s.ctx.world_size / max(time.perf_counter() - start, 1e-9)}

    # ---- checkpoints ---------------------------------------------------------------------------------------
    def checkpoint(self, path: Path, best: bool = False, keep: Path | None = None) -> None:
        """Collective: every rank's RNG state to rank 0, which writes `path` (and best.pt when `best`, a lean copy
        at `keep`); `CheckpointWriteError` on every rank when it could not (trainer_state.write_checkpoint)."""
        write_checkpoint(self.setup, self.state, path, best, keep)

    def restore(self, ckpt: dict) -> None:
        """Load a resumable checkpoint into the bare model, EMA, optimiser, scaler and loop state."""
        restore_checkpoint(self.setup, self.state, ckpt)

    # ---- the run ---------------------------------------------------------------------------------------------
    def fit(self) -> TrainState:
        s, st = self.setup, self.state
        while st.epoch < s.opts.epochs:
            t0 = time.perf_counter()
            row = self.train_epoch()
            if st.stop_requested:
                st.stop_reason = self.stop_reason or "asked on another rank"
                log.warning("stop requested (%s): saving %s at epoch %d, batch %d and exiting", st.stop_reason,
                            s.run_dir / "last.pt", st.epoch + 1, st.batch_in_epoch)
                self.checkpoint(s.run_dir / "last.pt")
                return st
            st.epoch += 1
            st.batch_in_epoch = 0
            self._post(st.epoch * len(s.train_loader) - 1, 2, "the epoch's evaluation and checkpoint")
            final = st.epoch == s.opts.epochs
            sync_ema_buffers(s)
            fitness, metrics = None, {}
            if s.evaluate_fn is not None and (st.epoch % s.opts.eval_interval == 0 or final):
                fitness, metrics = self._evaluate()
            elif s.evaluate_fn is None:  # no evaluator: a loss-based fitness keeps best.pt meaningful
                fitness = -(row["box"] + row["obj"] + row["cls"])
            row.update(metrics, epoch=st.epoch, time=time.perf_counter() - t0, fitness=fitness)
            improved = fitness is not None and fitness > st.best_fitness
            row["best"] = improved  # best.pt is this epoch's (the plots of its evaluation follow)
            if improved:
                st.best_fitness = fitness
            row["note"] = self._patience(improved, fitness is not None, final)
            period = s.opts.save_period
            keep = s.run_dir / f"epoch{st.epoch}.pt" if period and st.epoch % period == 0 else None
            self.checkpoint(s.run_dir / "last.pt", best=improved, keep=keep)
            if self.on_epoch_end is not None and dist.is_main_process():
                self._post(st.epoch * len(s.train_loader) - 1, 3, "rank 0's results and plots of the epoch")
                self.on_epoch_end(row)
            if st.stopped_early:
                st.stop_reason = row["note"]  # the note the run loggers end with
                log.warning("%s; best.pt holds the best weights", row["note"])
                break
        return st

    def _evaluate(self):
        """The epoch's evaluation; when it fails, the trained epoch is still saved in last.pt (every rank's
        evaluation fails together, so every rank takes part in that collective write) before the error goes on."""
        s = self.setup
        try:
            return s.evaluate_fn(s.ema.module if s.ema is not None else s.model)
        except Exception as e:
            last = s.run_dir / "last.pt"
            log.error("the evaluation after epoch %d failed (%s: %s); saving the trained epoch in %s", self.state.epoch,
                      type(e).__name__, e, last)
            self.checkpoint(last)
            raise

    def _patience(self, improved: bool, evaluated: bool, final: bool) -> str:
        """--patience: count the evaluations without improvement; stop once there are that many (the fitness
        is the same on every rank, and rank 0's decision is broadcast, so every rank stops at this epoch)."""
        st, patience = self.state, self.setup.opts.patience
        if patience is None or not evaluated:
            return ""
        st.stale_evaluations = 0 if improved else st.stale_evaluations + 1
        stop = dist.broadcast_object(st.stale_evaluations >= patience and not final)
        if not stop:
            return ""
        st.stopped_early = True
        return (f"early stop after epoch {st.epoch} of {self.setup.opts.epochs}: the fitness has not improved "
                f"for {st.stale_evaluations} evaluations (--patience {patience}; best {st.best_fitness:.4f})")
