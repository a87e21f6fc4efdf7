"""`python -m detect.bench val`: images/s of inference, NMS and COCOeval, for 1 and 2 processes.

    python -m detect.bench val --cfg ../shared/darknet-cfg/yolov3-tiny.cfg \\
        --weights ../shared/weights/yolov3-tiny.weights --data data/coco-tiny.yaml --img-size 416

Each process count runs the real sharded evaluation (`detect.evaluation.evaluator.evaluate`); the 2-process run spawns
gloo processes on this machine (CPU) or one process per GPU. Rates are images / wall seconds of the stage:
for several processes the slowest rank sets the stage's time. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import os
import socket
import time

import torch
import torch.multiprocessing as mp


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m detect.bench val", description=__doc__.split("\n")[0])
    p.add_argument("--cfg", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--img-size", "--img", dest="img", type=int, default=416)
    p.add_argument("--batch-size", "--batch", dest="batch", type=int, default=32)
    p.add_argument("--workers", type=int, default=2, help="loader workers per process")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--processes", default="1,2", help="comma-separated process counts to measure")
    p.add_argument("--amp", default="off", choices=("off", "fp16", "bf16"), help="autocast precision on CUDA")
    p.add_argument("--half", dest="amp", action="store_const", const="fp16", help="same as --amp fp16")
    return p.parse_args(argv)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _measure(rank: int, world_size: int, port: int, args, queue) -> None:
    """One process of a measurement: the full sharded evaluation, stage times reported to the parent."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from detect.darknet.load import for_inference, load_model, uses_channels_last
    from detect.data.loader import build_eval_loader, open_split
    from detect.evaluation.evaluator import CocoEvaluator, evaluate
    from detect.inference.loading import darknet_net_shape, model_resize
    from detect.runtime import dist
    from detect.runtime.precision import amp_dtype

    try:
        ctx = dist.init_distributed(args.device)
        if ctx.device.type == "cpu":  # share the cores between the processes
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
        loaded = load_model(args.cfg, args.weights, img_size=args.img, exact=True)
        model = for_inference(loaded.model, ctx.device)
        resize = model_resize(loaded.model, args.weights, loaded.record)[0]
        channels_last = uses_channels_last(ctx.device)
        with torch.inference_mode():  # first-call set-up (allocations, kernels) is not what we measure
            model(torch.zeros(1, 3, args.img, args.img, device=ctx.device))
        source = open_split(args.data, "val")
        loader = build_eval_loader(source, "val", args.img, args.batch, args.workers, model.max_stride,
                                   ctx.rank, ctx.world_size, rect=True, resize=resize,  # as detect.val feeds it
                                   net_shape=darknet_net_shape(loaded))
        dist.barrier()
        tick = time.perf_counter()
        result = evaluate(model, loader, CocoEvaluator(source), ctx.device,
                          amp_dtype=amp_dtype(args.amp, ctx.device), channels_last=channels_last)
        wall = time.perf_counter() - tick
        if ctx.is_main:
            queue.put(("ok", result.num_images, result.rank_seconds, result.timings["cocoeval"], wall, result.map))
    except BaseException as e:
        queue.put(("error", rank, f"{type(e).__name__}: {e}"))
        raise
    finally:
        dist.destroy()


def run_processes(world_size: int, args):
    """(num_images, per-rank stage seconds, cocoeval ms per image, wall seconds, mAP) of one measurement."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_measure, args=(r, world_size, port, args, queue)) for r in range(world_size)]
    for p in procs:
        p.start()
    try:
        message = queue.get(timeout=1800)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    if message[0] == "error":
        raise RuntimeError(f"rank {message[1]} failed: {message[2]}")
    return message[1:]


def format_row(world_size: int, num_images: int, rank_seconds, cocoeval_ms: float, wall: float,
               map_: float) -> str:
    def rate(stage):
        slowest = max(s[stage] for s in rank_seconds)
        return num_images / slowest if slowest > 0 else float("inf")

    cocoeval_rate = 1000.0 / cocoeval_ms if cocoeval_ms > 0 else float("inf")
    return (f"{world_size:9d} {num_images:7d} {rate('inference'):12.1f} {rate('nms'):10.1f} "
            f"{cocoeval_rate:10.1f} {num_images / wall:12.1f} {map_:7.4f}")


def main(argv) -> int:
    args = parse_args(argv)
    counts = [int(v) for v in args.processes.split(",") if v.strip()]
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    print(f"val benchmark: {args.cfg} at {args.img}, batch {args.batch}, amp {args.amp}, data {args.data}, device {device}, "
          f"{os.cpu_count()} CPU cores")
    print("processes  images  inference/s      NMS/s  COCOeval/s  end-to-end/s     mAP")
    for world_size in counts:
        print(format_row(world_size, *run_processes(world_size, args)), flush=True)
    return 0
