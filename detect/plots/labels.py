"""labels.png: what the training labels hold, from the label cache's records: instances per class, where box
centres fall and how large boxes are (both relative to the image), and boxes per image."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from detect.plots.render import new_figure, save_figure

NAMED_BARS = 40  # more classes than this: bars without their names


def label_statistics(records) -> dict[str, np.ndarray]:
    """From ImageRecord-like objects (boxes xyxy in pixels, classes, width, height): `classes` [n],
    `centres` [n, 2] and `sizes` [n, 2] relative to the image, `per_image` [images] box counts."""
    classes, centres, sizes, per_image = [], [], [], []
    for r in records:
        boxes = np.asarray(r.boxes, dtype=np.float64).reshape(-1, 4)
        scale = np.array([r.width, r.height], dtype=np.float64)
        centres.append((boxes[:, :2] + boxes[:, 2:]) / 2 / scale)
        sizes.append((boxes[:, 2:] - boxes[:, :2]) / scale)
        classes.append(np.asarray(r.classes, dtype=np.int64))
        per_image.append(len(boxes))
    if not per_image:
        return {"classes": np.zeros(0, np.int64), "centres": np.zeros((0, 2)), "sizes": np.zeros((0, 2)),
                "per_image": np.zeros(0, np.int64)}
    return {"classes": np.concatenate(classes), "centres": np.concatenate(centres), "sizes": np.concatenate(sizes),
            "per_image": np.asarray(per_image)}


def _density(fig, ax, xy: np.ndarray, xlabel: str, ylabel: str, title: str) -> None:
    counts, xedges, yedges = np.histogram2d(xy[:, 0], xy[:, 1], bins=50, range=[[0, 1], [0, 1]])
    image = ax.pcolormesh(xedges, yedges, np.where(counts > 0, counts, np.nan).T, cmap="viridis")
    fig.colorbar(image, ax=ax, label="boxes")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title, xlim=(0, 1), ylim=(0, 1), aspect="equal")


def plot_labels(stats: dict[str, np.ndarray], names: Sequence[str], path: str | Path) -> Path:
    """Four panels from `label_statistics`."""
    fig, axes = new_figure(12, 9, 2, 2)
    k = len(names)
    per_class = np.bincount(stats["classes"], minlength=k)[:k]
    bars = axes[0, 0]
    bars.bar(np.arange(k), per_class, color="tab:blue")
    if k <= NAMED_BARS:
        bars.set_xticks(np.arange(k), names, rotation=90 if k > 6 else 0, fontsize="small")
    bars.set(ylabel="instances", title=f"Instances per class ({len(stats['classes'])} boxes)")
    _density(fig, axes[0, 1], stats["centres"], "x (of image width)", "y (of image height)", "Box centres")
    axes[0, 1].invert_yaxis()  # image orientation: y grows downwards
    _density(fig, axes[1, 0], stats["sizes"], "width (of image width)", "height (of image height)", "Box sizes")
    per_image = stats["per_image"]
    top = int(per_image.max()) if len(per_image) else 0
    axes[1, 1].hist(per_image, bins=np.arange(top + 2) - 0.5, color="tab:green")
    axes[1, 1].set(xlabel="boxes in the image", ylabel="images", title=f"Boxes per image ({len(per_image)} images)")
    return save_figure(fig, path)
