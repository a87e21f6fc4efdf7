"""What predict writes per image or frame: the annotated picture, YOLO labels and json, and the video file."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import torch

from detect.runtime.files import atomic_write_bytes, atomic_write_text

log = logging.getLogger(__name__)


def class_colour(k: int) -> tuple[int, int, int]:
    """A distinct, stable BGR colour per class (golden-angle hues)."""
    hue = int((k * 137.508) % 180)
    bgr = cv2.cvtColor(np.array([[[hue, 200, 230]]], np.uint8), cv2.COLOR_HSV2BGR)[0, 0]
    return int(bgr[0]), int(bgr[1]), int(bgr[2])



def draw(image: np.ndarray, det: torch.Tensor, names: list[str]) -> np.ndarray:
    out = image.copy()
    thickness = line_thickness(image)
    for x1, y1, x2, y2, score, k in det.tolist():
        colour = class_colour(int(k))
        p1, p2 = (int(x1), int(y1)), (int(x2), int(y2))
        cv2.rectangle(out, p1, p2, colour, thickness, cv2.LINE_AA)
        draw_label(out, p1, f"{names[int(k)]} {score:.2f}", colour, thickness)
    return out


def line_thickness(image: np.ndarray) -> int:
    """Box lines (and label text) grow with the image: 2 px for 640x480, 5 for 1920x1080."""
    return max(1, round(sum(image.shape[:2]) / 600))


def draw_label(out: np.ndarray, corner: tuple[int, int], label: str, colour, thickness: int) -> None:
    """`label` in white on a `colour` band above a box's top-left `corner` (inside the box when there is no room
    above; moved left at the right edge so it stays readable)."""
    scale = 0.35 * thickness  # OpenCV 5 draws its fonts larger than 4.x: 0.7 gives 640x480 labels ~23 px high
    (tw, th), base = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
    x, y = corner
    top = y - th - base if y - th - base >= 0 else y
    left = min(max(x, 0), max(out.shape[1] - tw, 0))
    cv2.rectangle(out, (left, top), (left + tw, top + th + base), colour, -1)
    cv2.putText(out, label, (left, top + th), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1, cv2.LINE_AA)



def save_results(det: torch.Tensor, names: list[str], shape, stem: str, run_dir: Path, source: str,
                 save_conf: bool = False, ids=None) -> None:
    """labels/<stem>.txt (YOLO labels: class cx cy w h normalised, as train.py reads them; `save_conf` appends the
    confidence) and json/<stem>.json (pixels, with confidences). `ids` (tracking): each row's track id, the last
    value of its label line (as other YOLO tools write tracks) and `track_id` in the json."""
    h, w = shape[:2]
    lines, objects = [], []
    for row, track in zip(det.tolist(), [None] * len(det) if ids is None else [int(i) for i in ids]):
        x1, y1, x2, y2, score, k = row
        lines.append(f"{int(k)} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} {(x2 - x1) / w:.6f} "
                     f"{(y2 - y1) / h:.6f}" + (f" {score:.5f}" if save_conf else "")
                     + (f" {track}" if track is not None else ""))
        objects.append({"class": int(k), "name": names[int(k)], "confidence": round(score, 5),
                        "box_xyxy": [round(v, 2) for v in (x1, y1, x2, y2)]}
                       | ({"track_id": track} if track is not None else {}))
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



def open_writer(path: Path, fps: float, frame: np.ndarray) -> tuple[cv2.VideoWriter, tuple[int, int]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    size = (frame.shape[1], frame.shape[0])
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
    if not writer.isOpened():  # every write would vanish without a word
        log.warning("%s: OpenCV cannot write an mp4v video there (its build lacks the codec, or the folder is not "
                    "writable): no annotated video; the frames' labels and json are still written", path)
        return NoVideo(), size
    return writer, size


class NoVideo:
    """Stands in for a cv2.VideoWriter that could not open (said once, by open_writer)."""

    def write(self, frame) -> None:
        pass

    def release(self) -> None:
        pass
