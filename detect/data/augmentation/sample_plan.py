"""A training sample as a plan: every random draw and every box, made before any pixel is touched.

The plan is painted either on the host (`paint_sample`, OpenCV, in the loader workers) or, for a whole batch
at once, on the device (detect.data.augmentation.device_augment). Both follow the same plan, so the boxes are the same to the
bit and the pixels differ only by interpolation rounding.

    geometry (`plan_geometry`): one image centred in an S x S frame, or a mosaic of 4 or 9 on its canvas, and
        one matrix from the canvas to the S x S output (affine, with optional perspective)
    sample (`SamplePlan`): a geometry, optionally blended with a second one (mixup), HSV gains, flips
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from detect.data.augmentation.augment import (
    apply_hsv,
    axis_aligned_crop,
    blend,
    clip_and_filter,
    hsv_tables,
    is_axis_aligned,
    paint_axis_aligned,
    random_affine_matrix,
    transform_boxes,
    transform_clip_boxes,
    translation,
    warp,
)
from detect.data.augmentation.augment_config import AugmentConfig
from detect.data.augmentation.mosaic import mosaic_layout, paint_mosaic


@dataclass
class GeometryPlan:
    """One image or mosaic warped to size x size.

    `images` are the sources (BGR uint8, long side S); `places` are mosaic placements (canvas slice y, x, tile
    slice y, x, offset) or None for one image, whose canvas is the image itself; `matrix` maps canvas corner
    coordinates to output ones (the one the pixels get: the axis-aligned crop moves its shift by < 0.5 px);
    `crop` is that crop's plan (detect.data.augmentation.augment.axis_aligned_crop) or None for a warp.
    """

    images: list[np.ndarray]
    places: list | None
    canvas_hw: tuple[int, int]
    matrix: np.ndarray
    crop: tuple | None
    boxes: np.ndarray  # [k, 4] float32 xyxy in output pixels
    classes: np.ndarray  # [k]

    def tiles(self):
        """(image, canvas slice y, canvas slice x, tile slice y, tile slice x) of every source on the canvas."""
        if self.places is None:
            h, w = self.canvas_hw
            yield self.images[0], slice(0, h), slice(0, w), slice(0, h), slice(0, w)
            return
        for image, (cy, cx, ty, tx, _) in zip(self.images, self.places):
            yield image, cy, cx, ty, tx


@dataclass
class SamplePlan:
    geometries: list[GeometryPlan]  # one, or two blended by mixup (the first weighted mix_ratio)
    mix_ratio: float | None
    hsv_gains: np.ndarray | None  # None: no HSV jitter (the image is not converted at all)
    flip_lr: bool
    flip_ud: bool
    boxes: np.ndarray  # the sample's boxes after everything: [n, 4] xyxy output pixels
    classes: np.ndarray
    size: int

    def hsv_tables(self) -> np.ndarray | None:
        return None if self.hsv_gains is None else hsv_tables(self.hsv_gains)


def plan_geometry(rng: np.random.Generator, images: list[np.ndarray], boxes: list[np.ndarray],
                  classes: list[np.ndarray], size: int, cfg: AugmentConfig) -> GeometryPlan:
    """Mosaic (4 or 9 images) or centred single image, then one random affine warp to size x size.

    `images` are already resized to a long side of `size`, `boxes` are in their pixels.
    """
    places = None
    if len(images) in (4, 9):
        side, places, visible, full = mosaic_layout(rng, size, [im.shape[:2] for im in images], boxes)
        canvas_hw, place, frame = (side, side), np.eye(3), 2 * size
        if len(images) == 9:  # the affine centres a random 2S window of the 3S canvas (its centre on the middle tile)
            place = translation(*(-rng.uniform(0, size, 2)))
    else:
        visible = full = boxes[0]
        h, w = canvas_hw = images[0].shape[:2]
        place, frame = translation((size - w) / 2, (size - h) / 2), size  # centred in the S x S frame
    matrix = random_affine_matrix(rng, frame, frame, size, cfg) @ place
    crop = None
    if is_axis_aligned(matrix):
        matrix, crop = axis_aligned_crop(matrix, *canvas_hw, size)
    visible_out = transform_clip_boxes(visible, matrix, size)
    cut_off = (visible[:, 2] <= visible[:, 0]) | (visible[:, 3] <= visible[:, 1])  # fell off the mosaic canvas
    visible_out[cut_off] = 0.0
    kept, keep = clip_and_filter(visible_out, transform_boxes(full, matrix), size, cfg)
    return GeometryPlan(list(images), places, tuple(canvas_hw), matrix, crop, kept, np.concatenate(classes)[keep])


def paint_geometry(plan: GeometryPlan, size: int) -> np.ndarray:
    """The plan's size x size BGR uint8 pixels (OpenCV)."""
    source = plan.images[0] if plan.places is None else paint_mosaic(plan.canvas_hw[0], plan.images, plan.places)
    if plan.crop is not None:
        return paint_axis_aligned(source, plan.matrix, plan.crop, size)
    return warp(source, plan.matrix, size)


def geometric_augment(rng: np.random.Generator, images: list[np.ndarray], boxes: list[np.ndarray],
                      classes: list[np.ndarray], size: int, cfg: AugmentConfig):
    """`plan_geometry` painted: (image, boxes [k,4] float32 xyxy, classes [k], matrix input -> output)."""
    plan = plan_geometry(rng, images, boxes, classes, size, cfg)
    return paint_geometry(plan, size), plan.boxes, plan.classes, plan.matrix


def paint_sample(plan: SamplePlan) -> np.ndarray:
    """The sample's BGR uint8 pixels before the flips (which the CHW copy applies): geometries, mixup, HSV."""
    out = paint_geometry(plan.geometries[0], plan.size)
    if plan.mix_ratio is not None:
        out = blend(out, paint_geometry(plan.geometries[1], plan.size), plan.mix_ratio)
    if plan.hsv_gains is not None:
        apply_hsv(out, plan.hsv_tables())
    return out
