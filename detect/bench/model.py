"""`python -m detect.bench model --cfg cfg/yolov3-tiny.cfg --img 416`: parameters, GFLOPs and forward latency
(batch 1 and 16, ms per image) on the CPU and CUDA when present, unfused and fused. Figures, not pass/fail."""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from detect.darknet import Darknet


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m detect.bench model", description=__doc__)
    parser.add_argument("--cfg", required=True, help="Darknet .cfg file")
    parser.add_argument("--img", type=int, default=416, help="square input size (a multiple of the max stride)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: the CPU, and CUDA when present")
    parser.add_argument("--cpu-iters", type=int, default=3, help="timed iterations per CPU measurement")
    parser.add_argument("--cuda-iters", type=int, default=30, help="timed iterations per CUDA measurement")
    return parser.parse_args(argv)


def count_gflops(model: Darknet, size: int) -> float:
    """FLOPs (2 per multiply-add, as Darknet's BFLOPs) of one forward pass of one image, in billions."""
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(torch.zeros(1, 3, size, size))
    return counter.get_total_flops() / 1e9


def time_forward(model, batch: int, size: int, device: torch.device, iters: int) -> float:
    """Milliseconds per image: one warm-up pass, then the mean over `iters` passes (shorter for big CPU batches)."""
    x = torch.rand(batch, 3, size, size, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cpu" and batch > 1:
        iters = max(1, iters // 2)
    with torch.no_grad():
        model(x)
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            model(x)
        sync()
    return (time.perf_counter() - start) * 1000 / (iters * batch)


def main(argv=None) -> int:
    args = parse_args(argv)
    model = Darknet(args.cfg, img_size=args.img).eval()
    params = sum(p.numel() for p in model.parameters())
    print(f"cfg {args.cfg}  input {args.img}x{args.img}  layers {len(model.layers)}  heads {len(model.heads)}")
    print(f"parameters {params:,}  (.weights floats {model.darknet_float_count():,})")
    print(f"GFLOPs {count_gflops(model, args.img):.4g} per image")
    devices = [torch.device("cpu")] if args.device in ("auto", "cpu") else []
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        devices.append(torch.device("cuda"))
    print(f"{'device':8s} {'mode':8s} " + " ".join(f"{'batch ' + str(b) + ' ms/img':>18s}" for b in args.batch_sizes))
    for device in devices:
        iters = args.cuda_iters if device.type == "cuda" else args.cpu_iters
        for mode in ("unfused", "fused"):
            candidate = Darknet(model.cfg_text, img_size=args.img).eval()
            candidate.load_state_dict(model.state_dict())
            if mode == "fused":
                candidate.fuse()
            candidate.to(device)
            times = [time_forward(candidate, b, args.img, device, iters) for b in args.batch_sizes]
            print(f"{device.type:8s} {mode:8s} " + " ".join(f"{t:18.2f}" for t in times), flush=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
          + (f", {torch.cuda.get_device_name()}" if any(d.type == "cuda" for d in devices) else ""))
    return 0
