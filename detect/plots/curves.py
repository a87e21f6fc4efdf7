"""PR_curve.png and F1_curve.png: one line per class (with ground truth) and their mean, from
`detect.evaluation.pr_curves.Curves` (detections matched to the boxes at IoU 0.5)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from detect.evaluation.pr_curves import Curves
from detect.plots.render import new_figure, save_figure

LEGEND_CLASSES = 20  # more classes than this: thin grey lines without a legend entry each


def _class_lines(ax, x: np.ndarray, ys: np.ndarray, labels: Sequence[str]) -> None:
    named = len(labels) <= LEGEND_CLASSES
    for i, (y, label) in enumerate(zip(ys, labels)):
        if named:
            ax.plot(x, y, linewidth=1, label=label)
        else:  # one legend entry for all of them
            ax.plot(x, y, linewidth=0.5, color="grey", alpha=0.5, label=f"{len(labels)} classes" if i == 0 else None)


def _finish(fig, ax, xlabel: str, ylabel: str, title: str, path: str | Path) -> Path:
    ax.set(xlabel=xlabel, ylabel=ylabel, xlim=(0, 1), ylim=(0, 1.02), title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize="small", frameon=False)
    return save_figure(fig, path)


def plot_pr_curves(curves: Curves, names: Sequence[str], path: str | Path) -> Path:
    """Precision against recall for each class, and the mean over the classes with ground truth."""
    fig, axes = new_figure(9, 6)
    ax = axes[0, 0]
    classes = np.flatnonzero(curves.has_truth)
    labels = [f"{names[k]} {curves.ap50[k]:.3f}" for k in classes]
    _class_lines(ax, curves.recall_grid, curves.precision[classes], labels)
    if len(classes):
        mean_ap = curves.ap50[classes].mean()
        ax.plot(curves.recall_grid, curves.precision[classes].mean(axis=0), linewidth=3, color="tab:blue",
                label=f"all classes {mean_ap:.3f} mAP@0.5")
    return _finish(fig, ax, "recall", "precision", "Precision-recall at IoU 0.5 (legend: AP@0.5)", path)


def plot_f1_curves(curves: Curves, names: Sequence[str], path: str | Path) -> Path:
    """F1 against the confidence threshold for each class, and the mean (its best point in the legend)."""
    fig, axes = new_figure(9, 6)
    ax = axes[0, 0]
    classes = np.flatnonzero(curves.has_truth)
    _class_lines(ax, curves.confidence_grid, curves.f1[classes], [names[k] for k in classes])
    if len(classes):
        mean = curves.f1[classes].mean(axis=0)
        best = int(np.argmax(mean))
        ax.plot(curves.confidence_grid, mean, linewidth=3, color="tab:blue",
                label=f"all classes {mean[best]:.2f} at {curves.confidence_grid[best]:.3f}")
    return _finish(fig, ax, "confidence", "F1", "F1 against the confidence threshold (IoU 0.5)", path)
