"""Soak: the real training loop for many epochs, watched for leaks: `python -m benchmarks soak --epochs 32`.

Training mode: `--processes` gloo processes on the CPU (spawned here, one process group, as torchrun would) with
`--workers` loader workers each run `train.py`'s loop (evaluation and checkpoints every epoch) on the synthetic
set. After every epoch each rank measures itself and its loader workers (RSS from /proc, open file descriptors)
and rank 0 prints one line: img/s, then per process `rss MB (workers' rss MB) fds`. The summary compares the last
epoch with the end of epoch `--settle` (start-up, first allocations and the loader's first batches are done by
then): RSS growth per process and the spread of img/s. Goal: growth < 5%, img/s within 5%. Linux only (/proc).

Evaluation mode (`--eval-images N`): the peak RSS of one evaluation (`detect.evaluation.evaluator`) of a data spec's val split
repeated to N images (ids renumbered, ground truth repeated with them), in a fresh process; run it for two sizes
to see how memory grows with the images: it should grow with the detections kept for COCOeval, nothing else.
Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
from pathlib import Path

from detect.bench.val import _free_port as free_port


def process_tree_figures(pid: int) -> dict:
    """RSS (MB) and open file descriptors of `pid`, and the RSS of its children (loader workers)."""
    def rss_mb(p: int) -> float:
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    children.append(rss_mb(int(entry)))
            except (OSError, IndexError, ValueError):
                continue  # a process that ended while we looked
    return {"rss": rss_mb(pid), "workers": children, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks soak", description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=32)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--workers", type=int, default=2, help="loader workers per process")
    p.add_argument("--img-size", "--img", dest="img", type=int, default=128)
    p.add_argument("--batch-size", "--batch", dest="batch", type=int, default=8, help="per process")
    p.add_argument("--cfg", default=None, help="model cfg (default: train.py's)")
    p.add_argument("--data", default=None, help="data spec (default: the synthetic set)")
    p.add_argument("--settle", type=int, default=3, help="epochs before the figures are taken as the baseline")
    p.add_argument("--eval-images", type=int, default=None,
                   help="evaluation mode: peak RSS of evaluating the val split repeated to this many images")
    p.add_argument("--weights", default=None, help="evaluation mode: the model's weights")
    return p.parse_args(argv)


class _Watch:
    """Per-epoch figures: every rank measures itself after the epoch's checkpoint, rank 0 prints them."""

    def __init__(self):
        self.rows: list[dict] = []

    def __call__(self, trainer) -> None:
        from detect.runtime import dist

        figures = dist.all_gather_object(process_tree_figures(os.getpid()))
        if trainer.setup.ctx.is_main:
            row = {"epoch": trainer.state.epoch, "img_s": trainer.last_img_s, "procs": figures}
            self.rows.append(row)
            procs = "  ".join(f"rank {r}: {f['rss']:.0f} MB (workers {'/'.join(f'{w:.0f}' for w in f['workers'])})"
                              f" {f['fds']} fds" for r, f in enumerate(figures))
            print(f"epoch {row['epoch']:3d}  {row['img_s']:7.1f} img/s  {procs}", flush=True)


