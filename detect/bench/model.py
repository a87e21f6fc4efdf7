"""`python -m detect.bench model --cfg cfg/yolov3-tiny.cfg --img-size 416`: parameters, GFLOPs and forward latency
(ms per image and images/s at each batch size) on the CPU and CUDA when present: unfused, fused, and on CUDA
fused with bf16 autocast and channels_last. Figures, not pass/fail."""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from detect.darknet import Darknet


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m detect.bench model", description=__doc__)
    parser.add_argument("--cfg", required=True, help="Darknet .cfg file")
    parser.add_argument("--img-size", "--img", dest="img", type=int, default=416,
                        help="square input size (a multiple of the max stride)")
    parser.add_argument("--batch-size", "--batch-sizes", "--batch", dest="batch_sizes", type=int, nargs="+",
                        default=[1, 16], help="one or more batch sizes")
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


def time_forward(model, batch: int, size: int, device: torch.device, iters: int, amp_dtype=None,
                 channels_last: bool = False) -> float:
    """Milliseconds per image: warm-up passes, then the mean over `iters` passes (shorter for big CPU batches)."""
    x = torch.rand(batch, 3, size, size, device=device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cpu" and batch > 1:
        iters = max(1, iters // 2)
    autocast = torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)
    with torch.no_grad(), autocast:
        for _ in range(3 if device.type == "cuda" else 1):  # cuDNN picks its kernels in the first passes
            model(x)
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            model(x)
        sync()
    return (time.perf_counter() - start) * 1000 / (iters * batch)


# (name, fuse BatchNorm, autocast dtype, channels_last); the last one is CUDA only
MODES = (("unfused", False, None, False), ("fused", True, None, False), ("fused-bf16-nhwc", True, torch.bfloat16, True))


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
    print(f"{'device':8s} {'mode':16s} " + " ".join(f"{'batch ' + str(b) + ' ms/img (img/s)':>30s}"
                                                      for b in args.batch_sizes))
    for device in devices:
        iters = args.cuda_iters if device.type == "cuda" else args.cpu_iters
        for mode, fuse, amp_dtype, channels_last in MODES:
            if amp_dtype is not None and device.type != "cuda":
                continue
            candidate = Darknet(model.cfg_text, img_size=args.img).eval()
            candidate.load_state_dict(model.state_dict())
            if fuse:
                candidate.fuse()
            candidate.to(device)
            if channels_last:
                candidate.to(memory_format=torch.channels_last)
            times = [time_forward(candidate, b, args.img, device, iters, amp_dtype, channels_last)
                     for b in args.batch_sizes]
            print(f"{device.type:8s} {mode:16s} " + " ".join(f"{t:18.3f} ({1000 / t:8.1f})" for t in times),
                  flush=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
          + (f", {torch.cuda.get_device_name()}" if any(d.type == "cuda" for d in devices) else ""))
    return 0
