"""Target assignment for Darknet `[yolo]` heads: which (image, anchor, cell) predicts which ground truth.

Pure, vectorised tensor functions (no Python loop over boxes; the loop over heads is the only one).

Rules (see docs/darknet-format.md §2.7, §3.2):
* shape fit: a ground truth goes to every anchor of a head whose shape ratio fits,
  ``max(w/aw, aw/w, h/ah, ah/h) < anchor_t`` (new_coords heads cannot grow beyond 4x their anchor);
* Darknet's best anchor: every ground truth is also assigned to the anchor (over all heads) whose shape IoU with it
  is highest, so no ground truth is left without a positive;
* Darknet's ``iou_thresh``: further anchors of a head whose shape IoU exceeds that head's ``iou_thresh`` (1 disables);
* neighbouring cells: a head whose centre offsets reach beyond the cell (``scale_x_y > 1``, the new_coords heads use
  2) also trains the left/right and upper/lower neighbour cells whose decoded offset can still reach the centre.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class HeadSpec:
    """What the loss needs to know about one `[yolo]` head (built from a model's `YoloHead` or by hand)."""

    anchors: torch.Tensor  # [A, 2] (w, h) in input pixels
    scale_x_y: float = 1.0
    new_coords: bool = False
    options: dict = field(default_factory=dict)  # Darknet [yolo] keys (iou_loss, iou_thresh, label_smooth_eps, ...)

    @property
    def num_anchors(self) -> int:
        return int(self.anchors.shape[0])

    @classmethod
    def from_head(cls, head) -> HeadSpec:
        return cls(anchors=head.anchors.detach().float().cpu().clone(), scale_x_y=float(head.scale_x_y),
                   new_coords=bool(head.new_coords), options=dict(head.options))


@dataclass
class HeadTargets:
    """Rows of one head, each a (image, anchor, cell) slot and the ground truth it must predict.

    Padded (from `assign_padded`): a fixed number of rows, those with `valid` False trained on nothing, so the
    shapes depend only on the batch's target capacity and the loss has no data-dependent shape. Compact (from
    `build_targets` or `compact()`): only the positives, every row valid.
    """

    image: torch.Tensor  # [P] long
    anchor: torch.Tensor  # [P] long, index into this head's anchors
    gy: torch.Tensor  # [P] long, cell row
    gx: torch.Tensor  # [P] long, cell column
    box: torch.Tensor  # [P, 4] target (cx, cy, w, h) in input pixels, centre relative to the cell's top-left corner
    cls: torch.Tensor  # [P] long
    anchor_wh: torch.Tensor  # [P, 2] anchor (w, h) in input pixels
    valid: torch.Tensor  # [P] bool: a positive (padded rows: False)

    @property
    def count(self) -> int:
        """Rows (positives once compact); reading it does not touch the device."""
        return int(self.image.numel())

    def compact(self) -> HeadTargets:
        """Only the positive rows, in the same order (a data-dependent shape: for tools and tests, not the step)."""
        keep = self.valid.nonzero(as_tuple=True)[0]
        return HeadTargets(*(getattr(self, f)[keep] for f in self.__dataclass_fields__))


def shape_iou(wh_a: torch.Tensor, wh_b: torch.Tensor) -> torch.Tensor:
    """IoU of boxes sharing a centre: `[..., 2]` x `[..., 2]` broadcast to `[...]`."""
    inter = torch.minimum(wh_a[..., 0], wh_b[..., 0]) * torch.minimum(wh_a[..., 1], wh_b[..., 1])
    union = wh_a[..., 0] * wh_a[..., 1] + wh_b[..., 0] * wh_b[..., 1] - inter
    return inter / union.clamp(min=1e-9)


def best_anchor_per_target(heads: list[HeadSpec], gt_wh: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(head index, anchor index) of the anchor with the highest shape IoU for each ground truth ([M] each)."""
    all_anchors = torch.cat([h.anchors.to(gt_wh) for h in heads])  # [sum A, 2]
    owner = torch.cat([torch.full((h.num_anchors,), i, dtype=torch.long) for i, h in enumerate(heads)])
    local = torch.cat([torch.arange(h.num_anchors) for h in heads])
    best = shape_iou(gt_wh[:, None, :], all_anchors[None, :, :]).argmax(1)  # [M]
    return owner.to(gt_wh.device)[best], local.to(gt_wh.device)[best]


def neighbour_reach(scale_x_y: float) -> float:
    """How far (in cells, at most 0.5) a decoded centre offset reaches outside its cell."""
    return min(max((scale_x_y - 1.0) / 2.0, 0.0), 0.5)


def _anchor_matches(head: HeadSpec, gt_wh: torch.Tensor, anchor_t: float, forced: torch.Tensor) -> torch.Tensor:
    """[A, M] bool: which anchors of this head train which ground truth."""
    anchors = head.anchors.to(gt_wh)
    ratio = gt_wh[None, :, :] / anchors[:, None, :]  # [A, M, 2]
    fits = torch.maximum(ratio, 1.0 / ratio).amax(2) < anchor_t
    iou_thresh = float(head.options.get("iou_thresh", 1.0))
    if iou_thresh < 1.0:
        fits |= shape_iou(gt_wh[None, :, :], anchors[:, None, :]) > iou_thresh
    return fits | forced


def assign_head(head: HeadSpec, targets: torch.Tensor, valid: torch.Tensor, grid_hw: tuple[int, int],
                img_hw: tuple[int, int], anchor_t: float, forced: torch.Tensor) -> HeadTargets:
    """Padded rows of one head: every (candidate cell, anchor, target) triple, `valid` where it is a positive.

    targets: [M, 6] (image, class, cx, cy, w, h) normalised to the input; valid: [M] bool real targets;
    forced: [A, M] bool best-anchor matches. Rows run cell (own, left, up, right, down) -> anchor -> target.
    """
    grid_h, grid_w = grid_hw
    img_h, img_w = img_hw
    stride = targets.new_tensor([img_w / grid_w, img_h / grid_h])
    size = targets.new_tensor([img_w, img_h])
    gt_xy = targets[:, 2:4] * size  # input pixels
    gt_wh = targets[:, 4:6] * size
    match = _anchor_matches(head, gt_wh, anchor_t, forced) & valid[None, :]  # [A, M]
    grid_xy = gt_xy / stride  # centre in cells
    frac = grid_xy - grid_xy.floor()

    # candidate cells: own cell plus neighbours (left, up, right, down) the decoded offset can reach
    reach = neighbour_reach(head.scale_x_y)
    offsets = targets.new_tensor([[0, 0], [-1, 0], [0, -1], [1, 0], [0, 1]])
    own = torch.ones_like(valid)
    if reach > 0:
        limit = targets.new_tensor([grid_w, grid_h])
        low = (frac < reach) & (grid_xy >= 1.0)
        high = (frac > 1.0 - reach) & (grid_xy < limit - 1.0)
        use = torch.stack([own, low[:, 0], low[:, 1], high[:, 0], high[:, 1]])  # [C=5, M]
    else:
        use, offsets = own[None], offsets[:1]
    rows = use[:, None, :] & match[None, :, :]  # [C, A, M]
    shape = rows.shape
    cell = (grid_xy.floor()[None] + offsets[:, None]).long()  # [C, M, 2]
    gx = cell[..., 0].clamp(0, grid_w - 1)
    gy = cell[..., 1].clamp(0, grid_h - 1)
    centre = gt_xy[None] - torch.stack([gx, gy], -1).to(gt_xy) * stride  # [C, M, 2]
    box = torch.cat([centre, gt_wh[None].expand_as(centre)], -1)  # [C, M, 4]
    anchors = head.anchors.to(gt_wh)

    def per_row(t: torch.Tensor) -> torch.Tensor:  # [C, M, ...] -> [C*A*M, ...]
        return t[:, None].expand(shape[0], shape[1], *t.shape[1:]).reshape(-1, *t.shape[2:])

    return HeadTargets(image=targets[:, 0].long().expand(shape).reshape(-1),
                       anchor=torch.arange(shape[1], device=targets.device)[None, :, None].expand(shape).reshape(-1),
                       gy=per_row(gy), gx=per_row(gx), box=per_row(box),
                       cls=targets[:, 1].long().expand(shape).reshape(-1),
                       anchor_wh=anchors[None, :, None, :].expand(*shape, 2).reshape(-1, 2), valid=rows.reshape(-1))


def assign_padded(heads: list[HeadSpec], targets: torch.Tensor, valid: torch.Tensor,
                  grid_sizes: list[tuple[int, int]], img_hw: tuple[int, int],
                  anchor_t: float = 4.0) -> list[HeadTargets]:
    """Padded rows for every head (cfg order), shapes fixed by M: `targets` [M, 6] = (image, class, cx, cy, w, h)
    normalised, `valid` [M] bool (padding rows must still hold a finite box of positive size)."""
    if len(heads) != len(grid_sizes):
        raise ValueError(f"{len(heads)} heads but {len(grid_sizes)} grid sizes")
    targets = targets.float()
    img_w_h = targets.new_tensor([img_hw[1], img_hw[0]])
    gt_wh = (targets[:, 4:6] * img_w_h).clamp(min=1e-6)
    owner, local = best_anchor_per_target(heads, gt_wh)
    out = []
    for i, (head, grid_hw) in enumerate(zip(heads, grid_sizes)):
        # [A, M]: the anchor of this head that is each target's best over all heads
        slots = torch.arange(head.num_anchors, device=targets.device)[:, None]
        forced = (owner == i)[None, :] & (local[None, :] == slots)
        out.append(assign_head(head, targets, valid, grid_hw, img_hw, anchor_t, forced))
    return out


def build_targets(heads: list[HeadSpec], targets: torch.Tensor, grid_sizes: list[tuple[int, int]],
                  img_hw: tuple[int, int], anchor_t: float = 4.0) -> list[HeadTargets]:
    """The positives of every head (cfg order), compact. `targets` [M, 6] = (image, class, cx, cy, w, h), normalised."""
    valid = torch.ones(targets.shape[0], dtype=torch.bool, device=targets.device)
    return [t.compact() for t in assign_padded(heads, targets, valid, grid_sizes, img_hw, anchor_t)]


# Padding rows: a finite box of positive size on image 0, so every term of the loss stays finite on them.
_PAD_ROW = (0.0, 0.0, 0.5, 0.5, 0.25, 0.25)


def target_capacity(count: int, current: int = 0, minimum: int = 64) -> int:
    """Rows a batch's targets are padded to: `current` while it holds them, else the next power of two (so a run
    sees a handful of shapes, each compiled once)."""
    if current and count <= current:
        return current
    return max(minimum, 1 << max(count - 1, 0).bit_length())


def pad_targets(targets: torch.Tensor, capacity: int) -> tuple[torch.Tensor, torch.Tensor]:
    """([capacity, 6] targets, [capacity] bool valid): `targets` followed by padding rows."""
    count = targets.shape[0]
    if count > capacity:
        raise ValueError(f"{count} targets do not fit a capacity of {capacity}")
    padded = targets.new_tensor(_PAD_ROW).float().repeat(capacity, 1)
    padded[:count] = targets.float()
    valid = torch.arange(capacity, device=targets.device) < count
    return padded, valid
