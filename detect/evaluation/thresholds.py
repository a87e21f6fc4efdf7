"""Per-class confidence thresholds chosen on a validation split, and detections counted at given thresholds.
Pure NumPy, on the detections of one evaluation matched to the ground truth at IoU 0.5 by COCOeval's rules
(detect.evaluation.matching; an evaluation's `EvalResult.match`, each rank's images matched where they are), the
data of PR_curve.png and F1_curve.png.

The choice, per class c with n_c ground-truth boxes:
- t_c, its best-F1 threshold, exactly: with its detections sorted by score, keeping the best i gives
  F1 = 2 TP_i / (i + n_c); of the cuts between two different scores the best one wins (of equal F1 the higher
  threshold), and the threshold is set halfway between the lowest score kept and the highest dropped, so that
  a detection scoring like the kept ones on another image is kept too. A class without any true positive gives
  no evidence and takes t_global;
- t_global, the global best-F1 threshold: where the mean F1 curve over the classes with ground truth peaks
  (F1_curve.png's "all classes" line; the middle of its best stretch on the 1000-point grid);
- the threshold used, t_c' = (n_c t_c + k t_global) / (n_c + k): a class seen a few times has a noisy t_c (its
  F1 jumps by whole boxes, and the best of a noisy curve overshoots), so it stays near the global threshold until
  its boxes outweigh k; k = SHRINK_K was measured on held-out data (docs/benchmarks.md, "Per-class thresholds").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detect.evaluation.pr_curves import pr_curves
from detect.evaluation.split_match import SplitMatch
from detect.inference.class_conf import ClassConf, save_class_conf

log = logging.getLogger(__name__)

# boxes a class needs before its own best-F1 threshold counts as much as the global one. Measured (held-out total
# F1, docs/benchmarks.md "Per-class thresholds"): own thresholds beat the global one only with hundreds of boxes a
# class (synthetic shapes, 750 a class: +0.007) and lose to it with tens (coco-tiny, about 10 a class; synthetic,
# 16 and 49); k = 100 keeps all but 0.001 of the gain at 750 and matches the best k at 16 and 49
SHRINK_K = 100.0
IOU_THRES = 0.5


@dataclass(frozen=True)
class ThresholdChoice:
    conf: np.ndarray  # [K] the thresholds used: `best` shrunk toward `global_conf`
    best: np.ndarray  # [K] each class's own best-F1 threshold (global_conf where it has no true positive)
    global_conf: float
    instances: np.ndarray  # [K] ground-truth boxes per class
    shrink: float  # k

    def class_conf(self, chosen_on: str) -> ClassConf:
        """The thresholds as a model file stores them (detect.inference.class_conf)."""
        return ClassConf(tuple(float(c) for c in self.conf), float(self.global_conf),
                         tuple(int(n) for n in self.instances), float(self.shrink), chosen_on)


@dataclass(frozen=True)
class Counts:
    """True positives, false positives and missed boxes per class at some thresholds."""

    tp: np.ndarray  # [K]
    fp: np.ndarray  # [K]
    fn: np.ndarray  # [K]

    @staticmethod
    def _ratio(a, b):
        return np.divide(a, b, out=np.zeros(np.shape(a)), where=np.asarray(b) > 0)

    def precision(self, total: bool = False):
        tp, fp = (self.tp.sum(), self.fp.sum()) if total else (self.tp, self.fp)
        return self._ratio(tp, tp + fp)

    def recall(self, total: bool = False):
        tp, fn = (self.tp.sum(), self.fn.sum()) if total else (self.tp, self.fn)
        return self._ratio(tp, tp + fn)

    def f1(self, total: bool = False):
        """2 TP / (2 TP + FP + FN) per class, or of the sums over the classes (`total`)."""
        tp, fp, fn = (self.tp.sum(), self.fp.sum(), self.fn.sum()) if total else (self.tp, self.fp, self.fn)
        return self._ratio(2 * tp, 2 * tp + fp + fn)


def best_f1_threshold(scores: np.ndarray, hits: np.ndarray, truth_count: int) -> float | None:
    """The exact best-F1 threshold of one class (module docstring) from its detections' scores (any order) and
    whether each is a true positive; None when no detection is one."""
    if len(scores) == 0:
        return None
    order = np.argsort(-scores, kind="stable")
    scores, hits = scores[order], hits[order]
    true_cum = np.cumsum(hits)
    f1 = 2 * true_cum / (np.arange(1, len(scores) + 1) + truth_count)
    cut = np.r_[scores[1:] < scores[:-1], True]  # a threshold cannot separate equal scores
    f1[~cut] = -1.0
    i = int(np.argmax(f1))  # the first best: the highest threshold among equal F1s
    if true_cum[i] == 0:
        return None
    return float(scores[i] if i + 1 == len(scores) else (scores[i] + scores[i + 1]) / 2)


def global_best_f1(f1: np.ndarray, has_truth: np.ndarray, grid: np.ndarray) -> float:
    """The middle of the first stretch of `grid` where the mean F1 curve of the classes with ground truth peaks
    (the grid's middle when no class has a box: nothing to choose by)."""
    if not has_truth.any():
        return float(grid[len(grid) // 2])
    mean = f1[has_truth].mean(axis=0)
    start = int(np.argmax(mean))
    below = np.flatnonzero(mean[start:] < mean[start] - 1e-12)
    end = start + (int(below[0]) if len(below) else len(mean) - start) - 1
    return float(grid[(start + end) // 2])


def choose_thresholds(scores: np.ndarray, classes: np.ndarray, hits: np.ndarray, truth_counts: np.ndarray,
                      shrink: float = SHRINK_K) -> ThresholdChoice:
    """Per-class thresholds from `match_detections`' output (module docstring)."""
    if shrink < 0:
        raise ValueError(f"the shrinkage k must be 0 or more, got {shrink}")
    curves = pr_curves(scores, classes, hits, truth_counts)
    global_conf = global_best_f1(curves.f1, curves.has_truth, curves.confidence_grid)
    best = np.full(len(truth_counts), global_conf)
    for k in np.flatnonzero(truth_counts):
        mine = classes == k
        found = best_f1_threshold(scores[mine], hits[mine], int(truth_counts[k]))
        best[k] = global_conf if found is None else found
    n = truth_counts.astype(np.float64)
    # k = 0 with a class of no boxes: 0 / 0; such a class has no evidence, so the global threshold
    weight = np.divide(n, n + shrink, out=np.zeros_like(n), where=n + shrink > 0)
    conf = weight * best + (1 - weight) * global_conf
    return ThresholdChoice(conf, best, global_conf, truth_counts.astype(np.int64), float(shrink))


def count_at(scores: np.ndarray, classes: np.ndarray, hits: np.ndarray, truth_counts: np.ndarray,
             conf: float | np.ndarray) -> Counts:
    """The counts when only the detections that pass `conf` are kept, as NMS keeps them: one threshold
    (score > conf, --conf's rule) or one per class (score >= conf[class]). Counting the matched detections that
    pass is the matching of those alone: a detection only competes with higher-scoring ones of its class."""
    if np.ndim(conf) == 0:
        kept = scores > float(conf)
    else:
        kept = scores >= np.asarray(conf)[classes]
    k_total = len(truth_counts)
    tp = np.bincount(classes[kept & hits], minlength=k_total)[:k_total]
    fp = np.bincount(classes[kept & ~hits], minlength=k_total)[:k_total]
    return Counts(tp, fp, truth_counts - tp)


def format_choice(choice: ThresholdChoice, counts: Counts, names: Sequence[str]) -> str:
    """A table of the thresholds and what they give on the split they were chosen on."""
    lines = [f"{'class':>20s} {'boxes':>6s} {'best-F1':>8s} {'used':>6s} {'P':>6s} {'R':>6s} {'F1':>6s}"]
    p, r, f1 = counts.precision(), counts.recall(), counts.f1()
    for k, name in enumerate(names):
        lines.append(f"{name[:20]:>20s} {choice.instances[k]:6d} {choice.best[k]:8.3f} {choice.conf[k]:6.3f} "
                     f"{p[k]:6.3f} {r[k]:6.3f} {f1[k]:6.3f}")
    lines.append(f"{'all':>20s} {int(choice.instances.sum()):6d} {choice.global_conf:8.3f} {'':>6s} "
                 f"{counts.precision(True):6.3f} {counts.recall(True):6.3f} {counts.f1(True):6.3f}")
    return "\n".join(lines)


class BestEvaluationThresholds:
    """Thresholds for best.pt: hears every evaluation of a training run (`on_evaluation`, rank 0 holds the
    matches) and, when asked (`__call__`, as best.pt is written), chooses them from the latest one. A failure
    is a warning: best.pt is then written without them."""

    def __init__(self, source, chosen_on: str, shrink: float = SHRINK_K):
        self.source, self.chosen_on, self.shrink = source, chosen_on, shrink
        self._match: SplitMatch | None = None

    def on_evaluation(self, result) -> None:
        self._match = result.match

    def __call__(self) -> dict | None:
        if self._match is None:
            return None
        try:
            choice = choose_thresholds(*self._match.matched(), shrink=self.shrink)
        except Exception as e:  # noqa: BLE001 (best.pt without thresholds beats no best.pt)
            log.warning("best.pt: no per-class thresholds (%s: %s); detect.val --save-thresholds chooses them",
                        type(e).__name__, e)
            return None
        class_conf = choice.class_conf(self.chosen_on)
        log.info("best.pt: per-class confidence thresholds %s", class_conf.describe())
        return class_conf.to_dict()


def save_split_thresholds(match: SplitMatch, source, weights, chosen_on: str, conf_floor: float = 0.001,
                          shrink: float = SHRINK_K):
    """detect.val --save-thresholds: thresholds chosen from an evaluation's `match` on `source`, stored with the
    model file `weights` (detect.inference.class_conf.save_class_conf); returns (the file written, a table of
    them). `conf_floor`: the evaluation's --conf, below which no threshold can be found."""
    if conf_floor > 0.01:
        log.warning("--conf %g: no class can get a threshold below it; leave --conf at its default (0.001) to let "
                    "every class's best be found", conf_floor)
    matched = match.matched()
    choice = choose_thresholds(*matched, shrink=shrink)
    path = save_class_conf(weights, choice.class_conf(chosen_on))
    return path, format_choice(choice, count_at(*matched, choice.conf), source.names)
