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
    """Positives of one head: P rows, each a (image, anchor, cell) slot and the ground truth it must predict."""

    image: torch.Tensor  # [P] long
    anchor: torch.Tensor  # [P] long, index into this head's anchors
    gy: torch.Tensor  # [P] long, cell row
    gx: torch.Tensor  # [P] long, cell column
    box: torch.Tensor  # [P, 4] target (cx, cy, w, h) in input pixels, centre relative to the cell's top-left corner
    cls: torch.Tensor  # [P] long
    anchor_wh: torch.Tensor  # [P, 2] anchor (w, h) in input pixels

    @property
    def count(self) -> int:
        return int(self.image.numel())

    def to(self, device) -> HeadTargets:
        """The same positives on `device` (asynchronous copies: the host does not wait for the GPU)."""
        return HeadTargets(*(getattr(self, f).to(device, non_blocking=True) for f in self.__dataclass_fields__))


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


def assign_head(head: HeadSpec, targets: torch.Tensor, grid_hw: tuple[int, int], img_hw: tuple[int, int],
                anchor_t: float, forced: torch.Tensor) -> HeadTargets:
    """Positives of one head.

    targets: [M, 6] (image, class, cx, cy, w, h) normalised to the input; forced: [A, M] bool best-anchor matches.
    """
    grid_h, grid_w = grid_hw
    img_h, img_w = img_hw
    stride = targets.new_tensor([img_w / grid_w, img_h / grid_h])
    size = targets.new_tensor([img_w, img_h])
    gt_xy = targets[:, 2:4] * size  # input pixels
    gt_wh = targets[:, 4:6] * size
    match = _anchor_matches(head, gt_wh, anchor_t, forced)  # [A, M]
    a_idx, t_idx = match.nonzero(as_tuple=True)
    grid_xy = gt_xy[t_idx] / stride  # centre in cells
    frac = grid_xy - grid_xy.floor()

    # candidate cells: own cell plus neighbours (left, up, right, down) the decoded offset can reach
    reach = neighbour_reach(head.scale_x_y)
    offsets = targets.new_tensor([[0, 0], [-1, 0], [0, -1], [1, 0], [0, 1]])
    own = torch.ones_like(frac[:, 0], dtype=torch.bool)
    if reach > 0:
        limit = targets.new_tensor([grid_w, grid_h])
        low = (frac < reach) & (grid_xy >= 1.0)
        high = (frac > 1.0 - reach) & (grid_xy < limit - 1.0)
        use = torch.stack([own, low[:, 0], low[:, 1], high[:, 0], high[:, 1]])  # [5, P]
    else:
        use = own[None]
    which, row = use.nonzero(as_tuple=True)
    cell = (grid_xy[row].floor() + offsets[which]).long()
    gx = cell[:, 0].clamp(0, grid_w - 1)
    gy = cell[:, 1].clamp(0, grid_h - 1)
    t_rows, a_rows = t_idx[row], a_idx[row]
    centre = gt_xy[t_rows] - torch.stack([gx, gy], 1).to(gt_xy) * stride
    return HeadTargets(image=targets[t_rows, 0].long(), anchor=a_rows, gy=gy, gx=gx,
                       box=torch.cat([centre, gt_wh[t_rows]], 1), cls=targets[t_rows, 1].long(),
                       anchor_wh=head.anchors.to(gt_wh)[a_rows])


def build_targets(heads: list[HeadSpec], targets: torch.Tensor, grid_sizes: list[tuple[int, int]],
                  img_hw: tuple[int, int], anchor_t: float = 4.0) -> list[HeadTargets]:
    """Positives for every head (cfg order). `targets` [M, 6] = (image, class, cx, cy, w, h), normalised."""
    if len(heads) != len(grid_sizes):
        raise ValueError(f"{len(heads)} heads but {len(grid_sizes)} grid sizes")
    targets = targets.float()
    img_w_h = targets.new_tensor([img_hw[1], img_hw[0]])
    gt_wh = (targets[:, 4:6] * img_w_h).clamp(min=1e-6)
    owner, local = best_anchor_per_target(heads, gt_wh)
    out = []
    for i, (head, grid_hw) in enumerate(zip(heads, grid_sizes)):
        forced = torch.zeros(head.num_anchors, targets.shape[0], dtype=torch.bool, device=targets.device)
        mine = owner == i
        forced[local[mine], mine.nonzero(as_tuple=True)[0]] = True
        out.append(assign_head(head, targets, grid_hw, img_hw, anchor_t, forced))
    return out
