"""From the model's decoded output to detections in original image pixels.

`non_max_suppression` takes the eval-mode output `[N, P, 5+K]` (cx, cy, w, h in input pixels, objectness,
class probabilities not multiplied by objectness) and returns one `[n, 6]` tensor per image with rows
(x1, y1, x2, y2, score, class), score = objectness * class probability, best first. The whole batch goes
through one `torchvision.ops.batched_nms` call: the group of a candidate is (image, class), so NMS is
class-aware and never mixes images.

`scale_to_original` undoes the letterbox (pad, then scale) and clips to the original image;
`image_detections` does both for a batch: the Predictor's postprocess, the one owner of NMS.
`ClassAgnosticModel` shows a K-class model as a one-class one (detect.val --single-cls).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torchvision.ops import batched_nms

from detect.ops.boxes import box_iou, clip_boxes_, xywh_to_xyxy

# Candidates kept per image before NMS (best scores first): bounds NMS time when a weak model
# scores everything above a low confidence threshold.
MAX_CANDIDATES_PER_IMAGE = 30000


def class_thresholds(conf_thres, num_classes: int, device) -> torch.Tensor | None:
    """Per-class thresholds as a float32 [K] tensor on `device` (None for one threshold, a number)."""
    if np.ndim(conf_thres) == 0:  # a number (also NumPy's, a 0-d tensor)
        return None
    thresholds = torch.as_tensor(conf_thres, dtype=torch.float32, device=device).reshape(-1)
    if len(thresholds) != num_classes:
        raise ValueError(f"{len(thresholds)} per-class confidence thresholds for a model of {num_classes} classes")
    return thresholds


def _candidates(pred: torch.Tensor, conf_thres, multi_label: bool):
    """(image index, box xyxy, score, class) of every candidate: obj * cls > conf_thres for one threshold, or
    obj * cls >= conf_thres[cls] for a [K] tensor of per-class thresholds."""
    per_class = isinstance(conf_thres, torch.Tensor)
    floor = conf_thres.min() if per_class else conf_thres
    objectness = pred[..., 4]
    # obj * cls <= obj, so a row whose objectness does not pass the lowest threshold cannot produce a candidate
    image_idx, row_idx = (objectness >= floor if per_class else objectness > floor).nonzero(as_tuple=True)
    rows = pred[image_idx, row_idx]
    scores = rows[:, 5:] * rows[:, 4:5]
    boxes = xywh_to_xyxy(rows[:, :4])
    if multi_label:
        passes = scores >= conf_thres[None, :] if per_class else scores > conf_thres
        cand, cls = passes.nonzero(as_tuple=True)
        return image_idx[cand], boxes[cand], scores[cand, cls], cls
    best, cls = scores.max(dim=1)  # single-label: the best class must pass its own threshold
    keep = best >= conf_thres[cls] if per_class else best > conf_thres
    return image_idx[keep], boxes[keep], best[keep], cls[keep]


def _rank_within_image(image_idx: torch.Tensor, order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Reorder `order` (indices, best score first) grouped by image and give each its rank in its image."""
    grouped = order[torch.sort(image_idx[order], stable=True).indices]
    images = image_idx[grouped]
    counts = torch.bincount(images)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(len(grouped), device=grouped.device) - starts[images]
    return grouped, rank


def _cap_per_image(image_idx: torch.Tensor, scores: torch.Tensor, limit: int) -> torch.Tensor:
    """Indices of the `limit` best-scoring candidates of every image (all when fewer)."""
    order = torch.argsort(scores, descending=True, stable=True)
    grouped, rank = _rank_within_image(image_idx, order)
    return grouped[rank < limit]


def _merged_boxes(boxes: torch.Tensor, scores: torch.Tensor, image_idx: torch.Tensor, cls: torch.Tensor,
                  final: torch.Tensor, iou_thres: float) -> torch.Tensor:
    """Boxes of `final` replaced by the IoU x score weighted mean of their cluster (merge-NMS), image by image
    so the IoU matrix stays [kept, candidates of one image]."""
    merged = boxes[final].clone()
    for image in torch.unique(image_idx[final]).tolist():
        rows = (image_idx[final] == image).nonzero(as_tuple=True)[0]
        members = (image_idx == image).nonzero(as_tuple=True)[0]
        kept = final[rows]
        iou = box_iou(boxes[kept], boxes[members])
        same_cluster = (iou > iou_thres) & (cls[kept, None] == cls[None, members])
        # closer members count more: weight = IoU x score (mAP@0.5:0.95 of yolov3-tiny on coco-tiny +0.003)
        weights = same_cluster * iou * scores[None, members]
        merged[rows] = (weights @ boxes[members]) / weights.sum(1, keepdim=True)
    return merged


