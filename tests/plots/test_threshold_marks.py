"""The PR and F1 plots mark each class's chosen confidence threshold (and the F1 plot the global one) where it
lies on the class's curve."""

import numpy as np
import pytest

import detect.plots.curves as curves_module
from detect.evaluation.pr_curves import pr_curves
from detect.evaluation.thresholds import choose_thresholds

NAMES = ["cat", "dog", "bird"]
# cat: 2 boxes, 0.9 TP, 0.5 FP, 0.3 FP (best: keep one, cut at 0.7); dog: 1 box, 0.8 TP; bird: no box
MATCHED = (np.array([0.9, 0.5, 0.3, 0.8]), np.array([0, 0, 0, 1]), np.array([True, False, False, True]),
           np.array([2, 1, 0]))


def _figure(monkeypatch, plot, choice):
    drawn = []
    monkeypatch.setattr(curves_module, "save_figure", lambda fig, path: drawn.append(fig) or path)
    plot(pr_curves(*MATCHED), NAMES, "unused.png", choice)
    return drawn[0].axes[0]


def _dots(ax) -> dict:
    return {line.get_label(): (line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines
            if line.get_marker() == "o"}


def test_f1_plot_marks_each_threshold_on_its_curve_and_the_global_one(monkeypatch):
    choice = choose_thresholds(*MATCHED, shrink=0)
    ax = _figure(monkeypatch, curves_module.plot_f1_curves, choice)
    dots = [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines if line.get_marker() == "o"]
    # cat at 0.7: one of two boxes, precision 1: F1 2/3; dog at its own best (its one detection kept): F1 1
    assert [x for x, _ in dots] == pytest.approx([0.7, choice.conf[1]])
    assert [y for _, y in dots] == pytest.approx([2 / 3, 1.0], abs=0.01)
    assert "per-class thresholds" in _dots(ax)
    (vertical,) = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert vertical.get_xdata()[0] == pytest.approx(choice.global_conf)
    assert vertical.get_label() == f"global best-F1 threshold {choice.global_conf:.3f}"
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == ["cat 0.700", f"dog {choice.conf[1]:.3f}"]


def test_pr_plot_marks_the_precision_and_recall_each_threshold_gives(monkeypatch):
    ax = _figure(monkeypatch, curves_module.plot_pr_curves, choose_thresholds(*MATCHED, shrink=0))
    dots = [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines if line.get_marker() == "o"]
    # cat: recall 1/2 at precision 1; dog: both 1
    np.testing.assert_allclose(dots, [(0.5, 1.0), (1.0, 1.0)], atol=0.01)
    # without a choice: no marks
    ax = _figure(monkeypatch, curves_module.plot_pr_curves, None)
    assert not _dots(ax)
