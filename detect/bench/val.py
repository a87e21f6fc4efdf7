"""`python -m detect.bench val`: images/s of inference, NMS and COCOeval, for 1 and 2 processes.

Each configuration runs `detect.val` in fresh processes (2 processes: a gloo group over TCP on 127.0.0.1, as
under torchrun on the CPU). Stage throughput counts the shards as running in parallel: images divided by the
stage's time summed over ranks / processes; COCOeval runs once, on rank 0.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import socket
import tempfile

import torch
import torch.multiprocessing as mp


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m detect.bench val", description=__doc__.splitlines()[0])
    p.add_argument("--cfg", help="Darknet .cfg (optional for .pt checkpoints)")
    p.add_argument("--weights", required=True)
    p.add_argument("--data", required=True, help="dataset spec (data/*.yaml)")
    p.add_argument("--img", type=int, default=416)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--processes", default="1,2", help="comma-separated process counts to run")
    p.add_argument("--device", default="cpu", help="cpu (gloo), or cuda with 1 process")
    return p.parse_args(argv)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, val_argv: list[str], queue) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    from detect.val import parse_args as val_args, run

    with contextlib.redirect_stdout(io.StringIO()):  # the per-class table is not what is measured here
        result = run(val_args(val_argv))
    queue.put((rank, result.timings, result.num_images, result.map, result.map50))


def _run(world: int, val_argv: list[str]) -> tuple:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, val_argv, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    for _ in range(world):
        rank, timings, n, ap, ap50 = queue.get(timeout=1800)
        results[rank] = (timings, n, ap, ap50)
    for p in procs:
        p.join()
    return results[0]


def main(argv=None) -> int:
    args = parse_args(argv)
    worlds = [int(w) for w in args.processes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        val_argv = ["--weights", args.weights, "--data", args.data, "--img", str(args.img), "--batch",
                    str(args.batch), "--device", args.device, "--workers", "0", "--project", tmp]
        if args.cfg:
            val_argv[:0] = ["--cfg", args.cfg]
        print(f"evaluation of {args.weights} on {args.data} at {args.img}, batch {args.batch}, device {args.device}")
        print(f"{'processes':>9} {'images':>7} {'inference img/s':>16} {'NMS img/s':>10} {'COCOeval img/s':>15} "
              f"{'mAP':>7} {'mAP50':>7}")
        for world in worlds:
            timings, n, ap, ap50 = _run(world, val_argv)
            # timings are ms per image summed over ranks; the shards run side by side
            rate = {k: world * 1000.0 / max(timings[k], 1e-9) for k in ("inference", "nms")}
            cocoeval = 1000.0 / max(timings["cocoeval"], 1e-9)
            print(f"{world:>9} {n:>7} {rate['inference']:>16.1f} {rate['nms']:>10.1f} {cocoeval:>15.1f} "
                  f"{ap:>7.4f} {ap50:>7.4f}")
    print("stage img/s = images / (stage time summed over ranks / processes); COCOeval runs once on rank 0")
    return 0
