"""Augmentations with their box transforms: letterbox, mosaic (4 or 9 tiles, detect.data.augmentation.mosaic), random affine
(with optional perspective), mixup, HSV jitter, flips.

Geometry uses continuous corner coordinates (pixel column i spans x in [i, i+1)), the same convention as
the boxes. A 3x3 matrix M maps input coordinates to output coordinates (homogeneous: a perspective matrix's
last row is not (0, 0, 1), and points are divided by their third coordinate); `warp` converts it to OpenCV's
pixel-index convention, so image and boxes move together exactly. Boxes are xyxy float arrays.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from detect.data.augmentation.augment_config import AugmentConfig
from detect.data.augmentation.geometry import letterbox_ratio
from detect.data.augmentation.mosaic import PAD_VALUE


def letterbox(image: np.ndarray, shape: tuple[int, int],
              long_side: int | None = None) -> tuple[np.ndarray, float, tuple[int, int]]:
    """Fit `image` into `shape` (h, w) keeping its aspect ratio, centred on PAD_VALUE. With `long_side`, the
    image is scaled to that long side instead (never beyond what fits) and the rest of `shape` is border.

    Returns (out, ratio, (left, top)). A point x of the original lands at x * ratio + left (y: * ratio + top)
    exactly: the resize is given the scale itself (fx=fy=ratio), which OpenCV uses for its mapping, so
    rounding the output size does not change the scale. Inverse: x = (x' - left) / ratio.
    """
    return letterbox_place(*letterbox_resize(image, shape, long_side), shape)


def letterbox_resize(image: np.ndarray, shape: tuple[int, int],
                     long_side: int | None = None) -> tuple[np.ndarray, float]:
    """The letterbox's first step: (the image at its scale in `shape`, that scale)."""
    h, w = image.shape[:2]
    ratio = letterbox_ratio(h, w, shape, long_side)
    if ratio != 1.0:
        # bilinear, as the reference evaluation resizes (INTER_AREA: mAP@0.5 0.410 vs 0.415, yolov3-tiny, coco-tiny)
        image = cv2.resize(image, None, fx=ratio, fy=ratio, interpolation=cv2.INTER_LINEAR)
    return image, ratio


def letterbox_place(image: np.ndarray, ratio: float,
                    shape: tuple[int, int]) -> tuple[np.ndarray, float, tuple[int, int]]:
    """The letterbox's second step: the resized image centred in `shape` on PAD_VALUE."""
    out_h, out_w = shape
    nh, nw = image.shape[:2]
    nh, nw = min(nh, out_h), min(nw, out_w)
    left, top = (out_w - nw) // 2, (out_h - nh) // 2
    out = np.full((out_h, out_w, 3), PAD_VALUE, dtype=np.uint8)
    out[top:top + nh, left:left + nw] = image[:nh, :nw]
    return out, ratio, (left, top)


def translation(dx: float, dy: float) -> np.ndarray:
    return np.array([[1, 0, dx], [0, 1, dy], [0, 0, 1]], dtype=np.float64)


def random_affine_matrix(rng: np.random.Generator, in_w: float, in_h: float, out_size: int,
                         cfg: AugmentConfig) -> np.ndarray:
    """Centre the input on the origin, perspective, rotate+zoom, shear, then move to a jittered output centre."""
    angle = math.radians(rng.uniform(-cfg.degrees, cfg.degrees))
    zoom = rng.uniform(1 - cfg.scale, 1 + cfg.scale)
    cos, sin = math.cos(angle) * zoom, math.sin(angle) * zoom
    rotate = np.array([[cos, -sin, 0], [sin, cos, 0], [0, 0, 1]])
    shx, shy = (math.tan(math.radians(rng.uniform(-cfg.shear, cfg.shear))) for _ in range(2))
    shear = np.array([[1, shx, 0], [shy, 1, 0], [0, 0, 1]])
    tx, ty = (rng.uniform(0.5 - cfg.translate, 0.5 + cfg.translate) * out_size for _ in range(2))
    matrix = translation(tx, ty) @ shear @ rotate
    if cfg.perspective > 0:  # drawn last and only when on: the other draws stay what they were without it
        matrix = matrix @ perspective_matrix(*rng.uniform(-cfg.perspective, cfg.perspective, 2))
    return matrix @ translation(-in_w / 2, -in_h / 2)


def perspective_matrix(px: float, py: float) -> np.ndarray:
    """(x, y) -> (x, y) / (1 + px x + py y): lines stay lines, and the side towards +(px, py) shrinks."""
    return np.array([[1, 0, 0], [0, 1, 0], [px, py, 1]], dtype=np.float64)


def is_affine(matrix: np.ndarray) -> bool:
    return matrix[2, 0] == 0 and matrix[2, 1] == 0 and matrix[2, 2] == 1


def warp(image: np.ndarray, matrix: np.ndarray, out_size: int) -> np.ndarray:
    """Apply a corner-coordinate matrix with OpenCV (whose matrices act on pixel indices = corners - 0.5)."""
    if not is_affine(matrix):
        pixels = translation(-0.5, -0.5) @ matrix @ translation(0.5, 0.5)
        return cv2.warpPerspective(image, pixels, (out_size, out_size), flags=cv2.INTER_LINEAR,
                                   borderMode=cv2.BORDER_CONSTANT, borderValue=(PAD_VALUE,) * 3)
    m = matrix[:2].copy()
    m[:, 2] += m[:, :2].sum(1) * 0.5 - 0.5
    return cv2.warpAffine(image, m, (out_size, out_size), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=(PAD_VALUE,) * 3)


def is_axis_aligned(matrix: np.ndarray) -> bool:
    """A zoom and a shift only (no rotation, shear, perspective or mirror): boxes stay boxes and pixels can be
    resized."""
    return is_affine(matrix) and matrix[0, 1] == 0 and matrix[1, 0] == 0 and matrix[0, 0] > 0 and matrix[1, 1] > 0


def _resize_span(shift: float, zoom: float, length: int, out_size: int) -> tuple[int, int, int]:
    """Along one axis: (first, stop) of the input pixels that reach the output, with one pixel of margin so
    interpolation never reads past the crop, and the whole-pixel output offset of the first one."""
    first = max(0, math.floor(-shift / zoom) - 1)
    stop = min(length, math.ceil((out_size - shift) / zoom) + 1)
    return first, stop, round(shift + zoom * first)


def axis_aligned_crop(matrix: np.ndarray, height: int, width: int, out_size: int):
    """The plan of `warp_axis_aligned` for an axis-aligned matrix on a height x width source: (the matrix actually
    applied, (x0, x1, dx, y0, y1, dy) or None). The crop [x0, x1) x [y0, y1) of the source, resized by the zoom,
    lands with its first pixel at (dx, dy); the shift moves by < 0.5 px so that it lands on whole pixels. None:
    the crop would come out of OpenCV's resize at its own size (a zoom within half a pixel of 1 over it), which
    OpenCV copies instead of resizing, so the sample is warped with `matrix` as it is."""
    zoom_x, zoom_y = float(matrix[0, 0]), float(matrix[1, 1])
    x0, x1, dx = _resize_span(float(matrix[0, 2]), zoom_x, width, out_size)
    y0, y1, dy = _resize_span(float(matrix[1, 2]), zoom_y, height, out_size)
    # OpenCV's size for fx/fy without dsize: each side times its factor, rounded half to even (as round())
    same = round((x1 - x0) * zoom_x) == x1 - x0 and round((y1 - y0) * zoom_y) == y1 - y0
    if x1 > x0 and y1 > y0 and same and (zoom_x != 1 or zoom_y != 1):
        return matrix, None
    applied = matrix.astype(np.float64).copy()
    applied[0, 2], applied[1, 2] = dx - zoom_x * x0, dy - zoom_y * y0
    return applied, (x0, x1, dx, y0, y1, dy)


def paint_axis_aligned(image: np.ndarray, matrix: np.ndarray, crop, out_size: int) -> np.ndarray:
    """The pixels of an `axis_aligned_crop` plan: the crop resized (fx/fy, no dsize: corner coordinates map by
    exactly the zoom, x' = zoom * x) and placed on PAD_VALUE."""
    x0, x1, dx, y0, y1, dy = crop
    out = np.full((out_size, out_size, 3), PAD_VALUE, dtype=np.uint8)
    if x1 > x0 and y1 > y0:
        part = cv2.resize(image[y0:y1, x0:x1], None, fx=float(matrix[0, 0]), fy=float(matrix[1, 1]),
                          interpolation=cv2.INTER_LINEAR)
        ph, pw = part.shape[:2]
        ox0, oy0, ox1, oy1 = max(dx, 0), max(dy, 0), min(dx + pw, out_size), min(dy + ph, out_size)
        if ox1 > ox0 and oy1 > oy0:
            out[oy0:oy1, ox0:ox1] = part[oy0 - dy:oy1 - dy, ox0 - dx:ox1 - dx]
    return out


def warp_axis_aligned(image: np.ndarray, matrix: np.ndarray, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """`warp` for an axis-aligned matrix, by cropping what reaches the output and resizing it (several times
    cheaper than warpAffine, the largest cost of a training sample). Returns (out, the matrix actually applied);
    boxes must use the latter (`axis_aligned_crop`)."""
    applied, crop = axis_aligned_crop(matrix, *image.shape[:2], out_size)
    if crop is None:
        return warp(image, matrix, out_size), matrix
    return paint_axis_aligned(image, applied, crop, out_size), applied


def transform_boxes(boxes: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Axis-aligned boxes around the transformed corners of each box: [n,4] -> [n,4]."""
    if len(boxes) == 0:
        return boxes.reshape(0, 4).astype(np.float64)
    x1, y1, x2, y2 = boxes.T.astype(np.float64)
    xs = np.stack([x1, x2, x2, x1], 1)
    ys = np.stack([y1, y1, y2, y2], 1)
    tx = matrix[0, 0] * xs + matrix[0, 1] * ys + matrix[0, 2]
    ty = matrix[1, 0] * xs + matrix[1, 1] * ys + matrix[1, 2]
    if not is_affine(matrix):
        w = matrix[2, 0] * xs + matrix[2, 1] * ys + matrix[2, 2]
        tx, ty = tx / w, ty / w
    return np.stack([tx.min(1), ty.min(1), tx.max(1), ty.max(1)], 1)


def corners_of(boxes: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """The 4 transformed corners of each box, in order around it: [n, 4, 2]."""
    x1, y1, x2, y2 = boxes.T.astype(np.float64)
    pts = np.stack([np.stack([x1, y1], 1), np.stack([x2, y1], 1), np.stack([x2, y2], 1), np.stack([x1, y2], 1)], 1)
    moved = pts @ matrix[:2, :2].T + matrix[:2, 2]
    if is_affine(matrix):
        return moved
    return moved / (pts @ matrix[2, :2] + matrix[2, 2])[..., None]


def beyond_horizon(boxes: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Boxes with a corner on or behind a perspective matrix's horizon (no finite image there): [n] bool."""
    if is_affine(matrix):
        return np.zeros(len(boxes), dtype=bool)
    x1, y1, x2, y2 = boxes.T.astype(np.float64)
    xs, ys = np.stack([x1, x2, x2, x1], 1), np.stack([y1, y1, y2, y2], 1)
    return (matrix[2, 0] * xs + matrix[2, 1] * ys + matrix[2, 2] <= 1e-6).any(1)


def transform_clip_boxes(boxes: np.ndarray, matrix: np.ndarray, size: int) -> np.ndarray:
    """Exact axis-aligned box of (transformed box  intersected with  the [0, size]^2 frame): [n, 4].

    A rotated box cut by the frame is not just its clipped bounding box (that would keep a corner of empty
    frame). The intersection is convex (a perspective maps the box to a convex quadrilateral too, while it stays
    before the horizon); its vertices are the box corners inside the frame, the frame corners inside the box,
    and the crossings of box edges with the frame edges. Invisible boxes get zero area, and so do boxes that
    reach the horizon.
    """
    if len(boxes) == 0:
        return np.zeros((0, 4))
    if is_axis_aligned(matrix):  # the box stays a box: clipping it is the intersection
        return np.clip(transform_boxes(boxes, matrix), 0, size)
    quad = corners_of(boxes, matrix)  # [n, 4, 2]
    start, end = quad, np.roll(quad, -1, axis=1)
    candidates = [quad]
    frame = np.array([[0, 0], [size, 0], [size, size], [0, size]], dtype=np.float64)
    # frame corners inside the convex quad: same side of every edge (either orientation)
    cross = ((end[:, None, :, 0] - start[:, None, :, 0]) * (frame[None, :, None, 1] - start[:, None, :, 1])
             - (end[:, None, :, 1] - start[:, None, :, 1]) * (frame[None, :, None, 0] - start[:, None, :, 0]))
    inside = (cross >= -1e-9).all(2) | (cross <= 1e-9).all(2)  # [n, 4 frame corners]
    candidates.append(np.where(inside[..., None], frame[None], np.nan))
    for axis in (0, 1):
        for value in (0.0, float(size)):
            delta = end[..., axis] - start[..., axis]
            with np.errstate(divide="ignore", invalid="ignore"):  # edges parallel to the line: no crossing
                t = (value - start[..., axis]) / delta
                point = start + t[..., None] * (end - start)
            point[..., axis] = value
            candidates.append(np.where(((t >= 0) & (t <= 1))[..., None], point, np.nan))
    points = np.concatenate(candidates, 1)  # [n, 24, 2]
    in_frame = ((points >= -1e-6) & (points <= size + 1e-6)).all(2)
    points = np.where(in_frame[..., None], points, np.nan)
    visible = in_frame.any(1) & ~beyond_horizon(boxes, matrix)
    out = np.zeros((len(boxes), 4))
    with np.errstate(all="ignore"):
        out[visible] = np.concatenate([np.nanmin(points[visible], 1), np.nanmax(points[visible], 1)], 1)
    return np.clip(out, 0, size)


def clip_and_filter(boxes: np.ndarray, reference: np.ndarray, size: int,
                    cfg: AugmentConfig) -> tuple[np.ndarray, np.ndarray]:
    """Clip to [0, size]; keep boxes with both sides > min_box_size and enough of `reference`'s area left.

    Returns (clipped boxes [k,4] float32, keep mask [n]).
    """
    clipped = np.clip(boxes, 0, size)
    w, h = clipped[:, 2] - clipped[:, 0], clipped[:, 3] - clipped[:, 1]
    ref_area = (reference[:, 2] - reference[:, 0]) * (reference[:, 3] - reference[:, 1])
    keep = (w > cfg.min_box_size) & (h > cfg.min_box_size) & (w * h > cfg.min_area_ratio * ref_area)
    return clipped[keep].astype(np.float32), keep


def draw_hsv_gains(rng: np.random.Generator, cfg: AugmentConfig) -> np.ndarray | None:
    """Hue, saturation and value gains (None, and no draw, when all three are off)."""
    if not (cfg.hsv_h or cfg.hsv_s or cfg.hsv_v):
        return None
    return rng.uniform(-1, 1, 3) * (cfg.hsv_h, cfg.hsv_s, cfg.hsv_v) + 1


def hsv_tables(gains: np.ndarray) -> np.ndarray:
    """The lookup tables of `gains` for OpenCV's 8-bit H (0-179), S and V: uint8 [3, 256]."""
    x = np.arange(256, dtype=np.float32)
    return np.stack([((x * gains[0]) % 180).astype(np.uint8), np.clip(x * gains[1], 0, 255).astype(np.uint8),
                     np.clip(x * gains[2], 0, 255).astype(np.uint8)])


def apply_hsv(image: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """`hsv_tables` applied to a BGR uint8 image through OpenCV's HSV (in place)."""
    h, s, v = cv2.split(cv2.cvtColor(image, cv2.COLOR_BGR2HSV))
    hsv = cv2.merge((cv2.LUT(h, tables[0]), cv2.LUT(s, tables[1]), cv2.LUT(v, tables[2])))
    cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR, dst=image)
    return image


def augment_hsv(image: np.ndarray, rng: np.random.Generator, cfg: AugmentConfig) -> np.ndarray:
    """Random hue/saturation/value gains through lookup tables on a BGR uint8 image (in place)."""
    gains = draw_hsv_gains(rng, cfg)
    return image if gains is None else apply_hsv(image, hsv_tables(gains))


def flip_boxes_lr(boxes: np.ndarray, width: int) -> np.ndarray:
    out = boxes.copy()
    out[:, 0], out[:, 2] = width - boxes[:, 2], width - boxes[:, 0]
    return out


def flip_boxes_ud(boxes: np.ndarray, height: int) -> np.ndarray:
    out = boxes.copy()
    out[:, 1], out[:, 3] = height - boxes[:, 3], height - boxes[:, 1]
    return out


def draw_mix_ratio(rng: np.random.Generator) -> float:
    """mixup's weight of the sample's own image: r ~ beta(32, 32), close to 0.5."""
    return float(rng.beta(32.0, 32.0))


def blend(image: np.ndarray, other: np.ndarray, ratio: float) -> np.ndarray:
    return cv2.addWeighted(image, ratio, other, 1.0 - ratio, 0.0)


def mixup(rng: np.random.Generator, image: np.ndarray, boxes: np.ndarray, classes: np.ndarray,
          other: np.ndarray, other_boxes: np.ndarray, other_classes: np.ndarray):
    """Blend two samples of one size, `image` weighted r ~ beta(32, 32) (close to 0.5) and `other` 1 - r, and
    keep the boxes of both. Returns (image, boxes, classes, r)."""
    ratio = draw_mix_ratio(rng)
    return blend(image, other, ratio), np.concatenate([boxes, other_boxes]), np.concatenate([classes, other_classes]), ratio
