"""COCO at full size on this machine: `python -m benchmarks scale` (figures, not pass/fail). The evaluation at
COCO's size has its own: `python -m benchmarks coco_eval`.

Generates a COCO-sized split (benchmarks.scale_data: 118,287 train and 5,000 val images, COCO's box
counts and statistics, small images) once under `--workdir`, then runs `--processes` spawned gloo processes
(one process group, the environment torchrun gives) through the stages a COCO job pays for that do not
depend on the model:
- cache: the label cache of both splits built (rank 0 first; the others wait and load it), then loaded again
  by every rank; seconds, images/s and peak RSS per rank;
- loader: one epoch of the train loader over all records (`--workers` workers per rank, mosaic on); each
  worker's RSS and private (copy-on-write) memory after the first batches and at the end;
`--train`/`--val` scale it down for a quick run; `--stages` picks stages.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.scale_data import COCO_TRAIN_IMAGES, COCO_VAL_IMAGES, generate_dataset
from benchmarks.soak import process_tree_figures
from detect.bench.val import _free_port as free_port

STAGES = ("cache", "loader")


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks scale", description=__doc__.split("\n")[0])
    p.add_argument("--train", type=int, default=COCO_TRAIN_IMAGES, help="train images (default: COCO's)")
    p.add_argument("--val", type=int, default=COCO_VAL_IMAGES, help="val images (default: COCO's)")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--workers", type=int, default=2, help="loader workers per process")
    p.add_argument("--img-size", "--img", dest="img", type=int, default=160)
    p.add_argument("--batch-size", "--batch", dest="batch", type=int, default=32, help="per process")
    p.add_argument("--loader-batches", type=int, default=None, help="stop the loader epoch after this many")
    p.add_argument("--stages", default=",".join(STAGES), help=f"comma list of {', '.join(STAGES)}")
    p.add_argument("--workdir", default=None, help="generated data and caches (default: a temp folder)")
    args = p.parse_args(argv)
    args.stages = [s for s in args.stages.split(",") if s]
    unknown = set(args.stages) - set(STAGES)
    if unknown:
        p.error(f"--stages: unknown {sorted(unknown)}; choose from {', '.join(STAGES)}")
    return args


class PeakRss:
    """The peak RSS (MB) of this process while the block runs, sampled every 20 ms by a thread."""

    def __enter__(self):
        self.peak, self._stop = process_tree_figures(os.getpid())["rss"], threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, process_tree_figures(os.getpid())["rss"])

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, process_tree_figures(os.getpid())["rss"])


def private_mb(pid: int) -> float:
    """Private (copied-on-write or own) memory of a process, MB (/proc/<pid>/smaps_rollup)."""
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total / 1024


def worker_figures(pid: int) -> list[tuple[float, float]]:
    """(RSS, private) MB of each child (loader worker) of `pid`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) != pid:
                continue
            rss = next(int(x.split()[1]) for x in Path(f"/proc/{entry}/status").read_text().splitlines()
                       if x.startswith("VmRSS:")) / 1024
            out.append((rss, private_mb(int(entry))))
        except (OSError, StopIteration, IndexError, ValueError):
            continue
    return out


def stage_cache(spec: Path, cache_dir: Path) -> dict:
    from detect.data.loader import open_split
    from detect.runtime import dist

    figures = {}
    for split in ("train", "val"):
        with PeakRss() as peak:
            tick = time.perf_counter()
            source = open_split(spec, split, cache_dir)
            first = time.perf_counter() - tick
        dist.barrier()
        tick = time.perf_counter()
        open_split(spec, split, cache_dir)
        again = time.perf_counter() - tick
        figures[split] = {"images": len(source.records), "first_s": first, "load_s": again,
                          "peak_mb": peak.peak}
    return figures


