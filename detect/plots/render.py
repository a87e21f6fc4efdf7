"""Figures and images to files: matplotlib without pyplot (no global figure state, no GUI backend), and
JPEG mosaics through OpenCV. Everything is written atomically (detect.runtime.files).

matplotlib is imported here, lazily, and nowhere else: `import detect` stays light.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from detect.runtime.files import atomic_write_bytes

# one colour per class, cycled: tab10 followed by tab20's lighter halves (RGB 0-255), readable on photos
PALETTE = (
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
    (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207), (174, 199, 232), (255, 187, 120),
    (152, 223, 138), (255, 152, 150), (197, 176, 213), (196, 156, 148), (247, 182, 210), (199, 199, 199),
    (219, 219, 141), (158, 218, 229),
)


def class_colour(k: int) -> tuple[int, int, int]:
    return PALETTE[int(k) % len(PALETTE)]


def new_figure(width: float, height: float, rows: int = 1, cols: int = 1):
    """(figure, axes array [rows, cols]) drawn by the Agg renderer; `width` and `height` in inches."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


def save_figure(fig, path: str | Path, dpi: int = 150) -> Path:
    """Render `fig` as PNG into memory, then write it atomically to `path`."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    atomic_write_bytes(path, buffer.getvalue())
    return Path(path)


def save_jpeg(image_rgb: np.ndarray, path: str | Path, quality: int = 90) -> Path:
    """An HxWx3 uint8 RGB image as a JPEG file, written atomically."""
    import cv2

    ok, data = cv2.imencode(".jpg", np.ascontiguousarray(image_rgb[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise OSError(f"OpenCV could not encode {path} as JPEG")
    atomic_write_bytes(path, data.tobytes())
    return Path(path)
