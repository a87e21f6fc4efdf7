"""train_batch*.jpg and val_batch*_{labels,pred}.jpg: a grid of images with their boxes, class names and
(for predictions) scores, drawn with OpenCV."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detect.evaluation.split_match import MOSAIC_IMAGES
from detect.plots.render import class_colour, save_jpeg

TILE = 400  # pixels of the long side of each image in the grid
MAX_IMAGES = MOSAIC_IMAGES  # tiles of a mosaic (an evaluation keeps the detections of that many images)


@dataclass(frozen=True)
class Tile:
    """One image of a mosaic: HxWx3 uint8 RGB, boxes xyxy in its pixels, class indices, scores or None."""

    image: np.ndarray
    boxes: np.ndarray
    classes: np.ndarray
    scores: np.ndarray | None = None
    title: str = ""


def draw_label(canvas: np.ndarray, text: str, x: int, y: int, colour) -> None:
    """`text` on a box of `colour` whose bottom-left corner is (x, y), kept inside the canvas."""
    import cv2

    (w, h), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, 0.4, 1)
    x = min(max(x, 0), max(canvas.shape[1] - w - 2, 0))
    top = max(y - h - base - 2, 0)
    luminance = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
    ink = (0, 0, 0) if luminance > 150 else (255, 255, 255)  # readable on light and dark label colours
    cv2.rectangle(canvas, (x, top), (x + w + 2, top + h + base + 2), colour, -1)
    cv2.putText(canvas, text, (x + 1, top + h + 1), cv2.FONT_HERSHEY_SIMPLEX, 0.4, ink, 1, cv2.LINE_AA)


def _draw_tile(tile: Tile, names: Sequence[str]) -> np.ndarray:
    """The image scaled to TILE (long side) on a grey TILE x TILE square, boxes drawn."""
    import cv2

    h, w = tile.image.shape[:2]
    scale = TILE / max(h, w)
    image = cv2.resize(tile.image, (max(round(w * scale), 1), max(round(h * scale), 1)), interpolation=cv2.INTER_AREA)
    canvas = np.full((TILE, TILE, 3), 114, dtype=np.uint8)
    canvas[: image.shape[0], : image.shape[1]] = image
    for i, (box, k) in enumerate(zip(np.asarray(tile.boxes).reshape(-1, 4) * scale, tile.classes)):
        x1, y1, x2, y2 = (round(float(v)) for v in box)
        colour = class_colour(k)
        cv2.rectangle(canvas, (x1, y1), (x2, y2), colour, 2)
        name = names[int(k)] if 0 <= int(k) < len(names) else str(int(k))
        text = name if tile.scores is None else f"{name} {float(tile.scores[i]):.2f}"
        draw_label(canvas, text, max(x1, 0), max(y1, 0), colour)
    if tile.title:
        draw_label(canvas, tile.title, 0, TILE, (40, 40, 40))
    cv2.rectangle(canvas, (0, 0), (TILE - 1, TILE - 1), (255, 255, 255), 2)
    return canvas


def draw_mosaic(tiles: Sequence[Tile], names: Sequence[str], path: str | Path) -> Path:
    """Up to MAX_IMAGES tiles in a square-ish grid, written as a JPEG."""
    tiles = list(tiles)[:MAX_IMAGES]
    if not tiles:
        raise ValueError(f"{path}: a mosaic needs at least one image")
    cols = math.ceil(math.sqrt(len(tiles)))
    rows = math.ceil(len(tiles) / cols)
    grid = np.full((rows * TILE, cols * TILE, 3), 255, dtype=np.uint8)
    for i, tile in enumerate(tiles):
        r, c = divmod(i, cols)
        grid[r * TILE:(r + 1) * TILE, c * TILE:(c + 1) * TILE] = _draw_tile(tile, names)
    return save_jpeg(grid, path)


def batch_tiles(images: np.ndarray, targets: np.ndarray, paths: Sequence[str] = ()) -> list[Tile]:
    """Tiles of a training batch: images uint8 [B, 3, S, S] RGB, targets [M, 6] (batch index, class, cx, cy,
    w, h) normalised to the image tensor."""
    tiles = []
    for b in range(min(len(images), MAX_IMAGES)):
        image = np.ascontiguousarray(np.asarray(images[b]).transpose(1, 2, 0))
        h, w = image.shape[:2]
        rows = targets[targets[:, 0] == b]
        centre, size = rows[:, 2:4] * (w, h), rows[:, 4:6] * (w, h)
        boxes = np.concatenate((centre - size / 2, centre + size / 2), axis=1)
        title = Path(paths[b]).name if b < len(paths) else ""
        tiles.append(Tile(image, boxes, rows[:, 1].astype(np.int64), title=title))
    return tiles