def _soak_rank(rank: int, world: int, port: int, args, out: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import torch

    from detect.engine.options import TrainOptions
    from detect.engine.setup import build_trainer
    from detect.engine.trainer import Trainer
    from detect.runtime import dist
    from detect.runtime.log import setup_logging

    torch.set_num_threads(1)
    setup_logging(rank, world)
    watch = _Watch()

    class SoakTrainer(Trainer):
        last_img_s = 0.0

        def train_epoch(self):
            row = super().train_epoch()
            self.last_img_s = row["img_s"]
            return row

        def checkpoint(self, path, best=False):  # collective, once per epoch on every rank
            super().checkpoint(path, best)
            if self.state.batch_in_epoch == 0:
                watch(self)

    defaults = TrainOptions()
    opts = TrainOptions(cfg=args.cfg or defaults.cfg, data=args.data or defaults.data, img_size=args.img,
                        batch_size=args.batch, epochs=args.epochs, workers=args.workers, device="cpu",
                        project=out, name="soak", exist_ok=True)
    ctx = dist.init_distributed("cpu")
    try:
        trainer = build_trainer(opts, ctx, SoakTrainer)
        trainer.setup.progress = False
        trainer.fit()
        trainer.setup.train_loader.close()
    finally:
        dist.destroy(ctx)
    if rank == 0:
        Path(out, "figures.json").write_text(json.dumps(watch.rows))


def summarise(rows: list[dict], settle: int) -> str:
    """RSS growth of every process (and its workers together) from epoch `settle` to the last, and img/s spread."""
    base, last = next(r for r in rows if r["epoch"] == settle), rows[-1]
    lines = []
    for rank, (b, e) in enumerate(zip(base["procs"], last["procs"])):
        lines.append(f"rank {rank}: RSS {b['rss']:.0f} -> {e['rss']:.0f} MB ({100 * (e['rss'] / b['rss'] - 1):+.1f}%), "
                     f"workers {sum(b['workers']):.0f} -> {sum(e['workers']):.0f} MB "
                     f"({100 * (sum(e['workers']) / max(sum(b['workers']), 1e-9) - 1):+.1f}%), "
                     f"fds {b['fds']} -> {e['fds']}")
    rates = sorted(r["img_s"] for r in rows if r["epoch"] > settle)
    median = rates[len(rates) // 2]
    lines.append(f"img/s after epoch {settle}: median {median:.1f}, min {rates[0]:.1f} ({100 * (rates[0] / median - 1):+.1f}%),"
                 f" max {rates[-1]:.1f} ({100 * (rates[-1] / median - 1):+.1f}%)")
    return "\n".join(lines)


def repeated_split(source, images: int):
    """The split's records repeated (image ids renumbered per copy) to `images`, with ground truth to match."""
    import contextlib
    import copy
    import dataclasses
    import io

    from pycocotools.coco import COCO

    gt = source.coco_ground_truth().dataset
    offset = max(r.image_id for r in source.records) + 1
    copies = -(-images // len(source.records))
    records = [dataclasses.replace(r, image_id=r.image_id + k * offset) for k in range(copies)
               for r in source.records][:images]
    kept = {r.image_id for r in records}
    dataset = {"categories": gt["categories"],
               "images": [{**im, "id": im["id"] + k * offset} for k in range(copies) for im in gt["images"]
                          if im["id"] + k * offset in kept],
               "annotations": [{**a, "id": a["id"] + k * 10**9, "image_id": a["image_id"] + k * offset}
                               for k in range(copies) for a in gt["annotations"] if a["image_id"] + k * offset in kept]}
    out = copy.copy(source)
    out.records = records
    out._coco = COCO()
    out._coco.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):
        out._coco.createIndex()
    return out


def run_eval_memory(args) -> int:
    """Peak RSS of one evaluation of the val split repeated to `--eval-images` images (this process)."""
    import torch

    from detect.darknet.load import for_inference, load_model
    from detect.data.loader import build_eval_loader, open_split
    from detect.evaluation.evaluator import CocoEvaluator, evaluate

    torch.set_num_threads(max(1, (os.cpu_count() or 1)))
    model = for_inference(load_model(args.cfg, args.weights, img_size=args.img, exact=True).model,
                          torch.device("cpu"))
    source = repeated_split(open_split(args.data, "val"), args.eval_images)
    loader = build_eval_loader(source, "val", args.img, args.batch, args.workers, model.max_stride, 0, 1)
    evaluator = CocoEvaluator(source)
    before = process_tree_figures(os.getpid())["rss"]
    result = evaluate(model, loader, evaluator, torch.device("cpu"))
    detections = len(result.rows)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"evaluation of {result.num_images} images ({args.data} val repeated): {detections} detections, "
          f"mAP@0.5 {result.map50:.4f}; RSS before {before:.0f} MB, peak {peak:.0f} MB "
          f"(+{peak - before:.0f} MB, {1024 * 1024 * (peak - before) / max(detections, 1):.0f} bytes/detection)")
    return 0


def run_soak(args) -> int:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as out:
        print(f"soak: {args.processes} processes x {args.workers} loader workers, {args.epochs} epochs, "
              f"img {args.img}, batch {args.batch} (figures after each epoch's checkpoint)", flush=True)
        mp.start_processes(_soak_rank, args=(args.processes, free_port(), args, out), nprocs=args.processes,
                           start_method="spawn")
        rows = json.loads(Path(out, "figures.json").read_text())
    print(summarise(rows, args.settle))
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if not Path("/proc/self/status").exists():
        print("python -m benchmarks soak reads /proc: Linux only", file=sys.stderr)
        return 2
    if args.eval_images is not None:
        if not (args.cfg and args.weights and args.data):
            print("--eval-images needs --cfg, --weights and --data", file=sys.stderr)
            return 2
        return run_eval_memory(args)
    return run_soak(args)
