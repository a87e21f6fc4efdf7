"""`python -m detect.bench model --cfg cfg/yolov3-tiny.cfg --img-size 416`: parameters, GFLOPs and forward latency
(ms per image and images/s at each batch size) on the CPU and CUDA when present: unfused, fused, and the path
predict and val use (CPU: fused + oneDNN-packed; CUDA: fused, bf16 autocast, channels_last). Then, on the CPU at
batch 1, every inference backend side by side (PyTorch, onnxruntime, OpenCV DNN; `--opencv-path` adds an OpenCV
4.x with its Darknet importer): medians, p10/p90, the ratio to OpenCV DNN and the largest difference from the
unfused model's rows. With `--images DIR`, predict's own path on those real images (the Predictor of
detect.inference.predictor at batch 1, each image on its rect canvas as predict's default, and on the square one of --square) per
backend, in ms per image. Modes and backends are interleaved round by round. Figures, not pass/fail."""

from __future__ import annotations

import argparse
import copy
import itertools
import os
import tempfile
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from detect.darknet import Darknet
from detect.darknet.load import for_inference, load_model
from detect.data.records.images import IMAGE_SUFFIXES, BadImage, read_image
from detect.inference.loading import model_resize
from detect.inference.predictor import (
    InferenceSettings,
    Predictor,
    canvas_shape,
    model_input,
)
from detect.runtime.commands import run_command
from detect.runtime.precision import autocast

from .backends import build_backends, darknet_comparable, predict_models
from .timing import interleave, timed


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m detect.bench model", description=__doc__)
    parser.add_argument("--cfg", required=True, help="Darknet .cfg file")
    parser.add_argument("--weights", help=".weights or .pt (default: the cfg's random initialisation)")
    parser.add_argument("--img-size", "--img", dest="img", type=int, default=416,
                        help="square input size (a multiple of the max stride)")
    parser.add_argument("--batch-size", "--batch-sizes", "--batch", dest="batch_sizes", type=int, nargs="+",
                        default=[1, 16], help="one or more batch sizes")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: the CPU, and CUDA when present")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of every backend")
    parser.add_argument("--cpu-iters", type=int, default=5, help="timed rounds per CPU batch size")
    parser.add_argument("--cuda-iters", type=int, default=30, help="timed rounds per CUDA batch size")
    parser.add_argument("--rounds", type=int, default=30,
                        help="timed rounds of the CPU backend comparison (0 skips it)")
    parser.add_argument("--image", help="an image for the comparison (letterboxed to --img; default: noise)")
    parser.add_argument("--opencv-path", help="folder holding an OpenCV 4.x cv2 package (e.g. pip install "
                        "--target DIR opencv-python-headless==4.*), run in a child process for its Darknet importer")
    parser.add_argument("--int8-data", metavar="SPEC",
                        help="also time the int8 graph of detect.export --int8, calibrated on SPEC's train images")
    parser.add_argument("--images", help="a folder of real images: also time predict's own path on them "
                        "(detect.inference.predictor, batch 1, rect canvases and --square) per CPU backend")
    parser.add_argument("--image-count", type=int, default=16,
                        help="how many of --images (the first by name)")
    parser.add_argument("--image-rounds", type=int, default=3,
                        help="timed passes over those images, after a first pass timed apart")
    args = parser.parse_args(argv)
    if args.images and not Path(args.images).is_dir():
        parser.error(f"--images {args.images}: not a folder")
    if args.image_count < 1 or args.image_rounds < 1:
        parser.error(f"--image-count and --image-rounds must be positive, got {args.image_count} and "
                     f"{args.image_rounds}")
    if args.opencv_path and not Path(args.opencv_path).is_dir():
        parser.error(f"--opencv-path {args.opencv_path}: not a folder (pip install --target FOLDER "
                     f"opencv-python-headless==4.* makes one)")
    if args.threads < 1 or args.rounds < 0:
        parser.error(f"--threads must be positive and --rounds not negative, got {args.threads} and {args.rounds}")
    return args


def count_gflops(model: Darknet, size: int) -> float:
    """FLOPs (2 per multiply-add, as Darknet's BFLOPs) of one forward pass of one image, in billions."""
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(torch.zeros(1, 3, size, size))
    return counter.get_total_flops() / 1e9


