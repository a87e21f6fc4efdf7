"""`python -m detect.predict`: detect objects in images, folders, globs or videos and save what was found.

    python -m detect.predict --cfg cfg/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights \\
        --source photos/ --names cfg/coco.names

Writes to runs/predict/<name>: annotated images (or an annotated .mp4 per video), labels/<stem>.txt
(YOLO format: class cx cy w h confidence, normalised to the image) and json/<stem>.json (boxes in pixels).
Video frames are saved as <stem>_<frame>.txt / .json.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path

import detect.runtime.cpu_threads  # first: sets OMP_WAIT_POLICY before torch loads (README "CPU inference")

# isort: split
import cv2
import numpy as np
import torch

from detect.api import InferenceSettings, default_names, detect_images, load_tool_model
from detect.data.images import IMAGE_SUFFIXES, BadImage, read_image
from detect.data.spec import read_class_names
from detect.runtime import dist
from detect.runtime.commands import run_command
from detect.runtime.files import atomic_write_bytes, atomic_write_text
from detect.runtime.log import setup_logging
from detect.runtime.runs import next_run_dir

log = logging.getLogger("detect.predict")  # not __name__: under `python -m` that is __main__, outside `detect`
VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m detect.predict", description=__doc__.split("\n")[0])
    p.add_argument("--cfg", help="Darknet .cfg (optional for .pt checkpoints, which carry their cfg)")
    p.add_argument("--weights", required=True, help=".weights, .pt checkpoint or .onnx (detect.export)")
    p.add_argument("--source", required=True, help="an image, a folder, a glob pattern or a video file")
    p.add_argument("--names", help="class names: a .names file (one per line) or a data spec (.yaml); "
                   "default: the names a .pt carries, else COCO's for an 80-class model, else the class ids")
    p.add_argument("--img-size", "--img", dest="img", type=int, default=None,
                   help="input size (long side), as in detect.val; a multiple of the model's largest stride "
                        "(default: the size a .pt was trained at, else the cfg's [net] size)")
    p.add_argument("--square", action="store_true", help="square img x img letterbox instead of the image's own "
                   "rect canvas (long side at --img-size, half a stride of border)")
    p.add_argument("--batch-size", "--batch", dest="batch", type=int, default=1,
                   help="images per forward pass (images of one canvas shape are batched; video: 1 frame)")
    p.add_argument("--conf", type=float, default=0.25, help="confidence threshold (objectness * class)")
    p.add_argument("--iou", type=float, default=0.45, help="NMS IoU threshold")
    p.add_argument("--max-det", type=int, default=300, help="detections per image at most")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--project", default="runs/predict", help="parent folder of the run folder")
    p.add_argument("--name", default="exp", help="run folder name (a number is appended when it exists)")
    args = p.parse_args(argv)
    if (args.img is not None and args.img < 1) or args.max_det < 1 or args.batch < 1:
        p.error(f"--img-size, --batch-size and --max-det must be positive, got {args.img}, {args.batch} and "
                f"{args.max_det}")
    if not 0 <= args.conf < 1 or not 0 <= args.iou <= 1:
        p.error(f"--conf must be in [0, 1) and --iou in [0, 1], got {args.conf} and {args.iou}")
    return args


def list_sources(source: str) -> list[Path]:
    """The image and video files `source` names (a file, a folder or a glob), sorted."""
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES + VIDEO_SUFFIXES)
        others = sorted(p.name for p in set(path.iterdir()) - set(files) if p.is_file())
        if others:  # a folder of photos often holds other files: say which were left out, once
            log.info("--source %s: %d file(s) neither image nor video ignored: %s", source, len(others),
                     ", ".join(others[:5]) + (", ..." if len(others) > 5 else ""))
    elif path.is_file():
        files = [path]
    else:
        files = sorted(Path(p) for p in glob.glob(source, recursive=True))
    files = [f for f in files if f.suffix.lower() in IMAGE_SUFFIXES + VIDEO_SUFFIXES]
    if not files:
        raise FileNotFoundError(f"--source {source}: no such file, or no image or video file matches it "
                                f"(images: {', '.join(IMAGE_SUFFIXES)}; videos: {', '.join(VIDEO_SUFFIXES)})")
    return files


class UnreadableSource(ValueError):
    """An image or video that cannot be decoded: skipped, and counted in the summary."""


def open_video(path: Path) -> cv2.VideoCapture:
    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        raise UnreadableSource(f"{path}: OpenCV cannot open this video")
    return capture


def detect(model, image_bgr: np.ndarray, img_size: int, device, conf: float, iou: float,
           max_det: int, square: bool = False) -> torch.Tensor:
    """Rows (x1, y1, x2, y2, score, class) in the image's own pixels. The input is letterboxed as detect.val
    does it (the image's rect canvas, or a square one), so both see an image the same way (detect.api)."""
    settings = InferenceSettings(img_size, conf, iou, max_det, square)
    return detect_images(model, [image_bgr], settings, device)[0]


def class_colour(k: int) -> tuple[int, int, int]:
    """A distinct, stable BGR colour per class (golden-angle hues)."""
    hue = int((k * 137.508) % 180)
    bgr = cv2.cvtColor(np.array([[[hue, 200, 230]]], np.uint8), cv2.COLOR_HSV2BGR)[0, 0]
    return int(bgr[0]), int(bgr[1]), int(bgr[2])


def draw(image: np.ndarray, det: torch.Tensor, names: list[str]) -> np.ndarray:
    out = image.copy()
    thickness = max(1, round(sum(image.shape[:2]) / 600))
    for x1, y1, x2, y2, score, k in det.tolist():
        colour = class_colour(int(k))
        p1, p2 = (int(x1), int(y1)), (int(x2), int(y2))
        cv2.rectangle(out, p1, p2, colour, thickness, cv2.LINE_AA)
        label = f"{names[int(k)]} {score:.2f}"
        (tw, th), base = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, 0.4 * thickness, 1)
        top = p1[1] - th - base if p1[1] - th - base >= 0 else p1[1]
        cv2.rectangle(out, (p1[0], top), (p1[0] + tw, top + th + base), colour, -1)
        cv2.putText(out, label, (p1[0], top + th), cv2.FONT_HERSHEY_SIMPLEX, 0.4 * thickness, (255, 255, 255),
                    1, cv2.LINE_AA)
    return out


