"""Darknet's own image path (AlexeyAB darknet built without OpenCV, src/image.c), for evaluating a model on the
exact input `darknet detector map` feeds it.

Darknet decodes with stb_image, scales bytes to floats as `(float)byte / 255.` (a double division rounded to
float), and stretches to the network size with `resize_image`: two separable bilinear passes in float32 whose
source positions are `c * (W - 1) / (w - 1)`, so both borders map onto border pixels (OpenCV's INTER_LINEAR
maps pixel centres instead); the last output column copies the last source column. One quirk is kept: the
second pass skips the lower neighbour on the last output row, so when `(h - 1) * h_scale` rounds just below
H - 1 that row is `(1 - dy) * row[H - 2]`, nearly black (2 of coco-tiny's 80 train images at 416).
`letterbox_image` resizes into a 0.5-grey canvas.
Images are HWC RGB here (Darknet stores CHW; the arithmetic per channel is the same).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from pathlib import Path

import cv2
import numpy as np

# stb_image as a shared library (Debian/Ubuntu package libstb0): the decoder Darknet bundles, optional here
STB_LIBRARY = "libstb.so.0"


def darknet_floats(image: np.ndarray) -> np.ndarray:
    """uint8 -> float32 as load_image_stb converts (byte / 255 in double, rounded once to float); float input is
    taken as already converted."""
    if image.dtype == np.uint8:
        return (image.astype(np.float64) / 255.0).astype(np.float32)
    return np.asarray(image, dtype=np.float32)


def read_rgb(path: str | Path, decoder: str = "opencv", exif: str = "ignore") -> np.ndarray:
    """The image as Darknet's stb_image loader sees it: uint8 RGB HWC, EXIF orientation ignored (stb_image does
    not read it), grey replicated to three channels. `decoder="opencv"` decodes JPEGs with libjpeg-turbo, which
    differs from stb_image by a level or three on about 1% of the values; `"stb"` uses stb_image itself
    (libstb0), for Darknet's own bytes. `exif="apply"` (OpenCV only) turns the image upright as its EXIF
    orientation says, as the project's loaders do: not Darknet's pixels, but those its labels were drawn on."""
    if exif not in ("ignore", "apply"):
        raise ValueError(f"exif={exif!r}: use 'ignore' (Darknet's) or 'apply'")
    if decoder == "stb":
        if exif == "apply":
            raise ValueError("exif='apply' needs decoder='opencv' (stb_image, like Darknet, ignores EXIF)")
        return _stb_read(path)
    if decoder != "opencv":
        raise ValueError(f"decoder={decoder!r}: use 'opencv' or 'stb'")
    flags = cv2.IMREAD_COLOR if exif == "apply" else cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION
    image = cv2.imread(str(path), flags)
    if image is None:
        raise FileNotFoundError(f"{path}: not a readable image (missing, empty or an unsupported format)")
    return np.ascontiguousarray(image[..., ::-1])


@functools.cache
def stb_library() -> ctypes.CDLL | None:
    """stb_image's shared library, or None where it is not installed."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("stb") or STB_LIBRARY)
    except OSError:
        return None
    lib.stbi_load.restype = ctypes.POINTER(ctypes.c_ubyte)
    lib.stbi_load.argtypes = [ctypes.c_char_p] + [ctypes.POINTER(ctypes.c_int)] * 3 + [ctypes.c_int]
    lib.stbi_failure_reason.restype = ctypes.c_char_p
    return lib


def _stb_read(path: str | Path) -> np.ndarray:
    lib = stb_library()
    if lib is None:
        raise RuntimeError(f"decoder='stb' needs stb_image as a shared library ({STB_LIBRARY}, Debian's libstb0: "
                           f"apt-get install libstb0); or use decoder='opencv'")
    w, h, c = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    data = lib.stbi_load(os.fsencode(path), ctypes.byref(w), ctypes.byref(h), ctypes.byref(c), 3)
    if not data:
        raise FileNotFoundError(f"{path}: stb_image cannot read it ({lib.stbi_failure_reason().decode()})")
    try:
        return np.ctypeslib.as_array(data, shape=(h.value, w.value, 3)).copy()
    finally:
        lib.stbi_image_free(data)


def _axis_taps(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Per output index: the lower source index and its float32 fraction, as resize_image computes them
    (`scale = (float)(in - 1) / (out - 1)`, `s = i * scale`, `ix = (int)s`, `d = s - ix`)."""
    if size_out == 1:  # C divides by zero here; the one index then reads the first source pixel
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.float32)
    scale = np.float32(size_in - 1) / np.float32(size_out - 1)
    where = np.arange(size_out, dtype=np.float32) * scale
    low = where.astype(np.int64)  # truncation: positions are never negative
    return low, (where - low.astype(np.float32)).astype(np.float32)


def darknet_resize(image: np.ndarray, w: int, h: int) -> np.ndarray:
    """image.c `resize_image` (an HWC image, uint8 or float; float32 HWC out): horizontal pass into a
    [H, w] part, then the vertical pass, every product and sum in float32 as Darknet's C computes them."""
    src = darknet_floats(image)
    if src.ndim == 2:
        src = src[..., None]
    height, width = src.shape[:2]
    if (width, height) == (w, h):
        return src.copy()
    # pass 1: columns. The last column, and every column of a one-pixel-wide source, copies the last column.
    part = np.empty((height, w, src.shape[2]), dtype=np.float32)
    part[:, w - 1] = src[:, width - 1]
    if width == 1:
        part[:] = src[:, :1]
    elif w > 1:
        ix, dx = _axis_taps(width, w)
        ix, dx = ix[:-1], dx[:-1, None]
        part[:, :-1] = (np.float32(1) - dx) * src[:, ix] + dx * src[:, ix + 1]
    # pass 2: rows. `(1 - dy) * upper` is stored first and `dy * lower` added after, except on the last row
    # (and for a one-pixel-high source), which keeps the first term alone.
    iy, dy = _axis_taps(height, h)
    iy = np.minimum(iy, height - 1)
    out = (np.float32(1) - dy[:, None, None]) * part[iy]
    if height > 1 and h > 1:
        below = dy[:-1, None, None] * part[np.minimum(iy[:-1] + 1, height - 1)]
        out[:-1] = out[:-1] + below
    return out


def letterbox_size(width: int, height: int, w: int, h: int) -> tuple[int, int]:
    """(new_w, new_h) of Darknet's letterbox: the side whose float32 ratio is smaller fills the network, the other
    is scaled in integer arithmetic (image.c letterbox_image, yolo_layer.c correct_yolo_boxes)."""
    if np.float32(w) / np.float32(width) < np.float32(h) / np.float32(height):
        return w, (height * w) // width
    return (width * h) // height, h


def darknet_letterbox(image: np.ndarray, w: int, h: int) -> np.ndarray:
    """image.c `letterbox_image`: `darknet_resize` to the letterbox size, centred (integer offsets) on a
    float32 canvas of 0.5."""
    src = darknet_floats(image)
    if src.ndim == 2:
        src = src[..., None]
    new_w, new_h = letterbox_size(src.shape[1], src.shape[0], w, h)
    canvas = np.full((h, w, src.shape[2]), 0.5, dtype=np.float32)
    left, top = (w - new_w) // 2, (h - new_h) // 2
    canvas[top:top + new_h, left:left + new_w] = darknet_resize(src, new_w, new_h)
    return canvas
