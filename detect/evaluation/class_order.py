"""A model evaluated on a dataset whose classes it names differently: the model's classes compared with the
dataset's by name (detect.ops.class_names), and the model's detections given the dataset's class indices.

Same classes in the same order: nothing to do. The dataset's classes all among the model's, in another order or a
subset: the runner's class columns are reordered to the dataset's before NMS (`DatasetClassModel`), so NMS, COCO,
VOC and Darknet metrics all see dataset indices, and detections of classes the dataset lacks are dropped. A
dataset class the model lacks is refused before any work. A model without names (class ids "0", "1", ...) is
matched by index: the caller's count check applies.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from detect.ops.class_names import are_class_ids, is_identity, map_names, shown_names

log = logging.getLogger(__name__)


def dataset_class_order(model_names: Sequence[str], dataset_names: Sequence[str], weights, data,
                        also: str | None = None) -> list[int] | None:
    """None when the model's classes are the dataset's, index for index (or the model has no names: matched by
    index); else, per dataset class, the model class that is it (logged once). ValueError naming the first
    dataset class the model lacks, and what to do (`also`: one more way, the caller's)."""
    if are_class_ids(model_names):
        return None
    order = _refused_unless_found(model_names, dataset_names, weights, data, also)
    if len(order) == len(model_names) and is_identity(order, len(order)):
        return None
    if len(order) == len(model_names):
        log.info("%s: the model's classes are %s's in another order; its detections are mapped to the dataset's "
                 "classes by name", weights, data)
    else:
        log.info("%s: %s has %d of the model's %d classes (%s); its detections are mapped to them by name, those "
                 "of the other %d classes dropped", weights, data, len(order), len(model_names),
                 shown_names(dataset_names), len(model_names) - len(order))
    return order


def _refused_unless_found(model_names, dataset_names, weights, data, also: str | None) -> list[int]:
    try:
        return map_names(model_names, dataset_names, f"--weights {weights}", str(data))
    except ValueError as e:
        subset = f"list the model's classes that {data} has under `classes:` in it to evaluate those only"
        raise ValueError(f"{e}; use weights trained for these classes, " +
                         (f"{subset}, or {also}" if also else f"or {subset}")) from None


class DatasetClassModel(torch.nn.Module):
    """A runner (detect.inference.handle: eval-mode output [N, P, 5+K]) whose class columns are a dataset's:
    column 5 + j is the model's class `order[j]`, so its rows have 5 + len(order) columns."""

    def __init__(self, model, order: Sequence[int]):
        super().__init__()
        self.model = model
        self.max_stride = getattr(model, "max_stride", None)  # a test-time augmentation wrapper has none
        self.input_size = getattr(model, "input_size", None)  # the fixed shape of an .onnx model, else unused
        self.num_classes = len(order)
        self.columns = torch.tensor([0, 1, 2, 3, 4] + [5 + int(k) for k in order])
        self.train(getattr(model, "training", False))  # a new Module trains; the wrapped one may not

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pred = self.model(x)
        if self.columns.device != pred.device:
            self.columns = self.columns.to(pred.device)
        return pred.index_select(-1, self.columns)


def dataset_class_probs(probs: np.ndarray, order: Sequence[int] | None) -> np.ndarray:
    """Per-class probabilities [n, K] of the model as the dataset's [n, len(order)] (as they are for None)."""
    return probs if order is None else probs[:, list(order)]
