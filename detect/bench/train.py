"""`python -m detect.bench train --cfg cfg/yolov3-tiny.cfg --img 416 --batch 16`: training-step throughput.

For each cfg: images/s of full training steps (forward, loss, backward, SGD step) on synthetic tensors (data
excluded) and through the real training loader (data included), and peak memory. On CUDA every combination of
AMP and channels_last is measured. One process; figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import resource
import time
from pathlib import Path

import torch

from detect.darknet.model import Darknet
from detect.loss import YoloLoss
from detect.optim import build_optimizer
from detect.options import DEFAULT_DATA, DEFAULT_HYP, load_hyp


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m detect.bench train", description=__doc__.split("\n\n")[0])
    p.add_argument("--cfg", nargs="+", required=True, help="one or more Darknet cfgs")
    p.add_argument("--img", type=int, default=416, help="input size")
    p.add_argument("--batch", type=int, default=16, help="images per step")
    p.add_argument("--iters", type=int, default=3, help="timed steps (keep few on the CPU)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="dataset spec for the data-included figure")
    p.add_argument("--workers", type=int, default=2, help="loader workers for the data-included figure")
    p.add_argument("--no-data", action="store_true", help="skip the data-included figure")
    return p


def synthetic_batch(batch: int, img: int, num_classes: int, gen: torch.Generator):
    images = torch.randint(0, 256, (batch, 3, img, img), dtype=torch.uint8, generator=gen)
    n = 4 * batch  # four boxes per image
    targets = torch.cat([torch.arange(batch).repeat_interleave(4)[:, None].float(),
                         torch.randint(0, num_classes, (n, 1), generator=gen).float(),
                         torch.rand(n, 2, generator=gen) * 0.8 + 0.1, torch.rand(n, 2, generator=gen) * 0.3 + 0.02],
                        1)
    return images, targets


class StepRunner:
    """One training step of `model` (SGD, YOLO loss, optional AMP and channels_last)."""

    def __init__(self, cfg: str, num_classes: int, device: torch.device, amp: bool, channels_last: bool, hyp: dict):
        self.model = Darknet(cfg, num_classes=num_classes).to(device).train()
        self.device, self.channels_last = device, channels_last
        if channels_last:
            self.model.to(memory_format=torch.channels_last)
        self.dtype = (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16) if amp else None
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.dtype == torch.float16)
        self.loss = YoloLoss.for_model(self.model, hyp)
        self.optimizer = build_optimizer(self.model, "sgd", 0.001, 0.9, 5e-4)

    def step(self, images: torch.Tensor, targets: torch.Tensor) -> None:
        x = images.to(self.device, non_blocking=True).float().div_(255)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        ctx = torch.autocast(self.device.type, dtype=self.dtype) if self.dtype else contextlib.nullcontext()
        with ctx:
            raw = self.model(x)
        loss, _ = self.loss(raw, targets, (x.shape[2], x.shape[3]))
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(runner: StepRunner, batches, warmup: int, iters: int) -> float:
    """Images per second over `iters` steps after `warmup` steps; `batches` yields (images, targets)."""
    it = iter(batches)
    for _ in range(warmup):
        runner.step(*next(it)[:2])
    _sync(runner.device)
    start, images = time.perf_counter(), 0
    for _ in range(iters):
        imgs, targets = next(it)[:2]
        runner.step(imgs, targets)
        images += imgs.shape[0]
    _sync(runner.device)
    return images / (time.perf_counter() - start)


def peak_memory(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB (CUDA)"
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (process RSS)"


def _data_batches(args, hyp, stride):
    from detect.data.loader import build_train_loader
    from detect.data.spec import load_data_spec

    loader = build_train_loader(load_data_spec(args.data), args.img, args.batch, hyp, args.workers, stride, 0, 1, 0)
    return itertools.chain.from_iterable(loader.epoch(e) for e in itertools.count())


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    hyp = load_hyp(DEFAULT_HYP)
    modes = list(itertools.product((False, True), (False, True))) if device.type == "cuda" else [(False, False)]
    num_classes = 4  # the synthetic dataset's classes, so the data-included run uses the same heads
    print(f"device {device}, img {args.img}, batch {args.batch}, {args.iters} timed steps after {args.warmup}")
    for cfg in args.cfg:
        for amp, channels_last in modes:
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            runner = StepRunner(cfg, num_classes, device, amp, channels_last, hyp)
            gen = torch.Generator().manual_seed(0)
            fixed = [synthetic_batch(args.batch, args.img, num_classes, gen) for _ in range(2)]
            no_data = timed(runner, itertools.cycle(fixed), args.warmup, args.iters)
            line = (f"{Path(cfg).name:24s} amp={'on ' if amp else 'off'} channels_last={'on ' if channels_last else 'off'}"
                    f"  data excluded {no_data:7.1f} img/s")
            if not args.no_data:
                with_data = timed(runner, _data_batches(args, hyp, runner.model.max_stride), args.warmup, args.iters)
                line += f"  data included {with_data:7.1f} img/s"
            print(f"{line}  peak memory {peak_memory(device)}", flush=True)
            del runner
    return 0
