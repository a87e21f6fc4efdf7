"""Sliced inference (`--slice SIZE --overlap F` in detect.predict and detect.val, `Detector.load(slice_size=...)`):
a large image is cut into overlapping tiles, each tile is run through the model at its usual input size (so a
small object is seen at several times the scale the whole-image pass gives it), and the tiles' boxes are mapped
back into the image and merged with those of one pass over the whole image.

The grid (`tile_grid`): along each side, the fewest tiles of SIZE pixels whose neighbours overlap by at least
F x SIZE, spread evenly, the first at 0 and the last at the far edge; so every tile has the full size and the
overlap is F or a little more. A side no longer than SIZE has one tile of its own length.

Objects a tile edge cuts (`cut_by_tile_edge`): a tile's box that comes within EDGE_MARGIN x SIZE of one of the
tile's interior edges (an edge inside the image, not its border) is dropped. Such a box is most likely the part
of an object the tile shows, scored as if it were the whole: kept, it would survive NMS beside the whole object's
box, because a half box overlaps the whole one by an IoU of about 0.5 only. Nothing is lost by dropping it: an
object no wider than the overlap lies wholly inside a neighbouring tile, which finds it whole, and a larger one
is the whole-image pass's, at whose scale a large object is what the model sees best. One class-wise NMS over
everything left then keeps one box per object: an object found whole by two overlapping tiles and by the
whole-image pass ends as one box (the highest-scoring of them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torchvision.ops import batched_nms

# A tile's box within this fraction of the tile size of an interior tile edge counts as cut by it (2%: 13 px of
# a 640 px tile): boxes of a cut object end at the edge, give or take the few pixels a box regression is off.
EDGE_MARGIN = 0.02
DEFAULT_OVERLAP = 0.2

Tile = tuple[int, int, int, int]  # x1, y1, x2, y2 in image pixels (x2, y2 exclusive)


def check_slice(size: int, overlap: float, size_name: str = "--slice", overlap_name: str = "--overlap") -> None:
    """A ValueError naming the value at fault when a tile size or overlap cannot make a grid."""
    if size < 1:
        raise ValueError(f"{size_name} must be a positive tile size in pixels, got {size}")
    if not 0 <= overlap < 1:
        raise ValueError(f"{overlap_name} must be a fraction of the tile in [0, 1), got {overlap}")


def tile_starts(length: int, size: int, overlap: float) -> list[int]:
    """Start offsets of the tiles along a side of `length` pixels: the fewest tiles of `size` whose neighbours
    overlap by at least `overlap` x `size`, evenly spread from 0 to `length - size`; [0] when one tile covers it."""
    check_slice(size, overlap)
    if length <= size:
        return [0]
    step = size * (1 - overlap)  # the farthest apart two neighbours may start
    count = math.ceil((length - size) / step - 1e-9) + 1
    return [round(i * (length - size) / (count - 1)) for i in range(count)]


def tile_grid(width: int, height: int, size: int, overlap: float = DEFAULT_OVERLAP) -> list[Tile]:
    """The tiles of an image, row by row (x1, y1, x2, y2); a single tile, the whole image, when it fits in one."""
    xs, ys = tile_starts(width, size, overlap), tile_starts(height, size, overlap)
    return [(x, y, min(x + size, width), min(y + size, height)) for y in ys for x in xs]


def needs_tiles(width: int, height: int, size: int) -> bool:
    """Whether slicing adds anything: a side longer than the tile (else the whole-image pass is the only one)."""
    return width > size or height > size


def to_image_pixels(rows: torch.Tensor, tile: Tile) -> torch.Tensor:
    """Rows (x1, y1, x2, y2, ...) in a tile's pixels -> the same rows in the image's pixels (a new tensor)."""
    out = rows.clone()
    out[:, [0, 2]] += tile[0]
    out[:, [1, 3]] += tile[1]
    return out


def cut_by_tile_edge(rows: torch.Tensor, tile: Tile, width: int, height: int, margin: float) -> torch.Tensor:
    """bool [n]: which boxes (image pixels) come within `margin` pixels of an edge of `tile` that lies inside
    the image (the image's own border cuts nothing a neighbour could show whole)."""
    x1, y1, x2, y2 = tile
    return (((x1 > 0) & (rows[:, 0] <= x1 + margin)) | ((y1 > 0) & (rows[:, 1] <= y1 + margin))
            | ((x2 < width) & (rows[:, 2] >= x2 - margin)) | ((y2 < height) & (rows[:, 3] >= y2 - margin)))


def merge_tiles(whole: torch.Tensor, tile_rows: Sequence[torch.Tensor], tiles: Sequence[Tile], width: int,
                height: int, iou: float, max_det: int, edge_margin: float = EDGE_MARGIN) -> torch.Tensor:
    """One image's detections (x1, y1, x2, y2, score, class), best first, from the whole-image pass's rows
    (image pixels) and each tile's rows (tile pixels): tile boxes mapped into the image, those cut by an interior
    tile edge dropped, then one class-wise NMS at `iou` over all of them and the first `max_det` kept."""
    parts = [whole]
    for rows, tile in zip(tile_rows, tiles, strict=True):
        margin = edge_margin * max(tile[2] - tile[0], tile[3] - tile[1])
        mapped = to_image_pixels(rows, tile)
        parts.append(mapped[~cut_by_tile_edge(mapped, tile, width, height, margin)])
    rows = torch.cat(parts)
    # float64 as in detect.inference.postprocess: batched_nms offsets each class's boxes by a multiple of the
    # largest coordinate, which float32 would round
    keep = batched_nms(rows[:, :4].double(), rows[:, 4].double(), rows[:, 5].long(), iou)[:max_det]
    return rows[keep]
