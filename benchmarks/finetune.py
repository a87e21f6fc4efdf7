"""`python -m benchmarks finetune`: the fine-tune a user runs first, timed end to end, figures per epoch.

    python -m benchmarks finetune --data data/kangaroo.yaml            # yolov3-tiny COCO weights, 10 epochs

Runs `torchrun --nproc_per_node N train.py` with the default flags (only the ones below), then `detect.val` on
best.pt, and prints each epoch's losses and validation mAP with the wall time so far, then the final figures.
`--also-val SPEC ...` evaluates best.pt on those specs' val splits too (a held-out set no choice was made on).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import ROOT, SHARED


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks finetune", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="dataset spec yaml")
    p.add_argument("--cfg", default=str(ROOT / "cfg" / "yolov3-tiny.cfg"))
    p.add_argument("--weights", default=str(SHARED / "weights" / "yolov3-tiny.weights"))
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", "--batch", type=int, default=8, help="per process")
    p.add_argument("--img-size", "--img", type=int, default=416)
    p.add_argument("--nproc", type=int, default=2, help="torchrun processes")
    p.add_argument("--project", default=None, help="run folder parent (default: a temporary folder)")
    p.add_argument("--also-val", nargs="+", default=[], metavar="SPEC",
                   help="more dataset specs whose val split best.pt is evaluated on (e.g. a held-out part of train)")
    p.add_argument("train_args", nargs="*", help="extra train.py flags after --")
    return p.parse_args(argv)


def run(args, project: Path) -> int:
    train = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}",
             str(ROOT / "train.py"), "--cfg", args.cfg, "--weights", args.weights, "--data", args.data,
             "--img-size", str(args.img_size), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
             "--project", str(project), "--name", "finetune", *args.train_args]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    start = time.perf_counter()
    proc = subprocess.run(train, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
        print(f"training failed (exit {proc.returncode})", file=sys.stderr)
        return 1
    run_dir = project / "finetune"
    for line in proc.stderr.splitlines() + proc.stdout.splitlines():
        if "fine-tune default:" in line or "box+obj rows copied" in line or "nothing copied" in line:
            print(line.split("] ", 1)[-1])
    rows = list(csv.DictReader((run_dir / "results.csv").open()))
    print(f"{'epoch':>5s} {'box':>7s} {'obj':>7s} {'cls':>7s} {'mAP@0.5':>8s} {'mAP':>7s} {'epoch s':>8s} "
          f"{'wall s':>7s}")
    elapsed = 0.0
    for row in rows:
        elapsed += float(row["time"])
        print(f"{row['epoch']:>5s} {float(row['box']):7.4f} {float(row['obj']):7.4f} {float(row['cls']):7.4f} "
              f"{float(row['map50'] or 'nan'):8.4f} {float(row['map'] or 'nan'):7.4f} {float(row['time']):8.1f} "
              f"{elapsed:7.1f}")
    for i, data in enumerate([args.data, *args.also_val]):
        metrics = _evaluate(args, project, run_dir / "best.pt", data, f"best{i or ''}", env)
        if metrics is None:
            return 1
        print(f"detect.val best.pt on {Path(data).name}: mAP@0.5 {metrics['map50']:.3f}  mAP@0.5:0.95 "
              f"{metrics['map']:.3f} ({metrics['num_images']} images)")
    print(f"training wall time {wall:.0f} s ({args.nproc} processes, {os.cpu_count()} cores)")
    return 0


def _evaluate(args, project: Path, weights: Path, data: str, name: str, env: dict) -> dict | None:
    """detect.val of `weights` on `data`'s val split: its metrics.json, or None (the failure printed)."""
    val = [sys.executable, "-m", "detect.val", "--weights", str(weights), "--data", data,
           "--img-size", str(args.img_size), "--project", str(project / "val"), "--name", name]
    proc = subprocess.run(val, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
        print(f"detect.val on {data} failed (exit {proc.returncode})", file=sys.stderr)
        return None
    return json.loads((project / "val" / name / "metrics.json").read_text())


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.project:
        return run(args, Path(args.project))
    with tempfile.TemporaryDirectory() as tmp:
        return run(args, Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