def stage_loader(spec: Path, cache_dir: Path, args, rank: int, world: int) -> dict:
    from detect.data.augmentation.augment_config import AugmentConfig
    from detect.data.loader import build_train_loader

    loader = build_train_loader(spec, args.img, args.batch, AugmentConfig(), args.workers, 32, rank, world, 0,
                                cache_dir=cache_dir, max_batches=args.loader_batches)
    start, images, tick = None, 0, time.perf_counter()
    for i, (batch, _targets, _paths) in enumerate(loader.epoch(0)):
        images += batch.shape[0]
        if i == 2 * max(args.workers, 1):  # every worker has delivered a batch or two
            start = worker_figures(os.getpid())
    end = worker_figures(os.getpid())
    seconds = time.perf_counter() - tick
    loader.close()
    return {"batches": len(loader), "images": images, "s": seconds, "start": start or end, "end": end}


def _scale_rank(rank: int, world: int, port: int, args, spec: str, out: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import torch

    from detect.runtime import dist
    from detect.runtime.log import setup_logging

    torch.set_num_threads(1)
    setup_logging(rank, world)
    ctx = dist.init_distributed("cpu", timeout_s=3600)
    cache_dir, figures = Path(out) / "cache", {}
    try:
        if "cache" in args.stages:
            figures["cache"] = stage_cache(Path(spec), cache_dir)
        if "loader" in args.stages:
            figures["loader"] = stage_loader(Path(spec), cache_dir, args, rank, world)
        every = dist.all_gather_object(figures)
    finally:
        dist.destroy(ctx)
    if rank == 0:
        Path(out, "figures.json").write_text(json.dumps(every))


def report(every: list[dict]) -> str:
    """The figures of all ranks as lines (rank 0 prints them)."""
    lines = []
    if "cache" in every[0]:
        for split in ("train", "val"):
            first = [f["cache"][split] for f in every]
            n = first[0]["images"]
            lines.append(f"label cache {split} ({n} images): built by rank 0 in {first[0]['first_s']:.1f} s "
                         f"({n / max(first[0]['first_s'], 1e-9):.0f} images/s), peak RSS "
                         f"{first[0]['peak_mb']:.0f} MB; other ranks waited+loaded in "
                         + ", ".join(f"{f['first_s']:.1f} s" for f in first[1:])
                         + "; loaded again per rank: " + ", ".join(f"{f['load_s']:.2f} s" for f in first)
                         + " (peak RSS " + ", ".join(f"{f['peak_mb']:.0f}" for f in first) + " MB)")
    if "loader" in every[0]:
        for rank, f in enumerate(every):
            lo = f["loader"]
            growth = [100 * (b[0] / max(a[0], 1e-9) - 1) for a, b in zip(lo["start"], lo["end"])]
            pairs = zip(lo["start"], lo["end"], growth)
            workers = "; ".join(f"RSS {a[0]:.0f} -> {b[0]:.0f} MB ({g:+.1f}%), "
                                f"private {a[1]:.0f} -> {b[1]:.0f} MB" for a, b, g in pairs)
            lines.append(f"loader rank {rank}: {lo['images']} images in {lo['s']:.0f} s "
                         f"({lo['images'] / max(lo['s'], 1e-9):.0f} img/s); workers: {workers}")
    return "\n".join(lines)


def main(argv=None) -> int:
    import torch.multiprocessing as mp

    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.workdir or tmp)
        tick = time.perf_counter()
        spec = generate_dataset(root / "data", args.train, args.val)
        seconds = time.perf_counter() - tick
        print(f"scale: {args.train} train + {args.val} val images under {root} ({seconds:.0f} s "
              f"to generate or find); {args.processes} processes x {args.workers} workers; stages "
              f"{', '.join(args.stages)}", flush=True)
        out = Path(tempfile.mkdtemp(dir=root))
        mp.start_processes(_scale_rank, args=(args.processes, free_port(), args, str(spec), str(out)),
                           nprocs=args.processes, start_method="spawn")
        print(report(json.loads((out / "figures.json").read_text())))
    return 0
