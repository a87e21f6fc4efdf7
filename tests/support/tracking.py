"""Sequences with known tracks for the tracking tests: a camera window panning across a coco-tiny photo (real
people moving with their annotation ids), shapes crossing, written as MOTChallenge folders, image folders or a
video; and a stand-in predictor that returns given rows per frame."""

import json

import cv2
import numpy as np

from benchmarks.track_data import MadeSequence, moving_shapes, pan_over, write_sequence
from detect.inference.predictor import InferenceSettings

STREET = "000000454661.jpg"  # a coco-tiny val photo of a street: cars and trucks (4% to 21% of it), traffic lights


def coco_photo(shared, name: str = STREET) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(BGR photo, its non-crowd boxes [n, 4] xyxy of at least 1% of the photo, their COCO category ids)."""
    root = shared("data", "coco-tiny")
    ann = json.loads((root / "annotations" / "instances_val2017.json").read_text())
    image = next(im for im in ann["images"] if im["file_name"] == name)
    boxes, classes = [], []
    for a in ann["annotations"]:
        x, y, w, h = a["bbox"]
        if a["image_id"] == image["id"] and not a.get("iscrowd") and w * h >= 0.01 * image["width"] * image["height"]:
            boxes.append([x, y, x + w, y + h])
            classes.append(a["category_id"])
    return cv2.imread(str(root / "val2017" / name)), np.array(boxes, np.float64), np.array(classes, np.int64)


def panned_street(shared, length: int = 12, size=(320, 240), name: str = "street") -> MadeSequence:
    """A slow pan (a third of a sweep, 90% to 80% of the photo's width) across the street photo: the vehicles
    move a few pixels a frame, and some leave or enter at the edges."""
    image, boxes, classes = coco_photo(shared)
    return pan_over(image, boxes, classes, name, length=length, size=size, zoom=(0.9, 0.8), cycles=1 / 3)


def write_frames(seq: MadeSequence, folder) -> list:
    """The frames as folder/0000.jpg, 0001.jpg ... (an image sequence for predict and the API)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, frame in enumerate(seq.frames):
        paths.append(folder / f"{i:04d}.jpg")
        cv2.imwrite(str(paths[-1]), frame)
    return paths


def write_video(seq: MadeSequence, path, fps: float = 10.0):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, seq.size)
    assert writer.isOpened()
    for frame in seq.frames:
        writer.write(frame)
    writer.release()
    return path


def write_shapes_sequence(root, name: str = "shapes", length: int = 12, objects: int = 3, seed: int = 0):
    """A MOTChallenge folder of shapes moving and crossing; returns (folder, the sequence)."""
    seq = moving_shapes(name, length, objects, size=(160, 120), seed=seed)
    return write_sequence(seq, root), seq


class RowsPredictor:
    """Stands in for a Predictor: `predictor(images)` returns the next frames' rows [n, 6] from `rows` in order
    (what a detector would have found), and records the batch sizes it was called with."""

    def __init__(self, rows: list[np.ndarray], conf: float = 0.25, batch_size: int = 4):
        self.rows, self.next, self.calls = rows, 0, []
        self.settings = InferenceSettings(img_size=64, conf=conf, batch_size=batch_size)

    def __call__(self, images):
        self.calls.append(len(images))
        out = self.rows[self.next:self.next + len(images)]
        self.next += len(images)
        return [np.asarray(r, np.float32).reshape(-1, 6) for r in out]
