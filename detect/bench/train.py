"""`python -m detect.bench train --cfg cfg/yolov3-spp.cfg --img-size 416 640 --batch-size 64 max`: throughput.

Each row is the real training step of `detect.engine.trainer.Trainer` (forward under autocast, loss, backward,
clipping, fused SGD step, EMA) built by `detect.engine.setup.build_setup` exactly as `train.py` builds it, on one
process. Per cfg, input size and batch: images/s with the data excluded (two real batches, reused) and
included (the training loader with its workers, one column per `--loaders` variant: images decoded every
step or kept in RAM, augmented by the workers or on the device), peak memory, the model's forward GFLOPs per
image and, on CUDA, the fraction of the measured bf16 matrix-multiply peak the step reaches
(3 x forward FLOPs x images/s / peak: the backward pass costs about twice the forward).
`--batch-size max` doubles the batch from 64 until the next would not fit. `--profile N` adds, per row, the
split of a step's time from N steps under torch.profiler (detect.bench.step_split). Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import copy
import gc
import itertools
import os
import resource
import tempfile
import time
from pathlib import Path

import torch

from detect.bench.step_split import profile_steps
from detect.bench.timing import measure_matmul_tflops
from detect.bench.train_report import format_header, format_row, format_splits
from detect.data.loader import PREFETCH_FACTOR
from detect.engine.config import Hyp
from detect.engine.options import TrainOptions
from detect.runtime import dist
from detect.runtime.assets import asset
from detect.runtime.precision import cpu_has_native_bf16

VARIANT_HELP = ("precision (fp32, bf16, fp16), optionally -nchw (no channels_last) and -compile, e.g. "
                "bf16 bf16-compile fp32-nchw")
# the data variants of the data-included figure: name -> (TrainOptions.cache, TrainOptions.augment_on)
LOADERS = {"decode": (None, "host"), "ram": ("ram", "host"), "ram-device": ("ram", "device"),
           "decode-device": (None, "device")}


def parse_args(argv) -> argparse.Namespace:
    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(prog="python -m detect.bench train", description=__doc__.split("\n\n")[0])
    p.add_argument("--cfg", nargs="+", default=[str(asset("cfg", "yolo-mini.cfg")), str(asset("cfg", "yolov3-tiny.cfg"))],
                   help="one or more Darknet cfgs (default: the shipped yolo-mini.cfg and yolov3-tiny.cfg)")
    p.add_argument("--img-size", "--img", dest="img", type=int, nargs="+", default=[416], help="input sizes")
    p.add_argument("--batch-size", "--batch", dest="batch", nargs="+", default=["16"],
                   help="batch sizes per step, or max (largest that fits)")
    # on the CPU: float32, bf16 (where the CPU has it natively: the default of training there) and bf16 compiled
    cpu_variants = ["fp32", "bf16", "bf16-compile"] if cpu_has_native_bf16() else ["fp32", "fp32-compile"]
    p.add_argument("--variants", nargs="+", default=["bf16"] if cuda else cpu_variants, help=VARIANT_HELP)
    p.add_argument("--iters", type=int, default=20 if cuda else 3, help="timed steps")
    p.add_argument("--warmup", type=int, default=5 if cuda else 1,
                   help="untimed steps first (compilation, cuDNN autotuning)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--data", default="data/coco-tiny.yaml" if Path("data/coco-tiny.yaml").exists() else None,
                   help="dataset spec whose train split feeds the steps")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1) if cuda else 2,
                   help="loader workers for the data-included figure")
    p.add_argument("--loaders", nargs="+", default=["decode", "ram", "ram-device"] if cuda else ["ram"],
                   help="data variants of the data-included figure, one column each: decode (every step), ram "
                        "(decoded once, kept in RAM), ram-device and decode-device (augmented on the device); "
                        "NAME:W runs that loader with W workers instead of --workers")
    p.add_argument("--no-data", action="store_true", help="skip the data-included figures")
    p.add_argument("--profile", type=int, default=0 if cuda else 2, metavar="N",
                   help="after each row's figures, N steps with the data excluded and N with the first loader "
                        "under torch.profiler: the split of a step's time (0: off; default on the CPU: 2)")
    p.add_argument("--cache-dir", default=None,
                   help="generated data, label and image caches (default: $DETECT_CACHE or ~/.cache/detect)")
    args = p.parse_args(argv)
    for b in args.batch:
        if b != "max" and not (b.isdigit() and int(b) > 0):
            p.error(f"--batch-size takes positive integers or max, got {b!r}")
    for v in args.variants:
        parse_variant(v, p.error)
    for name in args.loaders:
        kind, _, workers = name.partition(":")
        if kind not in LOADERS or (workers and not workers.isdigit()):
            p.error(f"--loaders: unknown loader {name!r}; choose from {', '.join(LOADERS)}, each optionally with "
                    f":WORKERS (e.g. ram-device:6)")
    args.loaders = list(dict.fromkeys(args.loaders))  # a name given twice is one column
    if args.profile < 0:
        p.error(f"--profile takes a number of steps (0: off), got {args.profile}")
    if args.data is None:
        p.error("--data is required (no data/coco-tiny.yaml in the current folder)")
    return args


def parse_variant(text: str, error=None) -> dict:
    """'bf16-nchw-compile' -> {'amp': 'bf16', 'channels_last': False, 'compile': True}."""
    precision, *flags = text.split("-")
    amp = {"fp32": "off", "bf16": "bf16", "fp16": "fp16"}.get(precision)
    if amp is None or not set(flags) <= {"nchw", "compile"}:
        message = f"--variants: {text!r} is not {VARIANT_HELP}"
        if error is None:
            raise ValueError(message)
        error(message)
    return {"amp": amp, "channels_last": "nchw" not in flags, "compile": "compile" in flags}


def repeated(source, copies: int):
    """The split with its images listed `copies` times, so a large batch has several batches to draw from."""
    if copies <= 1:
        return source
    out = copy.copy(source)
    out.records = list(source.records) * copies
    return out


class Bench:
    """A Trainer built as train.py builds it, stepped on reused batches or on its own loader (`loader`: a
    name of LOADERS)."""

    def __init__(self, args, cfg: str, img: int, batch: int, variant: dict, sources, run_dir: Path, loader: str):
        from detect.engine.setup import build_setup
        from detect.engine.trainer import Trainer

        cache, augment_on = LOADERS[loader_kind(loader)]
        opts = TrainOptions(cfg=cfg, data=args.data, img_size=img, batch_size=batch, nbs=batch, epochs=10_000,
                            workers=loader_workers(loader, args.workers), device=args.device, amp=variant["amp"],
                            compile=variant["compile"], project=str(run_dir), exist_ok=True,
                            cache_dir=args.cache_dir, cache=cache, augment_on=augment_on)
        self.ctx = dist.init_distributed(args.device)
        train, val = sources
        copies = -(-4 * batch // len(train.records))  # at least four batches per epoch
        setup = build_setup(opts, Hyp(), self.ctx, run_dir, cfg, None, (repeated(train, copies), val))
        setup.progress, setup.evaluate_fn = False, None
        if not variant["channels_last"]:
            setup.model.to(memory_format=torch.contiguous_format)
            setup.channels_last = False
        self.trainer = Trainer(setup)
        self.trainer._set_train_mode()
        self.step_index = 0

    def step(self, images, targets) -> None:
        self.trainer.train_step(images, targets, self.step_index, last_of_window=True)
        self.step_index += 1

    def sync(self) -> None:
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)

    def timed(self, batches, warmup: int, iters: int) -> float:
        """Images per second over `iters` steps after `warmup` steps; `batches` yields loader batches."""
        it = iter(batches)
        for _ in range(warmup):
            self.step(*next(it)[:2])
        self.sync()
        start, images = time.perf_counter(), 0
        for _ in range(iters):
            imgs, targets = next(it)[:2]
            self.step(imgs, targets)
            images += len(imgs)  # a device-augmented batch is not a tensor, but knows its length
        self.sync()
        return images / (time.perf_counter() - start)

    def loader_batches(self):
        loader = self.trainer.setup.train_loader
        return itertools.chain.from_iterable(loader.epoch(e) for e in itertools.count())

    def close(self) -> None:
        self.trainer.setup.train_loader.close()


def peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def loader_kind(name: str) -> str:
    """'ram-device:6' -> 'ram-device'."""
    return name.partition(":")[0]


def loader_workers(name: str, default: int) -> int:
    """'ram-device:6' -> 6 workers; a name without a count runs --workers."""
    count = name.partition(":")[2]
    return int(count) if count else default


def free_memory(device: torch.device) -> None:
    """Give a dropped bench's memory back before the next is built."""
    gc.collect()  # a reference cycle in the trainer would hold its model's device memory until a collection
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_one(args, cfg, img, batch, variant, sources, run_dir) -> dict:
    """Of one configuration: data-excluded images/s (once), data-included images/s per loader, peak memory and
    with --profile the splits of a step (data excluded, data of the first loader)."""
    device = dist.resolve_device(args.device, 0)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    loaders = [] if args.no_data else args.loaders
    # reused batches must be plain uint8 tensors: a host-augmenting loader's (the first loader's if it is one)
    host = loaders[0] if loaders and LOADERS[loader_kind(loaders[0])][1] == "host" else "decode"
    reuse = bool(loaders) and loaders[0] == host
    row = {"included": {}, "splits": {}}
    bench = Bench(args, cfg, img, batch, variant, sources, run_dir, host)
    try:
        stream = bench.loader_batches()
        fixed = [next(stream), next(stream)]
        bench.close()
        row["excluded"] = bench.timed(itertools.cycle(fixed), args.warmup, args.iters)
        if args.profile and not reuse:
            row["splits"]["excluded"] = profile_steps(bench, itertools.cycle(fixed), args.profile)
        for i, name in enumerate(loaders):
            if i or not reuse:
                bench.close()
                bench = stream = None  # the stream holds the old loader's dataset (and its RAM cache)
                free_memory(device)
                bench = Bench(args, cfg, img, batch, variant, sources, run_dir, name)
            # the loader buffers workers x prefetch batches: step past them so the figure is its steady rate
            stream = bench.loader_batches()
            buffered = loader_workers(name, args.workers) * PREFETCH_FACTOR
            row["included"][name] = bench.timed(stream, args.warmup + buffered, args.iters)
            if args.profile:
                row["splits"][name] = profile_steps(bench, stream, args.profile)
                if reuse:
                    bench.close()  # its workers would compete with the data-excluded steps for the cores
                    row["splits"]["excluded"] = profile_steps(bench, itertools.cycle(fixed), args.profile)
        row["memory"] = peak_memory_gib(device)
        return row
    finally:
        if bench is not None:
            bench.close()
        bench = None
        free_memory(device)


