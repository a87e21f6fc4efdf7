"""Per-class weights of the classification loss, for datasets whose classes are imbalanced.

`class_weights: auto` weighs class c by sqrt(median count / n_c) (n_c: boxes of class c in the training labels),
capped to [1/MAX_WEIGHT, MAX_WEIGHT], then scaled so that the mean weight over the training boxes is 1: the
class loss keeps its size, only its share between classes moves. The square root (as repeat-factor sampling
takes one) keeps a class with 100x fewer boxes at 10x, not 100x: full inverse frequency lets a handful of boxes
dominate the class gradient. A list gives the weights as they are (Darknet's `counters_per_class` maps to one).
"""

from __future__ import annotations

import logging

import numpy as np
import torch

log = logging.getLogger(__name__)

MAX_WEIGHT = 10.0


def box_counts(records, num_classes: int) -> np.ndarray:
    """Boxes per class over `records` (a RecordTable's class array, or record by record)."""
    classes = records.classes if hasattr(records, "box_offsets") else \
        np.concatenate([np.asarray(r.classes, dtype=np.int64).reshape(-1) for r in records] or [np.zeros(0, np.int64)])
    return np.bincount(np.asarray(classes, dtype=np.int64), minlength=num_classes)[:num_classes]


def auto_class_weights(counts: np.ndarray) -> np.ndarray:
    """Weights from box counts; a class without boxes gets 1 (it has no positives to weigh)."""
    counts = np.asarray(counts, dtype=np.float64)
    weights = np.ones(len(counts))
    present = counts > 0
    if not present.any():
        return weights
    median = np.median(counts[present])
    weights[present] = np.clip(np.sqrt(median / counts[present]), 1 / MAX_WEIGHT, MAX_WEIGHT)
    return weights / (weights @ counts / counts.sum())


def resolve_class_weights(setting, records, names) -> torch.Tensor | None:
    """The hyp's `class_weights` (None | "auto" | numbers) as a float32 tensor for these training records, logged;
    None when off."""
    if setting is None:
        return None
    names = list(names)
    if setting == "auto":
        counts = box_counts(records, len(names))
        weights = auto_class_weights(counts)
        source = "auto, from the training boxes per class"
    else:
        weights = np.asarray(setting, dtype=np.float64)
        if len(weights) != len(names):
            raise ValueError(f"class_weights lists {len(weights)} weights but the data has {len(names)} classes "
                             f"({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): give one per class, "
                             "or auto")
        counts, source = None, "as given"
    order = np.argsort(-weights, kind="stable")
    shown = [f"{names[c]} {weights[c]:.2f}" + (f" ({int(counts[c])} boxes)" if counts is not None else "")
             for c in order[:3]]
    log.info("class weights (%s): largest %s; smallest %s %.2f", source, ", ".join(shown), names[order[-1]],
             weights[order[-1]])
    return torch.tensor(weights, dtype=torch.float32)
