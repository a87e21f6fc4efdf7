"""A corpus of bad and awkward input files in the YOLO layout, written into a tmp folder."""

import io
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

GOOD_LABEL = "0 0.5 0.5 0.25 0.25\n1 0.2 0.3 0.1 0.2\n"


def jpeg_bytes(h=48, w=64, seed=0):
    rng = np.random.default_rng(seed)
    ok, buf = cv2.imencode(".jpg", rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
    return buf.tobytes()


def exif_rotated_jpeg(h=40, w=60):
    """A w x h JPEG with EXIF orientation 6 (rotate 90): viewers and decoders show it as h x w."""
    image = Image.fromarray(np.full((h, w, 3), 90, dtype=np.uint8))
    exif = Image.Exif()
    exif[0x0112] = 6
    out = io.BytesIO()
    image.save(out, format="JPEG", exif=exif.tobytes())
    return out.getvalue()


def write_corpus(root: Path) -> dict:
    """Images and labels; returns the expected counts per kind of bad input."""
    images, labels = root / "images" / "train", root / "labels" / "train"
    images.mkdir(parents=True)
    labels.mkdir(parents=True)

    def add(name, data, label=GOOD_LABEL):
        (images / name).write_bytes(data)
        if label is not None:
            (labels / Path(name).with_suffix(".txt")).write_text(label)

    add("good.jpg", jpeg_bytes())
    add("background.jpg", jpeg_bytes(seed=1), label=None)  # no label file: a background image
    add("truncated.jpg", jpeg_bytes(120, 160, seed=2)[:400])
    add("corrupt.jpg", np.random.default_rng(3).integers(0, 255, 500, dtype=np.uint8).tobytes())
    add("empty.jpg", b"")
    gif = io.BytesIO()
    Image.new("RGB", (8, 8)).save(gif, format="GIF")
    add("animation.gif", gif.getvalue())
    add("gif_named_png.png", gif.getvalue())
    add("bad_class.jpg", jpeg_bytes(seed=4), "7 0.5 0.5 0.2 0.2\n-1 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n")
    add("non_finite.jpg", jpeg_bytes(seed=5), "0 nan 0.5 0.1 0.1\n1 0.5 inf 0.1 0.1\n0 0.5 0.5 0.2 0.2\n")
    add("outside.jpg", jpeg_bytes(seed=6), "0 -0.5 0.5 0.2 0.2\n0 1.6 0.5 0.2 0.2\n0 0.052 0.5 0.11 0.2\n")
    add("zero_area.jpg", jpeg_bytes(seed=7), "0 0.5 0.5 0 0.2\n1 0.5 0.5 0.3 0.0\n0 0.5 0.5 0.2 0.2\n")
    add("duplicate.jpg", jpeg_bytes(seed=8), "0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n")
    add("syntax.jpg", jpeg_bytes(seed=9), "0 0.5 0.5 0.2\n")
    add("exif.jpg", exif_rotated_jpeg(), "0 0.5 0.25 0.5 0.5\n")
    cv2.imwrite(str(images / "gray.png"), np.full((30, 50), 100, dtype=np.uint8))
    cv2.imwrite(str(images / "rgba.png"), np.full((30, 50, 4), 200, dtype=np.uint8))
    cv2.imwrite(str(images / "deep16.png"), np.full((30, 50, 3), 40000, dtype=np.uint16))
    for name in ("gray", "rgba", "deep16"):
        (labels / f"{name}.txt").write_text(GOOD_LABEL)
    return {"corrupt": 2, "empty_file": 1, "unsupported_format": 2, "label_syntax": 1,
            "class_out_of_range": 2, "non_finite": 2, "outside_image": 2, "clipped": 1, "zero_area": 2,
            "duplicate": 1, "exif_rotated": 1, "grayscale": 1, "rgba": 1, "16bit": 1}