def fits(args, cfg, img, batch, variant, sources, run_dir) -> bool:
    """Whether two data-excluded steps of `batch` run without running out of device memory."""
    quick = argparse.Namespace(**{**vars(args), "warmup": 1, "iters": 1, "no_data": True, "profile": 0})
    try:
        run_one(quick, cfg, img, batch, variant, sources, run_dir)
        return True
    except torch.OutOfMemoryError:
        return False


def largest_batch(args, cfg, img, variant, sources, run_dir, start: int = 64) -> int | None:
    """The largest power-of-two multiple of `start` that fits (None when not even `start` fits)."""
    best, batch = None, start
    while fits(args, cfg, img, batch, variant, sources, run_dir):
        best, batch = batch, batch * 2
    return best


def main(argv=None) -> int:
    from detect.bench.model import count_gflops
    from detect.darknet.model import Darknet
    from detect.engine.setup import open_sources
    from detect.runtime.log import setup_logging

    args = parse_args(argv)
    setup_logging(0, 1, level="WARNING")
    device = dist.resolve_device(args.device, 0)
    sources = open_sources(TrainOptions(data=args.data, cache_dir=args.cache_dir))
    peak = measure_matmul_tflops(device) if device.type == "cuda" else None
    print(f"device {torch.cuda.get_device_name(device) if peak else 'cpu'}, data {args.data} "
          f"({len(sources[0].records)} train images, repeated to fill large batches), {args.workers} loader "
          f"workers, {args.iters} timed steps after {args.warmup}" + (f"; bf16 matmul peak {peak:.0f} TFLOP/s "
          "(8192^3, median of 20)" if peak else ""))
    print(format_header([] if args.no_data else args.loaders, peak), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for cfg, img in itertools.product(args.cfg, args.img):
            gflops = count_gflops(Darknet(cfg, img_size=img, num_classes=len(sources[0].names)), img)
            for variant_name, batch_arg in itertools.product(args.variants, args.batch):
                variant = parse_variant(variant_name)
                batch = (largest_batch(args, cfg, img, variant, sources, Path(tmp)) if batch_arg == "max"
                         else int(batch_arg))
                if batch is None:
                    print(f"{Path(cfg).name:18s} {img:5d} {'-':>6s} {variant_name:16s} batch 64 does not fit")
                    continue
                try:
                    row = run_one(args, cfg, img, batch, variant, sources, Path(tmp))
                except torch.OutOfMemoryError:
                    print(f"{Path(cfg).name:18s} {img:5d} {batch:6d} {variant_name:16s} out of memory", flush=True)
                    continue
                print("\n".join([format_row(cfg, img, batch, variant_name, row, gflops, peak),
                                 *format_splits(row)]), flush=True)
    print(f"torch {torch.__version__}")
    return 0