def save_results(det: torch.Tensor, names: list[str], shape, stem: str, run_dir: Path, source: str) -> None:
    """labels/<stem>.txt (YOLO: class cx cy w h conf, normalised) and json/<stem>.json (pixels)."""
    h, w = shape[:2]
    lines, objects = [], []
    for x1, y1, x2, y2, score, k in det.tolist():
        lines.append(f"{int(k)} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} {(x2 - x1) / w:.6f} "
                     f"{(y2 - y1) / h:.6f} {score:.5f}")
        objects.append({"class": int(k), "name": names[int(k)], "confidence": round(score, 5),
                        "box_xyxy": [round(v, 2) for v in (x1, y1, x2, y2)]})
    atomic_write_text(run_dir / "labels" / f"{stem}.txt", "".join(line + "\n" for line in lines))
    record = {"source": source, "width": w, "height": h, "detections": objects}
    atomic_write_text(run_dir / "json" / f"{stem}.json", json.dumps(record, indent=1))


def write_image(path: Path, image: np.ndarray) -> None:
    """Encode in the format of `path`'s suffix and write it atomically."""
    ok, data = cv2.imencode(path.suffix or ".jpg", image)
    if not ok:
        raise ValueError(f"{path}: OpenCV cannot encode an image as {path.suffix!r}")
    atomic_write_bytes(path, data.tobytes())


def summary(det: torch.Tensor, names: list[str]) -> str:
    counts = Counter(int(k) for k in det[:, 5].tolist())
    return ", ".join(f"{n} {names[k]}" for k, n in sorted(counts.items())) or "no detections"


