"""Robust image probing (for the label cache) and decoding (for the loaders).

Probing reads the header and verifies the file without a full decode (COCO-sized splits stay quick); a JPEG
without its end-of-image marker is decoded in full: one OpenCV can decode (libjpeg fills in the missing end)
is used, with one warning, and only one it cannot decode is refused. Decoding goes through OpenCV, which
applies the EXIF orientation and converts grayscale, RGBA and 16-bit images to 8-bit BGR, so the decoded
size always equals the probed (oriented) size.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from detect.data.records.records import BadInputReport

log = logging.getLogger(__name__)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
PIL_FORMATS = {"JPEG", "PNG", "BMP", "TIFF", "WEBP", "MPO"}
EXIF_ORIENTATION_TAG = 0x0112
# EXIF orientations 5..8 rotate by 90 degrees: width and height swap
TRANSPOSING_ORIENTATIONS = (5, 6, 7, 8)
PROBE_THREADS = 8  # probing is I/O bound (headers, stat); threads overlap the reads
JPEG_END = b"\xff\xd9"  # the end-of-image marker
TRUNCATED_DETAIL = ("truncated JPEG (its end is missing); used as OpenCV decodes it, the missing part filled in "
                    "by libjpeg, which says 'premature end of data segment' on stderr whenever it is read; "
                    "re-save or replace the file to silence that")


class BadImage(Exception):
    """An image that cannot be used; `kind` is one of records.IMAGE_SKIP_KINDS."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class ImageProbe:
    width: int  # after EXIF orientation
    height: int
    notes: tuple[str, ...]  # conversions the decoder will apply (records.FIXED_KINDS)


def is_image_file(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


def _png_bit_depth(path: Path) -> int:
    with open(path, "rb") as f:
        head = f.read(25)
    return head[24] if len(head) >= 25 and head[12:16] == b"IHDR" else 8


def _jpeg_is_terminated(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-2, 2)
        return f.read(2) == JPEG_END


def _with_jpeg_end(data: np.ndarray) -> np.ndarray:
    """The bytes of an image file, with an end-of-image marker appended to a JPEG that lacks one.

    libjpeg's own file reader does exactly this when a file ends early (and fills in the missing scans), so
    cv2.imread decodes a truncated JPEG; OpenCV's in-memory reader gives up instead. Appending the marker makes
    cv2.imdecode give cv2.imread's pixels. A marker after trailing bytes is harmless: decoding stops at the first.
    """
    if data.size > 2 and data[0] == 0xFF and data[1] == 0xD8 and data[-2:].tobytes() != JPEG_END:
        return np.concatenate([data, np.frombuffer(JPEG_END, dtype=np.uint8)])
    return data


def probe_image(path: str | Path) -> ImageProbe:
    """Size and needed conversions of an image file; raises `BadImage` when it cannot be used."""
    path = Path(path)
    try:
        nbytes = path.stat().st_size
    except FileNotFoundError:
        raise BadImage("missing", "file not found") from None
    if nbytes == 0:
        raise BadImage("empty_file", "zero-byte file")
    if not is_image_file(path):
        raise BadImage("unsupported_format", f"suffix {path.suffix!r} is not one of {', '.join(IMAGE_SUFFIXES)}")
    try:
        with Image.open(path) as im:
            fmt, mode, (width, height) = im.format, im.mode, im.size
            orientation = im.getexif().get(EXIF_ORIENTATION_TAG, 1) if fmt in ("JPEG", "MPO", "TIFF", "WEBP") else 1
            im.verify()
    except UnidentifiedImageError:
        raise BadImage("corrupt", "not a readable image (unidentified content)") from None
    except Exception as e:  # PIL raises many types for damaged files
        raise BadImage("corrupt", f"{type(e).__name__}: {e}") from None
    if fmt not in PIL_FORMATS:
        raise BadImage("unsupported_format", f"{fmt} content is not supported (use JPEG or PNG)")
    notes = []
    if fmt in ("JPEG", "MPO") and not _jpeg_is_terminated(path) and _is_truncated(path):
        notes.append("truncated")
    if orientation not in (1, None):
        notes.append("exif_rotated")
        if orientation in TRANSPOSING_ORIENTATIONS:
            width, height = height, width
    if mode in ("L", "LA", "1", "I", "I;16", "I;16B", "I;16L", "F"):
        notes.append("grayscale")
    if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in getattr(im, "info", {})):
        notes.append("rgba")
    if mode.startswith("I") or (fmt == "PNG" and _png_bit_depth(path) == 16):
        notes.append("16bit")
    if width < 2 or height < 2:
        raise BadImage("corrupt", f"degenerate size {width}x{height}")
    return ImageProbe(width, height, tuple(notes))


