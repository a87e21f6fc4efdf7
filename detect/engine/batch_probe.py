"""`--batch-size auto`: the largest per-process batch whose training step fits the GPU with headroom.

A step (forward under the run's autocast, loss, backward) is tried on generated images at the training size:
the batch doubles from 8 while the peak memory stays under `HEADROOM` of the device, then the gap to the first
batch that did not fit is bisected in multiples of 8. Ranks take the smallest of their answers. On the CPU there
is no memory limit to find, so it is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from detect.darknet.load import uses_channels_last
from detect.darknet.model import Darknet
from detect.engine.config import Hyp
from detect.engine.loss import YoloLoss
from detect.engine.options import TrainOptions, training_size
from detect.runtime import dist
from detect.runtime.precision import amp_dtype, autocast

log = logging.getLogger(__name__)

HEADROOM = 0.85  # of the device's memory: the loader's pinned batches, fragmentation, eval and EMA copies
START, LIMIT, QUANTUM = 8, 1024, 8


def largest_fitting(peak_fraction: Callable[[int], float | None], start: int = START, limit: int = LIMIT,
                    headroom: float = HEADROOM, quantum: int = QUANTUM) -> tuple[int | None, dict[int, float | None]]:
    """(largest batch whose peak fraction is <= headroom, or None when `start` does not fit; every batch tried ->
    its peak fraction, None where it ran out of memory). `peak_fraction(b)`: peak memory of a step of b over the
    device's, or None on out-of-memory."""
    tried: dict[int, float | None] = {}

    def ok(batch: int) -> bool:
        tried[batch] = peak_fraction(batch)
        return tried[batch] is not None and tried[batch] <= headroom

    if not ok(start):
        return None, tried
    good, bad = start, None
    while good * 2 <= limit:
        if not ok(good * 2):
            bad = good * 2
            break
        good *= 2
    top = limit // quantum * quantum
    if bad is None and top > good:  # the doubling stopped at the limit: the limit itself may fit
        if ok(top):
            good = top
        else:
            bad = top
    while bad is not None and bad - good > quantum:
        middle = (good + bad) // 2 // quantum * quantum
        if ok(middle):
            good = middle
        else:
            bad = middle
    return good, tried


def cuda_peak_fraction(model, loss, img_size: int, amp_dtype, channels_last: bool) -> Callable[[int], float | None]:
    """A probe for `largest_fitting`: one training step of `model` (train mode, on its CUDA device) at a batch."""
    device = next(model.parameters()).device
    total = torch.cuda.get_device_properties(device).total_memory

    def probe(batch: int) -> float | None:
        model.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        try:
            x = torch.rand(batch, 3, img_size, img_size, device=device)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            # two objects per image, mid-sized: the assignment's cost is small beside the activations
            image = torch.arange(batch, dtype=torch.float32).repeat_interleave(2)
            boxes = torch.tensor([[0.3, 0.3, 0.2, 0.3], [0.6, 0.7, 0.4, 0.2]]).repeat(batch, 1)
            targets = torch.cat([image[:, None], torch.zeros(2 * batch, 1), boxes], 1)
            with autocast(device, amp_dtype):
                raw = model(x)
            total_loss, _ = loss(raw, targets, (img_size, img_size))
            total_loss.backward()
            torch.cuda.synchronize(device)
            return torch.cuda.max_memory_allocated(device) / total
        except torch.OutOfMemoryError:
            return None
        finally:
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()

    return probe


def auto_batch_size(model, loss, img_size: int, device: torch.device, amp_dtype, channels_last: bool,
                    images_per_rank: int | None = None) -> int:
    """The per-process batch of `--batch-size auto` on `device` (the same on every rank: the smallest), logged.
    `images_per_rank` caps it: a batch larger than a rank's share of the split could never be filled."""
    if device.type != "cuda":
        raise ValueError(f"--batch-size auto probes the GPU's memory; on the {device.type} give a number "
                         f"(e.g. --batch-size 8)")
    was_training = model.training
    model.train()
    limit = LIMIT if images_per_rank is None else max(START, min(LIMIT, images_per_rank))
    batch, tried = largest_fitting(cuda_peak_fraction(model, loss, img_size, amp_dtype, channels_last), limit=limit)
    model.train(was_training)
    if batch is None:
        raise ValueError(f"--batch-size auto: not even {START} images of {img_size}x{img_size} fit on {device} "
                         f"with {HEADROOM:.0%} headroom; lower --img-size or give a smaller --batch-size")
    chosen = min(dist.all_gather_object(batch)) if dist.is_initialized() else batch
    shown = ", ".join(f"{b}: {'out of memory' if f is None else f'{f:.0%}'}" for b, f in sorted(tried.items()))
    capped = f"; the split's {images_per_rank} images per process cap it" if limit < LIMIT else ""
    log.info("--batch-size auto: %d per process on %s at %d px (peak memory per batch tried: %s; at most %.0f%% "
             "of the device%s)", chosen, device, img_size, shown, 100 * HEADROOM, capped)
    return chosen


def probe_batch_size(opts: TrainOptions, hyp: Hyp, ctx: dist.DistContext, cfg_source, train_source) -> int:
    """--batch-size auto: a throw-away copy of the model (weights do not change its memory) probed on the device."""
    model = Darknet(cfg_source, num_classes=len(train_source.names)).to(ctx.device)
    channels_last = uses_channels_last(ctx.device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    try:
        return auto_batch_size(model, YoloLoss.for_model(model, hyp.loss), training_size(model, opts), ctx.device,
                               amp_dtype(opts.amp, ctx.device), channels_last,
                               images_per_rank=-(-len(train_source.records) // ctx.world_size))
    finally:
        del model
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
