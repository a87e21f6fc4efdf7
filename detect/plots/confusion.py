"""confusion_matrix.png: predicted class (rows) against true class (columns) with a background row
(missed objects) and column (false alarms), each column normalised (detect.evaluation.confusion)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from detect.evaluation.confusion import normalise_columns
from detect.plots.render import new_figure, save_figure

ANNOTATE_CLASSES = 30  # up to this many classes each cell shows its share
COUNT_CLASSES = 10  # up to this many, its count too
TICK_CLASSES = 100


def plot_confusion_matrix(counts: np.ndarray, names: Sequence[str], path: str | Path, conf_thres: float,
                          iou_thres: float) -> Path:
    """`counts` [K+1, K+1] from `confusion_matrix`; drawn normalised per true class (column)."""
    k = len(names)
    if counts.shape != (k + 1, k + 1):
        raise ValueError(f"confusion counts of shape {counts.shape} do not fit {k} class names")
    share = normalise_columns(counts)
    side = min(max(6.0, 0.2 * k + 4.0), 20.0)  # inches: 80 COCO classes fit readably
    fig, axes = new_figure(side + 1.5, side)
    ax = axes[0, 0]
    shown = np.where(counts.sum(axis=0, keepdims=True) > 0, share, np.nan)  # empty columns stay blank
    image = ax.imshow(shown, cmap="Blues", vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=ax, shrink=0.8, label="share of the column")
    labels = [*names, "background"]
    if k + 1 <= TICK_CLASSES:
        ticks = np.arange(k + 1)
        ax.set_xticks(ticks, labels, rotation=90, fontsize="small")
        ax.set_yticks(ticks, labels, fontsize="small")
    if k <= ANNOTATE_CLASSES:
        for (row, col), value in np.ndenumerate(share):
            if counts[:, col].sum() and value >= 0.005:
                text = f"{value:.2f}\n({counts[row, col]})" if k <= COUNT_CLASSES else f"{value:.2f}"
                ax.text(col, row, text, ha="center", va="center", fontsize="small",
                        color="white" if value > 0.5 else "black")
    ax.set(xlabel="true class", ylabel="predicted class",
           title=f"Confusion matrix (normalised per true class; conf >= {conf_thres:g}, IoU >= {iou_thres:g})")
    return save_figure(fig, path, dpi=150 if k <= ANNOTATE_CLASSES else 100)  # a large matrix: 2000 px, not 3000
