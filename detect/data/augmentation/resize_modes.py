"""How an image becomes a square network input: the two modes a Darknet model can be fed with.

- `letterbox` (the cfg's `letter_box=1`, and every model this project trained before it recorded its mode): the
  image keeps its aspect ratio, scaled into the canvas and centred on grey (detect.data.augmentation.augment.letterbox).
- `stretch` (Darknet's default, `letter_box=0`: how the official weights and most Darknet-trained models were
  trained): the image is resized to the canvas' width and height independently, so x and y have their own
  ratios and there is no border. A point x of the original lands at x * (canvas w / image w), exactly.
"""

from __future__ import annotations

import cv2
import numpy as np

from detect.data.augmentation.geometry import round_up

RESIZE_MODES = ("letterbox", "stretch")
# training may also stretch the single images only (mosaic tiles keep their aspect ratio); such a model is then
# fed stretched images, as the samples it ends training on (the last epochs run without mosaic)
TRAIN_RESIZE_MODES = (*RESIZE_MODES, "stretch-single")


def inference_resize(train_mode: str) -> str:
    """How a model trained with `train_mode` is fed at inference (and in its evaluations)."""
    return "stretch" if train_mode.startswith("stretch") else "letterbox"


def check_resize_mode(mode: str, flag: str = "--resize", modes: tuple[str, ...] = RESIZE_MODES) -> str:
    if mode not in modes:
        raise ValueError(f"{flag} {mode!r}: choose one of {', '.join(modes)}")
    return mode


def network_canvas(img_size: int, stride: int, net_shape: tuple[int, int] | None = None) -> tuple[int, int]:
    """(h, w) of the network's own canvas, which a stretched image fills: img_size x img_size, or for a model
    trained by Darknet on a non-square network (`net_shape`, its cfg's height and width) that shape, scaled so its
    long side is img_size (each side a multiple of `stride`): Darknet stretches every image to its network's width
    and height, or letterboxes it into them."""
    if net_shape is None or net_shape[0] == net_shape[1]:
        return (round_up(img_size, stride),) * 2
    scale = img_size / max(net_shape)
    h, w = (max(stride, round(side * scale / stride) * stride) for side in net_shape)
    return h, w


def stretch_ratio(width: int, height: int, shape: tuple[int, int]) -> tuple[float, float]:
    """(x ratio, y ratio) that bring a `width` x `height` image onto a canvas of `shape` (h, w)."""
    return shape[1] / width, shape[0] / height


def stretch(image: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, tuple[float, float]]:
    """(`image` resized to `shape` (h, w), bilinear, (x ratio, y ratio)). OpenCV maps pixel centres with the
    ratio of the sizes, so the boxes' ratios are exact."""
    h, w = image.shape[:2]
    if (h, w) != tuple(shape):
        image = cv2.resize(image, (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR)
    return image, stretch_ratio(w, h, shape)
