"""Letterbox canvas geometry: pure arithmetic on sizes, shared by the evaluation loader, the letterbox
itself and detect.predict (which letterboxes each image as detect.val does)."""

from __future__ import annotations

import math


def round_up(value: float, stride: int) -> int:
    """The smallest multiple of `stride` that is at least `value`."""
    return int(math.ceil(value / stride) * stride)


def rect_shape(width: float, height: float, img_size: int, stride: int) -> tuple[int, int]:
    """(h, w) canvas of one image in rect evaluation: the image at long side `img_size`, plus at least half a
    stride of border on each axis, rounded up to the stride. The border gives objects at the image edge the
    same grey context Darknet's square letterbox gives them; it is the PyTorch port's rect padding (pad=0.5)."""
    scale = img_size / max(width, height)
    return (round_up(height * scale + stride / 2, stride), round_up(width * scale + stride / 2, stride))


def letterbox_ratio(height: int, width: int, shape: tuple[int, int], long_side: int | None = None) -> float:
    """The scale the letterbox gives a `height` x `width` image on a canvas of `shape` (h, w): the largest that
    fits, and with `long_side` at most the one that brings the image's long side to it."""
    out_h, out_w = shape
    ratio = min(out_h / height, out_w / width)
    return ratio if long_side is None else min(ratio, long_side / max(height, width))
