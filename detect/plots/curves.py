"""PR_curve.png and F1_curve.png: one line per class (with ground truth) and their mean, from
`detect.evaluation.pr_curves.Curves` (detections matched to the boxes at IoU 0.5). Given the per-class confidence
thresholds chosen from the same matches (detect.evaluation.thresholds), each class's line carries a dot where its
threshold puts it (F1 curve: at the threshold; PR curve: at the precision and recall it gives, which may lie below
the curve, the precision envelope), and the F1 plot a dashed line at the global best-F1 threshold."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from detect.evaluation.pr_curves import Curves
from detect.evaluation.thresholds import ThresholdChoice
from detect.plots.render import new_figure, save_figure

LEGEND_CLASSES = 20  # more classes than this: thin grey lines without a legend entry each


def _class_lines(ax, x: np.ndarray, ys: np.ndarray, labels: Sequence[str]) -> list:
    """The lines drawn, one per class."""
    named = len(labels) <= LEGEND_CLASSES
    lines = []
    for i, (y, label) in enumerate(zip(ys, labels)):
        if named:
            lines += ax.plot(x, y, linewidth=1, label=label)
        else:  # one legend entry for all of them
            lines += ax.plot(x, y, linewidth=0.5, color="grey", alpha=0.5,
                             label=f"{len(labels)} classes" if i == 0 else None)
    return lines


def _marks(ax, lines: list, xs: np.ndarray, ys: np.ndarray, label: str) -> None:
    """A dot per class at (xs[i], ys[i]) in its line's colour; one legend entry for all of them."""
    for i, (line, x, y) in enumerate(zip(lines, xs, ys)):
        ax.plot([x], [y], "o", markersize=5, color=line.get_color(), markeredgecolor="black",
                markeredgewidth=0.5, zorder=3, label=label if i == 0 else None)


def _at(grid: np.ndarray, curves: np.ndarray, thresholds) -> np.ndarray:
    """Each curve (row) at its own threshold: the value of the grid point at or below it (a curve at g counts
    the detections scoring >= g, so a threshold equal to the lowest kept score reads its own value)."""
    index = np.clip(np.searchsorted(grid, thresholds, side="right") - 1, 0, len(grid) - 1)
    return np.take_along_axis(np.atleast_2d(curves), np.atleast_1d(index)[:, None], axis=1)[:, 0]


def _finish(fig, ax, xlabel: str, ylabel: str, title: str, path: str | Path) -> Path:
    ax.set(xlabel=xlabel, ylabel=ylabel, xlim=(0, 1), ylim=(0, 1.02), title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize="small", frameon=False)
    return save_figure(fig, path)


def plot_pr_curves(curves: Curves, names: Sequence[str], path: str | Path,
                   choice: ThresholdChoice | None = None) -> Path:
    """Precision against recall for each class, and the mean over the classes with ground truth; with `choice`,
    each class's operating point at its threshold."""
    fig, axes = new_figure(9, 6)
    ax = axes[0, 0]
    classes = np.flatnonzero(curves.has_truth)
    labels = [f"{names[k]} {curves.ap50[k]:.3f}" for k in classes]
    lines = _class_lines(ax, curves.recall_grid, curves.precision[classes], labels)
    if choice is not None and len(classes):
        grid, conf = curves.confidence_grid, choice.conf[classes]
        _marks(ax, lines, _at(grid, curves.recall_at[classes], conf), _at(grid, curves.precision_at[classes], conf),
               "per-class thresholds")
    if len(classes):
        mean_ap = curves.ap50[classes].mean()
        ax.plot(curves.recall_grid, curves.precision[classes].mean(axis=0), linewidth=3, color="tab:blue",
                label=f"all classes {mean_ap:.3f} mAP@0.5")
    return _finish(fig, ax, "recall", "precision", "Precision-recall at IoU 0.5 (legend: AP@0.5)", path)


def plot_f1_curves(curves: Curves, names: Sequence[str], path: str | Path,
                   choice: ThresholdChoice | None = None) -> Path:
    """F1 against the confidence threshold for each class, and the mean (its best point in the legend); with
    `choice`, each class's threshold (in its legend entry) and the global one."""
    fig, axes = new_figure(9, 6)
    ax = axes[0, 0]
    classes = np.flatnonzero(curves.has_truth)
    labels = [names[k] + (f" {choice.conf[k]:.3f}" if choice is not None else "") for k in classes]
    lines = _class_lines(ax, curves.confidence_grid, curves.f1[classes], labels)
    if len(classes):
        mean = curves.f1[classes].mean(axis=0)
        # its best point: the chosen global threshold (the middle of the best stretch), else the first best
        at = choice.global_conf if choice is not None else curves.confidence_grid[int(np.argmax(mean))]
        ax.plot(curves.confidence_grid, mean, linewidth=3, color="tab:blue",
                label=f"all classes {_at(curves.confidence_grid, mean, [at])[0]:.2f} at {at:.3f}")
    if choice is not None and len(classes):
        conf = choice.conf[classes]
        _marks(ax, lines, conf, _at(curves.confidence_grid, curves.f1[classes], conf), "per-class thresholds")
        ax.axvline(choice.global_conf, color="black", linestyle="--", linewidth=1,
                   label=f"global best-F1 threshold {choice.global_conf:.3f}")
    return _finish(fig, ax, "confidence", "F1", "F1 against the confidence threshold (IoU 0.5)", path)
