"""Box conversions and the IoU family, on torch tensors of any leading shape (last dimension 4).

Conventions: `xywh` is (centre x, centre y, width, height); `xyxy` is (left, top, right, bottom).
Everything is vectorised and differentiable (the losses use `aligned_iou`).
"""

from __future__ import annotations

import math

import torch

IOU_KINDS = ("iou", "giou", "diou", "ciou")
# Keeps divisions finite for degenerate (zero-area) boxes without changing normal values measurably.
EPS = 1e-7


def xywh_to_xyxy(t: torch.Tensor) -> torch.Tensor:
    """(cx, cy, w, h) -> (x1, y1, x2, y2); a new tensor, same shape and dtype."""
    centre, size = t[..., :2], t[..., 2:4]
    half = size / 2
    return torch.cat((centre - half, centre + half), dim=-1)


def xyxy_to_xywh(t: torch.Tensor) -> torch.Tensor:
    """(x1, y1, x2, y2) -> (cx, cy, w, h); a new tensor, same shape and dtype."""
    top_left, bottom_right = t[..., :2], t[..., 2:4]
    return torch.cat(((top_left + bottom_right) / 2, bottom_right - top_left), dim=-1)


def box_area(boxes_xyxy: torch.Tensor) -> torch.Tensor:
    """Area of xyxy boxes (negative extents count as zero)."""
    wh = (boxes_xyxy[..., 2:4] - boxes_xyxy[..., :2]).clamp(min=0)
    return wh[..., 0] * wh[..., 1]


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise IoU of xyxy boxes: a [N, 4], b [M, 4] -> [N, M]."""
    top_left = torch.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = torch.minimum(a[:, None, 2:4], b[None, :, 2:4])
    inter = (bottom_right - top_left).clamp(min=0).prod(dim=-1)
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    return inter / (union + EPS)


def aligned_iou(a: torch.Tensor, b: torch.Tensor, kind: str = "iou", xywh: bool = True) -> torch.Tensor:
    """Element-wise IoU (or GIoU / DIoU / CIoU) of boxes a[..., 4] and b[..., 4], broadcasting.

    giou = iou - (enclosing area - union) / enclosing area
    diou = iou - centre distance^2 / enclosing diagonal^2
    ciou = diou - alpha * v, v = 4/pi^2 (atan(w_b/h_b) - atan(w_a/h_a))^2, alpha = v / (1 - iou + v)
    (alpha is treated as a constant for the gradient, as in the CIoU paper).
    """
    if kind not in IOU_KINDS:
        raise ValueError(f"IoU kind must be one of {', '.join(IOU_KINDS)}; got {kind!r}")
    a_xyxy, b_xyxy = (xywh_to_xyxy(a), xywh_to_xyxy(b)) if xywh else (a, b)
    a_wh = a_xyxy[..., 2:4] - a_xyxy[..., :2]
    b_wh = b_xyxy[..., 2:4] - b_xyxy[..., :2]

    inter_wh = (torch.minimum(a_xyxy[..., 2:4], b_xyxy[..., 2:4])
                - torch.maximum(a_xyxy[..., :2], b_xyxy[..., :2])).clamp(min=0)
    inter = inter_wh[..., 0] * inter_wh[..., 1]
    union = a_wh[..., 0] * a_wh[..., 1] + b_wh[..., 0] * b_wh[..., 1] - inter + EPS
    iou = inter / union
    if kind == "iou":
        return iou

    enclose_wh = (torch.maximum(a_xyxy[..., 2:4], b_xyxy[..., 2:4])
                  - torch.minimum(a_xyxy[..., :2], b_xyxy[..., :2])).clamp(min=0)
    if kind == "giou":
        enclose_area = enclose_wh[..., 0] * enclose_wh[..., 1] + EPS
        return iou - (enclose_area - union) / enclose_area

    diagonal_sq = enclose_wh.pow(2).sum(dim=-1) + EPS
    centre_a = (a_xyxy[..., :2] + a_xyxy[..., 2:4]) / 2
    centre_b = (b_xyxy[..., :2] + b_xyxy[..., 2:4]) / 2
    distance_sq = (centre_b - centre_a).pow(2).sum(dim=-1)
    diou = iou - distance_sq / diagonal_sq
    if kind == "diou":
        return diou

    aspect_a = torch.atan(a_wh[..., 0] / (a_wh[..., 1] + EPS))
    aspect_b = torch.atan(b_wh[..., 0] / (b_wh[..., 1] + EPS))
    v = (4 / math.pi**2) * (aspect_b - aspect_a).pow(2)
    with torch.no_grad():
        alpha = v / (1 - iou + v + EPS)
    return diou - alpha * v


def clip_boxes_(boxes: torch.Tensor, h: float, w: float) -> torch.Tensor:
    """Clip xyxy boxes in place to the image [0, w] x [0, h]; returns `boxes`."""
    boxes[..., 0].clamp_(0, w)
    boxes[..., 1].clamp_(0, h)
    boxes[..., 2].clamp_(0, w)
    boxes[..., 3].clamp_(0, h)
    return boxes