def probe_images(paths: list[Path], report: BadInputReport) -> list[ImageProbe | None]:
    """Probe every image of a split in threads: its probe, or None for an unusable one (added to `report`)."""
    def probe(p):
        try:
            return probe_image(p)
        except BadImage as e:
            return e

    with ThreadPoolExecutor(PROBE_THREADS) as pool:
        results = list(pool.map(probe, paths))
    out = []
    for p, r in zip(paths, results):
        if isinstance(r, BadImage):
            report.add(r.kind, p, r.detail)
            out.append(None)
            continue
        for note in r.notes:
            report.add(note, p, TRUNCATED_DETAIL if note == "truncated" else "converted on load")
        if "truncated" in r.notes:
            log.warning(f"{p}: {TRUNCATED_DETAIL}")
        out.append(r)
    return out


def _is_truncated(path: Path) -> bool:
    """Of a JPEG that does not end in its end marker: False when it decodes as it is (bytes after the marker),
    True when it decodes only as the loaders read it (`_with_jpeg_end`); `BadImage` when not even then."""
    data = np.fromfile(str(path), dtype=np.uint8)
    if cv2.imdecode(data, cv2.IMREAD_COLOR) is not None:
        return False
    if _decode(data, path, strict=False) is None:
        raise BadImage("corrupt", "truncated or damaged JPEG that OpenCV cannot decode")
    return True


def load_image(path: str | Path) -> np.ndarray:
    """HxWx3 uint8 BGR, EXIF orientation applied, grayscale/alpha/16-bit converted."""
    return _decode(np.fromfile(str(path), dtype=np.uint8), path)


def read_image(path: str | Path) -> np.ndarray:
    """`load_image` for a file outside any dataset (prediction, the Python API): `BadImage` says why a file
    cannot be used, instead of blaming a label cache."""
    path = Path(path)
    if not path.is_file():
        raise BadImage("missing", "file not found")
    data = np.fromfile(str(path), dtype=np.uint8)
    if data.size == 0:
        raise BadImage("empty_file", "zero-byte file")
    image = _decode(data, path, strict=False)
    if image is None:
        raise BadImage("corrupt", f"not an image OpenCV can decode ({data.size} bytes)")
    return image


def _decode(data: np.ndarray, path, strict: bool = True) -> np.ndarray | None:
    image = cv2.imdecode(_with_jpeg_end(data), cv2.IMREAD_COLOR) if data.size else None
    if image is None and strict:
        raise OSError(f"cannot decode image {path}: it changed or broke after the label cache was built; "
                      f"delete the label cache or fix the file")
    return image


# libjpeg scales by 1/2, 1/4 or 1/8 while it decodes: several times faster for large photos, and its block
# averaging is a better downscale than a bilinear resize by a large factor
_JPEG_REDUCTIONS = ((8, cv2.IMREAD_REDUCED_COLOR_8), (4, cv2.IMREAD_REDUCED_COLOR_4), (2, cv2.IMREAD_REDUCED_COLOR_2))


def load_image_for_size(path: str | Path, width: int, height: int, long_side: int) -> tuple[np.ndarray, float]:
    """(image, scale from the original): a JPEG whose (oriented) `width` x `height` is at least twice
    `long_side` is decoded at the largest reduction that keeps its long side >= `long_side`; other images as
    `load_image`, at scale 1. Coordinates map exactly: x_decoded = x_original * scale."""
    data = np.fromfile(str(path), dtype=np.uint8)
    if data.size > 2 and data[0] == 0xFF and data[1] == 0xD8:  # JPEG
        for factor, flag in _JPEG_REDUCTIONS:
            if max(width, height) >= factor * long_side:
                image = cv2.imdecode(_with_jpeg_end(data), flag)
                # the decoder's output is ceil(size / factor); anything else (a file that changed) takes the full path
                if image is not None and image.shape[:2] == (-(-height // factor), -(-width // factor)):
                    return image, 1.0 / factor
                break
    return _decode(data, path), 1.0


def resize_long_side(image: np.ndarray, size: int) -> tuple[np.ndarray, float]:
    """Scale so the longer side equals `size`; returns (image, scale). Bilinear: training samples are warped
    again right after, and INTER_AREA at non-integer scales costs several times a JPEG decode."""
    h, w = image.shape[:2]
    r = size / max(h, w)
    if r == 1.0:
        return image, r
    return cv2.resize(image, None, fx=r, fy=r, interpolation=cv2.INTER_LINEAR), r