def run(args) -> Path:
    ctx = dist.init_distributed(args.device)
    setup_logging(ctx.rank, ctx.world_size)
    model, checkpoint_names, args.square, args.img = load_tool_model(args.weights, args.cfg, ctx.device, args.img,
                                                                     args.square)
    names = read_class_names(args.names) if args.names else checkpoint_names
    names = names or default_names(model.num_classes, args.weights)
    if len(names) != model.num_classes:
        raise ValueError(f"--names {args.names} lists {len(names)} classes but the model predicts "
                         f"{model.num_classes}; give the names the weights were trained with")
    files = list_sources(args.source)
    run_dir = next_run_dir(args.project, args.name)
    for sub in ("labels", "json"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    detect_args = (args.img, ctx.device, args.conf, args.iou, args.max_det, args.square)
    settings = InferenceSettings(args.img, args.conf, args.iou, args.max_det, args.square, batch_size=args.batch)
    skipped, images = 0, []
    for i, path in enumerate(files, 1):
        label = f"{i}/{len(files)}"
        if path.suffix.lower() not in VIDEO_SUFFIXES:
            images.append((path, label))
            if len(images) == args.batch or i == len(files):
                skipped += predict_images(model, images, names, run_dir, settings, ctx.device)
                images = []
            continue
        skipped += predict_images(model, images, names, run_dir, settings, ctx.device)
        images = []
        try:
            predict_video(model, path, names, run_dir, detect_args, f"video {label}")
        except UnreadableSource as e:
            log.warning("skipped %s", e)
            skipped += 1
    if skipped == len(files):
        raise ValueError(f"--source {args.source}: none of its {len(files)} file(s) could be read (see above)")
    if skipped:
        print(f"{len(files) - skipped} of {len(files)} files processed; {skipped} skipped (could not be read)")
    print(f"results written to {run_dir}")
    return run_dir


def predict_images(model, images: list[tuple[Path, str]], names, run_dir: Path, settings: InferenceSettings,
                   device) -> int:
    """Detect in image files (path, progress label) as one batch and save the results; returns how many were
    skipped because they cannot be decoded (each named in one warning)."""
    tick = time.perf_counter()
    readable = []
    for path, label in images:
        try:
            readable.append((path, label, read_image(path)))
        except BadImage as e:
            log.warning("skipped %s", UnreadableSource(f"{path}: {e.detail}"))
    found = detect_images(model, [image for _, _, image in readable], settings, device) if readable else []
    elapsed = (time.perf_counter() - tick) * 1000 / max(len(readable), 1)
    for (path, label, image), det in zip(readable, found):
        write_image(run_dir / path.name, draw(image, det, names))
        save_results(det, names, image.shape, path.stem, run_dir, str(path))
        print(f"image {label} {path}: {summary(det, names)} ({elapsed:.1f} ms)")
    return len(images) - len(readable)


def predict_video(model, path: Path, names, run_dir: Path, detect_args, label: str) -> None:
    """Annotate every frame into run_dir/<stem>.mp4; txt and json per frame."""
    capture = open_video(path)
    fps = capture.get(cv2.CAP_PROP_FPS) or 25.0
    writer, index = None, 0
    try:
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            tick = time.perf_counter()
            det = detect(model, frame, *detect_args)
            elapsed = (time.perf_counter() - tick) * 1000
            if writer is None:
                writer = cv2.VideoWriter(str(run_dir / f"{path.stem}.mp4"), cv2.VideoWriter_fourcc(*"mp4v"),
                                         fps, (frame.shape[1], frame.shape[0]))
            writer.write(draw(frame, det, names))
            save_results(det, names, frame.shape, f"{path.stem}_{index}", run_dir, f"{path}#{index}")
            print(f"{label} {path} frame {index}: {summary(det, names)} ({elapsed:.1f} ms)")
            index += 1
    finally:
        capture.release()
        if writer is not None:
            writer.release()
    if index == 0:
        raise UnreadableSource(f"{path}: the video has no readable frame")


def main(argv=None) -> int:
    return run_command(parse_args, run, argv)


if __name__ == "__main__":
    sys.exit(main())
