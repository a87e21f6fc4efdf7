"""Mosaics: 4 tiles around a random centre on a 2S x 2S canvas, or 9 on a 3S x 3S canvas (yolov7's mosaic9), each
tile cut to where it lands; boxes come back in canvas coordinates, cut to their tile and whole."""

from __future__ import annotations

import numpy as np

PAD_VALUE = 114  # grey of the letterbox and mosaic borders (uint8)


def mosaic_placements(rng: np.random.Generator, size: int, shapes: list[tuple[int, int]]):
    """Where 4 tiles (h, w) go on a 2S x 2S canvas around a random centre.

    Yields (canvas slice y, canvas slice x, tile slice y, tile slice x, offset (dx, dy)) per tile: tile pixel
    (x, y) lands at canvas (x + dx, y + dy); parts falling off the canvas are cut.
    """
    xc, yc = (int(rng.uniform(size * 0.5, size * 1.5)) for _ in range(2))
    canvas = 2 * size
    for i, (h, w) in enumerate(shapes):
        dx = xc - w if i in (0, 2) else xc  # tiles 0, 2 end at the centre column; 1, 3 start there
        dy = yc - h if i in (0, 1) else yc
        x1, y1 = max(dx, 0), max(dy, 0)
        x2, y2 = min(dx + w, canvas), min(dy + h, canvas)
        yield slice(y1, y2), slice(x1, x2), slice(y1 - dy, y2 - dy), slice(x1 - dx, x2 - dx), (dx, dy)


# (row, column) of the 9 tiles of a 3 x 3 mosaic: the sample's own image in the middle, then the others around it
NINE_CELLS = ((1, 1), (0, 0), (0, 1), (0, 2), (1, 2), (2, 2), (2, 1), (2, 0), (1, 0))


def mosaic9_placements(size: int, shapes: list[tuple[int, int]]):
    """Where 9 tiles (h, w) go on a 3S x 3S canvas: the first in its middle; the grid's inner lines are that
    tile's edges, and every other tile touches it (at a corner, or centred along a side) and is cut to its
    cell, so no tile covers another. Yields what `mosaic_placements` yields.
    """
    h0, w0 = shapes[0]
    left, top = size + (size - w0) // 2, size + (size - h0) // 2
    xs, ys = (0, left, left + w0, 3 * size), (0, top, top + h0, 3 * size)  # column and row edges
    for (h, w), (row, col) in zip(shapes, NINE_CELLS):
        dx = (left - w, left + (w0 - w) // 2, left + w0)[col]
        dy = (top - h, top + (h0 - h) // 2, top + h0)[row]
        x1, y1 = max(dx, xs[col]), max(dy, ys[row])
        x2, y2 = max(min(dx + w, xs[col + 1]), x1), max(min(dy + h, ys[row + 1]), y1)
        yield slice(y1, y2), slice(x1, x2), slice(y1 - dy, y2 - dy), slice(x1 - dx, x2 - dx), (dx, dy)


def mosaic_layout(rng: np.random.Generator, size: int, shapes: list[tuple[int, int]], boxes: list[np.ndarray]):
    """Where the 4 or 9 tiles of `shapes` go (the random draws of a mosaic), without touching a pixel:
    (canvas side, placements as `mosaic_placements` yields them, visible boxes, full boxes) in canvas coordinates.

    `visible` is each box cut to its tile's part on the canvas; `full` is the uncut box (for the area ratio).
    """
    if len(shapes) not in (4, 9):
        raise ValueError(f"a mosaic has 4 or 9 tiles, got {len(shapes)}")
    side = (2 if len(shapes) == 4 else 3) * size
    places = list(mosaic_placements(rng, size, shapes) if len(shapes) == 4 else mosaic9_placements(size, shapes))
    visible, full = [], []
    for b, (cy, cx, _, _, (dx, dy)) in zip(boxes, places):
        moved = b + np.array([dx, dy, dx, dy], dtype=np.float64)
        full.append(moved)
        lo = np.array([cx.start, cy.start] * 2, dtype=np.float64)
        hi = np.array([cx.stop, cy.stop] * 2, dtype=np.float64)
        visible.append(np.clip(moved, lo, hi))
    return side, places, np.concatenate(visible), np.concatenate(full)


def paint_mosaic(side: int, tiles: list[np.ndarray], places) -> np.ndarray:
    """The side x side canvas of a layout: each tile's placed part on PAD_VALUE."""
    canvas = np.full((side, side, 3), PAD_VALUE, dtype=np.uint8)
    for tile, (cy, cx, ty, tx, _) in zip(tiles, places):
        canvas[cy, cx] = tile[ty, tx]
    return canvas


def build_mosaic(rng: np.random.Generator, size: int, tiles: list[np.ndarray], boxes: list[np.ndarray]):
    """A mosaic of 4 tiles on 2S x 2S or of 9 on 3S x 3S: (canvas, visible boxes, full boxes) with boxes in
    canvas coordinates (`mosaic_layout`, then `paint_mosaic`)."""
    side, places, visible, full = mosaic_layout(rng, size, [t.shape[:2] for t in tiles], boxes)
    return paint_mosaic(side, tiles, places), visible, full
