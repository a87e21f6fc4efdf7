"""Anchor fit: how well a cfg's anchors suit a dataset's box shapes (anchors fitted to those shapes:
detect.engine.anchor_fitting).

The match rule is the loss's (detect.engine.assign): a ground truth of shape (w, h) can train an anchor (aw, ah) when
``max(w/aw, aw/w, h/ah, ah/h) < anchor_t``. A box no anchor matches trains only Darknet's forced best anchor,
far from its shape (a new_coords head cannot even reach a box beyond 4x its anchor), so the fraction of boxes
some anchor matches ("best possible recall") bounds how well training can learn the dataset.

Shapes are measured at the training size: each image letterboxed to long side `img_size`, before augmentation
(scale augmentation spreads them around that). Pure numpy; nothing here touches the training loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np

POOR_RECALL = 0.98  # below this a run warns: over 2% of the boxes have no anchor to train


# -- shapes ---------------------------------------------------------------------------------------------------
def label_shapes(source, img_size: int) -> np.ndarray:
    """float64 [N, 2]: (w, h) of every box of `source.records` in the image letterboxed to long side `img_size`."""
    records = source.records
    counts = np.array([len(r.boxes) for r in records], dtype=np.int64)
    if counts.sum() == 0:
        return np.zeros((0, 2))
    scale = img_size / np.array([max(r.width, r.height) for r in records], dtype=np.float64)
    boxes = np.concatenate([np.asarray(r.boxes, dtype=np.float64).reshape(-1, 4) for r in records])
    return (boxes[:, 2:4] - boxes[:, 0:2]) * np.repeat(scale, counts)[:, None]


def split_shapes(spec, img_size: int, split: str = "train", cache_dir: Path | None = None) -> np.ndarray:
    """`label_shapes` of a split of a data spec (a path, a DataSpec or an opened source)."""
    from detect.data.loader import open_split

    return label_shapes(open_split(spec, split, cache_dir), img_size)


def ratio_metric(shapes: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """[N, K]: max(w/aw, aw/w, h/ah, ah/h), the worse side's ratio (1 = same shape); the loss's match rule
    compares it with anchor_t. Computed as the loss computes it (divisions), so a box exactly at the limit
    falls on the same side."""
    shapes, anchors = np.asarray(shapes, dtype=np.float64), np.asarray(anchors, dtype=np.float64)
    rw = shapes[:, 0, None] / anchors[None, :, 0]
    rh = shapes[:, 1, None] / anchors[None, :, 1]
    return np.maximum(np.maximum(rw, 1.0 / rw), np.maximum(rh, 1.0 / rh))


def log_ratio(log_shapes: np.ndarray, log_anchors: np.ndarray) -> np.ndarray:
    """[N, K] log of the ratio metric, max(|log w - log aw|, |log h - log ah|), for the refinement loop. Sides
    are taken as columns (here and above): numpy reduces a length-2 last axis several times slower than it
    combines two [N, K] arrays."""
    dw = np.abs(log_shapes[:, 0, None] - log_anchors[None, :, 0])
    return np.maximum(dw, np.abs(log_shapes[:, 1, None] - log_anchors[None, :, 1]))


def shape_iou(shapes: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """[N, K]: IoU of boxes sharing a centre (the k-means distance is 1 - this)."""
    shapes, anchors = np.asarray(shapes, dtype=np.float64), np.asarray(anchors, dtype=np.float64)
    inter = np.minimum(shapes[:, 0, None], anchors[None, :, 0]) * np.minimum(shapes[:, 1, None], anchors[None, :, 1])
    return inter / (shapes.prod(1)[:, None] + anchors.prod(1)[None, :] - inter)


# -- fit figures ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AnchorFit:
    """How a set of heads' anchors match a set of box shapes under the loss's rule."""

    head_recall: tuple[float, ...]  # per head: fraction of boxes at least one anchor of that head matches
    recall: float  # fraction of boxes some anchor of some head matches ("best possible recall")
    anchors_per_box: float  # mean number of anchors (all heads) a box matches
    num_boxes: int
    anchor_t: float
    head_labels: tuple[str, ...]

    def summary(self) -> str:
        if self.num_boxes == 0:
            return "anchor fit: no boxes to measure"
        heads = ", ".join(f"{label} {r:.3f}" for label, r in zip(self.head_labels, self.head_recall))
        return (f"anchor fit (ratio < {self.anchor_t:g}, {self.num_boxes} boxes): best possible recall "
                f"{self.recall:.3f}, {self.anchors_per_box:.2f} anchors/box; per head: {heads}")


def anchor_fit(shapes: np.ndarray, head_anchors: Sequence, anchor_t: float = 4.0,
               head_labels: Sequence[str] | None = None) -> AnchorFit:
    """Fit figures of `head_anchors` (per head an [A, 2] array or tensor, input pixels) for `shapes` [N, 2]."""
    anchors = [np.asarray(a.cpu() if hasattr(a, "cpu") else a, dtype=np.float64).reshape(-1, 2)
               for a in head_anchors]
    labels = tuple(head_labels) if head_labels is not None else tuple(f"head {i}" for i in range(len(anchors)))
    shapes = np.asarray(shapes, dtype=np.float64).reshape(-1, 2)
    if len(shapes) == 0:
        return AnchorFit(tuple(float("nan") for _ in anchors), float("nan"), float("nan"), 0, anchor_t, labels)
    matches = ratio_metric(shapes, np.concatenate(anchors)) < anchor_t  # [N, K], heads' anchors side by side
    bounds = np.cumsum([0] + [len(a) for a in anchors])
    head_any = [matches[:, lo:hi].any(1) for lo, hi in pairwise(bounds)]
    return AnchorFit(head_recall=tuple(float(m.mean()) for m in head_any), recall=float(matches.any(1).mean()),
                     anchors_per_box=float(matches.sum(1).mean()), num_boxes=len(shapes), anchor_t=anchor_t,
                     head_labels=labels)


def model_anchor_fit(model, shapes: np.ndarray, anchor_t: float = 4.0) -> AnchorFit:
    """`anchor_fit` of a Darknet model's heads (`model.heads`: anchors [A, 2], stride (y, x))."""
    labels = [f"layer {h.layer_index} (stride {max(h.stride):g})" for h in model.heads]
    return anchor_fit(shapes, [h.anchors for h in model.heads], anchor_t, labels)


def poor_fit_warning(fit: AnchorFit, min_recall: float = POOR_RECALL) -> str | None:
    """The warning a run logs when the anchors fit the data poorly, else None."""
    if fit.num_boxes == 0 or fit.recall >= min_recall:
        return None
    return (f"anchors fit this dataset poorly: only {fit.recall:.3f} of {fit.num_boxes} training boxes are within "
            f"{fit.anchor_t:g}x of some anchor (want >= {min_recall:g}); boxes outside can never be learnt well. "
            "Use --anchors fit to recompute the anchors for this dataset.")