def mode_models(model: Darknet, device: torch.device) -> dict[str, tuple[torch.nn.Module, torch.dtype | None]]:
    """name -> (model, autocast dtype) of each mode timed on `device`."""
    unfused = copy.deepcopy(model).to(device)
    fused = copy.deepcopy(model).fuse().to(device)
    if device.type == "cpu":
        return {"unfused": (unfused, None), "fused": (fused, None),
                "fused-packed": (for_inference(copy.deepcopy(model), device), None)}
    return {"unfused": (unfused, None), "fused": (fused, None),
            "fused-bf16-nhwc": (for_inference(copy.deepcopy(model), device), torch.bfloat16)}


def latency_table(model: Darknet, device: torch.device, args) -> dict[str, list]:
    """Per mode, the median ms per image at each batch size; modes interleaved round by round."""
    modes = mode_models(model, device)
    rounds = args.cuda_iters if device.type == "cuda" else args.cpu_iters
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    table = {name: [] for name in modes}
    for batch in args.batch_sizes:
        x = torch.rand(batch, 3, args.img, args.img, device=device)
        runners = {}
        for name, (candidate, dtype) in modes.items():
            def forward(candidate=candidate, dtype=dtype, x=x):
                with torch.inference_mode(), autocast(device, dtype):
                    candidate(x.contiguous(memory_format=torch.channels_last) if dtype else x)
                sync()
            runners[name] = timed(forward)
        timings = interleave(runners, max(1, rounds if batch == 1 else rounds // 2))
        for name, timing in timings.items():
            table[name].append(timing.median / batch)
    return table


def comparison_input(image: str | None, size: int) -> torch.Tensor:
    """[1, 3, size, size] float in [0, 1], RGB: the image letterboxed onto a grey square as the tools' --square
    does it (the Predictor's `model_input`), or seeded noise."""
    if image is None:
        return torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    bgr = cv2.imread(image)
    if bgr is None:
        raise FileNotFoundError(f"--image {image}: not an image OpenCV can read")
    canvas, _, _ = model_input(bgr, InferenceSettings(size, square=True), 1)
    return torch.from_numpy(canvas)[None].float() / 255


def darknet_weights_for(model: Darknet, weights: str | None, workdir: Path) -> Path:
    """A .weights file of `model` for OpenCV's Darknet importer: the one given, or the model's own written out."""
    if weights and Path(weights).suffix == ".weights":
        return Path(weights)
    path = workdir / "model.weights"
    model.save_darknet_weights(path)
    return path


def compare_backends(model: Darknet, x: torch.Tensor, args) -> None:
    """CPU, batch 1, input `x`: every backend interleaved; median, p10/p90, ratio to OpenCV DNN, max |diff| of
    the rows."""
    with tempfile.TemporaryDirectory(prefix="bench-model-") as tmp:
        workdir = Path(tmp)
        weights = darknet_weights_for(model, args.weights, workdir)
        backends, problems = build_backends(model, x, args.threads, workdir, weights, args.opencv_path,
                                            args.int8_data)
        try:
            with torch.inference_mode():
                reference = model(x).numpy()
            diffs = {}
            for backend in backends:
                backend.run()
                expected = darknet_comparable(reference) if backend.name == "opencv-darknet" else reference
                diffs[backend.name] = float(np.abs(backend.output() - expected).max())
            timings = interleave({b.name: b.run for b in backends}, args.rounds)
        finally:
            for backend in backends:
                backend.close()
    names = [b.name for b in backends]
    base = next((n for n in ("opencv-darknet", "opencv-onnx-child", "opencv-onnx") if n in names), None)
    print(f"\nCPU backends, batch 1, {args.img}x{args.img}, {args.threads} threads each (torch.set_num_threads, "
          f"onnxruntime intra_op_num_threads, cv2.setNumThreads), {args.rounds} rounds interleaved; "
          f"input: {args.image or 'noise'}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY') or 'unset'}")
    print(f"{'backend':16s} {'median ms':>10s} {'p10':>8s} {'p90':>8s} {'vs ' + (base or '-'):>18s} "
          f"{'max|diff|':>10s}  what")
    for backend in backends:
        t = timings[backend.name]
        ratio = f"{t.median / timings[base].median:.2f}x" if base else "-"
        print(f"{backend.name:16s} {t.median:10.2f} {t.p10:8.2f} {t.p90:8.2f} {ratio:>18s} "
              f"{diffs[backend.name]:10.2e}  {backend.note}")
    print("max|diff|: largest absolute difference from the unfused PyTorch model's [N, P, 5+K] rows (boxes in "
          "input pixels); opencv-darknet's class columns are objectness x class, zeroed below 0.2, as it gives them")
    for line in problems:
        print(line)


def read_images(folder: str, count: int) -> list[np.ndarray]:
    """The first `count` images of `folder` by name, BGR, as predict reads them."""
    paths = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)[:count]
    if not paths:
        raise ValueError(f"--images {folder}: no image files in it ({', '.join(IMAGE_SUFFIXES)})")
    try:
        return [read_image(path) for path in paths]
    except BadImage as e:
        raise ValueError(f"--images {folder}: {e.detail}") from None


def image_runner(model, images: list[np.ndarray], settings: InferenceSettings):
    """A runner for `interleave`: the Predictor on the next image, in turn, round after round."""
    predictor, turn = Predictor(model, settings, "cpu"), itertools.cycle(images)
    return timed(lambda: predictor([next(turn)]))


def compare_on_images(model: Darknet, images: list[np.ndarray], args) -> None:
    """predict's own path at batch 1 (letterbox, forward pass, NMS, boxes back into the image) on real images,
    every backend in turn on each image: median ms per image on the rect canvases (predict's default) and on
    the square one (--square). The first pass, in which each canvas is met for the first time, is apart."""
    resize = model_resize(model, args.weights)[0]  # as predict feeds this model (a stretched one: square only)
    rect, stride = InferenceSettings(args.img, resize=resize), model.max_stride
    canvases = Counter(canvas_shape(image.shape[1], image.shape[0], rect, stride) for image in images)
    with tempfile.TemporaryDirectory(prefix="bench-model-") as tmp:
        models, problems = predict_models(model, args.img, args.threads, Path(tmp))
        runners, notes = {}, {}
        for name, (candidate, note) in models.items():
            for canvas, square in (("rect", False), ("square", True)):
                settings = InferenceSettings(args.img, square=square, batch_size=1, resize=resize)
                runners[f"{name} {canvas}"] = image_runner(candidate, images, settings)
                notes[f"{name} {canvas}"] = note
        first = interleave(runners, len(images), warmup=0)
        timings = interleave(runners, len(images) * args.image_rounds, warmup=0)
    shapes = ", ".join(f"{h}x{w} ({n})" for (h, w), n in canvases.most_common())
    print(f"\npredict's path on real images (detect.inference.predictor, batch 1, --img {args.img}, "
          f"{args.threads} threads): {len(images)} images of {args.images}, rect canvases {shapes}; a first "
          f"pass, then timed passes: {args.image_rounds}, backends in turn on each image")
    base = timings["torch-packed rect"].median
    print(f"{'backend':16s} {'canvas':7s} {'median ms/img':>13s} {'p10':>8s} {'p90':>8s} {'first pass':>10s} "
          f"{'vs torch-packed rect':>20s}  what")
    for key, t in timings.items():
        name, canvas = key.split()
        print(f"{name:16s} {canvas:7s} {t.median:13.2f} {t.p10:8.2f} {t.p90:8.2f} {first[key].mean:10.2f} "
              f"{t.median / base:19.2f}x  {notes[key]}")
    print("first pass: mean ms per image of the first pass over the images, which meets each canvas first "
          "(torch-packed packs its weights for a new shape then)")
    for line in problems:
        print(line)


def main(argv=None) -> int:
    return run_command(parse_args, run, argv)


def run(args) -> None:
    torch.set_num_threads(args.threads)
    x = comparison_input(args.image, args.img)  # read first: a bad --image fails before any timing
    images = read_images(args.images, args.image_count) if args.images else None
    model = load_model(args.cfg, args.weights, img_size=args.img, exact=args.weights is not None).model.eval()
    params = sum(p.numel() for p in model.parameters())
    print(f"cfg {args.cfg}  input {args.img}x{args.img}  layers {len(model.layers)}  heads {len(model.heads)}")
    print(f"parameters {params:,}  (.weights floats {model.darknet_float_count():,})")
    print(f"GFLOPs {count_gflops(model, args.img):.4g} per image")
    devices = [torch.device("cpu")] if args.device in ("auto", "cpu") else []
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        devices.append(torch.device("cuda"))
    print(f"{'device':8s} {'mode':16s} " + " ".join(f"{'batch ' + str(b) + ' ms/img (img/s)':>30s}"
                                                      for b in args.batch_sizes) + "   (medians, modes interleaved)")
    for device in devices:
        for mode, times in latency_table(model, device, args).items():
            print(f"{device.type:8s} {mode:16s} " + " ".join(f"{t:18.3f} ({1000 / t:8.1f})" for t in times),
                  flush=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
          + (f", {torch.cuda.get_device_name()}" if any(d.type == "cuda" for d in devices) else ""))
    if args.rounds > 0 and torch.device("cpu") in devices:
        compare_backends(model, x, args)
    if images and torch.device("cpu") in devices:
        compare_on_images(model, images, args)
