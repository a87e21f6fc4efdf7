"""Small YOLO datasets written in a tmp folder: three images of known boxes, with their labels where a layout puts them."""

from pathlib import Path

import cv2
import numpy as np

SIZE = 64


ROWS = ("0 0.25 0.5 0.25 0.5", "1 0.625 0.375 0.125 0.25", "0 0.75 0.75 0.25 0.25")


STEMS = ("a", "b", "c")  # image i holds i + 1 boxes


def rows_of(stem: str) -> list[str]:
    return list(ROWS[: STEMS.index(stem) + 1])


def expected_boxes(stem: str) -> np.ndarray:
    """The xyxy pixel boxes of `rows_of(stem)` in a SIZE x SIZE image."""
    values = np.array([[float(v) for v in row.split()[1:]] for row in rows_of(stem)])
    half = values[:, 2:] / 2
    return np.concatenate([values[:, :2] - half, values[:, :2] + half], 1) * SIZE


def write_images(folder: Path, labels: Path | None = None, stems=STEMS) -> None:
    """SIZE x SIZE JPEGs `<stem>.jpg` in `folder`, and their label files in `labels` when given."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, stem in enumerate(stems):
        cv2.imwrite(str(folder / f"{stem}.jpg"), np.full((SIZE, SIZE, 3), 60 + 40 * i, np.uint8))
        if labels is not None:
            labels.mkdir(parents=True, exist_ok=True)
            (labels / f"{stem}.txt").write_text("\n".join(rows_of(stem)) + "\n")