def non_max_suppression(pred: torch.Tensor, conf_thres: float | Sequence[float] = 0.001, iou_thres: float = 0.6,
                        max_det: int = 300, multi_label: bool = True,
                        classes: Sequence[int] | None = None,
                        max_candidates: int = MAX_CANDIDATES_PER_IMAGE, merge: bool = False) -> list[torch.Tensor]:
    """Per image, detections `[n, 6]` = (x1, y1, x2, y2, score, class) in input pixels, best first.

    `conf_thres`: one threshold (score > conf_thres), or one per class (score >= conf_thres[class]: the
    thresholds detect.val --save-thresholds chooses), applied to the candidates, before NMS: NMS within a class
    only lets a box suppress lower-scoring ones, which its class's threshold drops as well, so (without merge)
    the result is that of filtering afterwards, and max_det counts kept detections only.
    `multi_label`: every class whose score passes gives its own row; otherwise only the best class of a box.
    `classes`: keep only these class indices. At most `max_det` rows per image, chosen among the
    `max_candidates` best-scoring candidates of that image. `merge`: each kept box becomes the IoU x score
    weighted mean of the candidates it suppressed (same image and class, IoU > iou_thres) and itself.
    """
    if pred.dim() != 3 or pred.shape[-1] < 6:
        raise ValueError(f"expected model output [N, P, 5+K] with K >= 1, got shape {tuple(pred.shape)}")
    if not 0 <= iou_thres <= 1:
        raise ValueError(f"NMS IoU threshold must be in [0, 1], got {iou_thres}")
    batch = pred.shape[0]
    per_class = class_thresholds(conf_thres, pred.shape[-1] - 5, pred.device)
    image_idx, boxes, scores, cls = _candidates(pred.float(), float(conf_thres) if per_class is None else per_class,
                                                multi_label)
    if classes is not None:
        wanted = torch.isin(cls, torch.as_tensor(list(classes), device=cls.device))
        image_idx, boxes, scores, cls = image_idx[wanted], boxes[wanted], scores[wanted], cls[wanted]
    if len(scores) > max_candidates:
        capped = _cap_per_image(image_idx, scores, max_candidates)
        image_idx, boxes, scores, cls = image_idx[capped], boxes[capped], scores[capped], cls[capped]

    num_classes = pred.shape[-1] - 5
    # float64 for NMS: batched_nms may offset each group's boxes by group * (max coordinate + 1), and in
    # float32 such offsets would round the coordinates, making IoUs depend on an image's place in the batch
    kept = batched_nms(boxes.double(), scores.double(), image_idx * num_classes + cls, iou_thres)  # best first
    grouped, rank = _rank_within_image(image_idx, kept)
    final = grouped[rank < max_det]
    final_boxes = _merged_boxes(boxes, scores, image_idx, cls, final, iou_thres) if merge else boxes[final]
    rows = torch.cat((final_boxes, scores[final, None], cls[final, None].float()), dim=1)
    counts = torch.bincount(image_idx[final], minlength=batch).tolist()
    return list(torch.split(rows, counts))


class ClassAgnosticModel(torch.nn.Module):
    """A K-class detector seen as a one-class one: each box's one class probability is its best class's, so its
    score is objectness x best class probability and NMS runs across the classes, as in a single-class model.
    `model` is any Runner (detect.inference.handle: eval-mode output [N, P, 5+K])."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.max_stride = model.max_stride
        self.input_size = getattr(model, "input_size", None)  # the fixed shape of an .onnx model, else unused
        self.num_classes = 1
        self.train(getattr(model, "training", False))  # a new Module trains; the wrapped one may not

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pred = self.model(x)
        return torch.cat((pred[..., :5], pred[..., 5:].amax(dim=-1, keepdim=True)), dim=-1)


def scale_to_original(boxes: torch.Tensor, ratio: float | Sequence[float], pad: Sequence[float],
                      orig_size: Sequence[int]) -> torch.Tensor:
    """Map xyxy boxes from letterboxed input pixels back to the original image and clip them (new tensor).

    `ratio`: the scale the letterbox applied (one number, or (x, y)); `pad`: (left, top) padding in pixels;
    `orig_size`: (h, w) of the original image.
    """
    ratio_x, ratio_y = (ratio, ratio) if not isinstance(ratio, (Sequence, torch.Tensor)) else tuple(ratio)
    out = boxes[..., :4].clone()
    out[..., [0, 2]] = (out[..., [0, 2]] - pad[0]) / ratio_x
    out[..., [1, 3]] = (out[..., [1, 3]] - pad[1]) / ratio_y
    return clip_boxes_(out, orig_size[0], orig_size[1])


def image_detections(pred: torch.Tensor, placements: Sequence[tuple], conf_thres: float | Sequence[float],
                     iou_thres: float, max_det: int, multi_label: bool = False,
                     merge: bool = False) -> list[torch.Tensor]:
    """Per image of a batch, rows (x1, y1, x2, y2, score, class) in the image's own pixels: one NMS over the
    batch's [N, P, 5+K] rows, then each image's letterbox undone. `placements`: per image (ratio, (left, top),
    (h, w) of the image), as the letterbox placed it; `conf_thres` one threshold or one per class."""
    found = non_max_suppression(pred, conf_thres, iou_thres, max_det, multi_label=multi_label, merge=merge)
    return [torch.cat((scale_to_original(det, ratio, pad, size), det[:, 4:6]), dim=1)
            for det, (ratio, pad, size) in zip(found, placements, strict=True)]
