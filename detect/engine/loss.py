"""The YOLO loss for Darknet `[yolo]` heads: box (GIoU/DIoU/CIoU), objectness BCE with an IoU target, class BCE.

The loss decodes the matched predictions with exactly the head's rules (docs/darknet-format.md §3.2):
* ``new_coords=0``: offset ``sigmoid(t)*s - (s-1)/2``, size ``exp(t)*anchor``, obj/class are logits;
* ``new_coords=1``: the conv already applied the logistic: offset ``p*s - (s-1)/2``, size ``(2p)^2*anchor``,
  obj/class are probabilities.

Objectness is a mean over all slots of the local batch; box and class are sums over the local positives divided by
the global positive count per rank (one small all-reduce), so the gradient DDP averages is the gradient of the
whole global batch, however it is split across ranks. The gains of `LossConfig` (detect.engine.config)
``box``/``obj``/``cls`` weight the parts. The cfg's Darknet normalizers (``iou_normalizer`` etc.) scale Darknet's own
summed gradients and are not used; the head's ``iou_loss`` (giou/diou/ciou) and ``label_smooth_eps`` are.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from detect.darknet.yolo import box_parts
from detect.engine.assign import HeadSpec, HeadTargets, assign_padded, pad_targets, target_capacity
from detect.engine.config import DEFAULT_OBJ_BALANCE, IOU_KINDS, LossConfig
from detect.ops.boxes import aligned_iou
from detect.runtime.dist import all_reduce_sum, get_world_size

_MAX_LOG_SCALE = math.log(1000.0)  # exp(t) beyond this is a diverged prediction; keep the loss finite


def decode_positives(raw: torch.Tensor, head: HeadSpec, t: HeadTargets, stride_xy: torch.Tensor) -> torch.Tensor:
    """Boxes (cx, cy relative to the cell's corner, w, h; input pixels) of the matched slots: [P, 4]."""
    xy, wh = box_parts(raw[t.image, t.anchor, t.gy, t.gx, :4], head.scale_x_y, head.new_coords, _MAX_LOG_SCALE)
    return torch.cat([xy * stride_xy, wh * t.anchor_wh], 1)


def bce(pred: torch.Tensor, target: torch.Tensor, probabilities: bool, reduction: str = "mean") -> torch.Tensor:
    """Binary cross-entropy on logits, or on probabilities (new_coords heads) with clamped logs."""
    if not probabilities:
        return F.binary_cross_entropy_with_logits(pred, target, reduction=reduction)
    eps = 1e-7
    p = pred.clamp(eps, 1.0 - eps)
    loss = -(target * p.log() + (1.0 - target) * (1.0 - p).log())
    return {"mean": loss.mean, "sum": loss.sum}.get(reduction, lambda: loss)()


def positives_per_rank(assigned: list[HeadTargets]) -> torch.Tensor:
    """Per head, the global number of positives divided by the world size ([heads], on their device, >= 1e-9).

    Box and class losses are sums over positives divided by this, so the gradient DDP averages equals the
    gradient of one process that sees the whole global batch, however the positives fall across ranks.
    It stays a device tensor: reading it on the host would stall the step until the GPU caught up.
    """
    counts = torch.stack([t.valid.sum() for t in assigned]).float()
    counts = all_reduce_sum(counts) / get_world_size()
    return counts.clamp(min=1e-9)


def objectness_balance(stride: float, table: dict | None) -> float:
    table = {float(k): float(v) for k, v in (table or DEFAULT_OBJ_BALANCE).items()}
    nearest = min(table, key=lambda k: abs(math.log2(k) - math.log2(stride)))
    return table[nearest]


class YoloLoss:
    """`loss(raw_maps, targets, img_hw) -> (total, parts[box, obj, cls] detached)`; total is a scalar mean.

    The step has no host synchronisation and no data-dependent shape: the targets are padded on the host to a
    capacity (a power of two, grown when a batch holds more), assigned on the device as padded rows with a
    validity mask, and every term is reduced there (`padded_loss`, which compiles as one graph).
    """

    def __init__(self, heads: list[HeadSpec], config: LossConfig, class_weights: torch.Tensor | None = None):
        self.heads = heads
        self.config = config
        self.class_weights = class_weights  # [K]: a positive's class loss times its class's weight (None: 1)
        self.capacity = 0  # targets per batch the padding holds (grown by `target_capacity`)
        self._compiled = None  # padded_loss under torch.compile (`compile`)
        self._on_device: dict[str, tuple[list[HeadSpec], torch.Tensor | None]] = {}
        for i, h in enumerate(heads):
            kind = str(h.options.get("iou_loss", "mse"))
            if kind not in IOU_KINDS and kind != "mse":
                raise ValueError(f"head {i}: iou_loss {kind!r} is not one of mse, {', '.join(IOU_KINDS)}")

    @classmethod
    def for_model(cls, model, config: LossConfig, class_weights: torch.Tensor | None = None) -> YoloLoss:
        heads = [HeadSpec.from_head(h) for h in model.heads]
        if not heads:
            raise ValueError("the model has no [yolo] heads: it cannot be trained as a detector")
        if class_weights is not None and model.num_classes != len(class_weights):
            raise ValueError(f"{len(class_weights)} class weights for a model with {model.num_classes} classes")
        return cls(heads, config, class_weights)

    def _iou_kind(self, head: HeadSpec) -> str:
        kind = str(head.options.get("iou_loss", "mse"))
        return kind if kind in IOU_KINDS else self.config.iou_loss

    def _smoothing(self, head: HeadSpec) -> float:
        if self.config.label_smoothing is not None:
            return float(self.config.label_smoothing)
        return float(head.options.get("label_smooth_eps", 0.0))

    def _device_copies(self, device) -> tuple[list[HeadSpec], torch.Tensor | None]:
        """The heads' anchors and the class weights on `device`, copied once rather than every step."""
        key = str(device)
        if key not in self._on_device:
            heads = [HeadSpec(h.anchors.to(device), h.scale_x_y, h.new_coords, h.options) for h in self.heads]
            weights = None if self.class_weights is None else self.class_weights.to(device)
            self._on_device[key] = (heads, weights)
        return self._on_device[key]

    def pad(self, targets: torch.Tensor, device) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's targets padded to the capacity and moved to `device` in one asynchronous copy."""
        self.capacity = target_capacity(int(targets.shape[0]), self.capacity)
        padded, valid = pad_targets(targets.detach(), self.capacity)
        if torch.device(device).type == "cuda" and not padded.is_cuda:
            padded, valid = padded.pin_memory(), valid.pin_memory()
        return padded.to(device, non_blocking=True), valid.to(device, non_blocking=True)

    def __call__(self, raw_maps: list[torch.Tensor], targets: torch.Tensor, img_hw: tuple[int, int]):
        if len(raw_maps) != len(self.heads):
            raise ValueError(f"{len(raw_maps)} head outputs but the loss knows {len(self.heads)} heads")
        padded, valid = self.pad(targets, raw_maps[0].device)
        return (self._compiled or self.padded_loss)(raw_maps, padded, valid, img_hw)

    def compile(self) -> YoloLoss:
        """Run `padded_loss` compiled (--compile): the assignment and the loss fused into a few kernels."""
        self._compiled = torch.compile(self.padded_loss)
        return self

    def padded_loss(self, raw_maps: list[torch.Tensor], padded: torch.Tensor, valid: torch.Tensor,
                    img_hw: tuple[int, int]):
        """The loss of padded targets ([M, 6], valid [M]) on their device: fixed shapes, no host read."""
        raw_maps = [r.float() for r in raw_maps]  # losses in float32 even under autocast
        heads, class_weights = self._device_copies(raw_maps[0].device)
        grids = [(int(r.shape[2]), int(r.shape[3])) for r in raw_maps]
        assigned = assign_padded(heads, padded, valid, grids, img_hw, self.config.anchor_t)
        normalisers = positives_per_rank(assigned)
        zero = raw_maps[0].new_zeros(())
        box_loss, obj_loss, cls_loss = zero.clone(), zero.clone(), zero.clone()
        for i, (raw, head, t, (gh, gw)) in enumerate(zip(raw_maps, heads, assigned, grids)):
            stride_xy = raw.new_tensor([img_hw[1] / gw, img_hw[0] / gh])
            b, o, c = self._head_loss(raw, head, t, stride_xy, normalisers[i], class_weights)
            box_loss = box_loss + b
            obj_loss = obj_loss + o * objectness_balance((img_hw[1] / gw + img_hw[0] / gh) / 2,
                                                         self.config.obj_balance)
            cls_loss = cls_loss + c
        cfg = self.config
        box_loss, obj_loss, cls_loss = box_loss * cfg.box, obj_loss * cfg.obj, cls_loss * cfg.cls
        total = box_loss + obj_loss + cls_loss
        return total, torch.stack([box_loss, obj_loss, cls_loss]).detach()

    def _head_loss(self, raw: torch.Tensor, head: HeadSpec, t: HeadTargets, stride_xy: torch.Tensor,
                   positives: torch.Tensor, class_weights: torch.Tensor | None):
        """(box, obj, cls) of one head; box and cls are sums over this rank's positive rows / `positives`."""
        probabilities = head.new_coords
        weight = t.valid.to(raw.dtype)  # padded rows count for nothing (their boxes are finite by construction)
        pred = decode_positives(raw, head, t, stride_xy)
        iou = aligned_iou(pred, t.box, kind=self._iou_kind(head), xywh=True)
        box_loss = ((1.0 - iou) * weight).sum() / positives
        r = self.config.obj_iou_ratio
        score = ((1.0 - r) + r * iou.detach().clamp(min=0.0)) * weight
        flat = ((t.image * raw.shape[1] + t.anchor) * raw.shape[2] + t.gy) * raw.shape[3] + t.gx
        # contiguous whatever the layout of `raw` (channels_last activations give a permuted view); several ground
        # truths may share a slot: keep the best IoU, deterministically (padded rows add 0, below every score)
        obj_target = raw.new_zeros(raw.shape[:-1])
        obj_target.view(-1).scatter_reduce_(0, flat, score.to(obj_target.dtype), reduce="amax")
        cls_loss = raw.new_zeros(())
        num_classes = raw.shape[-1] - 5
        if num_classes > 1:
            eps = self._smoothing(head)
            cls_target = F.one_hot(t.cls, num_classes).to(raw.dtype) * (1.0 - eps) + 0.5 * eps
            per_box = bce(raw[t.image, t.anchor, t.gy, t.gx, 5:], cls_target, probabilities, "none").sum(1)
            if class_weights is not None:
                per_box = per_box * class_weights[t.cls]
            cls_loss = (per_box * weight).sum() / (positives * num_classes)
        obj_loss = bce(raw[..., 4], obj_target, probabilities)
        return box_loss, obj_loss, cls_loss
