"""The `[yolo]` detection head: raw maps for the loss, Darknet's activation and box decoding (§2.7, §3)."""

from __future__ import annotations

import torch
from torch import nn


def box_parts(raw_xywh: torch.Tensor, scale_x_y: float, new_coords: bool,
              max_log_scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Darknet's box parametrisation (§3): (x, y within the cell in cells, w, h in multiples of the anchor).
    The loss passes `max_log_scale` to keep exp() finite for a diverging prediction; decoding never clamps."""
    s = scale_x_y
    if new_coords:
        return raw_xywh[..., :2] * s - 0.5 * (s - 1), raw_xywh[..., 2:4].square() * 4
    log_wh = raw_xywh[..., 2:4] if max_log_scale is None else raw_xywh[..., 2:4].clamp(max=max_log_scale)
    return raw_xywh[..., :2].sigmoid() * s - 0.5 * (s - 1), log_wh.exp()


class YoloHead(nn.Module):
    """One `[yolo]` layer. `forward(x)` reshapes the feeding conv's output [N, A·(5+K), H, W] into the raw map
    [N, A, H, W, 5+K]; `decode(raw)` turns a raw map into boxes in input pixels and probabilities."""

    def __init__(self, layer_index: int, options: dict, stride: tuple[float, float]):
        super().__init__()
        self.layer_index = layer_index
        self.options = options
        self.num_classes = options["classes"]
        self.mask = list(options["mask"])
        self.num_anchors = len(self.mask)
        self.scale_x_y = float(options["scale_x_y"])
        self.new_coords = bool(options["new_coords"])
        self.stride = stride  # (y, x) input pixels per grid cell, from the shapes the model was built with
        all_anchors = torch.tensor(options["anchors"], dtype=torch.float32).view(-1, 2)
        # Not persistent: anchors come from the cfg, never from a checkpoint of another cfg.
        self.register_buffer("anchors", all_anchors[self.mask].clone(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        if x.is_contiguous(memory_format=torch.channels_last):  # no copy for channels_last activations
            return x.permute(0, 2, 3, 1).view(n, h, w, self.num_anchors, -1).permute(0, 3, 1, 2, 4)
        return x.reshape(n, self.num_anchors, self.num_classes + 5, h, w).permute(0, 1, 3, 4, 2)

    def activate(self, raw: torch.Tensor) -> torch.Tensor:
        """The [yolo] layer's own output as Darknet stores it ([N, A·(5+K), H, W]): logistic on x, y, objectness
        and classes unless new_coords, then x, y ← x·s − (s−1)/2."""
        out = raw if self.new_coords else torch.cat([raw[..., :2].sigmoid(), raw[..., 2:4], raw[..., 4:].sigmoid()], -1)
        s = self.scale_x_y
        if s != 1:
            out = torch.cat([out[..., :2] * s - 0.5 * (s - 1), out[..., 2:]], -1)
        n, a, h, w, e = out.shape
        return out.permute(0, 1, 4, 2, 3).reshape(n, a * e, h, w)

    def decode(self, raw: torch.Tensor, input_size: tuple[int, int] | None = None) -> torch.Tensor:
        """[N, A, H, W, 5+K] -> same shape with cx, cy, w, h in input pixels, objectness and class probabilities.
        `input_size` (h, w) gives the grid stride as input/grid, as Darknet does; by default the build stride."""
        _, _, h, w, _ = raw.shape
        stride_y, stride_x = self.stride if input_size is None else (input_size[0] / h, input_size[1] / w)
        xy, wh = box_parts(raw[..., :4], self.scale_x_y, self.new_coords)
        # the scores in place and the four box columns written over them: a cat of one-column pieces along the
        # last axis copies element by element (on the CPU the slowest op of a small model's pass)
        out = raw.clone() if self.new_coords else raw.sigmoid()
        grid_x = torch.arange(w, device=raw.device, dtype=raw.dtype).view(1, 1, 1, w)
        grid_y = torch.arange(h, device=raw.device, dtype=raw.dtype).view(1, 1, h, 1)
        out[..., 0] = (grid_x + xy[..., 0]) * stride_x
        out[..., 1] = (grid_y + xy[..., 1]) * stride_y
        out[..., 2:4] = wh * self.anchors.to(raw.dtype).view(1, -1, 1, 1, 2)
        return out

    def extra_repr(self) -> str:
        return (f"layer={self.layer_index}, classes={self.num_classes}, mask={self.mask}, "
                f"scale_x_y={self.scale_x_y}, new_coords={self.new_coords}")
