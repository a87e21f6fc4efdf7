"""results.png: every column of a run's results.csv against the epoch, one panel each."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from detect.plots.render import new_figure, save_figure

TITLES = {"box": "box loss", "obj": "objectness loss", "cls": "class loss", "lr": "learning rate",
          "map50": "mAP@0.5", "map": "mAP@0.5:0.95", "fitness": "fitness", "img_s": "images/s",
          "time": "epoch time (s)"}


TEXT_COLUMNS = ("note",)  # words (why a run stopped), not a curve


def read_results_csv(path: str | Path) -> dict[str, np.ndarray]:
    """column -> float values (NaN where a row left it empty, e.g. mAP on an epoch without evaluation)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return {}

    def number(text):
        try:
            return float(text)
        except (TypeError, ValueError):
            return math.nan

    return {name: np.array([number(r.get(name)) for r in rows]) for name in rows[0] if name not in TEXT_COLUMNS}


def plot_results(columns: dict[str, np.ndarray], path: str | Path) -> Path:
    """One panel per column (other than `epoch`), markers at each epoch so a single epoch shows too."""
    epochs = columns.get("epoch")
    names = [n for n in columns if n != "epoch"]
    if epochs is None or not names:
        raise ValueError(f"results to plot need an 'epoch' column and at least one other, got {list(columns)}")
    cols = min(5, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = new_figure(3.2 * cols, 2.6 * rows, rows, cols)
    for ax, name in zip(axes.flat, names):
        values = columns[name]
        known = ~np.isnan(values)
        ax.plot(epochs[known], values[known], marker="o", markersize=3, linewidth=1.5)
        ax.set_title(TITLES.get(name, name), fontsize="medium")
        ax.set_xlabel("epoch", fontsize="small")
        ax.grid(alpha=0.3)
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4))
        ax.xaxis.get_major_locator().set_params(integer=True)
    for ax in list(axes.flat)[len(names):]:
        ax.set_axis_off()
    return save_figure(fig, path)
